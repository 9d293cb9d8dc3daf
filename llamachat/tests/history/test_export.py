"""The tests of `llamachat.history.export`."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from llamachat.history.store import History, HistoryError, ImportCancelled, import_file
from llamachat.tests.support import chat_with_one_exchange, good_export, nested_list


class TestExport:
    """Sessions as files: Markdown and JSON exports, and JSON imported back."""

    def test_history_export_markdown_has_title_roles_and_reasoning(self, tmp_path: Path) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "qwen")
        history.add_message(sid, "user", "Why is the sky blue?")
        history.add_message(
            sid, "assistant", "Rayleigh scattering.", reasoning="Physics.", model="qwen"
        )
        history.add_message(sid, "assistant", "Half an ans", status="stopped")
        text = history.export_markdown(sid)
        assert text.startswith("# Why is the sky blue?\n")
        assert "## You\n\nWhy is the sky blue?" in text
        assert "## Assistant (qwen)" in text
        assert "<details><summary>Reasoning</summary>\n\nPhysics.\n\n</details>" in text
        assert text.index("Physics.") < text.index("Rayleigh scattering.")
        assert "*(stopped)*" in text

    def test_history_json_export_imports_back_as_a_new_identical_session(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "m", prompt_name="Default")
        history.set_skills(sid, ["finance-cli"])
        history.add_message(sid, "user", "hi", attachments=[{"name": "a.txt", "text": "x"}])
        history.add_message(
            sid,
            "assistant",
            "hello",
            reasoning="r",
            usage={"total_tokens": 3},
            tool_calls=[{"id": "1", "function": {"name": "f", "arguments": "{}"}}],
        )
        exported = history.export_json(sid)
        assert exported["format"] == "llamachat-session" and exported["version"] == 2
        other = History(tmp_path / "other.db")
        new_id = other.import_json(json.loads(json.dumps(exported)))
        assert other.export_json(new_id) == exported
        assert history.import_json(exported) != sid
        assert history.export_json(sid) == exported

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (lambda d: d.clear(), "not a llamachat session"),
            (lambda d: d.update(format="other"), "not a llamachat session"),
            (lambda d: d.update(version=3), "newer llamachat"),
            (lambda d: d.update(version="1"), "version"),
            (lambda d: d.update(session=[]), "session must be an object"),
            (lambda d: d["session"].update(mode="group"), "session.mode"),
            (lambda d: d["session"].update(title=5), "session.title"),
            (lambda d: d["session"].update(skills=[1]), "session.skills"),
            (lambda d: d.update(messages={}), "messages must be a list"),
            (lambda d: d["messages"].append("text"), "messages[2] must be an object"),
            (lambda d: d["messages"][0].pop("role"), "messages[1].role"),
            (lambda d: d["messages"][0].update(role="robot"), "messages[1].role"),
            (lambda d: d["messages"][0].update(status="done"), "messages[1].status"),
            (lambda d: d["messages"][0].update(usage=[]), "messages[1].usage"),
            (lambda d: d["messages"][0].update(attachments=["a"]), "messages[1].attachments"),
            (lambda d: d.update(version=2), "messages[1].id"),
        ],
    )
    def test_history_import_rejects_bad_input_and_adds_nothing(
        self, tmp_path: Path, change, words: str
    ) -> None:

        history = History(tmp_path / "h.db")
        data = good_export()
        change(data)
        with pytest.raises(HistoryError, match=re.escape(words)):
            history.import_json(data)
        assert history.count_sessions() == 0
        assert history.get_session(history.import_json(good_export()))["title"] == "t"

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (lambda d: d["session"].update(params={"temperature": "hot"}), "params.temperature"),
            (lambda d: d["session"].update(params={"seed": [1]}), "session.params.seed"),
            (lambda d: d["session"].update(params={"top_p": float("nan")}), "params.top_p"),
            (lambda d: d["session"].update(updated_at=float("inf")), "session.updated_at"),
            (lambda d: d["messages"][0].update(created_at=float("nan")), "messages[1].created_at"),
            (lambda d: d["messages"][0].update(created_at=-5), "messages[1].created_at"),
            (lambda d: d["messages"][0].update(usage={"t": float("nan")}), "messages[1].usage"),
            (
                lambda d: d["messages"][0].update(tool_calls=nested_list(100)),
                "messages[1].tool_calls",
            ),
            (
                lambda d: d["messages"][0].update(timings={"a": nested_list(200_000)}),
                "messages[1].timings nests",
            ),
        ],
    )
    def test_history_import_refuses_non_finite_numbers_deep_values_and_bad_params(
        self, tmp_path: Path, change, words: str
    ) -> None:
        """Every field is checked before anything is written: parameters against their
        table, times and numbers finite, free-form values at most 32 deep."""

        history = History(tmp_path / "h.db")
        data = good_export()
        change(data)
        with pytest.raises(HistoryError, match=re.escape(words)):
            history.import_json(data)
        assert history.count_sessions() == 0

    def test_history_import_file_names_deep_nesting_nan_and_an_oversized_message(
        self, tmp_path: Path
    ) -> None:
        """What json.loads turned into a RecursionError or a NaN, and a message over the
        size limit, each refuse the file with the field named; nothing is added."""

        db = tmp_path / "h.db"
        History(db).close()
        good = json.dumps(good_export())
        cases = {
            "[" * 200_000 + "]" * 200_000: "not a llamachat session",
            good.replace('"content": "hi"', '"content": ' + "[" * 200_000 + "]" * 200_000): (
                "messages[1] nests lists or objects too deeply"
            ),
            good.replace('"created_at": 1.0}]', '"created_at": NaN}]'): "messages[1].created_at",
            good.replace("}]", '}, {"role": "user", "content": "' + "x" * 2000 + '"}]'): (
                "messages[2] is 2,031 characters long; the limit is 1,000 per message"
            ),
            good + " {}": "it is not JSON",
        }
        for number, (text, words) in enumerate(cases.items()):
            source = tmp_path / f"{number}.json"
            source.write_text(text, encoding="utf-8")
            with pytest.raises(HistoryError, match=re.escape(words)):
                import_file(db, source, max_message_chars=1000)
        with History(db) as history:
            assert history.count_sessions() == 0

    def test_history_import_file_is_marked_imported_and_listed_first_with_its_dates(
        self, tmp_path: Path
    ) -> None:
        """A user's import is titled "(imported)" and goes to the top of the list; its
        messages and its creation keep the dates they had."""

        history = History(tmp_path / "h.db")
        old = history.create_session("chat")
        history.add_message(old, "user", "Old question")
        history.add_message(history.create_session("chat"), "user", "Newer question")
        exported = history.export_json(old)
        source = tmp_path / "old.json"
        source.write_text(json.dumps(exported), encoding="utf-8")
        new_id = import_file(history.path, source)
        first = history.list_sessions()[0]
        assert (first["id"], first["title"]) == (new_id, "Old question (imported)")
        assert first["created_at"] == exported["session"]["created_at"]
        assert [m["created_at"] for m in history.messages(new_id)] == [
            m["created_at"] for m in exported["messages"]
        ]

    def test_history_import_file_cancelled_between_batches_keeps_nothing(
        self, tmp_path: Path
    ) -> None:
        """Cancel (the progress callback raising) after messages were written removes the
        hidden session and its messages; progress rose until then."""

        history = History(tmp_path / "h.db")
        data = good_export()
        data["messages"] = [
            {"role": "user", "content": f"message {n}", "created_at": 1.0} for n in range(2500)
        ]
        source = tmp_path / "big.json"
        source.write_text(json.dumps(data), encoding="utf-8")
        seen: list[float] = []

        def progress(share: float) -> None:
            seen.append(share)
            if share > 0.5:
                raise ImportCancelled

        with pytest.raises(ImportCancelled):
            import_file(history.path, source, on_progress=progress)
        assert seen == sorted(seen) and seen[-1] > 0.5
        assert history.count_sessions() == 0
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
        assert raw.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
        raw.close()
        assert import_file(history.path, source) and history.count_sessions() == 1

    def test_tree_export_imports_back_equal_and_v1_files_still_import(self, tmp_path: Path) -> None:
        """The JSON export holds every branch and the active leaf; importing it recreates
        the same tree; a version-1 file (one path) imports as one path."""

        history = History(tmp_path / "h.db")
        sid, question, reply = chat_with_one_exchange(history)
        history.add_message(sid, "assistant", "Kuzco.", parent=question)
        history.add_message(sid, "user", "Edited.", parent=None)
        history.select_version(sid, reply)
        history.set_session_params(sid, {"temperature": 0.3, "seed": 7})
        exported = history.export_json(sid)
        assert exported["version"] == 2 and exported["session"]["active"] == 2
        assert exported["session"]["params"] == {"temperature": 0.3, "seed": 7}
        assert [(m["id"], m["parent"]) for m in exported["messages"]] == [
            (1, None),
            (2, 1),
            (3, 1),
            (4, None),
        ]
        other = History(tmp_path / "other.db")
        copy = other.import_json(json.loads(json.dumps(exported)))
        assert other.export_json(copy) == exported
        assert [m["content"] for m in other.messages(copy)] == ["Name a llama.", "Dolly."]

        old = good_export()
        old["messages"].append({"role": "assistant", "content": "hello", "created_at": 2.0})
        single = history.import_json(old)
        assert [(m["content"], m["versions"]) for m in history.messages(single)] == [
            ("hi", []),
            ("hello", []),
        ]

    @pytest.mark.parametrize(
        ("change", "words"),
        [
            (lambda m, s: m[1].update(parent=7), "messages[2].parent"),
            (lambda m, s: m[1].update(parent=2), "messages[2].parent"),  # itself: not earlier
            (lambda m, s: m[1].update(id=1), "messages[2].id"),
            (lambda m, s: m[0].update(id="1"), "messages[1].id"),
            (lambda m, s: s.update(active=9), "session.active"),
            (lambda m, s: s.update(params=[1]), "session.params"),
        ],
    )
    def test_tree_import_names_the_bad_field_and_adds_nothing(
        self, tmp_path: Path, change, words: str
    ) -> None:

        history = History(tmp_path / "h.db")
        sid, _question, _reply = chat_with_one_exchange(history)
        data = history.export_json(sid)
        change(data["messages"], data["session"])
        with pytest.raises(HistoryError, match=re.escape(words)):
            history.import_json(data)
        assert history.count_sessions() == 1

    def test_a_20_mb_title_is_cut_at_import(self) -> None:
        """Issue 37 item 4: an imported title (of any format: each ends here) is cut to 500
        characters, so the list that draws it does not stall."""
        from llamachat.history.export import validate_import

        data = good_export()
        data["session"]["title"] = "T" * 20_000_000
        title = validate_import(data).session["title"]
        assert len(title) == 500 and title.endswith("…")

    def test_a_cancelled_import_removes_the_project_it_made(self, tmp_path) -> None:
        """Stopping an import part way removes its chats and the project made for them."""
        import json

        import pytest

        from llamachat.dev.chat_exports import chatgpt_export
        from llamachat.history.store import ImportCancelled, import_chats
        from llamachat.tests.support import history_with_sessions

        history = history_with_sessions(tmp_path)
        history.projects.create("Work")
        source = tmp_path / "conversations.json"
        source.write_text(json.dumps(chatgpt_export(400)), encoding="utf-8")

        def stop_late(share: float) -> None:
            if share > 0.8:
                raise ImportCancelled

        with pytest.raises(ImportCancelled):
            import_chats(history.path, source, on_progress=stop_late)
        assert [p["name"] for p in history.projects.listed()] == ["Work"]
        assert history.count_sessions() == 0
        history.close()


class TestExportMemories:
    """A chat's export carries the memories it kept; its import brings them back."""

    def test_a_chats_own_overflow_policy_and_memory_switch_import_back(
        self, tmp_path: Path
    ) -> None:
        """`context_overflow` and the memory switch are kept with the chat's parameters but
        are no request parameters: its export imports back with them, a wrong one refused."""

        history = History(tmp_path / "h.db")
        sid, _question, _reply = chat_with_one_exchange(history)
        saved = {"temperature": 0.5, "context_overflow": "trim", "memory": False}
        history.set_session_params(sid, saved)
        data = history.export_json(sid)
        assert history.session_params(history.import_json(data)) == saved
        for key, wrong in (("memory", True), ("memory", 0), ("context_overflow", "drop")):
            bad = json.loads(json.dumps(data))
            bad["session"]["params"][key] = wrong
            with pytest.raises(HistoryError, match=f"session.params.{key} must be one of"):
                history.import_json(bad)
        assert history.count_sessions() == 2

    def test_a_chats_memories_travel_with_its_export(self, tmp_path: Path) -> None:
        """Each memory keeps its text, pin, author, the message it came from and its scope:
        a project's memory lands in the imported chat's project."""

        source = History(tmp_path / "a.db")
        work = source.projects.create("Work")
        sid = source.create_session("chat")
        source.projects.move(sid, work)
        question = source.add_message(sid, "user", "Remember our API is FastAPI")
        reply = source.add_message(sid, "assistant", "Noted.")
        kept = source.memories.add(
            "The API is FastAPI", project_id=work, session_id=sid, message_id=reply, author="model"
        )
        source.memories.update(kept, pinned=True)
        source.memories.add("Prefers metric units", session_id=sid, message_id=question)
        source.memories.add("Not this chat's")
        data = json.loads(json.dumps(source.export_json(sid)))
        assert [m["text"] for m in data["memories"]] == [
            "The API is FastAPI",
            "Prefers metric units",
        ]

        target = History(tmp_path / "b.db")
        new = target.import_json(data)
        project = target.get_session(new)["project_id"]
        assert project is not None
        rows = target.memories.listed(project_id=project)
        messages = target.messages(new)
        assert [
            (m["text"], m["pinned"], m["author"], m["project_id"], m["session_id"], m["message_id"])
            for m in rows
        ] == [
            ("The API is FastAPI", True, "model", project, new, messages[1]["id"]),
            ("Prefers metric units", False, "user", None, new, messages[0]["id"]),
        ]
        target.import_json(data)  # the same facts again are not kept twice
        assert len(target.memories.listed(every=True)) == 2

    @pytest.mark.parametrize(
        ("memories", "problem"),
        [
            ("nope", "memories must be a list"),
            ([{"text": ""}], r"memories\[1\]: a memory needs some text"),
            ([{"text": "x", "author": "admin"}], r"memories\[1\].author"),
            ([{"text": "x", "pinned": "yes"}], r"memories\[1\].pinned"),
            ([{"text": "x", "message": 99}], r"memories\[1\].message"),
            ([{"text": "x", "message": [1]}], r"memories\[1\].message"),
        ],
    )
    def test_an_export_with_bad_memories_imports_nothing(
        self, tmp_path: Path, memories: object, problem: str
    ) -> None:
        history = History(tmp_path / "h.db")
        with pytest.raises(HistoryError, match=problem):
            history.import_json({**good_export(), "memories": memories})
        assert history.list_sessions() == [] and history.memories.listed(every=True) == []
