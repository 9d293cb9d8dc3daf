"""Finding sessions: by the words of their title, and by full-text search of their messages,
kept to those a `SearchFilter` allows (a project, a model, a time of last update).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Literal, cast

from llamachat.history.rows import _SESSION_COLUMNS, SearchHit, SessionRow, _decode

# The spans of last update a filter offers, by key, with what the sidebar calls them.
SPANS = {
    "any": "Any time",
    "today": "Today",
    "week": "Last 7 days",
    "month": "Last 30 days",
    "year": "This year",
}
_DAY_S = 86_400.0


def span_start(span: str, now: float | None = None) -> float | None:
    """When `span` (a key of SPANS) began, as a timestamp (None: "any"); local days."""
    now = time.time() if now is None else now
    day = time.localtime(now)
    if span == "any":
        return None
    if span == "today":
        return time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1))
    if span == "week":
        return now - 7 * _DAY_S
    if span == "month":
        return now - 30 * _DAY_S
    if span == "year":
        return time.mktime((day.tm_year, 1, 1, 0, 0, 0, 0, 0, -1))
    raise ValueError(f"span must be one of {', '.join(SPANS)}, got {span!r}")


@dataclass(frozen=True)
class SearchFilter:
    """Which chats a search or the list keeps: those that pass every part that is set."""

    project: int | None | Literal["any"] = "any"
    """A project's id, None for the chats in no project, "any" for all."""
    model: str = ""
    """A model the chat was set to or that wrote one of its messages ('': any)."""
    updated: str = "any"
    """A key of SPANS: the chat's last update falls in it."""
    mode: str = ""
    """A mode of chat ("oneshot": the quick questions), '' for the list's own."""

    def __post_init__(self) -> None:
        if self.updated not in SPANS:
            raise ValueError(f"updated must be one of {', '.join(SPANS)}, got {self.updated!r}")

    @property
    def active(self) -> bool:
        """Whether the filter keeps out anything."""
        return self != SearchFilter()

    def sql(self, table: str, now: float | None = None) -> tuple[str, tuple]:
        """The conditions on `table` (sessions, or its alias) as " AND ..." ('' when none),
        and their values."""
        where, params = "", cast(tuple, ())
        if self.project is None:
            where += f" AND {table}.project_id IS NULL"
        elif self.project != "any":
            where, params = where + f" AND {table}.project_id = ?", (*params, self.project)
        if self.model:
            # Through the messages_by_model index: the model's chats are read once.
            where += (
                f" AND ({table}.model = ?"
                f" OR {table}.id IN (SELECT session_id FROM messages WHERE model = ?))"
            )
            params = (*params, self.model, self.model)
        if self.mode:
            where, params = where + f" AND {table}.mode = ?", (*params, self.mode)
        start = span_start(self.updated, now)
        if start is not None:
            where, params = where + f" AND {table}.updated_at >= ?", (*params, start)
        return where, params


NO_FILTER = SearchFilter()


def models(conn: sqlite3.Connection) -> list[str]:
    """Every model the live chats were set to or that wrote a message, by name."""
    rows = conn.execute(
        "SELECT model FROM sessions WHERE deleted_at IS NULL AND model != ''"
        " UNION SELECT model FROM messages WHERE model != ''"
    ).fetchall()
    return sorted((row[0] for row in rows), key=lambda name: (name.casefold(), name))


def _fts_query(text: str) -> str:
    """Match every word the user typed, as a literal prefix: FTS syntax is never parsed."""
    return " ".join(
        '"' + term.replace('"', '""') + '"*' for term in text.replace("\x00", " ").split()
    )


def _like_escape(text: str) -> str:
    """`text` matched literally by LIKE ... ESCAPE '\\' (its % and _ are not wildcards)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def search(
    conn: sqlite3.Connection, query: str, *, limit: int = 50, matching: SearchFilter = NO_FILTER
) -> list[SearchHit]:
    """Live sessions that `matching` keeps matching every word of `query`, with a snippet
    of the best message ([] for a blank query).

    Sessions whose title holds every word come first (newest first; their snippet
    is '' and their message_id None when no message matches), then those with a
    message matching every word as a prefix, best first.
    """
    match = _fts_query(query)
    if not match:
        return []
    words = query.replace("\x00", " ").split()
    like = " AND ".join(["title LIKE ? ESCAPE '\\'"] * len(words))
    kept, kept_params = matching.sql("sessions")
    titled: list[SearchHit] = [
        {**cast(SessionRow, _decode(row)), "snippet": "", "message_id": None}
        for row in conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE deleted_at IS NULL AND {like}{kept}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*(f"%{_like_escape(word)}%" for word in words), *kept_params, limit),
        ).fetchall()
    ]
    found = _search_messages(conn, match, limit, matching)
    best = {session["id"]: session for session in found}
    for session in titled:
        if (hit := best.pop(session["id"], None)) is not None:
            session["snippet"], session["message_id"] = hit["snippet"], hit["message_id"]
    return (titled + [s for s in found if s["id"] in best])[:limit]


def _search_messages(
    conn: sqlite3.Connection, match: str, limit: int, matching: SearchFilter
) -> list[SearchHit]:
    """Live sessions `matching` keeps with a message matching the FTS `match`, best first,
    with a snippet."""
    kept, kept_params = matching.sql("s")
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
        "  FROM hits JOIN sessions s ON s.id = hits.session_id"
        f"  WHERE s.deleted_at IS NULL{kept})"
        " WHERE place = 1 ORDER BY rank LIMIT ?",
        (match, *kept_params, limit),
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
