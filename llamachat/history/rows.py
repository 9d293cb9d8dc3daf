"""What the history's modules share: the rows History returns, their columns and JSON
coding, the errors (described in store.py, which re-exports them) and the transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict, cast

MODES = ("chat", "oneshot")
ROLES = ("user", "assistant", "system", "tool")
STATUSES = ("complete", "streaming", "stopped", "error")

_SESSION_COLUMNS = (
    "id, mode, title, model, prompt_name, prompt_custom, skills, created_at, updated_at, pinned,"
    " project_id"
)
_MESSAGE_COLUMNS = (
    "id, session_id, parent_id, role, content, reasoning, tool_calls, attachments, model, "
    "status, error, usage, timings, created_at"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, parent_id, role, content, reasoning, tool_calls,"
    " attachments, model, status, error, usage, timings, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_JSON_LISTS = ("skills", "tool_calls", "attachments")
_JSON_DICTS = ("usage", "timings")


class NewSession(TypedDict):
    """A session's stored fields, as export_json writes them and import_json reads them."""

    mode: str
    title: str
    model: str
    prompt_name: str
    prompt_custom: str
    skills: list[str]
    created_at: float
    updated_at: float


class SessionRow(NewSession):
    """A session as History returns it; `pinned` (0 or 1) keeps it at the top of the list,
    `project_id` is the project it belongs to (None: none)."""

    id: int
    pinned: int
    project_id: int | None


class SearchHit(SessionRow):
    """A session found by History.search, with a snippet of its best matching message."""

    snippet: str
    message_id: int | None
    """The best matching message (None: only the title matched)."""


class NewMessage(TypedDict):
    """A message's stored fields, before it has an id (add_message, import_json)."""

    role: str
    content: str
    reasoning: str
    tool_calls: list[Any]
    attachments: list[dict[str, Any]]
    model: str
    status: str
    error: str
    usage: dict[str, Any]
    timings: dict[str, Any]
    created_at: float


class MessageRow(NewMessage):
    """A message as History returns it, on its session's active path.

    `versions` are the ids of the message and its siblings (the other replies to the
    same question, the other edits of the same message), oldest first; [] when it has
    none.
    """

    id: int
    session_id: int
    parent_id: int | None
    versions: list[int]


# Each stored field's type and default: what import_json accepts, and what _stored keeps.
_SESSION_FIELDS: dict[str, tuple[type | tuple[type, ...], object]] = {
    "mode": (str, "chat"),
    "title": (str, ""),
    "model": (str, ""),
    "prompt_name": (str, ""),
    "prompt_custom": (str, ""),
    "skills": (list, []),
    "created_at": ((int, float), None),
    "updated_at": ((int, float), None),
}
_MESSAGE_FIELDS: dict[str, tuple[type | tuple[type, ...], object]] = {
    "role": (str, None),
    "content": (str, ""),
    "reasoning": (str, ""),
    "tool_calls": (list, []),
    "attachments": (list, []),
    "model": (str, ""),
    "status": (str, "complete"),
    "error": (str, ""),
    "usage": (dict, {}),
    "timings": (dict, {}),
    "created_at": ((int, float), None),
}


class HistoryError(Exception):
    """The history cannot be opened, written or imported; the message says why."""


class HistoryUnavailable(HistoryError):
    """SQLite failed for a reason outside llamachat (disk full, locked, read-only...)."""

    def __init__(self, message: str, *, code: str = "") -> None:
        # `code` has a default: unpickling (an import's child process sends its error)
        # calls the class with the message only, then restores `code`.
        super().__init__(message)
        self.code = code


# The environment's faults, by SQLite primary result code, with what the user can do.
_ADVICE = {
    sqlite3.SQLITE_BUSY: "another program is using it; close that program and try again",
    sqlite3.SQLITE_READONLY: "the file or its folder cannot be written; make them writable",
    sqlite3.SQLITE_IOERR: "the disk failed to read or write; check the disk and try again",
    sqlite3.SQLITE_CORRUPT: "the file is damaged; restart llamachat to set it aside and "
    "recover what can be read",
    sqlite3.SQLITE_FULL: "the disk is full; free some space and try again",
    sqlite3.SQLITE_CANTOPEN: "check that its folder exists and is writable",
    sqlite3.SQLITE_NOTADB: "the file is not a database; move it away and restart llamachat",
}


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _unavailable(path: Path, exc: sqlite3.Error, doing: str) -> HistoryUnavailable:
    """The HistoryUnavailable for an environment's fault; any other error is re-raised."""
    advice = _ADVICE.get(_primary_code(exc))  # type: ignore[arg-type]
    if advice is None:
        # A bug (bad SQL, a closed connection, a broken constraint): it must reach the
        # crash handler with its traceback, not pass for a full disk.
        raise exc
    return HistoryUnavailable(
        f"cannot {doing} the history database {path}: {exc}; {advice}",
        code=getattr(exc, "sqlite_errorname", "") or "",
    )


@contextmanager
def transaction(conn: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    """One write transaction on `conn` (the history at `path`): committed whole or not at all."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            # SQLite has rolled back by itself after some failures (a full disk, an I/O
            # error): a ROLLBACK then fails and would hide the reason.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "save to") from None


# How a column's stored value becomes a row's: JSON of a list or a dict, or a timestamp.
_COLUMN_TYPES: dict[str, type] = {
    **dict.fromkeys(_JSON_LISTS, list),
    **dict.fromkeys(_JSON_DICTS, dict),
    "created_at": float,
    "updated_at": float,
}
_IDS = frozenset({"id", "session_id", "parent_id", "project_id"})


_MESSAGE_KEYS = tuple(name.strip() for name in _MESSAGE_COLUMNS.split(","))
"""The names of _MESSAGE_COLUMNS, in order: a row of plain values is zipped with them."""


def _decode(row: sqlite3.Row | dict[str, Any]) -> dict[str, Any]:
    # Runs once per message a chat shows or sends (500 for a long chat): the few typed
    # columns are looked at by name, the rest only when the row holds a NULL.
    item = dict(row)
    for key, kind in _COLUMN_TYPES.items():
        if key not in item:
            continue
        value = item[key]
        if kind is float:
            if value is not None:
                item[key] = float(value)
            continue
        try:
            # Most rows hold no tool calls, attachments or figures: skip the parser.
            decoded = json.loads(value) if value and value not in ("[]", "{}") else kind()
        except ValueError:
            decoded = kind()
        item[key] = decoded if isinstance(decoded, kind) else kind()
    if None in item.values():
        for key, value in item.items():
            if value is None and key not in _IDS:
                item[key] = ""  # the seed's schema allowed NULL titles and models
    return item


def _message_row(session_id: int, parent_id: int | None, message: NewMessage) -> tuple:
    """The values of _INSERT_MESSAGE for a message dict, lists and dicts as JSON."""
    return (
        session_id,
        parent_id,
        message["role"],
        message["content"],
        message["reasoning"],
        json.dumps(message["tool_calls"]),
        json.dumps(message["attachments"]),
        message["model"],
        message["status"],
        message["error"],
        json.dumps(message["usage"]),
        json.dumps(message["timings"]),
        message["created_at"],
    )


def _stored(message: MessageRow) -> NewMessage:
    """A message's stored fields, without its place in a session."""
    return cast(NewMessage, {key: message[key] for key in _MESSAGE_FIELDS})  # type: ignore[literal-required]
