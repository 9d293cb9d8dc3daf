"""The tests of `llamachat.history.store`."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QAbstractButton

from llamachat.history.store import History, HistoryError
from llamachat.tests.support import CHECKOUT, history_file_bytes
from llamachat.ui.views.sidebar import SessionSidebar


class TestHistoryStore:
    """The history store: sessions and messages, saved as they stream, deleted and purged."""

    def test_history_sessions_create_get_rename_and_settings(self, tmp_path: Path) -> None:

        with History(tmp_path / "h.db") as history:
            sid = history.create_session("chat", "model-a", prompt_name="Default")
            history.rename_session(sid, "Named")
            history.set_model(sid, "model-b")
            history.set_prompt(sid, "", "Be terse.")
            history.set_skills(sid, ["finance-cli", "handoff"])
            session = history.get_session(sid)
            assert session is not None
            assert {
                k: session[k]
                for k in ("id", "mode", "title", "model", "prompt_name", "prompt_custom", "skills")
            } == {
                "id": sid,
                "mode": "chat",
                "title": "Named",
                "model": "model-b",
                "prompt_name": "",
                "prompt_custom": "Be terse.",
                "skills": ["finance-cli", "handoff"],
            }
            assert isinstance(session["created_at"], float)
            assert history.get_session(sid + 100) is None
            with pytest.raises(ValueError):
                history.create_session("group")

    def test_history_messages_keep_every_field_and_first_user_message_titles_the_session(
        self,
        tmp_path: Path,
    ) -> None:

        history = History(tmp_path / "h.db")
        sid = history.create_session("chat", "m")
        before = history.get_session(sid)["updated_at"]
        history.add_message(sid, "system", "You are terse.")
        user = history.add_message(
            sid,
            "user",
            "\n  How do llamas sleep?\nSecond line",
            attachments=[{"name": "pic.png", "mime": "image/png"}],
        )
        calls = [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "web_search", "arguments": '{"query": "llama"}'},
            }
        ]
        reply = history.add_message(
            sid,
            "assistant",
            "Standing up.",
            reasoning="Think.",
            tool_calls=calls,
            model="m",
            usage={"prompt_tokens": 5},
            timings={"predicted_per_second": 42.0},
        )
        history.add_message(sid, "user", "A later question")
        messages = history.messages(sid)
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert messages[1]["id"] == user and messages[1]["attachments"][0]["name"] == "pic.png"
        assert messages[2]["id"] == reply
        assert messages[2]["tool_calls"] == calls
        assert messages[2]["usage"] == {"prompt_tokens": 5}
        assert messages[2]["timings"] == {"predicted_per_second": 42.0}
        assert messages[2]["reasoning"] == "Think." and messages[2]["status"] == "complete"
        session = history.get_session(sid)
        assert session["title"] == "How do llamas sleep?"
        assert session["updated_at"] >= before
        assert history.message_count(sid) == 4
        history.delete_branch(reply)
        assert [m["id"] for m in history.messages(sid)] == [messages[0]["id"], user]
        with pytest.raises(HistoryError, match="no session"):
            history.add_message(sid + 100, "user", "x")
        with pytest.raises(ValueError):
            history.add_message(sid, "robot", "x")

    def test_history_has_no_column_for_api_keys(self, tmp_path: Path) -> None:

        History(tmp_path / "h.db").close()
        conn = sqlite3.connect(tmp_path / "h.db")
        columns = [
            row[1]
            for table in ("sessions", "messages")
            for row in conn.execute(f"PRAGMA table_info({table})")
        ]
        conn.close()
        assert columns and not [c for c in columns if "key" in c or "secret" in c]

    def test_history_edited_first_question_renames_an_automatic_title_only(
        self, tmp_path: Path
    ) -> None:
        """A new version of the first question renames a chat whose title came from an
        earlier version; a title the user gave stays; a later message keeps titles."""

        history = History(tmp_path / "h.db")
        auto = history.create_session("chat")
        history.add_message(auto, "user", "Wher do llamas live?")
        history.add_message(auto, "assistant", "In the Andes.")
        history.add_message(auto, "user", "And alpacas?")
        assert history.get_session(auto)["title"] == "Wher do llamas live?"
        history.add_message(auto, "user", "Where do llamas live?", parent=None)
        assert history.get_session(auto)["title"] == "Where do llamas live?"
        history.add_message(auto, "user", "Whereabouts?", parent=None)
        assert history.get_session(auto)["title"] == "Whereabouts?"

        named = history.create_session("chat")
        history.add_message(named, "user", "Wher do llamas live?")
        history.rename_session(named, "Llamas")
        history.add_message(named, "user", "Where do llamas live?", parent=None)
        assert history.get_session(named)["title"] == "Llamas"

    def test_history_soft_delete_hides_undelete_restores_purge_removes(
        self, tmp_path: Path
    ) -> None:

        history = History(tmp_path / "h.db")
        keep = history.create_session("chat")
        history.add_message(keep, "user", "keep me")
        gone = history.create_session("chat")
        history.add_message(gone, "user", "delete me please")
        history.delete_session(gone)
        assert [s["id"] for s in history.list_sessions()] == [keep]
        assert history.count_sessions() == 1 and history.search("delete") == []
        history.undelete_session(gone)
        assert [s["id"] for s in history.list_sessions()] == [gone, keep]
        assert [s["id"] for s in history.search("delete")] == [gone]
        history.delete_session(gone)
        assert history.purge_deleted() == 1
        assert history.get_session(gone) is None and history.message_count(gone) == 0
        assert history.search("delete") == [] and history.message_count(keep) == 1

    def test_history_streamed_text_saved_by_update_survives_a_crash(self, tmp_path: Path) -> None:

        path = tmp_path / "h.db"
        script = (
            "import os, sys\n"
            "from llamachat.history.store import History\n"
            "h = History(sys.argv[1])\n"
            "sid = h.create_session('chat')\n"
            "h.add_message(sid, 'user', 'tell a story')\n"
            "mid = h.add_message(sid, 'assistant', '', status='streaming')\n"
            "h.update_message(mid, content='Once upon', reasoning='plan')\n"
            "h.update_message(mid, content='Once upon a time')\n"
            "os._exit(9)\n"  # no close, no commit on exit: what a crash leaves behind
        )
        done = subprocess.run([sys.executable, "-c", script, str(path)], cwd=CHECKOUT, check=False)
        assert done.returncode == 9
        history = History(path)
        reply = history.messages(history.list_sessions()[0]["id"])[-1]
        assert (reply["content"], reply["reasoning"], reply["status"]) == (
            "Once upon a time",
            "plan",
            "streaming",
        )

    def test_fault_deleted_chat_is_purged_from_the_file_when_undo_ends(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A chat deleted in the sidebar can be undone while the notice shows; once the notice
        goes, its messages and full-text rows are gone from the file, not just hidden."""

        path = tmp_path / "history.db"
        history = History(path)
        keep = history.create_session("chat")
        history.add_message(keep, "user", "keepsake marmalade")
        gone = history.create_session("chat")
        history.add_message(gone, "user", "zanzibarquokka secret plans")
        history.add_message(gone, "assistant", "zanzibarquokka noted")
        sidebar = SessionSidebar(history)
        qtbot.addWidget(sidebar)
        sidebar.delete_session(gone)
        assert sidebar.undo_delete() == gone  # still restorable while Undo is offered
        sidebar.delete_session(gone)
        # The notice bar closing (its timer, or the user) ends the undo window.
        close = [
            b for b in sidebar.findChildren(QAbstractButton) if b.accessibleName() == "Close notice"
        ]
        close[0].click()
        assert sidebar.undo_delete() is None
        assert history.get_session(gone) is None and history.message_count(gone) == 0
        assert history.search("zanzibarquokka") == []
        history.close()
        data = history_file_bytes(path)
        assert b"marmalade" in data
        assert b"zanzibarquokka" not in data

    def test_fault_chat_deleted_in_an_earlier_run_is_purged_at_start(self, tmp_path: Path) -> None:
        """A deleted chat the last run never purged (quit with Undo still offered) is purged when
        the history next opens, once older than the undo margin; a fresh deletion is kept."""

        from llamachat.history import store as db

        path = tmp_path / "history.db"
        history = History(path)
        old = history.create_session("chat")
        history.add_message(old, "user", "oldquokkaword")
        fresh = history.create_session("chat")
        history.add_message(fresh, "user", "freshquokkaword")
        history.delete_session(old)
        history.delete_session(fresh)
        history.close()
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE sessions SET deleted_at = deleted_at - ? WHERE id = ?",
                (db.PURGE_AFTER_S + 1, old),
            )
        conn.close()
        History(path).close()
        data = history_file_bytes(path)
        assert b"oldquokkaword" not in data
        reopened = History(path)
        try:
            rows = reopened._read("SELECT id FROM sessions")
            assert [r[0] for r in rows] == [fresh]
        finally:
            reopened.close()
