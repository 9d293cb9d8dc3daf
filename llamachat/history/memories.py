"""Memories: short facts the person (or the model, through `remember`) keeps across chats.

A memory is one line of text with its scope (everywhere: `project_id` None, or one
project), where it came from (a chat and a message, None once they are gone), who wrote
it (`author` "user" or "model"), whether it is pinned, and when a request last carried
it (`used_at`). `Memories` is a History's (`History.memories`), over its connection; the
functions it calls are plain, for the export and import's own connection too.

A chat's own switch (**Use memory in this chat**) is kept with its parameters in
`session_params` under `SWITCH_KEY`, only while it is off (`with_switch`, `switch_of`):
not a `params.PARAMS` name, so never sent. A one-shot question (the quick window, `ask`)
has no project: it carries the memories kept everywhere (`sent_to` says to which models).

What a chat's requests carry (`chosen`): the memories in its scope within a token
budget, pinned ones first, then the most recently used, then the newest. The block is
written in a stable order (`turn.memory_part`), not in this one.

Qt-free.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from llamachat.history.rows import HistoryError
from llamachat.tokens import estimate_tokens

MAX_CHARS = 500
"""The longest memory: a short fact, not a document."""

AUTHORS = ("user", "model")

SWITCH_KEY = "memory"
"""A chat's memory switch among its saved parameters: `False` when off, absent when on."""

_COLUMNS = (
    "id, text, project_id, session_id, message_id, author, pinned, created_at, updated_at, used_at"
)


class MemoryRow(TypedDict):
    """A memory as History returns it."""

    id: int
    text: str
    project_id: int | None
    session_id: int | None
    message_id: int | None
    author: str
    pinned: bool
    created_at: float
    updated_at: float
    used_at: float


def _row(row: sqlite3.Row) -> MemoryRow:
    item = dict(row)
    item["pinned"] = bool(item["pinned"])
    return cast(MemoryRow, item)


def checked_text(text: str) -> str:
    """`text` as a memory keeps it (one line, spaces tidied); HistoryError when unusable."""
    text = " ".join(str(text).split())
    if not text:
        raise HistoryError("a memory needs some text")
    if len(text) > MAX_CHARS:
        raise HistoryError(
            f"a memory is a short fact: at most {MAX_CHARS} characters, this one has {len(text)}"
        )
    return text


def add(
    conn: sqlite3.Connection,
    text: str,
    *,
    project_id: int | None = None,
    session_id: int | None = None,
    message_id: int | None = None,
    author: str = "user",
    pinned: bool = False,
    at: float | None = None,
) -> int:
    """A new memory; its id. The same text already in that scope is not added twice: its id."""
    text = checked_text(text)
    if author not in AUTHORS:
        raise ValueError(f"a memory's author is one of {AUTHORS}, got {author!r}")
    same = conn.execute(
        "SELECT id FROM memories WHERE text = ? AND project_id IS ?", (text, project_id)
    ).fetchone()
    if same is not None:
        return int(same[0])
    now = time.time() if at is None else at
    cursor = conn.execute(
        "INSERT INTO memories (text, project_id, session_id, message_id, author, pinned,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (text, project_id, session_id, message_id, author, int(pinned), now, now),
    )
    return int(cursor.lastrowid)  # type: ignore[arg-type]


def get(conn: sqlite3.Connection, memory_id: int) -> MemoryRow | None:
    """The memory with this id, or None."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
    return _row(row) if row else None


def listed(
    conn: sqlite3.Connection, *, project_id: int | None = None, every: bool = False
) -> list[MemoryRow]:
    """The memories in scope of a chat in `project_id` (everywhere's and the project's),
    or `every` memory; pinned first, then oldest first."""
    where = "" if every else "WHERE project_id IS NULL OR project_id = ?"
    params: tuple = () if every else (project_id,)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM memories {where} ORDER BY pinned DESC, id", params
    ).fetchall()
    return [_row(row) for row in rows]


def update(conn: sqlite3.Connection, memory_id: int, changes: dict[str, Any]) -> None:
    """Change a memory's text, pinned or scope (project_id); raises HistoryError."""
    values: dict[str, Any] = {}
    for key, value in changes.items():
        if key == "text":
            values[key] = checked_text(value)
        elif key == "pinned" and isinstance(value, bool):
            values[key] = int(value)
        elif key == "project_id" and (value is None or isinstance(value, int)):
            values[key] = value
        else:
            raise ValueError(f"a memory's {key} cannot be set to {value!r}")
    if values:
        assignments = ", ".join(f"{key} = ?" for key in values)
        conn.execute(
            f"UPDATE memories SET {assignments}, updated_at = ? WHERE id = ?",
            (*values.values(), time.time(), memory_id),
        )


