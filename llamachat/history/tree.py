"""The conversation as a tree: adding a message (and naming the chat after its first
question) or a branch of messages, the path to a leaf with each message's versions, switching to another
version, deleting a branch, forking a path into a chat of its own.

Each function takes the connection; those that write expect the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Literal, cast

from llamachat.history.rows import (
    _INSERT_MESSAGE,
    _MESSAGE_COLUMNS,
    _MESSAGE_KEYS,
    HistoryError,
    MessageRow,
    NewMessage,
    SessionRow,
    _decode,
    _message_row,
    _stored,
)

TITLE_CHARS = 80

# The path from a root to a leaf (bound twice: the leaf, its session), as message ids.
_PATH_TO = (
    "WITH RECURSIVE path(step) AS (SELECT ? UNION ALL"
    " SELECT m.parent_id FROM messages m JOIN path ON m.id = path.step"
    " WHERE m.parent_id IS NOT NULL)"
    " SELECT {columns} FROM path JOIN messages ON messages.id = path.step"
    " WHERE session_id = ? ORDER BY id"
)


def _title_from(content: str) -> str:
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1].rstrip() + "…"


def _values(conn: sqlite3.Connection, sql: str, params: tuple) -> list[tuple]:
    """Rows as plain tuples: a quarter of the cost of sqlite3.Row for a long chat's rows."""
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor.execute(sql, params).fetchall()


def insert_message(
    conn: sqlite3.Connection,
    session_id: int,
    message: NewMessage,
    parent: int | None | Literal["active"],
) -> int:
    """Add a message after `parent` ("active": the active leaf) and make it the active leaf."""
    session = conn.execute(
        "SELECT title, active_leaf FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if session is None:
        raise HistoryError(f"no session {session_id} in the history")
    parent_id = session["active_leaf"] if parent == "active" else parent
    if (
        parent_id is not None
        and conn.execute(
            "SELECT 1 FROM messages WHERE id = ? AND session_id = ?", (parent_id, session_id)
        ).fetchone()
        is None
    ):
        raise HistoryError(f"no message {parent_id} in session {session_id}")
    cursor = conn.execute(_INSERT_MESSAGE, _message_row(session_id, parent_id, message))
    message_id = int(cursor.lastrowid)  # type: ignore[arg-type]
    conn.execute(
        "UPDATE sessions SET updated_at = max(updated_at, ?), active_leaf = ? WHERE id = ?",
        (message["created_at"], message_id, session_id),
    )
    if message["role"] == "user":
        _follow_first_question(conn, session_id, session["title"], message_id)
    return message_id


def insert_branch(
    conn: sqlite3.Connection, session_id: int, messages: list[NewMessage]
) -> list[int]:
    """Add `messages` as a new branch from the root, each following the one before, and
    make its last one the active leaf (a compacted chat: its first message is another
    version of the session's first one); their ids."""
    ids: list[int] = []
    for message in messages:
        ids.append(insert_message(conn, session_id, message, ids[-1] if ids else None))
    return ids


def _follow_first_question(
    conn: sqlite3.Connection, session_id: int, title: str, message_id: int
) -> None:
    """Name the chat after its first question, or after a new version of it unless the
    user named the chat (a title taken from an earlier version is automatic too)."""
    row = conn.execute(
        "SELECT parent_id, content FROM messages WHERE id = ?", (message_id,)
    ).fetchone()
    if title:
        earlier = conn.execute(
            "SELECT content FROM messages WHERE session_id = ? AND role = 'user' AND id != ?"
            " AND parent_id IS ?",
            (session_id, message_id, row["parent_id"]),
        ).fetchall()
        if all(_title_from(other[0]) != title for other in earlier):
            return
        asked_before = conn.execute(
            "WITH RECURSIVE up(id) AS (SELECT ? UNION ALL SELECT m.parent_id FROM messages m"
            " JOIN up ON m.id = up.id WHERE m.parent_id IS NOT NULL)"
            " SELECT 1 FROM messages WHERE id IN (SELECT id FROM up) AND role = 'user'",
            (row["parent_id"],),
        ).fetchone()
        if asked_before is not None:
            return
    conn.execute(
        "UPDATE sessions SET title = ? WHERE id = ?", (_title_from(row["content"]), session_id)
    )


def message(conn: sqlite3.Connection, message_id: int) -> MessageRow:
    """One message as a path holds it, its versions (siblings) with it."""
    [values] = _values(conn, f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,))
    row = cast(MessageRow, _decode(dict(zip(_MESSAGE_KEYS, values))))
    siblings = [
        sibling
        for (sibling,) in _values(
            conn,
            "SELECT id FROM messages WHERE session_id = ? AND parent_id IS ? ORDER BY id",
            (row["session_id"], row["parent_id"]),
        )
    ]
    row["versions"] = siblings if len(siblings) > 1 else []
    return row


