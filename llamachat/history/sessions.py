"""A chat's own row: sessions started, read and listed (pinned first, by project, by a
search filter), their settings (title, pin, model, prompt, mode, skills, request
parameters), and their deletion (hidden, brought back, chosen for purging).

Each function takes History's connection (`History` maps SQLite's failures to
HistoryUnavailable around the call) and plain values; none of them knows History.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable
from typing import Any, Literal, cast

from llamachat.history.rows import _SESSION_COLUMNS, MODES, SessionRow, _decode
from llamachat.history.search import SearchFilter

log = logging.getLogger(__name__)

Project = int | None | Literal["any"]
"""Which sessions of projects: one project's, those in none (None), or all ("any")."""

# What `update` may set, by column: a session's settings that are one value each.
_SETTINGS = frozenset({"title", "pinned", "model", "prompt_name", "prompt_custom", "mode"})


def _checked_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def _live(mode: str | None, project: Project, matching: SearchFilter) -> tuple[str, tuple]:
    """The WHERE clause (and its values) of the live sessions of `mode` in `project` that
    `matching` keeps."""
    where, params = "deleted_at IS NULL", cast(tuple, ())
    if mode:
        where, params = where + " AND mode = ?", (mode,)
    if project is None:
        where += " AND project_id IS NULL"
    elif project != "any":
        where, params = where + " AND project_id = ?", (*params, project)
    kept, kept_params = matching.sql("sessions")
    return where + kept, (*params, *kept_params)


def create(
    conn: sqlite3.Connection,
    mode: str,
    model: str,
    *,
    title: str,
    prompt_name: str,
    prompt_custom: str,
    project_id: int | None,
) -> int:
    """Start a session (in project `project_id`, when given); its id."""
    now = time.time()
    cursor = conn.execute(
        "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom, created_at,"
        " updated_at, project_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (_checked_mode(mode), title, model, prompt_name, prompt_custom, now, now, project_id),
    )
    return int(cursor.lastrowid)  # type: ignore[arg-type]


def get(conn: sqlite3.Connection, session_id: int) -> SessionRow | None:
    """The session with this id (deleted ones too), or None."""
    rows = conn.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
    ).fetchall()
    return cast(SessionRow, _decode(rows[0])) if rows else None


def listed(
    conn: sqlite3.Connection,
    *,
    limit: int,
    offset: int,
    mode: str | None,
    project: Project,
    matching: SearchFilter,
) -> list[SessionRow]:
    """One page of live sessions, pinned ones first, then most recently updated first."""
    where, params = _live(mode, project, matching)
    rows = conn.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where}"
        " ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT ? OFFSET ?",
        (*params, limit, offset),
    ).fetchall()
    return [cast(SessionRow, _decode(row)) for row in rows]


def count(
    conn: sqlite3.Connection, *, mode: str | None, project: Project, matching: SearchFilter
) -> int:
    """How many live sessions there are (of `mode`, in `project`, kept by `matching`)."""
    where, params = _live(mode, project, matching)
    return int(conn.execute(f"SELECT count(*) FROM sessions WHERE {where}", params).fetchone()[0])


def update(conn: sqlite3.Connection, session_id: int, **values: str | int) -> None:
    """Set a session's settings, by column (those in _SETTINGS; a mode is checked)."""
    if not values.keys() <= _SETTINGS:
        raise ValueError(f"not a session setting: {sorted(values.keys() - _SETTINGS)}")
    if "mode" in values:
        _checked_mode(str(values["mode"]))
    assignments = ", ".join(f"{column} = ?" for column in values)
    conn.execute(f"UPDATE sessions SET {assignments} WHERE id = ?", (*values.values(), session_id))


def set_skills(conn: sqlite3.Connection, session_id: int, names: list[str]) -> None:
    """Record which skills the session has loaded."""
    conn.execute(
        "UPDATE sessions SET skills = ? WHERE id = ?", (json.dumps(list(names)), session_id)
    )


def params(conn: sqlite3.Connection, session_id: int) -> dict[str, Any]:
    """The request parameters the session overrides ({} when none, or unreadable)."""
    rows = conn.execute(
        "SELECT params FROM session_params WHERE session_id = ?", (session_id,)
    ).fetchall()
    try:
        value = json.loads(rows[0]["params"]) if rows else {}
    except ValueError:
        log.warning("session %s has unreadable parameters; using none", session_id)
        return {}
    return value if isinstance(value, dict) else {}


def set_params(conn: sqlite3.Connection, session_id: int, values: dict[str, Any]) -> None:
    """Record the request parameters the session overrides (replacing the earlier ones)."""
    conn.execute(
        "INSERT INTO session_params (session_id, params) VALUES (?, ?)"
        " ON CONFLICT (session_id) DO UPDATE SET params = excluded.params",
        (session_id, json.dumps(values)),
    )


def delete(conn: sqlite3.Connection, session_id: int) -> None:
    """Hide a session from the list and search (`undelete` brings it back)."""
    conn.execute(
        "UPDATE sessions SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
        (time.time(), session_id),
    )


def undelete(conn: sqlite3.Connection, session_id: int) -> None:
    """Bring back a session hidden by `delete`."""
    conn.execute("UPDATE sessions SET deleted_at = NULL WHERE id = ?", (session_id,))


def deleted(session_ids: Iterable[int] | None, older_than: float) -> tuple[str, tuple] | None:
    """The WHERE clause (and its values) of the deleted sessions to purge: those in
    `session_ids`, else every one deleted `older_than` seconds ago or more; None: none."""
    where = "deleted_at IS NOT NULL"
    if session_ids is None:
        return where + " AND deleted_at <= ?", (time.time() - older_than,)
    ids = [int(i) for i in session_ids]
    if not ids:
        return None
    return where + f" AND id IN ({', '.join('?' * len(ids))})", tuple(ids)
