"""The tests of `llamachat.history.import_child`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llamachat.history.store import HistoryError, ImportCancelled
from llamachat.tests.support import history_with_sessions, write_export


class TestImportChild:
    """Importing chats in a child process, so that reading and checking never hold the app's GIL."""

    def test_import_runs_in_a_child_process_that_cancel_and_failure_leave_clean(
        self, tmp_path: Path
    ) -> None:
        """`import_in_child` imports in a process of its own (the window's GIL stays free);
        Cancel (its progress callback raising) keeps nothing; a bad file's HistoryError
        comes back whole."""
        import multiprocessing

        from llamachat.dev.chat_exports import chatgpt_export
        from llamachat.history.import_child import import_in_child

        source = write_export(tmp_path, "conversations.json", chatgpt_export(40))
        history = history_with_sessions(tmp_path)
        children: set[str] = set()

        def watch(_share: float) -> None:
            children.update(p.name for p in multiprocessing.active_children())

        ids = import_in_child(history.path, source, watch)
        assert len(ids) == 40 and history.count_sessions() == 40
        assert "llamachat-import" in children

        def cancel(share: float) -> None:
            if share > 0.3:
                raise ImportCancelled

        with pytest.raises(ImportCancelled):
            import_in_child(history.path, source, cancel)
        assert history.count_sessions() == 40
        raw = sqlite3.connect(history.path)
        assert raw.execute("SELECT count(*) FROM sessions").fetchone()[0] == 40
        raw.close()
        bad = write_export(tmp_path, "bad.json", [{"title": "x", "mapping": 3}])
        with pytest.raises(HistoryError, match="mapping"):
            import_in_child(history.path, bad, watch)
        history.close()
