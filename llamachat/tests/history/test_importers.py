"""The tests of `llamachat.history.importers`."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from llamachat.history.store import History, HistoryError, import_chats
from llamachat.tests.support import messy_folder, returns_at_once, write_export


class TestImporters:
    """Chats from a file of another app, or from our own exports, as checked imports."""

    @staticmethod
    def _rows(history: History, session_id: int) -> list[tuple]:
        return [
            (m["role"], m["content"], m["reasoning"], m["model"])
            for m in history.messages(session_id)
        ]

    def test_import_chatgpt_tree_becomes_versions_with_the_current_node_active(
        self, tmp_path: Path
    ) -> None:
        """ChatGPT's mapping is the tree: a regenerated answer is a version and
        current_node the active leaf; root, system, tool and recap nodes are left out;
        thoughts become the answer's reasoning, an image a placeholder; models and times
        kept; the newest conversation is listed first."""
        from llamachat.dev.chat_exports import BASE_TIME, chatgpt_export

        history = History(tmp_path / "h.db")
        source = write_export(tmp_path, "conversations.json", chatgpt_export(3))
        ids = import_chats(history.path, source)
        assert [s["title"] for s in history.list_sessions()] == [
            "Chat 2 (imported)",
            "Chat 1 (imported)",
            "Chat 0 (imported)",
        ]
        assert [s["id"] for s in history.list_sessions()] == ids[::-1]
        first = ids[0]
        session = history.get_session(first)
        assert (session["created_at"], session["model"]) == (BASE_TIME, "gpt-4o-mini")
        rows = self._rows(history, first)
        assert rows[:6] == [
            ("user", "Question 0 of chat 0", "", ""),
            ("assistant", "Answer 0 of chat 0", "", "gpt-4o"),
            ("user", "[image]\n\nQuestion 1 of chat 0", "", ""),
            ("assistant", "Answer 1 of chat 0", "", "gpt-4o"),
            ("user", "Question 2 of chat 0", "", ""),
            ("assistant", "Answer 2 of chat 0", "Thinking about chat 0", "gpt-4o"),
        ]
        assert len(rows) == 10 and rows[7] == ("assistant", "Answer 3 of chat 0", "", "gpt-4o")
        assert rows[-1] == ("assistant", "Answer 4 of chat 0, regenerated", "", "gpt-4o-mini")
        messages = history.messages(first)
        assert messages[0]["created_at"] == BASE_TIME and messages[1]["created_at"] == BASE_TIME + 5
        last = messages[-1]
        assert len(last["versions"]) == 2 and last["versions"][-1] == last["id"]
        earlier = history.select_version(first, last["versions"][0])[-1]
        assert (earlier["content"], earlier["model"]) == ("Answer 4 of chat 0", "gpt-4o")
        assert all(len(m["versions"]) == 0 for m in history.messages(ids[1]))
        history.close()

    def test_import_open_webui_history_tree_reasoning_and_models(self, tmp_path: Path) -> None:
        """Open WebUI's history.messages tree: an edited question is a version, currentId
        the active leaf; its reasoning block becomes the reply's reasoning; model and
        times (seconds) kept."""
        from llamachat.dev.chat_exports import BASE_TIME, open_webui_export

        history = History(tmp_path / "h.db")
        ids = import_chats(history.path, write_export(tmp_path, "chat.json", open_webui_export(2)))
        assert history.get_session(ids[-1])["title"] == "Web chat 1 (imported)"
        session = history.get_session(ids[0])
        assert (session["created_at"], session["model"]) == (BASE_TIME, "llama3:8b")
        assert self._rows(history, ids[0]) == [
            ("user", "Edited question of chat 0", "", ""),
            ("assistant", "Answer of chat 0", "Thinking about chat 0\nin two lines", "llama3:8b"),
        ]
        question = history.messages(ids[0])[0]
        assert question["created_at"] == BASE_TIME + 60 and len(question["versions"]) == 2
        other = history.select_version(ids[0], question["versions"][0])
        assert [m["content"] for m in other] == ["First question of chat 0", "First answer"]
        history.close()

    def test_import_llama_cpp_web_ui_exports_one_all_and_the_older_shape(
        self, tmp_path: Path
    ) -> None:
        """The web UI's {conv, messages} (one, or a list): its root left out, an edited
        question a version, currNode active, thinking the reasoning, times in ms; the
        older web UI's numbered ids and <think> reasoning too."""
        from llamachat.dev.chat_exports import BASE_TIME, llama_cpp_conversation, llama_cpp_export

        history = History(tmp_path / "h.db")
        ids = import_chats(history.path, write_export(tmp_path, "all.json", llama_cpp_export(2)))
        assert len(ids) == 2
        [one] = import_chats(
            history.path, write_export(tmp_path, "one.json", llama_cpp_conversation(5))
        )
        assert history.get_session(one)["title"] == "Local chat 5 (imported)"
        assert self._rows(history, ids[0]) == [
            ("user", "Edited question of chat 0\n\n[image: photo.png]", "", ""),
            ("assistant", "Answer of chat 0", "Thinking about chat 0", "qwen3-4b"),
        ]
        question = history.messages(ids[0])[0]
        assert question["created_at"] == BASE_TIME + 60 and len(question["versions"]) == 2
        assert history.get_session(ids[0])["model"] == "qwen3-4b"
        older = {
            "conv": {"id": "conv-1", "name": "Old", "lastModified": 1_700_000_000_000, "currNode": 3},
            "messages": [
                {"id": 1, "convId": "conv-1", "type": "root", "timestamp": 1_700_000_000_000,
                 "role": "system", "content": "", "parent": -1, "children": [2]},
                {"id": 2, "convId": "conv-1", "type": "text", "timestamp": 1_700_000_001_000,
                 "role": "user", "content": "Hi", "parent": 1, "children": [3]},
                {"id": 3, "convId": "conv-1", "type": "text", "timestamp": 1_700_000_002_000,
                 "role": "assistant", "content": "<think>Hmm.</think>Hello!", "parent": 2,
                 "children": []},
            ],
        }  # fmt: skip
        [old] = import_chats(history.path, write_export(tmp_path, "old.json", older))
        assert self._rows(history, old) == [
            ("user", "Hi", "", ""),
            ("assistant", "Hello!", "Hmm.", ""),
        ]
        history.close()

    def test_import_markdown_export_round_trip_gives_back_the_path(self, tmp_path: Path) -> None:
        """export_markdown then import: the same path (roles, text, reasoning, models,
        a stopped and a failed reply, tool calls, a fenced '## You' inside a reply)."""
        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "qwen")
        history.add_message(sid, "user", "Name three rivers.\n\nIn Africa, please.")
        history.add_message(sid, "assistant", "First try", model="qwen")
        history.add_message(
            sid,
            "assistant",
            "Nile.",
            model="qwen",
            parent=history.messages(sid)[0]["id"],
            reasoning="Think\n\nhard",
        )
        history.add_message(sid, "user", "A code block?")
        history.add_message(
            sid, "assistant", "```md\n## You\n```\n\nDone.", model="llama", status="stopped"
        )
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"q": "x"}'},
        }
        history.add_message(sid, "assistant", "Let me look.", tool_calls=[call], model="llama")
        history.add_message(sid, "tool", "found it")
        history.add_message(sid, "assistant", "", model="llama", status="error", error="HTTP 500")
        source = write_export(tmp_path, "chat.md", history.export_markdown(sid))
        [new] = import_chats(history.path, source)
        fields = ("role", "content", "reasoning", "model", "status", "error", "tool_calls")
        assert [[m[f] for f in fields] for m in history.messages(new)] == [
            [m[f] for f in fields] for m in history.messages(sid)
        ]
        session = history.get_session(new)
        assert (session["mode"], session["model"]) == ("chat", "qwen")
        assert session["title"] == "Name three rivers. (imported)"
        history.close()

    @pytest.mark.parametrize(
        ("key", "make", "words"),
        [
            (
                "chatgpt",
                lambda e: e["chatgpt"][1]["mapping"]["q0-1"]["message"].update(create_time="noon"),
                'conversation 2 "Chat 1": mapping["q0-1"].message.create_time must be a time',
            ),
            (
                "chatgpt",
                lambda e: e["chatgpt"][0]["mapping"]["root-2"].update(parent="q4-2"),
                "conversation 1 \"Chat 2\": message 'root-2' is among its own parents",
            ),
            (
                "chatgpt",
                lambda e: e["chatgpt"][0].update(update_time=float("nan")),
                "update_time must be a time in seconds since 1970, got nan",
            ),
            (
                "webui",
                lambda e: e["webui"][0]["chat"]["history"].update(messages=[]),
                'conversation 1 "Web chat 1": chat.history.messages must be an object',
            ),
            (
                "llamacpp",
                lambda e: e["llamacpp"][1]["messages"][2].update(id="u1-1"),
                'conversation 2 "Local chat 1": messages[3].id must be an id no other message',
            ),
            (
                "llamacpp",
                lambda e: e["llamacpp"][0]["messages"][1].update(timestamp=-5),
                "messages[2].timestamp must be a time in milliseconds since 1970, got -5",
            ),
            (
                "markdown",
                lambda e: e.update(markdown="# Notes\n\nJust some notes.\n\n## You\n\nhi\n"),
                "line 3 is not under a '## You' or '## Assistant' heading",
            ),
            (
                "other",
                lambda e: e.update(other=[{"hello": 1}]),
                "not a chat export llamachat reads",
            ),
            (
                "deep",
                lambda e: e.update(deep="[" * 200_000 + "]" * 200_000),
                "conversation 1 nests",
            ),
            ("empty", lambda e: e.update(empty=[]), "the file holds no conversations"),
            (
                "chatgpt",
                lambda e: e["chatgpt"][2]["mapping"]["a1-0"]["message"]["content"].update(
                    parts=["x" * 2000]
                ),
                'conversation 3 "Chat 0": message 4 is 2,000 characters long; the limit is 1,000',
            ),
        ],
    )
    def test_import_bad_file_names_the_problem_and_imports_nothing(
        self, tmp_path: Path, key: str, make, words: str
    ) -> None:
        """Each format's mistakes name the conversation and the field; nothing is added,
        the good conversations before the bad one included."""
        from llamachat.dev.chat_exports import chatgpt_export, llama_cpp_export, open_webui_export

        exports: dict = {
            "chatgpt": chatgpt_export(3),
            "webui": open_webui_export(2),
            "llamacpp": llama_cpp_export(2),
        }
        make(exports)
        history = History(tmp_path / "h.db")
        source = write_export(tmp_path, "bad.json", exports[key])
        with pytest.raises(HistoryError, match=re.escape(words)):
            import_chats(history.path, source, max_message_chars=1000)
        assert history.count_sessions() == 0
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
        raw.close()
        history.close()

    def test_an_import_refuses_dev_zero_a_fifo_and_a_sparse_gigabyte_at_once(
        self, tmp_path: Path
    ) -> None:
        """Issue 37 item 4: a link to /dev/zero, a FIFO and a 1 GB sparse file are refused
        promptly with the reason, never read until the memory runs out."""
        from llamachat.history import importers

        messy = messy_folder(tmp_path / "docs")
        for name, word in (
            ("zero.txt", "device"),
            ("fifo.txt", "pipe"),
            ("sparse.txt", "too large"),
        ):
            started = time.monotonic()
            refused = returns_at_once(functools.partial(importers.read_chats, messy.root / name))
            assert isinstance(refused, HistoryError) and word in str(refused), (name, refused)
            assert time.monotonic() - started < 2.0, name

    def test_another_apps_chats_import_into_a_folded_project_of_their_own(self, tmp_path) -> None:
        """A ChatGPT export's chats go into "Imported from ChatGPT", made folded, so the
        person's own chats stay at the top of the list; asked otherwise, into no project; a
        second import joins the same project."""
        import json

        from llamachat.dev.chat_exports import chatgpt_export
        from llamachat.history.store import import_chats
        from llamachat.tests.support import history_with_sessions

        history = history_with_sessions(tmp_path)
        mine = history.create_session("chat")
        history.add_message(mine, "user", "Mine")
        source = tmp_path / "conversations.json"
        source.write_text(json.dumps(chatgpt_export(30)), encoding="utf-8")

        ids = import_chats(history.path, source)
        (project,) = history.projects.listed()
        assert project["name"] == "Imported from ChatGPT" and project["collapsed"] is True
        assert {history.get_session(i)["project_id"] for i in ids} == {project["id"]}
        # The chats in no project, which the list shows below the (folded) projects.
        assert [s["id"] for s in history.list_sessions(limit=10, project=None)] == [mine]

        # Other chats (the newest first; the same ones would be skipped as imported before).
        source.write_text(json.dumps(chatgpt_export(33)[:3]), encoding="utf-8")
        more = import_chats(history.path, source, own_project=False)
        assert len(more) == 3
        assert {history.get_session(i)["project_id"] for i in more} == {None}
        assert len(history.projects.listed()) == 1

        source.write_text(json.dumps(chatgpt_export(36)[:3]), encoding="utf-8")
        again = import_chats(history.path, source)
        assert len(again) == 3
        assert {history.get_session(i)["project_id"] for i in again} == {project["id"]}
        assert len(history.projects.listed()) == 1
        history.close()


