"""The messages on each session's active path, kept between reads: a reply's next request
and its count do not read a long chat back from the disk each time.

`ActivePaths` reads a path once (`read`) and keeps it by session, with the leaf it ends
at. Any write of History empties it (`clear`), but the two a reply makes bring the path
up to date instead: a message added at the end of the path (`add`) and a message's text
saved (`update`). Another process's commit (PRAGMA data_version) empties it too. Like
History, it is used only by the thread that opened the connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

from llamachat.history import tree
from llamachat.history.rows import MessageRow, NewMessage, _unavailable, transaction


class ActivePaths:
    """Each session's active path as last read, over History's connection to `path`."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path
        # By session: (leaf id, the rows from a root down to it).
        self._paths: dict[int, tuple[int, list[MessageRow]]] = {}
        self._data_version: int | None = None

    def clear(self) -> None:
        """Forget every path (a write that may have changed any)."""
        self._paths.clear()

    @contextmanager
    def _failing(self, doing: str) -> Iterator[sqlite3.Connection]:
        """The connection; SQLite's failures become HistoryUnavailable ("cannot `doing`")."""
        try:
            yield self._conn
        except sqlite3.Error as exc:
            raise _unavailable(self._path, exc, doing) from None

    def read(self, session_id: int) -> list[MessageRow]:
        """The messages on a session's active path, first question first (copies)."""
        with self._failing("read") as conn:
            rows = conn.execute(
                "SELECT coalesce(active_leaf, (SELECT max(id) FROM messages WHERE session_id = ?))"
                " FROM sessions WHERE id = ?",
                (session_id, session_id),
            ).fetchall()
            if not rows or rows[0][0] is None:
                return []
            leaf = rows[0][0]
            version = conn.execute("PRAGMA data_version").fetchall()[0][0]
            if version != self._data_version:
                self._data_version = version
                self._paths.clear()
            cached = self._paths.get(session_id)
            if cached is None or cached[0] != leaf:
                cached = self._paths[session_id] = (leaf, tree.path_to(conn, session_id, leaf))
        # Copies: what a caller does with its rows never reaches the next caller's.
        return [cast(MessageRow, {**row, "versions": list(row["versions"])}) for row in cached[1]]

    def add(
        self, session_id: int, message: NewMessage, parent: int | None | Literal["active"]
    ) -> int:
        """Add `message` after `parent` ("active": the active leaf) as the active leaf; its id.
        A path it ends stays kept, with it."""
        cached = self._paths.get(session_id)
        self._paths.clear()
        with transaction(self._conn, self._path) as conn:
            message_id = tree.insert_message(conn, session_id, message, parent)
        if cached is not None:
            leaf, path = cached
            with self._failing("read") as conn:
                row = tree.message(conn, message_id)
            if row["parent_id"] == leaf:
                # The new active leaf ends the path it was added to.
                self._paths[session_id] = (message_id, [*path, row])
        return message_id

    def update(self, message_id: int, changes: dict[str, Any]) -> None:
        """Set the columns in `changes` (stored values) of a message, and commit at once;
        the paths holding it keep it as it is now."""
        assignments = ", ".join(f"{key} = ?" for key in changes)
        holding = [
            (session_id, path, index)
            for session_id, (_leaf, path) in self._paths.items()
            for index in range(len(path) - 1, -1, -1)
            if path[index]["id"] == message_id
        ]
        self._paths.clear()
        with self._failing("save to") as conn:
            conn.execute(
                f"UPDATE messages SET {assignments} WHERE id = ?", (*changes.values(), message_id)
            )
        for session_id, path, index in holding:
            with self._failing("read") as conn:
                path[index] = tree.message(conn, message_id)
            self._paths[session_id] = (path[-1]["id"], path)
