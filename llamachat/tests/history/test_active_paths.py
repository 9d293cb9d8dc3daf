"""The tests of `llamachat.history.active_paths`."""

from __future__ import annotations

from pathlib import Path

from llamachat.history.store import History


class TestActivePaths:
    """A session's active path, kept between reads and brought up to date by the writes."""

    def test_kept_path_follows_a_reply_added_and_saved_and_a_new_version(
        self, tmp_path: Path
    ) -> None:
        """The writes a reply makes (a message added at the end, its text saved as it
        streams) show in the next read; so does another version of a message, in the
        `versions` of the path that goes through it."""
        with History(tmp_path / "h.db") as history:
            sid = history.create_session("chat")
            question = history.add_message(sid, "user", "Why?")
            assert [m["id"] for m in history.messages(sid)] == [question]
            reply = history.add_message(sid, "assistant", "", status="streaming")
            history.update_message(reply, content="Because")
            history.update_message(reply, content="Because.", status="complete")
            path = history.messages(sid)
            assert [(m["content"], m["status"]) for m in path] == [
                ("Why?", "complete"),
                ("Because.", "complete"),
            ]
            again = history.add_message(sid, "assistant", "Since.", parent=question)
            path = history.messages(sid)
            assert [m["id"] for m in path] == [question, again]
            assert path[1]["versions"] == [reply, again]

    def test_rows_read_are_copies_a_caller_cannot_change_for_the_next(self, tmp_path: Path) -> None:
        """What a caller does with the rows it read never reaches the next caller's."""
        with History(tmp_path / "h.db") as history:
            sid = history.create_session("chat")
            first = history.add_message(sid, "user", "One")
            history.add_message(sid, "assistant", "Two", parent=first)
            history.add_message(sid, "assistant", "Three", parent=first)
            path = history.messages(sid)
            path[0]["content"] = "changed"
            path[1]["versions"].clear()
            path.pop()
            again = history.messages(sid)
            assert [m["content"] for m in again] == ["One", "Three"]
            assert len(again[1]["versions"]) == 2

    def test_another_connections_commit_is_read_not_the_kept_path(self, tmp_path: Path) -> None:
        """A second llamachat (`ask --print`, another window) writing the same file: the
        path kept by the first is read again (PRAGMA data_version), not shown stale."""
        path = tmp_path / "h.db"
        with History(path) as window, History(path) as other:
            sid = window.create_session("chat")
            question = window.add_message(sid, "user", "Hello")
            reply = window.add_message(sid, "assistant", "Hi")
            assert [m["content"] for m in window.messages(sid)] == ["Hello", "Hi"]
            other.update_message(reply, content="Hi there")
            assert [m["content"] for m in window.messages(sid)] == ["Hello", "Hi there"]
            other.add_message(sid, "assistant", "Hey", parent=question)
            path_now = window.messages(sid)
            assert [m["content"] for m in path_now] == ["Hello", "Hey"]
            assert len(path_now[1]["versions"]) == 2
