"""Drafts: what the user typed in a chat and has not sent yet, one per chat.

The new chat, which has no session until its first message is sent, keeps its draft
under session id 0 (no session has it). Each function takes the connection.
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
