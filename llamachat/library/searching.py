"""Searching the libraries' passages: BM25 over FTS5 and the nearest vectors (sqlite-vec),
fused.

`search(db, has_vectors, query, session_id, ...)` gives the best passages of a chat's
libraries and its project's: BM25's best (`_bm25`, which keeps a query of common words
fast) and the vectors' nearest (`nearest`: bits first, then floats, see `vectors`), fused
by reciprocal rank. Each function takes `LibraryStore`'s connection and whether sqlite-vec
is loaded in it, and runs on the thread that opened it.

Qt-free.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamachat.library import vectors
from llamachat.library.schema import loaded_path
from llamachat.library.vectors import DB_ERRORS, Embedder, EmbeddingError

log = logging.getLogger(__name__)

QUERY_EMBED_TIMEOUT = 10.0
"""Seconds a search waits for its query's vector before it ranks by full text alone."""
CANDIDATES = 20
"""How many passages each ranking (BM25, vectors) puts forward to the fusion."""
COARSE_CANDIDATES = 10 * CANDIDATES
"""How many passages the vectors' bits put forward to be ranked by their float vectors:
sqlite-vec's scan for the k nearest costs about k, and 10 x 20 keeps nearly all of the
exact 20 nearest (see `nearest`)."""
RANK_BUDGET = 8_000
"""The most postings BM25 scores for one query: what keeps a query of common words fast
(see `_bm25`)."""

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_WORDS = 24
# Words nearly every English passage holds: matching them ranks nothing and costs the
# time of scoring every passage. Left in when the query has no other word.
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "does", "for", "from", "has",
        "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of",
        "on", "or", "our", "so", "than", "that", "the", "their", "them", "then", "there", "these",
        "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why",
        "will", "with", "you", "your",
    }
)  # fmt: skip


_Chat = tuple[int | None, int | None]
# A chat's session id and its project's id (None: none), and the libraries they search.
_CHATS = "(l.session_id = ? OR l.project_id = ?)"


@dataclass(frozen=True)
class Hit:
    """A passage found: its file, page (PDFs) and heading, and its text."""

    path: Path
    page: int | None
    heading: str
    text: str
    rank: float


