"""Where the user left off: what they typed in a chat and did not send yet, one draft per
chat, and the chat they opened last.

The new chat, which has no session until its first message is sent, keeps its draft
under session id 0 (no session has it). A chat's `opened_at` is when it was last opened.
Each function takes the connection; SQLite's failures raise HistoryUnavailable.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from llamachat.history.rows import _unavailable

# The key of the new chat's draft: session ids start at 1.
NEW_CHAT = 0


def read(conn: sqlite3.Connection, path: Path, session_id: int | None) -> str:
    """The chat's draft ('' when none; None: the new chat)."""
    try:
        rows = conn.execute(
            "SELECT text FROM drafts WHERE session_id = ?", (session_id or NEW_CHAT,)
        ).fetchall()
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "read") from None
    return str(rows[0][0]) if rows else ""


def write(conn: sqlite3.Connection, path: Path, session_id: int | None, text: str) -> None:
    """Keep `text` as the chat's draft (None: the new chat); '' forgets it."""
    if text:
        sql = (
            "INSERT INTO drafts (session_id, text, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET text = excluded.text,"
            " updated_at = excluded.updated_at"
        )
        values: tuple = (session_id or NEW_CHAT, text, time.time())
    else:
        sql, values = "DELETE FROM drafts WHERE session_id = ?", (session_id or NEW_CHAT,)
    try:
        conn.execute(sql, values)
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "save to") from None


def drafted(conn: sqlite3.Connection, path: Path) -> set[int]:
    """The sessions that hold a draft (the new chat's left out)."""
    try:
        rows = conn.execute(
            "SELECT session_id FROM drafts WHERE session_id != ? AND text != ''", (NEW_CHAT,)
        ).fetchall()
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "read") from None
    return {int(row[0]) for row in rows}


def mark_opened(conn: sqlite3.Connection, path: Path, session_id: int) -> None:
    """Remember that the chat was opened now (the new chat: `forget_opened`)."""
    try:
        conn.execute("UPDATE sessions SET opened_at = ? WHERE id = ?", (time.time(), session_id))
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "save to") from None


def last_opened(conn: sqlite3.Connection, path: Path, mode: str) -> int | None:
    """The live chat of `mode` opened last (None: none was ever opened)."""
    try:
        row = conn.execute(
            "SELECT id FROM sessions WHERE deleted_at IS NULL AND mode = ?"
            " AND opened_at IS NOT NULL ORDER BY opened_at DESC LIMIT 1",
            (mode,),
        ).fetchone()
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "read") from None
    return int(row[0]) if row else None


def forget_opened(conn: sqlite3.Connection, path: Path) -> None:
    """Make the new chat the one opened last: no chat is."""
    try:
        conn.execute("UPDATE sessions SET opened_at = NULL WHERE opened_at IS NOT NULL")
    except sqlite3.Error as exc:
        raise _unavailable(path, exc, "save to") from None
