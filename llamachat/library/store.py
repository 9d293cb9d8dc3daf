"""The libraries' index: one SQLite file of its own (library.db), searched with FTS5 and vectors.

A library is a folder (or a file) attached to a chat, keyed by the history's session id.
`LibraryStore(path)` opens the file (WAL, so the indexing thread writes while another
thread reads, each through its own connection) and holds:

    libraries   id, session_id, root
    files       each file under a root: its size and mtime (what re-indexing compares),
                its passage count, or why it was skipped
    passages    file, page, heading, text; `passages_fts` indexes them (BM25)
    passage_vectors   with an embedding model: a passage's vector (sqlite-vec, rowid =
                the passage's id), its float32 `embedding` and its `coarse` bits (what a
                search scans first, see `vectors`); `vector_model` names the model and
                its dimension, `embedded_files` the files whose passages all have one

`index(library_id, embedder=...)` walks the root and re-reads only the files whose size
or mtime changed (new files included), forgets the files gone, then asks the router for
the vectors of the files that have none (all of them again when the model or its
dimension changed); a router that fails leaves the full-text index as it is and says why
in the report. `search(query, session_id, embedder=...)` gives the best passages of a
chat's libraries: BM25's best and the vectors' nearest, fused. A store, like any SQLite
connection, belongs to the thread that opened it.

Qt-free.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from llamachat.library import vectors
from llamachat.library.extract import Passage, Skipped, extract
from llamachat.library.vectors import DB_ERRORS, Embedder, EmbeddingError

log = logging.getLogger(__name__)

# Folders that hold no one's documents: version control, caches, dependencies.
IGNORED_DIRS = frozenset(
    {"node_modules", "__pycache__", "venv", ".venv", "site-packages", "target", "build", "dist"}
)
COMMIT_SECONDS = 0.5
"""How often a long indexing run commits: a reader sees progress, and a crash loses little."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS libraries (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL,
    root TEXT NOT NULL,
    indexed_at REAL NOT NULL DEFAULT 0,
    UNIQUE (session_id, root)
);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    library_id INTEGER NOT NULL REFERENCES libraries(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    passages INTEGER NOT NULL DEFAULT 0,
    skipped TEXT NOT NULL DEFAULT '',
    UNIQUE (library_id, path)
);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    page INTEGER,
    heading TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_file ON passages(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
    text, heading, content='passages', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS passages_added AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, text, heading) VALUES (new.id, new.text, new.heading);
END;
CREATE TRIGGER IF NOT EXISTS passages_removed AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, text, heading)
        VALUES ('delete', old.id, old.text, old.heading);