def query_words(text: str) -> list[str]:
    """The words of `text` to search for: each once, the common English ones left out."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    words = [w for w in words if w not in STOPWORDS] or words
    return words[:MAX_QUERY_WORDS]


def fts_query(words: list[str], operator: str = "OR") -> str:
    """`words` as an FTS5 query: any may match (OR), or all must (AND)."""
    return f" {operator} ".join(f'"{word}"' for word in words)


def search(
    db: Any,
    has_vectors: bool,
    query: str,
    session_id: int | None,
    limit: int = 5,
    embedder: Embedder | None = None,
    project_id: int | None = None,
) -> list[Hit]:
    """The `limit` passages of the libraries of the chat and of its project that match
    `query` best: BM25's best, fused with the nearest by vector when an `embedder`
    made the vectors."""
    chat = (session_id, project_id)
    ranked = _bm25(db, query, chat, CANDIDATES)
    near = (
        nearest(db, has_vectors, query, session_id, embedder, CANDIDATES, project_id)
        if embedder
        else []
    )
    order = vectors.fuse([ranked, near])[:limit]
    if not order:
        return []
    marks = ",".join("?" * len(order))
    rows = db.execute(
        "SELECT p.id, l.root, f.path, p.page, p.heading, p.text FROM passages p"
        " JOIN files f ON f.id = p.file_id JOIN libraries l ON l.id = f.library_id"
        f" WHERE p.id IN ({marks})",
        [pid for pid, _score in order],
    ).fetchall()
    found = {row[0]: row[1:] for row in rows}
    out = []
    for pid, score in order:
        if pid in found:
            root, rel, page, heading, text = found[pid]
            path = Path(loaded_path(root)) / loaded_path(rel) if rel else Path(loaded_path(root))
            out.append(Hit(path, page, heading, text, -score))
    return out


def nearest(
    db: Any,
    has_vectors: bool,
    query: str,
    session_id: int | None,
    embedder: Embedder,
    count: int,
    project_id: int | None = None,
) -> list[int]:
    """The ids of the `count` passages of the chat's libraries and its project's
    nearest the query's vector ([]: none):
    the COARSE_CANDIDATES nearest by their bits, ranked by cosine distance.

    A brute-force scan of the float vectors costs ~40 ms over 50,000 passages of 576
    values; the bits are a 32nd of that, and the candidates' floats set the order.
    """
    # The vectors' keys: a chat's session id, a project's id negated (see `library.index`).
    owners = [session_id] if session_id is not None else []
    if project_id is not None:
        owners.append(-project_id)
    if not has_vectors or not owners:
        return []
    row = db.execute("SELECT model FROM vector_model").fetchone()
    if row is None or row[0] != embedder.model:
        return []
    try:
        vector = embedder.vectors([query], QUERY_EMBED_TIMEOUT)[0]
    except EmbeddingError as exc:
        log.info("searching by full text only: %s", exc)
        return []
    blob = vectors.pack(vector)
    marks = ",".join("?" * len(owners))
    try:
        # With IN, sqlite-vec finds the k nearest of each partition: the chat's and
        # its project's candidates are ranked together.
        rows = db.execute(
            "SELECT rowid FROM (SELECT rowid, embedding FROM passage_vectors"
            "       WHERE coarse MATCH vec_quantize_binary(?) AND k = ?"
            f"      AND session_id IN ({marks}))"
            " ORDER BY vec_distance_cosine(embedding, ?), rowid LIMIT ?",
            (
                vectors.coarse(blob),
                max(count, COARSE_CANDIDATES),
                *owners,
                blob,
                count,
            ),
        ).fetchall()
    except DB_ERRORS as exc:  # a query vector of another length than the stored ones
        log.info("searching by full text only: %s", exc)
        return []
    return [int(rowid) for (rowid,) in rows]


def _bm25(db: Any, query: str, chat: _Chat, count: int) -> list[int]:
    """The ids of the `count` best passages of the chat's libraries (and its
    project's) by BM25, best first.

    BM25 costs about a microsecond a passage it scores, so a word found in half of
    50,000 passages would cost 25 ms alone. Words are scored rarest first while the
    passages they are found in stay within RANK_BUDGET: a commoner word adds little
    to BM25 (FTS5 gives a word in half the passages a weight of nearly 0). When every
    word is that common, the passages holding all of them are ranked; and when even
    those are too many, the first RANK_BUDGET passages that hold any word are.
    """
    words = query_words(query)
    span = db.execute(
        "SELECT MIN((SELECT MIN(id) FROM passages WHERE file_id = f.id)),"
        " MAX((SELECT MAX(id) FROM passages WHERE file_id = f.id))"
        f" FROM libraries l JOIN files f ON f.library_id = l.id WHERE {_CHATS}",
        chat,
    ).fetchone()
    if not words or span[0] is None:
        return []
    low, high = span
    found = {word: _matches(db, fts_query([word]), low, high) for word in words}
    chosen: list[str] = []
    work = 0
    for word in sorted(words, key=found.__getitem__):
        if found[word] and work + found[word] <= RANK_BUDGET:
            chosen.append(word)
            work += found[word]
    if chosen or not any(found.values()):
        return _ranked(db, fts_query(chosen), chat, low, high, count)
    common = [word for word in words if found[word]]
    ids: list[int] = []
    every = fts_query(common, "AND")
    if len(common) > 1 and _matches(db, every, low, high) <= RANK_BUDGET:
        ids = _ranked(db, every, chat, low, high, count)
    if len(ids) < count:
        # The first RANK_BUDGET passages holding a word, ranked.
        match = fts_query(common)
        cut = db.execute(
            "SELECT MAX(rowid) FROM (SELECT rowid FROM passages_fts WHERE passages_fts"
            " MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?)",
            (match, low, high, RANK_BUDGET),
        ).fetchone()[0]
        more = _ranked(db, match, chat, low, cut, count)
        ids += [pid for pid in more if pid not in ids][: count - len(ids)]
    return ids


def _matches(db: Any, match: str, low: int, high: int) -> int:
    """How many passages with ids from `low` to `high` `match` finds, counted up to
    RANK_BUDGET + 1 (the count of a word in every passage costs as much as ranking)."""
    row = db.execute(
        "SELECT COUNT(*) FROM (SELECT rowid FROM passages_fts WHERE passages_fts MATCH ?"
        " AND rowid BETWEEN ? AND ? LIMIT ?)",
        (match, low, high, RANK_BUDGET + 1),
    ).fetchone()
    return int(row[0])


def _ranked(db: Any, match: str, chat: _Chat, low: int, high: int, count: int) -> list[int]:
    """The chat's (and its project's) `count` best passages for `match` by FTS5's rank
    (BM25), best first."""
    if not match:
        return []
    rows = db.execute(
        "SELECT s.rowid FROM (SELECT rowid, rank FROM passages_fts"
        "       WHERE passages_fts MATCH ? AND rowid BETWEEN ? AND ?) s"
        " JOIN passages p ON p.id = s.rowid JOIN files f ON f.id = p.file_id"
        " JOIN libraries l ON l.id = f.library_id"
        f" WHERE {_CHATS} ORDER BY s.rank LIMIT ?",
        (match, low, high, *chat, count),
    ).fetchall()
    return [int(rowid) for (rowid,) in rows]
