"""The picks of blind comparisons: which model's answer the person went on with, over which.

A pick among N answers is kept as one row for each model the picked one won against
(`add`); `wins` counts them by pair, everywhere or in one project. `Picks` is a
History's (`History.picks`), over its connection. Qt-free.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

# `wins(project=EVERYWHERE)` counts the picks of every chat, in a project or not.
EVERYWHERE = -1


class Picks:
    """The winners of blind comparisons, kept in a History's database."""

    def __init__(
        self,
        transaction: Callable[[], AbstractContextManager[sqlite3.Connection]],
        reading: Callable[[], AbstractContextManager[sqlite3.Connection]],
    ) -> None:
        self._transaction = transaction
        self._reading = reading

    def add(
        self,
        winner: str,
        losers: Iterable[str],
        *,
        project_id: int | None = None,
        session_id: int | None = None,
    ) -> None:
        """Keep that `winner` was picked over each of `losers`. Raises HistoryError."""
        now = time.time()
        rows = [(winner, loser, project_id, session_id, now) for loser in losers if loser != winner]
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO compare_picks (winner, loser, project_id, session_id, picked_at)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def wins(self, project_id: int | None = EVERYWHERE) -> dict[tuple[str, str], int]:
        """How often each model was picked over each other one: {(winner, loser): count},
        everywhere (EVERYWHERE), in one project, or (None) in chats of no project."""
        sql = "SELECT winner, loser, count(*) FROM compare_picks"
        params: tuple = ()
        if project_id is None:
            sql += " WHERE project_id IS NULL"
        elif project_id != EVERYWHERE:
            sql, params = sql + " WHERE project_id = ?", (project_id,)
        with self._reading() as conn:
            rows = conn.execute(sql + " GROUP BY winner, loser", params).fetchall()
        return {(str(w), str(lo)): int(n) for w, lo, n in rows}
