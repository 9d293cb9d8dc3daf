"""History's one SQLite connection: opening it, and lending it out for reads and writes.

`Connection` opens the database file (creating its folder; a corrupt file is moved aside
and what can be read of it salvaged into a fresh one, ``database``) and lends the
connection to `History` and the modules it hands it to: as one write transaction, for
statements saved one by one, or for reads, SQLite's failures becoming HistoryUnavailable.
Every write first calls `on_write`, which forgets what a write may have made stale (the
kept active paths). It knows nothing of History.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from llamachat.history import database
from llamachat.history.database import BUSY_TIMEOUT_S, _Corrupt
from llamachat.history.rows import HistoryError, _unavailable, transaction

log = logging.getLogger("llamachat.history.store")


class Connection:
    """The history file's connection: opened (a corrupt file salvaged) and lent out."""

    def __init__(self, path: Path, on_write: Callable[[], None]) -> None:
        self.path = path
        self.recovered_from: Path | None = None
        """Where a corrupt file was moved aside to (None: it opened as it was)."""
        self.salvaged = 0
        """How many messages were salvaged from the corrupt file."""
        self._on_write = on_write
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(
                f"cannot create the folder for the history database {self.path}: "
                f"{exc.strerror or exc}"
            ) from None
        try:
            self.conn = database.connect(self.path, BUSY_TIMEOUT_S)
        except _Corrupt as exc:
            self.recovered_from = database.move_aside(self.path)
            log.warning(
                "history %s is damaged (%s); moved to %s", self.path, exc, self.recovered_from
            )
            self.conn = database.connect(self.path, BUSY_TIMEOUT_S)
            with transaction(self.conn, self.path) as conn:
                self.salvaged = database.salvage(conn, self.recovered_from)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; any write may change a kept path, so they are forgotten."""
        self._on_write()
        with transaction(self.conn, self.path) as conn:
            yield conn

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """The connection for statements saved one by one; failures become HistoryUnavailable."""
        self._on_write()
        try:
            yield self.conn
        except sqlite3.Error as exc:
            raise _unavailable(self.path, exc, "save to") from None

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for a helper's reads; SQLite's failures become HistoryUnavailable."""
        try:
            yield self.conn
        except sqlite3.Error as exc:
            raise _unavailable(self.path, exc, "read") from None

    def write(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        """Run one statement that writes, saved at once."""
        with self.writing() as conn:
            return conn.execute(sql, params)

    def read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        """Run one query; its rows."""
        with self.reading() as conn:
            return conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close the connection; it is unusable afterwards."""
        self.conn.close()
