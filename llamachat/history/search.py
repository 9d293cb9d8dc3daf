"""Finding sessions: by the words of their title, and by full-text search of their messages."""

from __future__ import annotations

import sqlite3
from typing import cast

from llamachat.history.rows import _SESSION_COLUMNS, SearchHit, SessionRow, _decode


def _fts_query(text: str) -> str:
    """Match every word the user typed, as a literal prefix: FTS syntax is never parsed."""
    return " ".join(
        '"' + term.replace('"', '""') + '"*' for term in text.replace("\x00", " ").split()
    )


def _like_escape(text: str) -> str:
    """`text` matched literally by LIKE ... ESCAPE '\\' (its % and _ are not wildcards)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search(conn: sqlite3.Connection, query: str, *, limit: int = 50) -> list[SearchHit]:
    """Live sessions matching every word of `query`, with a snippet of the best message.

    Sessions whose title holds every word come first (newest first; their snippet
    is '' and their message_id None when no message matches), then those with a
    message matching every word as a prefix, best first.
    """
    match = _fts_query(query)
    if not match:
        return []
    words = query.replace("\x00", " ").split()
    like = " AND ".join(["title LIKE ? ESCAPE '\\'"] * len(words))
    titled: list[SearchHit] = [
        {**cast(SessionRow, _decode(row)), "snippet": "", "message_id": None}
        for row in conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE deleted_at IS NULL AND {like}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*(f"%{_like_escape(word)}%" for word in words), limit),
        ).fetchall()
    ]
    found = _search_messages(conn, match, limit)
    best = {session["id"]: session for session in found}
    for session in titled:
        if (hit := best.pop(session["id"], None)) is not None:
            session["snippet"], session["message_id"] = hit["snippet"], hit["message_id"]
    return (titled + [s for s in found if s["id"] in best])[:limit]


def _search_messages(conn: sqlite3.Connection, match: str, limit: int) -> list[SearchHit]:
    """Live sessions with a message matching the FTS `match`, best first, with a snippet."""
    # FTS5 refuses snippet() beside a window function, so the best message per
    # session is chosen first and only those few are given a snippet.
    best = conn.execute(
        "WITH hits AS MATERIALIZED ("
        "  SELECT m.id AS message_id, m.session_id AS session_id, messages_fts.rank AS rank"
        "  FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
        "  WHERE messages_fts MATCH ?)"
        " SELECT message_id, session_id FROM ("
        "  SELECT hits.*, row_number() OVER"
        "   (PARTITION BY hits.session_id ORDER BY hits.rank) AS place"
        "  FROM hits JOIN sessions s ON s.id = hits.session_id WHERE s.deleted_at IS NULL)"
        " WHERE place = 1 ORDER BY rank LIMIT ?",
        (match, limit),
    ).fetchall()
    if not best:
        return []
    ids = [row["message_id"] for row in best]
    marks = ", ".join("?" * len(ids))
    snippets = {
        row[0]: row[1]
        for row in conn.execute(
            "SELECT rowid, snippet(messages_fts, -1, '', '', '…', 16) FROM messages_fts"
            f" WHERE messages_fts MATCH ? AND rowid IN ({marks})",
            (match, *ids),
        ).fetchall()
    }
    results: list[SearchHit] = []
    for row in best:
        session = conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (row["session_id"],)
        ).fetchone()
        if session is not None:
            hit = cast(SessionRow, _decode(session))
            results.append(
                {
                    **hit,
                    "snippet": snippets.get(row["message_id"], ""),
                    "message_id": row["message_id"],
                }
            )
    return results
