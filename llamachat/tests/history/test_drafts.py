"""The tests of `llamachat.history.drafts`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from llamachat.history.store import MIGRATIONS, History


class TestHistoryDrafts:
    """Each chat's draft, kept in the history file."""

    def test_history_keeps_one_draft_per_chat_and_the_new_chats_across_opens(
        self, tmp_path: Path
    ) -> None:
        """A draft per session and one for the new chat (None), kept across opens; ''
        forgets it; purging a chat purges its draft; a version-3 file gains the table."""

        path = tmp_path / "h.db"
        with History(path) as history:
            sid = history.create_session("chat")
            assert history.draft(sid) == "" and history.draft(None) == ""
            history.set_draft(sid, "half a thought")
            history.set_draft(None, "for a new chat")
            history.set_draft(sid, "a whole thought")
        with History(path) as history:
            assert history.draft(sid) == "a whole thought"
            assert history.draft(None) == "for a new chat"
            history.set_draft(None, "")
            assert history.draft(None) == ""
            history.delete_session(sid)
            history.purge_deleted([sid])
            assert history.draft(sid) == ""
        # A database of schema 3 (before drafts) gains them.
        old = tmp_path / "schema3.db"
        raw = sqlite3.connect(old)
        for script in MIGRATIONS[:3]:
            raw.executescript(script)
        raw.execute("PRAGMA user_version = 3")
        raw.close()
        with History(old) as history:
            history.set_draft(None, "after the migration")
            assert history.draft(None) == "after the migration"
