"""The tests of `llamachat.history.picks`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from llamachat.history.picks import EVERYWHERE
from llamachat.history.store import MIGRATIONS, History


class TestPicks:
    """The winners of blind comparisons, by pair, everywhere or in one project."""

    def test_picks_count_by_pair_and_by_project_and_outlive_their_chat(
        self, tmp_path: Path
    ) -> None:
        """A pick over two models counts one win against each; the table is everywhere's,
        one project's, or the chats of none; a deleted chat's picks still count."""

        history = History(tmp_path / "h.db")
        work = history.projects.create("Work")
        chat = history.create_session("chat", project_id=work)
        history.picks.add("alpha", ["beta", "gamma", "alpha"], project_id=work, session_id=chat)
        history.picks.add("beta", ["alpha"])
        assert history.picks.wins() == {
            ("alpha", "beta"): 1,
            ("alpha", "gamma"): 1,
            ("beta", "alpha"): 1,
        }
        assert history.picks.wins(EVERYWHERE) == history.picks.wins()
        assert history.picks.wins(work) == {("alpha", "beta"): 1, ("alpha", "gamma"): 1}
        assert history.picks.wins(None) == {("beta", "alpha"): 1}
        history.delete_session(chat)
        history.purge_deleted(older_than=0)
        assert history.picks.wins(work) == {("alpha", "beta"): 1, ("alpha", "gamma"): 1}
        history.close()

        conn = sqlite3.connect(tmp_path / "h.db")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) >= 13
        rows = conn.execute(
            "SELECT session_id FROM compare_picks WHERE winner = 'alpha'"
        ).fetchall()
        assert rows == [(None,), (None,)]
        conn.close()
