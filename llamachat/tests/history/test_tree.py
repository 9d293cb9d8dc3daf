"""The tests of `llamachat.history.tree`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from llamachat.history.store import History, HistoryError
from llamachat.tests.support import chat_with_one_exchange


class TestTree:
    """The conversation as a tree: versions, branches, the active path, forks."""

    def test_versions_of_a_reply_are_siblings_and_the_newest_is_shown(self, tmp_path: Path) -> None:
        """Three regenerations are four versions of one reply; switching shows each with
        what followed it; a reopened file shows the path last shown."""

        history = History(tmp_path / "h.db")
        sid, question, first = chat_with_one_exchange(history)
        follow_up = history.add_message(sid, "user", "Why?")
        versions = [first]
        for text in ("Kuzco.", "Paca.", "Lhama."):
            versions.append(history.add_message(sid, "assistant", text, parent=question))
        path = history.messages(sid)
        assert [m["content"] for m in path] == ["Name a llama.", "Lhama."]
        assert path[1]["versions"] == versions and path[0]["versions"] == []
        assert history.message_count(sid) == 6

        shown = history.select_version(sid, first)
        assert [m["content"] for m in shown] == ["Name a llama.", "Dolly.", "Why?"]
        assert shown[2]["id"] == follow_up and shown[1]["versions"] == versions
        assert [m["content"] for m in history.select_version(sid, versions[2])][1] == "Paca."
        history.close()
        again = History(tmp_path / "h.db")
        assert [m["content"] for m in again.messages(sid)] == ["Name a llama.", "Paca."]
        with pytest.raises(HistoryError, match="no message"):
            again.select_version(sid, 10_000)

    def test_a_path_read_again_after_any_change_is_what_the_file_holds(
        self, tmp_path: Path
    ) -> None:
        """History keeps each chat's path between reads and brings it up to date with the
        writes a reply makes: after every kind of change, in any order, its messages are
        those a fresh connection reads from the file, and a caller's changes to the rows it
        got never reach the next reader."""

        history = History(tmp_path / "h.db")
        sid, question, reply = chat_with_one_exchange(history)
        other = history.create_session("chat", "m", prompt_name="Default")
        history.add_message(other, "user", "Elsewhere?")
        chance = random.Random(13)

        def step(number: int) -> None:
            path = history.messages(sid)
            ids = [m["id"] for m in path]
            match chance.choice(["add", "add", "save", "save", "version", "select", "delete"]):
                case "add":
                    role = "user" if path[-1]["role"] == "assistant" else "assistant"
                    history.add_message(sid, role, f"message {number}", status="streaming")
                case "save":
                    history.update_message(
                        chance.choice(ids),
                        content=f"saved {number}",
                        status="complete",
                        usage={"prompt_tokens": number},
                        tool_calls=[{"id": f"c{number}"}],
                    )
                case "version" if len(path) > 1:
                    at = chance.randrange(1, len(path))
                    history.add_message(
                        sid, path[at]["role"], f"version {number}", parent=path[at]["parent_id"]
                    )
                case "select":
                    history.select_version(sid, chance.choice(ids))
                case "delete" if len(path) > 2:
                    history.delete_branch(path[-1]["id"])
                case _:
                    history.add_message(other, "assistant", f"other {number}")

        for number in range(120):
            step(number)
            got = history.messages(sid)
            got[-1]["content"] = "changed by a caller"
            got[-1]["versions"].append(-1)
            fresh = History(tmp_path / "h.db")
            assert history.messages(sid) == fresh.messages(sid), number
            assert history.messages(other) == fresh.messages(other), number
            fresh.close()
        assert history.messages(sid)[0]["id"] == question and reply

    def test_a_chat_changed_by_another_connection_is_read_again(self, tmp_path: Path) -> None:
        """A second llamachat process (`ask --print`) writing the same file: the window's
        History sees its messages at the next read, not the path it read before."""

        history = History(tmp_path / "h.db")
        sid, _question, reply = chat_with_one_exchange(history)
        assert len(history.messages(sid)) == 2
        elsewhere = History(tmp_path / "h.db")
        elsewhere.update_message(reply, content="Dolly, edited elsewhere.")
        # The path still ends where it did: only the file says the reply changed.
        assert history.messages(sid)[-1]["content"] == "Dolly, edited elsewhere."
        elsewhere.add_message(sid, "user", "And another?")
        elsewhere.close()
        assert [m["content"] for m in history.messages(sid)] == [
            "Name a llama.",
            "Dolly, edited elsewhere.",
            "And another?",
        ]

    def test_edits_are_branches_that_keep_their_replies(self, tmp_path: Path) -> None:
        """Two edits of a question make three branches, each with its own reply."""

        history = History(tmp_path / "h.db")
        sid, _question, reply = chat_with_one_exchange(history)
        later = history.add_message(sid, "user", "Another?")
        history.add_message(sid, "assistant", "Kuzco.")
        edits = [later]
        for text in ("Two more?", "Three more?"):
            edits.append(history.add_message(sid, "user", text, parent=reply))
            history.add_message(sid, "assistant", f"Answer to {text}")
        path = history.messages(sid)
        assert [m["content"] for m in path] == [
            "Name a llama.",
            "Dolly.",
            "Three more?",
            "Answer to Three more?",
        ]
        assert path[2]["versions"] == edits
        walked = [[m["content"] for m in history.select_version(sid, edit)][2:] for edit in edits]
        assert walked == [
            ["Another?", "Kuzco."],
            ["Two more?", "Answer to Two more?"],
            ["Three more?", "Answer to Three more?"],
        ]
        assert history.get_session(sid)["title"] == "Name a llama."
        assert [hit["id"] for hit in history.search("Kuzco")] == [sid]  # every branch is found

    def test_delete_branch_takes_what_followed_and_the_path_ends_at_its_parent(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        sid, question, reply = chat_with_one_exchange(history)
        history.add_message(sid, "user", "More?")
        kept = history.add_message(sid, "assistant", "Other.", parent=question)
        history.select_version(sid, reply)
        history.delete_branch(reply)
        assert [m["id"] for m in history.messages(sid)] == [question]
        assert history.message_count(sid) == 2
        assert [m["id"] for m in history.select_version(sid, kept)] == [question, kept]

    def test_fork_copies_the_path_up_to_a_message_with_skills_and_prompt(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        sid, question, reply = chat_with_one_exchange(history)
        history.set_skills(sid, ["weather"])
        history.set_prompt(sid, "", "Be brief.")
        history.set_session_params(sid, {"temperature": 0.2})
        history.add_message(sid, "user", "More?")
        history.add_message(sid, "assistant", "Other.", parent=question)  # not on the path
        history.select_version(sid, reply)
        forked = history.fork(sid, reply)
        session = history.get_session(forked)
        assert session["title"] == "Name a llama. (fork)" and session["skills"] == ["weather"]
        assert (session["prompt_custom"], session["model"], session["mode"]) == (
            "Be brief.",
            "m",
            "chat",
        )
        assert [(m["role"], m["content"]) for m in history.messages(forked)] == [
            ("user", "Name a llama."),
            ("assistant", "Dolly."),
        ]
        assert history.message_count(forked) == 2 and history.message_count(sid) == 4
        assert history.session_params(forked) == {"temperature": 0.2}
        with pytest.raises(HistoryError, match="not on the path|no message"):
            history.fork(sid, 10_000)

    def test_history_add_branch_makes_a_new_root_version_and_keeps_the_original_path(
        self, tmp_path: Path
    ) -> None:
        """`add_branch` writes a compacted chat's summary and kept messages as a new branch
        from the root in one go: the active path, the original path one version away."""

        with History(tmp_path / "h.db") as history:
            session = history.create_session("chat", "m")
            first = history.add_message(session, "user", "first question")
            history.add_message(session, "assistant", "first answer")
            original = history.messages(session)
            row = {
                k: v
                for k, v in original[-1].items()
                if k not in ("id", "session_id", "parent_id", "versions")
            }
            summary = {**row, "role": "system", "content": "summary", "usage": {"summary_of": 1}}
            ids = history.add_branch(session, [summary, row])  # type: ignore[list-item]
            path = history.messages(session)
            assert [m["id"] for m in path] == ids and path[0]["parent_id"] is None
            assert path[0]["versions"] == [first, ids[0]] and path[0]["usage"] == {"summary_of": 1}
            assert history.get_session(session)["title"] == "first question"  # type: ignore[index]
            back = history.select_version(session, first)
            assert [m["id"] for m in back] == [m["id"] for m in original]