END;
CREATE TABLE IF NOT EXISTS vector_model (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    model TEXT NOT NULL,
    dimension INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS embedded_files (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE
);
"""
# The heading weighs half the text in BM25 (FTS5's rank, set once per file).
RANK = "bm25(1.0, 0.5)"

EMBED_BATCH = 32
"""Passages per /v1/embeddings request."""
EMBED_TIMEOUT = 120.0
"""Seconds an indexing request for vectors may take (the router may load the model first)."""
QUERY_EMBED_TIMEOUT = 10.0
"""Seconds a search waits for its query's vector before it ranks by full text alone."""
CANDIDATES = 20
"""How many passages each ranking (BM25, vectors) puts forward to the fusion."""
COARSE_CANDIDATES = 10 * CANDIDATES
"""How many passages the vectors' bits put forward to be ranked by their float vectors:
sqlite-vec's scan for the k nearest costs about k, and 10 x 20 keeps nearly all of the
exact 20 nearest (see `_nearest`)."""
SCHEMA_VERSION = 2
"""library.db's `user_version`: 1 had float vectors only (searched by brute force)."""
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


class LibraryError(Exception):
    """The library file cannot be opened or written; str() says why."""


STORE_ERRORS: tuple[type[Exception], ...] = (LibraryError, OSError, *DB_ERRORS)
"""What a LibraryStore call may raise when the file cannot be used."""


@dataclass(frozen=True)
class LibraryRow:
    """An attached library: its root and what its last indexing found."""

    id: int
    session_id: int
    root: Path
    files: int
    passages: int
    skipped: int
    indexed_at: float


@dataclass(frozen=True)
class FileRow:
    """One file of a library: `skipped` is why it is not indexed ('' when it is)."""

    path: Path
    size: int
    passages: int
    skipped: str


@dataclass(frozen=True)
class Hit:
    """A passage found: its file, page (PDFs) and heading, and its text."""

    path: Path
    page: int | None
    heading: str
    text: str
    rank: float


@dataclass
class IndexReport:
    """What one indexing run did."""

    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    passages: int = 0
    embedded: int = 0
    vectors: str = ""
    """Why passages were left without vectors ('' when none was, or none was asked for)."""
    seconds: float = 0.0


Progress = Callable[[int, int, str], None]
"""Called with (files done, files in all, the file now) while indexing."""


def default_path(history_path: Path) -> Path:
    """library.db, next to the history file (its own file: the history is never migrated)."""
    return history_path.with_name("library.db")


def query_words(text: str) -> list[str]:
    """The words of `text` to search for: each once, the common English ones left out."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    words = [w for w in words if w not in STOPWORDS] or words
    return words[:MAX_QUERY_WORDS]


def fts_query(words: list[str], operator: str = "OR") -> str:
    """`words` as an FTS5 query: any may match (OR), or all must (AND)."""
    return f" {operator} ".join(f'"{word}"' for word in words)


def walk(root: Path) -> Iterator[Path]:
    """The files under `root` in a stable order, without hidden files and dependency folders."""
    if root.is_file():
        yield root
        return
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in IGNORED_DIRS)
        for name in sorted(names):
            if not name.startswith("."):
                yield Path(folder, name)


class LibraryStore:
    """library.db through one connection, used by the thread that opened it only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db, self.vectors = vectors.connect(path, timeout=10)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA synchronous=NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                self._db.executescript(SCHEMA)
                self._db.execute(
                    "INSERT INTO passages_fts(passages_fts, rank) VALUES ('rank', ?)", (RANK,)
                )
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.commit()
        except (OSError, *DB_ERRORS) as exc:  # type: ignore[misc]
            raise LibraryError(f"cannot open the library file {path}: {exc}") from exc

    def _upgrade_vectors(self) -> None:
        """Version 1's float vectors kept, each given its bits: done by indexing, in its
        thread (~8 s for 50,000 vectors); until then a search finds no vector's nearest."""
        self._db.execute("BEGIN IMMEDIATE")  # another connection may be upgrading it
        if self._db.execute("PRAGMA user_version").fetchone()[0] == 1:
            model = self._db.execute("SELECT model, dimension FROM vector_model").fetchone()
            if model is not None and self._has_vector_table():
                self._db.execute(
                    "CREATE TEMP TABLE old_vectors AS"
                    " SELECT rowid AS id, session_id, embedding FROM passage_vectors"
                )
                self._db.execute("DROP TABLE passage_vectors")
                self._create_vector_table(int(model[1]))
                old = self._db.execute("SELECT id, session_id, embedding FROM old_vectors")
                self._db.executemany(
                    "INSERT INTO passage_vectors (rowid, session_id, coarse, embedding)"
                    " VALUES (?, ?, vec_quantize_binary(?), ?)",
                    ((pid, sid, vectors.coarse(blob), blob) for pid, sid, blob in old),
                )
                self._db.execute("DROP TABLE old_vectors")
            # (Vectors of no model are dropped by `_check_model`.)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._db.commit()

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    # ------------------------------------------------------------------ libraries

    def attach(self, session_id: int, root: Path) -> int:
        """Attach `root` to the chat `session_id` (again: the same library); its id."""
        root = root.expanduser().resolve()
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO libraries (session_id, root) VALUES (?, ?)",
                (session_id, str(root)),
            )
        row = self._db.execute(
            "SELECT id FROM libraries WHERE session_id = ? AND root = ?", (session_id, str(root))
        ).fetchone()
        return int(row[0])

    def remove(self, library_id: int) -> None:
        """Forget a library and its index (the files themselves are left alone)."""
        with self._db:
            files = self._db.execute("SELECT id FROM files WHERE library_id = ?", (library_id,))
            for (file_id,) in files.fetchall():
                self._forget(file_id)
            self._db.execute("DELETE FROM libraries WHERE id = ?", (library_id,))

    def libraries(self, session_id: int | None = None) -> list[LibraryRow]:
        """The libraries of a chat (None: of every chat), oldest first."""
        where, args = (
            ("WHERE l.session_id = ?", (session_id,)) if session_id is not None else ("", ())
        )
        rows = self._db.execute(
            "SELECT l.id, l.session_id, l.root, l.indexed_at, COUNT(f.id),"
            " COALESCE(SUM(f.passages), 0), COALESCE(SUM(f.skipped != ''), 0)"
            f" FROM libraries l LEFT JOIN files f ON f.library_id = l.id {where}"
            " GROUP BY l.id ORDER BY l.id",
            args,
        ).fetchall()
        return [
            LibraryRow(int(i), int(s), Path(root), int(n), int(p), int(k), float(at))
            for i, s, root, at, n, p, k in rows
        ]

    def files(self, library_id: int) -> list[FileRow]:
        """A library's files in path order, the skipped ones with the reason."""
        root = self._root(library_id)
        rows = self._db.execute(
            "SELECT path, size, passages, skipped FROM files WHERE library_id = ? ORDER BY path",
            (library_id,),
        ).fetchall()
        return [
            FileRow(root / path if path else root, int(size), int(n), str(why))
            for path, size, n, why in rows
        ]

    def has_passages(self, session_id: int) -> bool:
        """Whether a chat has a library attached (indexed or not yet)."""
        row = self._db.execute(
            "SELECT 1 FROM libraries WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        return row is not None

    def _forget(self, file_id: int) -> None:
        """Delete a file's row, its passages and their vectors (in the open transaction)."""
        if self._has_vector_table():
            if self.vectors:
                ids = self._db.execute("SELECT id FROM passages WHERE file_id = ?", (file_id,))
                self._db.executemany("DELETE FROM passage_vectors WHERE rowid = ?", ids.fetchall())
            else:
                # Vectors that cannot be deleted now: the passages' ids may come back on
                # other passages, so every vector is made again when sqlite-vec loads.
                self._db.execute("DELETE FROM vector_model")
        self._db.execute("DELETE FROM passages WHERE file_id = ?", (file_id,))
        self._db.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def _has_vector_table(self) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'passage_vectors'"
        ).fetchone()
        return row is not None

    def _root(self, library_id: int) -> Path:
        row = self._db.execute("SELECT root FROM libraries WHERE id = ?", (library_id,)).fetchone()
        if row is None:
            raise LibraryError(f"no library {library_id}")
        return Path(row[0])

    # ------------------------------------------------------------------ indexing

    def index(
        self,
        library_id: int,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        read: Callable[[Path, int], list[Passage]] = extract,
        embedder: Embedder | None = None,
    ) -> IndexReport:
        """Bring a library's index up to date: new and changed files (by size and mtime)
        are read again (by `read`), files gone are forgotten; with an `embedder`, then the
        passages without a vector get one (`report.vectors` says why not, if not). Stops
        early when `cancel` is set."""
        started = time.perf_counter()
        root = self._root(library_id)
        report = IndexReport()
        known = {
            path: (fid, size, mtime)
            for fid, path, size, mtime in self._db.execute(
                "SELECT id, path, size, mtime_ns FROM files WHERE library_id = ?", (library_id,)
            )
        }
        found: list[tuple[Path, str, os.stat_result]] = []
        for path in walk(root):
            try:
                stat = path.stat()
            except OSError:
                continue
            # A library of one file stores it as "" (the root itself).
            rel = path.relative_to(root).as_posix() if path != root else ""
            found.append((path, rel, stat))
        seen = {rel for _path, rel, _stat in found}
        committed = time.monotonic()
        for done, (path, rel, stat) in enumerate(found):
            if cancel is not None and cancel.is_set():
                break
            if progress is not None:
                progress(done, len(found), rel)
            old = known.get(rel)
            if old is not None and old[1] == stat.st_size and old[2] == stat.st_mtime_ns:
                report.unchanged += 1
                continue
            try:
                passages = read(path, stat.st_size)
                why = ""
            except Skipped as exc:
                passages, why = [], str(exc)
            if old is not None:
                self._forget(old[0])
            cursor = self._db.execute(
                "INSERT INTO files (library_id, path, size, mtime_ns, passages, skipped)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (library_id, rel, stat.st_size, stat.st_mtime_ns, len(passages), why),
            )
            self._db.executemany(
                "INSERT INTO passages (file_id, page, heading, text) VALUES (?, ?, ?, ?)",
                [(cursor.lastrowid, p.page, p.heading, p.text) for p in passages],
            )
            report.indexed += 1
            report.skipped += bool(why)
            report.passages += len(passages)
            time.sleep(0)  # the GIL for the GUI thread between files
            if time.monotonic() - committed > COMMIT_SECONDS:
                self._db.commit()
                committed = time.monotonic()
        else:
            for rel in known.keys() - seen:
                self._forget(known[rel][0])
                report.removed += 1
            self._db.execute(
                "UPDATE libraries SET indexed_at = ? WHERE id = ?", (time.time(), library_id)
            )
        self._db.commit()
        if embedder is not None and not (cancel is not None and cancel.is_set()):
            self._embed(library_id, embedder, report, progress, cancel)
        if progress is not None:
            progress(len(found), len(found), "")
        report.seconds = time.perf_counter() - started
        log.info("indexed library %s (%s): %s", library_id, root, report)
        return report

    # ------------------------------------------------------------------ vectors

    def _embed(
        self,
        library_id: int,
        embedder: Embedder,
        report: IndexReport,
        progress: Progress | None,
        cancel: threading.Event | None,
    ) -> None:
        """Vectors for the library's files that have none, a file per transaction."""
        if not self.vectors:
            report.vectors = f"No vectors: {vectors.problem()}; searching uses full text only."
            return
        if self._db.execute("PRAGMA user_version").fetchone()[0] == 1:
            self._upgrade_vectors()
        self._check_model(embedder.model, None)
        done = 0
        while cancel is None or not cancel.is_set():
            pending = self._db.execute(
                "SELECT f.id, f.path, l.session_id FROM files f"
                " JOIN libraries l ON l.id = f.library_id"
                " WHERE f.library_id = ? AND f.passages > 0"
                " AND f.id NOT IN (SELECT file_id FROM embedded_files) ORDER BY f.path",
                (library_id,),
            ).fetchall()
            if not pending:
                return
            file_id, rel, session_id = pending[0]
            if progress is not None:
                progress(done, done + len(pending), f"{rel} (vectors)")
            try:
                report.embedded += self._embed_file(file_id, session_id, embedder, cancel)
            except EmbeddingError as exc:
                self._db.rollback()
                report.vectors = f"{exc}. Searching uses full text only until it works."
                log.warning("library %s: %s", library_id, exc)
                return
            done += 1

    def _embed_file(
        self, file_id: int, session_id: int, embedder: Embedder, cancel: threading.Event | None
    ) -> int:
        rows = self._db.execute(
            "SELECT id, heading, text FROM passages WHERE file_id = ? ORDER BY id", (file_id,)
        ).fetchall()
        for start in range(0, len(rows), EMBED_BATCH):
            if cancel is not None and cancel.is_set():
                self._db.rollback()
                return 0
            batch = rows[start : start + EMBED_BATCH]
            got = embedder.vectors(
                [f"{heading}\n{text}" if heading else text for _id, heading, text in batch],
                EMBED_TIMEOUT,
            )
            self._check_model(embedder.model, len(got[0]))
            blobs = [vectors.pack(v) for v in got]
            self._db.executemany(
                "INSERT INTO passage_vectors (rowid, session_id, coarse, embedding)"
                " VALUES (?, ?, vec_quantize_binary(?), ?)",
                [
                    (pid, session_id, vectors.coarse(blob), blob)
                    for (pid, _h, _t), blob in zip(batch, blobs)
                ],
            )
            time.sleep(0)  # the GIL for the GUI thread between requests
        self._db.execute("INSERT INTO embedded_files (file_id) VALUES (?)", (file_id,))
        self._db.commit()
        return len(rows)

    def _check_model(self, model: str, dimension: int | None) -> None:
        """Drop every vector unless they are `model`'s (and `dimension` long, when given);
        with a dimension, make the vector table for them if there is none."""
        row = self._db.execute("SELECT model, dimension FROM vector_model").fetchone()
        same = row is not None and row[0] == model
        if same and (dimension is None or row[1] == dimension):
            return
        if row is not None or self._has_vector_table():
            log.info("library vectors made again: %s -> %s (%s)", row, model, dimension)
            self._db.execute("DROP TABLE IF EXISTS passage_vectors")
            self._db.execute("DELETE FROM embedded_files")
            self._db.execute("DELETE FROM vector_model")
        if dimension is not None:
            self._create_vector_table(dimension)
            self._db.execute(
                "INSERT INTO vector_model (id, model, dimension) VALUES (1, ?, ?)",
                (model, dimension),
            )

    def _create_vector_table(self, dimension: int) -> None:
        # The floats are an auxiliary column: stored by rowid, read for the few candidates.
        self._db.execute(
            "CREATE VIRTUAL TABLE passage_vectors USING vec0(session_id INTEGER PARTITION KEY,"
            f" coarse bit[{vectors.bits(dimension)}], +embedding BLOB)"
        )

    def _nearest(self, query: str, session_id: int, embedder: Embedder, count: int) -> list[int]:
        """The ids of the chat's `count` passages nearest the query's vector ([]: none):
        the COARSE_CANDIDATES nearest by their bits, ranked by cosine distance.

        A brute-force scan of the float vectors costs ~40 ms over 50,000 passages of 576
        values; the bits are a 32nd of that, and the candidates' floats set the order.
        """
        if not self.vectors:
            return []
        row = self._db.execute("SELECT model FROM vector_model").fetchone()
        if row is None or row[0] != embedder.model:
            return []
        try:
            vector = embedder.vectors([query], QUERY_EMBED_TIMEOUT)[0]
        except EmbeddingError as exc:
            log.info("searching by full text only: %s", exc)
            return []
        blob = vectors.pack(vector)
        try:
            rows = self._db.execute(
                "SELECT rowid FROM (SELECT rowid, embedding FROM passage_vectors"
                "       WHERE coarse MATCH vec_quantize_binary(?) AND k = ? AND session_id = ?)"
                " ORDER BY vec_distance_cosine(embedding, ?), rowid LIMIT ?",
                (vectors.coarse(blob), max(count, COARSE_CANDIDATES), session_id, blob, count),
            ).fetchall()
        except DB_ERRORS as exc:  # a query vector of another length than the stored ones
            log.info("searching by full text only: %s", exc)
            return []
        return [int(rowid) for (rowid,) in rows]

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, session_id: int, limit: int = 5, embedder: Embedder | None = None
    ) -> list[Hit]:
        """The `limit` passages of the chat's libraries that match `query` best: BM25's
        best, fused with the nearest by vector when an `embedder` made the vectors."""
        ranked = self._bm25(query, session_id, CANDIDATES)
        near = self._nearest(query, session_id, embedder, CANDIDATES) if embedder else []
        order = vectors.fuse([ranked, near])[:limit]
        if not order:
            return []
        marks = ",".join("?" * len(order))
        rows = self._db.execute(
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
                path = Path(root) / rel if rel else Path(root)
                out.append(Hit(path, page, heading, text, -score))
        return out

    def _bm25(self, query: str, session_id: int, count: int) -> list[int]:
        """The ids of the chat's `count` best passages by BM25, best first.

        BM25 costs about a microsecond a passage it scores, so a word found in half of
        50,000 passages would cost 25 ms alone. Words are scored rarest first while the
        passages they are found in stay within RANK_BUDGET: a commoner word adds little
        to BM25 (FTS5 gives a word in half the passages a weight of nearly 0). When every
        word is that common, the passages holding all of them are ranked; and when even
        those are too many, the first RANK_BUDGET passages that hold any word are.
        """
        words = query_words(query)
        span = self._db.execute(
            "SELECT MIN((SELECT MIN(id) FROM passages WHERE file_id = f.id)),"
            " MAX((SELECT MAX(id) FROM passages WHERE file_id = f.id))"
            " FROM libraries l JOIN files f ON f.library_id = l.id WHERE l.session_id = ?",
            (session_id,),
        ).fetchone()
        if not words or span[0] is None:
            return []
        low, high = span
        found = {word: self._matches(fts_query([word]), low, high) for word in words}
        chosen: list[str] = []
        work = 0
        for word in sorted(words, key=found.__getitem__):
            if found[word] and work + found[word] <= RANK_BUDGET:
                chosen.append(word)
                work += found[word]
        if chosen or not any(found.values()):
            return self._ranked(fts_query(chosen), session_id, low, high, count)
        common = [word for word in words if found[word]]
        ids: list[int] = []
        every = fts_query(common, "AND")
        if len(common) > 1 and self._matches(every, low, high) <= RANK_BUDGET:
            ids = self._ranked(every, session_id, low, high, count)
        if len(ids) < count:
            # The first RANK_BUDGET passages holding a word, ranked.
            match = fts_query(common)
            cut = self._db.execute(
                "SELECT MAX(rowid) FROM (SELECT rowid FROM passages_fts WHERE passages_fts"
                " MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?)",
                (match, low, high, RANK_BUDGET),
            ).fetchone()[0]
            more = self._ranked(match, session_id, low, cut, count)
            ids += [pid for pid in more if pid not in ids][: count - len(ids)]
        return ids

    def _matches(self, match: str, low: int, high: int) -> int:
        """How many passages with ids from `low` to `high` `match` finds, counted up to
        RANK_BUDGET + 1 (the count of a word in every passage costs as much as ranking)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM (SELECT rowid FROM passages_fts WHERE passages_fts MATCH ?"
            " AND rowid BETWEEN ? AND ? LIMIT ?)",
            (match, low, high, RANK_BUDGET + 1),
        ).fetchone()
        return int(row[0])

    def _ranked(self, match: str, session_id: int, low: int, high: int, count: int) -> list[int]:
        """The chat's `count` best passages for `match` by FTS5's rank (BM25), best first."""
        if not match:
            return []
        rows = self._db.execute(
            "SELECT s.rowid FROM (SELECT rowid, rank FROM passages_fts"
            "       WHERE passages_fts MATCH ? AND rowid BETWEEN ? AND ?) s"
            " JOIN passages p ON p.id = s.rowid JOIN files f ON f.id = p.file_id"
            " JOIN libraries l ON l.id = f.library_id"
            " WHERE l.session_id = ? ORDER BY s.rank LIMIT ?",
            (match, low, high, session_id, count),
        ).fetchall()
        return [int(rowid) for (rowid,) in rows]