def delete(conn: sqlite3.Connection, memory_id: int) -> None:
    """Forget a memory."""
    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))


def restore(conn: sqlite3.Connection, rows: Iterable[MemoryRow]) -> None:
    """Make deleted memories again as they were, under their ids (an Undo: ids are never
    given again, AUTOINCREMENT)."""
    columns = _COLUMNS.split(", ")
    values = [{**row, "pinned": int(row["pinned"])} for row in rows]
    conn.executemany(
        f"INSERT INTO memories ({_COLUMNS}) VALUES ({', '.join('?' * len(columns))})",
        [tuple(value[column] for column in columns) for value in values],
    )


def mark_used(conn: sqlite3.Connection, ids: Iterable[int], at: float | None = None) -> None:
    """A request carried these memories (`at`, default now)."""
    now = time.time() if at is None else at
    conn.executemany("UPDATE memories SET used_at = ? WHERE id = ?", [(now, i) for i in ids])


def switch_of(saved: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A chat's saved parameters split into its request parameters and its memory switch
    (on unless saved off: a new or older chat uses memory)."""
    rest = dict(saved)
    return rest, rest.pop(SWITCH_KEY, True) is not False


def with_switch(request_params: Mapping[str, Any], on: bool) -> dict[str, Any]:
    """A chat's parameters as saved: its request parameters, and its switch when off."""
    saved = {k: v for k, v in request_params.items() if k != SWITCH_KEY}
    if not on:
        saved[SWITCH_KEY] = False
    return saved


def sent_to(model: str, *, router: bool, providers: Sequence[str]) -> bool:
    """Whether requests to `model` may carry memories: the router's models, and a
    provider's (`provider/model`) only when `providers` (`memory_providers`) names it."""
    return router or model.partition("/")[0] in providers


@dataclass(frozen=True)
class Chosen:
    """What a chat's requests carry of its memories, and what the budget left out."""

    kept: tuple[MemoryRow, ...]
    left_out: tuple[MemoryRow, ...]


def chosen(memories: Sequence[MemoryRow], budget_tokens: int) -> Chosen:
    """The memories that fit `budget_tokens`: pinned first, then the most recently used,
    then the newest; one that does not fit is left out and smaller ones after it may fit.

    Stable from turn to turn while no memory changes: the ones kept are marked used
    together (`mark_used`), so they stay ahead of every one left out, and the running
    total at which a left-out one was refused can only have grown.
    """
    ranked = sorted(memories, key=lambda m: (not m["pinned"], -m["used_at"], -m["id"]))
    kept: list[MemoryRow] = []
    left: list[MemoryRow] = []
    total = 0
    for memory in ranked:
        cost = estimate_tokens(memory["text"]) + 2  # its "- " and line break
        if total + cost <= budget_tokens:
            kept.append(memory)
            total += cost
        else:
            left.append(memory)
    return Chosen(tuple(kept), tuple(left))


_Connection = Callable[[], AbstractContextManager[sqlite3.Connection]]


class Memories:
    """A History's memories; `writing` and `reading` lend its connection (the first in a
    transaction), turning SQLite's failures into HistoryUnavailable."""

    def __init__(self, writing: _Connection, reading: _Connection) -> None:
        self._writing = writing
        self._reading = reading

    def add(
        self,
        text: str,
        *,
        project_id: int | None = None,
        session_id: int | None = None,
        message_id: int | None = None,
        author: str = "user",
    ) -> int:
        """Remember `text` (everywhere, or in `project_id`); its id. Raises HistoryError."""
        with self._writing() as conn:
            return add(
                conn,
                text,
                project_id=project_id,
                session_id=session_id,
                message_id=message_id,
                author=author,
            )

    def get(self, memory_id: int) -> MemoryRow | None:
        """The memory with this id, or None."""
        with self._reading() as conn:
            return get(conn, memory_id)

    def listed(self, *, project_id: int | None = None, every: bool = False) -> list[MemoryRow]:
        """The memories a chat in `project_id` sees (or `every` one), pinned first."""
        with self._reading() as conn:
            return listed(conn, project_id=project_id, every=every)

    def update(self, memory_id: int, **changes: Any) -> None:
        """Change a memory's text, pinned or project_id; raises HistoryError."""
        with self._writing() as conn:
            update(conn, memory_id, changes)

    def delete(self, memory_id: int) -> None:
        """Forget a memory."""
        with self._writing() as conn:
            delete(conn, memory_id)

    def restore(self, rows: Iterable[MemoryRow]) -> None:
        """Make deleted memories again as they were (an Undo)."""
        with self._writing() as conn:
            restore(conn, rows)

    def mark_used(self, ids: Iterable[int]) -> None:
        """A request carried these memories now."""
        ids = list(ids)
        if ids:
            with self._writing() as conn:
                mark_used(conn, ids)
