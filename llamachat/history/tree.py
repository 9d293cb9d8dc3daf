"""The conversation as a tree: the path to a leaf with each message's versions, switching
to another version, deleting a branch, forking a path into a chat of its own.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, cast

from llamachat.history.rows import (
    _INSERT_MESSAGE,
    _MESSAGE_COLUMNS,
    _MESSAGE_KEYS,
    HistoryError,
    MessageRow,
    _decode,
    _message_row,
    _stored,
)

if TYPE_CHECKING:
    from llamachat.history.store import History

# The path from a root to a leaf (bound twice: the leaf, its session), as message ids.
_PATH_TO = (
    "WITH RECURSIVE path(step) AS (SELECT ? UNION ALL"
    " SELECT m.parent_id FROM messages m JOIN path ON m.id = path.step"
    " WHERE m.parent_id IS NOT NULL)"
    " SELECT {columns} FROM path JOIN messages ON messages.id = path.step"
    " WHERE session_id = ? ORDER BY id"
)


def path_to(history: History, session_id: int, leaf: int) -> list[MessageRow]:
    """The messages from a root down to `leaf`, each with its versions."""
    rows = history._read_values(_PATH_TO.format(columns=_MESSAGE_COLUMNS), (leaf, session_id))
    # Only the few parents with more than one child are looked at twice.
    siblings: dict[int | None, list[int]] = {}
    for row in history._read(
        "SELECT parent_id, id FROM messages WHERE session_id = ? AND coalesce(parent_id, 0)"
        " IN (SELECT coalesce(parent_id, 0) FROM messages WHERE session_id = ?"
        " GROUP BY coalesce(parent_id, 0) HAVING count(*) > 1) ORDER BY id",
        (session_id, session_id),
    ):
        siblings.setdefault(row[0], []).append(row[1])
    path = []
    for values in rows:
        message = cast(MessageRow, _decode(dict(zip(_MESSAGE_KEYS, values))))
        message["versions"] = siblings.get(message["parent_id"], [])
        path.append(message)
    return path


def select_version(history: History, session_id: int, message_id: int) -> list[MessageRow]:
    """Make the path through `message_id` the active one; its messages.

    Below `message_id` the path follows the newest reply at each step, so switching
    to a version shows it with everything that followed it.
    """
    rows = history._read(
        "WITH RECURSIVE down(id) AS (SELECT id FROM messages WHERE id = ? AND session_id = ?"
        " UNION ALL SELECT (SELECT max(c.id) FROM messages c"
        "  WHERE c.session_id = ? AND c.parent_id = down.id) FROM down"
        " WHERE down.id IS NOT NULL)"
        " SELECT max(id) FROM down",
        (message_id, session_id, session_id),
    )
    leaf = rows[0][0] if rows else None
    if leaf is None:
        raise HistoryError(f"no message {message_id} in session {session_id}")
    history._write("UPDATE sessions SET active_leaf = ? WHERE id = ?", (leaf, session_id))
    return path_to(history, session_id, leaf)


def delete_branch(history: History, message_id: int) -> None:
    """Delete a message and every message that follows it, on all branches (a failed
    reply that a retry replaces). The active path then ends at its parent."""
    with history._transaction() as conn:
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


def fork(history: History, session_id: int, message_id: int) -> int:
    """A new chat holding the active path up to `message_id`, with the session's
    model, prompt, skills and parameters; its id."""
    source = history._require(session_id)
    path = history.messages(session_id)
    upto = next((n for n, m in enumerate(path) if m["id"] == message_id), None)
    if upto is None:
        raise HistoryError(f"no message {message_id} on the path of session {session_id}")
    title = f"{source['title'] or 'Untitled'} (fork)"
    now = time.time()
    with history._transaction() as conn:
        new_id = int(
            conn.execute(
                "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom,"
                " skills, created_at, updated_at) VALUES ('chat', ?, ?, ?, ?, ?, ?, ?)",
                (
                    title,
                    source["model"],
                    source["prompt_name"],
                    source["prompt_custom"],
                    json.dumps(source["skills"]),
                    now,
                    now,
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