def _chatgpt_node(parent, children, role="user", text="q"):
    message = None
    if role is not None:
        author = {"role": role} if role else {}
        message = {"author": author, "content": {"content_type": "text", "parts": [text]}}
    return {"parent": parent, "children": children, "message": message}


def _webui(messages: dict, current) -> list[dict]:
    return [{"title": "Web", "chat": {"history": {"messages": messages, "currentId": current}}}]


def _webui_node(parent, children, role="user", text="q"):
    return {"role": role, "content": text, "parentId": parent, "childrenIds": children}


class TestImportLinks:
    """Every format's tree checked: its links, its roles."""

    @pytest.mark.parametrize(
        ("data", "named"),
        [
            (
                [
                    {
                        "title": "Lone",
                        "mapping": {
                            "a": _chatgpt_node(None, ["b"]),
                            "b": _chatgpt_node("a", [], "assistant", "r"),
                            "c": _chatgpt_node("gone", [], "assistant", "lone reply"),
                        },
                        "current_node": "c",
                    }
                ],
                "mapping[\"c\"].parent is 'gone', which is not a message of the conversation",
            ),
            (
                [
                    {
                        "title": "Lone",
                        "mapping": {"a": _chatgpt_node(None, ["b", "lost"])}
                        | {"b": _chatgpt_node("a", [], "assistant", "r")},
                        "current_node": "b",
                    }
                ],
                "mapping[\"a\"].children names 'lost', which is not a message",
            ),
            (
                [
                    {
                        "title": "Lone",
                        "mapping": {"a": _chatgpt_node(None, [])},
                        "current_node": "elsewhere",
                    }
                ],
                "current_node 'elsewhere' is not a message of the conversation",
            ),
            (
                [
                    {
                        "title": "Lone",
                        "mapping": {"a": _chatgpt_node(None, [], role="")},
                        "current_node": "a",
                    }
                ],
                'mapping["a"].message.author.role is missing',
            ),
            (
                _webui(
                    {
                        "a": _webui_node(None, ["b"]),
                        "b": _webui_node("a", ["a"], "assistant", "r"),
                    },
                    "b",
                ),
                "chat.history.messages[\"b\"].childrenIds names 'a', whose parentId is None",
            ),
            (
                _webui({"a": _webui_node("gone", [])}, "a"),
                "chat.history.messages[\"a\"].parentId is 'gone', which is not a message",
            ),
            (
                _webui({"a": _webui_node(None, [])}, "nope"),
                "chat.history.currentId 'nope' is not a message of the conversation",
            ),
            (
                _webui({"a": {"content": "no role", "parentId": None}}, "a"),
                'chat.history.messages["a"].role is missing',
            ),
            (
                [
                    {
                        "conv": {"name": "Web UI", "currNode": "9"},
                        "messages": [{"id": "1", "role": "user", "content": "q", "parent": None}],
                    }
                ],
                "conv.currNode '9' is not a message of the file",
            ),
        ],
    )
    def test_a_tree_whose_links_do_not_hold_is_refused_naming_the_field(
        self, tmp_path, data, named
    ) -> None:
        """The whole file is checked and a mistake named, in every format: a parent, a
        child or the current message not in the conversation, children that form a cycle,
        a message without its role (they imported without a word: a chat opening on a
        lone reply; issue 37, item 4). Nothing is written."""
        from llamachat.history.store import import_chats

        source = tmp_path / "export.json"
        source.write_text(json.dumps(data), encoding="utf-8")
        History(tmp_path / "h.db").close()
        with pytest.raises(HistoryError) as refused:
            import_chats(tmp_path / "h.db", source)
        assert named in str(refused.value)
        assert (
            str(refused.value).startswith("cannot import: conversation 1 ") or "currNode" in named
        )
        with History(tmp_path / "h.db") as history:
            assert history.count_sessions() == 0