def path_to(conn: sqlite3.Connection, session_id: int, leaf: int) -> list[MessageRow]:
    """The messages from a root down to `leaf`, each with its versions."""
    rows = _values(conn, _PATH_TO.format(columns=_MESSAGE_COLUMNS), (leaf, session_id))
    # Only the few parents with more than one child are looked at twice.
    siblings: dict[int | None, list[int]] = {}
    for row in conn.execute(
        "SELECT parent_id, id FROM messages WHERE session_id = ? AND coalesce(parent_id, 0)"
        " IN (SELECT coalesce(parent_id, 0) FROM messages WHERE session_id = ?"
        " GROUP BY coalesce(parent_id, 0) HAVING count(*) > 1) ORDER BY id",
        (session_id, session_id),
    ).fetchall():
        siblings.setdefault(row[0], []).append(row[1])
    path = []
    for values in rows:
        message = cast(MessageRow, _decode(dict(zip(_MESSAGE_KEYS, values))))
        message["versions"] = siblings.get(message["parent_id"], [])
        path.append(message)
    return path


def select_version(conn: sqlite3.Connection, session_id: int, message_id: int) -> list[MessageRow]:
    """Make the path through `message_id` the active one; its messages.

    Below `message_id` the path follows the newest reply at each step, so switching
    to a version shows it with everything that followed it.
    """
    rows = conn.execute(
        "WITH RECURSIVE down(id) AS (SELECT id FROM messages WHERE id = ? AND session_id = ?"
        " UNION ALL SELECT (SELECT max(c.id) FROM messages c"
        "  WHERE c.session_id = ? AND c.parent_id = down.id) FROM down"
        " WHERE down.id IS NOT NULL)"
        " SELECT max(id) FROM down",
        (message_id, session_id, session_id),
    ).fetchall()
    leaf = rows[0][0] if rows else None
    if leaf is None:
        raise HistoryError(f"no message {message_id} in session {session_id}")
    conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (leaf, session_id))
    return path_to(conn, session_id, leaf)


def delete_branch(conn: sqlite3.Connection, message_id: int) -> None:
    """Delete a message and every message that follows it, on all branches (a failed
    reply that a retry replaces). The active path then ends at its parent."""
    row = conn.execute(
        "SELECT session_id, parent_id FROM messages WHERE id = ?", (message_id,)
    ).fetchone()
    if row is None:
        return
    conn.execute(
        "WITH RECURSIVE branch(id) AS (SELECT ? UNION ALL"
        " SELECT m.id FROM messages m JOIN branch ON m.parent_id = branch.id"
        " WHERE m.session_id = ?)"
        " DELETE FROM messages WHERE id IN (SELECT id FROM branch)",
        (message_id, row["session_id"]),
    )
    conn.execute(
        "UPDATE sessions SET active_leaf = ? WHERE id = ? AND (active_leaf IS NULL"
        " OR active_leaf NOT IN (SELECT id FROM messages WHERE session_id = ?))",
        (row["parent_id"], row["session_id"], row["session_id"]),
    )


def fork(
    conn: sqlite3.Connection,
    session_id: int,
    source: SessionRow,
    path: list[MessageRow],
    message_id: int,
) -> int:
    """A new chat holding `path` (the active path of `source`, session `session_id`) up
    to `message_id`, with the session's model, prompt, skills, parameters and project; its id."""
    upto = next((n for n, m in enumerate(path) if m["id"] == message_id), None)
    if upto is None:
        raise HistoryError(f"no message {message_id} on the path of session {session_id}")
    title = f"{source['title'] or 'Untitled'} (fork)"
    now = time.time()
    new_id = int(
        conn.execute(
            "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom,"
            " skills, created_at, updated_at, project_id) VALUES ('chat', ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                title,
                source["model"],
                source["prompt_name"],
                source["prompt_custom"],
                json.dumps(source["skills"]),
                now,
                now,
                source["project_id"],
            ),
        ).lastrowid  # type: ignore[arg-type]
    )
    parent_id = None
    for message in path[: upto + 1]:
        row = _message_row(new_id, parent_id, _stored(message))
        parent_id = int(conn.execute(_INSERT_MESSAGE, row).lastrowid)  # type: ignore[arg-type]
    conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (parent_id, new_id))
    conn.execute(
        "INSERT INTO session_params (session_id, params)"
        " SELECT ?, params FROM session_params WHERE session_id = ?",
        (new_id, session_id),
    )
    return new_id
