"""The libraries' index: one SQLite file of its own (library.db), searched with FTS5 and vectors.

A library is a folder (or a file) attached to a chat (the history's session id) or to a
project (its project id): a project's is indexed once and searched by each of its chats.
`LibraryStore(path)` opens the file (WAL, so the indexing thread writes while another
thread reads, each through its own connection) and holds:

    libraries   id, session_id or project_id (one of them), root
    files       each file under a root: its size and mtime (what re-indexing compares),
                its passage count, or why it was skipped
    passages    file, page, heading, text; `passages_fts` indexes them (BM25)
    passage_vectors   with an embedding model: a passage's vector (sqlite-vec, rowid =
                the passage's id), its float32 `embedding` and its `coarse` bits (what a
                search scans first, see `vectors`), partitioned by the library's owner
                (in `session_id`: a chat's session id, or minus a project's id, so
                a chat's vectors from before projects keep their key); `vector_model` names the model and
                its dimension, `embedded_files` the files whose passages all have one

`index(library_id, embedder=...)` walks the root and re-reads only the files whose size
or mtime changed (new files included), forgets the files gone, then asks the router for
the vectors of the files that have none (all of them again when the model or its
dimension changed); a router that fails leaves the full-text index as it is and says why
in the report. `search(query, session_id, embedder=..., project_id=...)` gives the best passages
of a chat's libraries and its project's: BM25's best and the vectors' nearest, fused. A store, like any SQLite
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

from llamachat import outside
from llamachat.history.database import move_aside
from llamachat.history.rows import HistoryError
from llamachat.library import schema, vectors
from llamachat.library.extract import Passage, Skipped, extract
from llamachat.library.vectors import DB_ERRORS, Embedder, EmbeddingError

log = logging.getLogger(__name__)

# Folders that hold no one's documents: version control, caches, dependencies.
IGNORED_DIRS = frozenset(
    {"node_modules", "__pycache__", "venv", ".venv", "site-packages", "target", "build", "dist"}
)
COMMIT_SECONDS = 0.5
"""How often a long indexing run commits: a reader sees progress, and a crash loses little."""

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


class LibraryError(Exception):
    """The library file cannot be opened or written; str() says why."""


STORE_ERRORS: tuple[type[Exception], ...] = (LibraryError, OSError, *DB_ERRORS)
"""What a LibraryStore call may raise when the file cannot be used."""

# SQLite's primary result codes of a damaged file.
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


def is_damage(exc: BaseException) -> bool:
    """Whether `exc` (from a LibraryStore) says library.db is damaged (`recover` mends it)."""
    cause = exc.__cause__ if isinstance(exc, LibraryError) else exc
    code = getattr(cause, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _DAMAGED


def recover(path: Path) -> Path | None:
    """Mend a damaged library.db as the history is mended: the file is moved aside to
    `<name>.corrupt-<stamp>` and a fresh one holds the libraries still listed in it
    (which folder belongs to which chat or project; their files are read again at the
    next indexing: the index is only made from them). Where the damaged file went; None
    when the file is sound (a quick_check: well under a second). Raises LibraryError."""
    try:
        db, _vectors = vectors.connect(path, timeout=10)
    except DB_ERRORS as exc:
        raise LibraryError(f"cannot open the library file {path}: {exc}") from exc
    rows: list[tuple] = []
    try:
        try:
            if db.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok":
                return None
        except DB_ERRORS as exc:
            if not is_damage(exc):
                raise LibraryError(f"cannot open the library file {path}: {exc}") from exc
        try:
            rows = db.execute(
                "SELECT id, session_id, project_id, root FROM libraries ORDER BY id"
            ).fetchall()
        except DB_ERRORS:
            rows = []  # the list itself is unreadable: the folders must be attached again
    finally:
        db.close()
    try:
        aside = move_aside(path, "library file")
    except HistoryError as exc:
        raise LibraryError(str(exc)) from None
    store = LibraryStore(path)
    try:
        with store._db:
            store._db.executemany(
                "INSERT OR IGNORE INTO libraries (id, session_id, project_id, root)"
                " VALUES (?, ?, ?, ?)",
                rows,
            )
    finally:
        store.close()
    log.warning("library.db %s was damaged: moved to %s, %d libraries kept", path, aside, len(rows))
    return aside


@dataclass(frozen=True)
class LibraryRow:
    """An attached library: its root and what its last indexing found."""

    id: int
    session_id: int | None
    """The chat it is attached to (None: a project's)."""
    root: Path
    files: int
    passages: int
    skipped: int
    indexed_at: float
    project_id: int | None = None
    """The project it is attached to (None: a chat's)."""


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


def walk(root: Path) -> Iterator[outside.Walked]:
    """The files under `root` in a stable order, without hidden files and dependency folders;
    a file left out (a FIFO, a link out of the folder...) comes with the reason."""
    return outside.walk(root, skip_dirs=IGNORED_DIRS)


def _stored(path: str) -> str | bytes:
    """A path as library.db keeps it: text, or the bytes on disk when its name is not UTF-8
    (SQLite text cannot hold them, and the file must still be found by its name)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def _loaded(value: str | bytes) -> str:
    """A path as `_stored` kept it, as the `str` that opens the file."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


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
                schema.create(self._db)
            elif version < schema.SCHEMA_VERSION:
                schema.add_projects(self._db, version)
        except (OSError, *DB_ERRORS) as exc:  # type: ignore[misc]
            raise LibraryError(f"cannot open the library file {path}: {exc}") from exc

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    # ------------------------------------------------------------------ libraries

    def attach(self, session_id: int, root: Path) -> int:
        """Attach `root` to the chat `session_id` (again: the same library); its id."""
        return self._attach("session_id", session_id, root)

    def attach_to_project(self, project_id: int, root: Path) -> int:
        """Attach `root` to the project `project_id`, for each of its chats; its id."""
        return self._attach("project_id", project_id, root)

    def _attach(self, column: str, key: int, root: Path) -> int:
        root = root.expanduser().resolve()
        with self._db:
            self._db.execute(
                f"INSERT OR IGNORE INTO libraries ({column}, root) VALUES (?, ?)",
                (key, _stored(str(root))),
            )
        row = self._db.execute(
            f"SELECT id FROM libraries WHERE {column} = ? AND root = ?", (key, _stored(str(root)))
        ).fetchone()
        return int(row[0])

    def forget_project(self, project_id: int) -> None:
        """Forget every library of a project (a project deleted)."""
        for row in self.libraries(project_id=project_id):
            self.remove(row.id)

    def remove(self, library_id: int) -> None:
        """Forget a library and its index (the files themselves are left alone)."""
        with self._db:
            files = self._db.execute("SELECT id FROM files WHERE library_id = ?", (library_id,))
            for (file_id,) in files.fetchall():
                self._forget(file_id)
            self._db.execute("DELETE FROM libraries WHERE id = ?", (library_id,))

    def libraries(
        self, session_id: int | None = None, project_id: int | None = None
    ) -> list[LibraryRow]:
        """The libraries of a chat, or of a project (neither: every library), oldest first."""
        where, args = (
            ("WHERE l.session_id = ?", (session_id,))
            if session_id is not None
            else ("WHERE l.project_id = ?", (project_id,))
            if project_id is not None
            else ("", ())
        )
        rows = self._db.execute(
            "SELECT l.id, l.session_id, l.project_id, l.root, l.indexed_at, COUNT(f.id),"
            " COALESCE(SUM(f.passages), 0), COALESCE(SUM(f.skipped != ''), 0)"
            f" FROM libraries l LEFT JOIN files f ON f.library_id = l.id {where}"
            " GROUP BY l.id ORDER BY l.id",
            args,
        ).fetchall()
        return [
            LibraryRow(int(i), s, Path(_loaded(root)), int(n), int(p), int(k), float(at), project)
            for i, s, project, root, at, n, p, k in rows
        ]

    def files(self, library_id: int) -> list[FileRow]:
        """A library's files in path order, the skipped ones with the reason."""
        root = self._root(library_id)
        rows = self._db.execute(
            "SELECT path, size, passages, skipped FROM files WHERE library_id = ? ORDER BY path",
            (library_id,),
        ).fetchall()
        return [
            FileRow(root / _loaded(path) if path else root, int(size), int(n), str(why))
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
        if schema.has_vector_table(self._db):
            if self.vectors:
                ids = self._db.execute("SELECT id FROM passages WHERE file_id = ?", (file_id,))
                self._db.executemany("DELETE FROM passage_vectors WHERE rowid = ?", ids.fetchall())
            else:
                # Vectors that cannot be deleted now: the passages' ids may come back on
                # other passages, so every vector is made again when sqlite-vec loads.
                self._db.execute("DELETE FROM vector_model")
        self._db.execute("DELETE FROM passages WHERE file_id = ?", (file_id,))
        self._db.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def _root(self, library_id: int) -> Path:
        row = self._db.execute("SELECT root FROM libraries WHERE id = ?", (library_id,)).fetchone()
        if row is None:
            raise LibraryError(f"no library {library_id}")
        return Path(_loaded(row[0]))

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
            _loaded(path): (fid, size, mtime)
            for fid, path, size, mtime in self._db.execute(
                "SELECT id, path, size, mtime_ns FROM files WHERE library_id = ?", (library_id,)
            )
        }
        # A library of one file stores it as "" (the root itself).
        found = list(walk(root))
        seen = {item.rel for item in found}
        committed = time.monotonic()
        for done, item in enumerate(found):
            path, rel = item.path, item.rel
            size, mtime = (item.stat.st_size, item.stat.st_mtime_ns) if item.stat else (0, 0)
            if cancel is not None and cancel.is_set():
                break
            if progress is not None:
                progress(done, len(found), outside.shown(rel))
            old = known.get(rel)
            if old is not None and old[1] == size and old[2] == mtime:
                report.unchanged += 1
                continue
            try:
                if item.reason:
                    # Never opened: a FIFO, a device, a link out of the folder.
                    raise Skipped(item.reason.removeprefix("is "))
                passages = read(path, size)
                why = ""
            except Skipped as exc:
                passages, why = [], str(exc)
            if old is not None:
                self._forget(old[0])
            cursor = self._db.execute(
                "INSERT INTO files (library_id, path, size, mtime_ns, passages, skipped)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (library_id, _stored(rel), size, mtime, len(passages), why),
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
            schema.upgrade_vectors(self._db)
        schema.keep_vectors_of(self._db, embedder.model, None)
        done = 0
        # The vectors' length this indexing got first: one that changes is refused.
        dimension: int | None = None
        while cancel is None or not cancel.is_set():
            pending = self._db.execute(
                "SELECT f.id, f.path, COALESCE(l.session_id, -l.project_id) FROM files f"
                " JOIN libraries l ON l.id = f.library_id"
                " WHERE f.library_id = ? AND f.passages > 0"
                " AND f.id NOT IN (SELECT file_id FROM embedded_files) ORDER BY f.path",
                (library_id,),
            ).fetchall()
            if not pending:
                return
            file_id, rel, key = pending[0]
            if progress is not None:
                progress(done, done + len(pending), f"{outside.shown(_loaded(rel))} (vectors)")
            try:
                embedded, dimension = self._embed_file(file_id, key, embedder, cancel, dimension)
                report.embedded += embedded
            except EmbeddingError as exc:
                self._db.rollback()
                report.vectors = f"{exc}. Searching uses full text only until it works."
                log.warning("library %s: %s", library_id, exc)
                return
            done += 1

    def _embed_file(
        self,
        file_id: int,
        key: int,
        embedder: Embedder,
        cancel: threading.Event | None,
        dimension: int | None,
    ) -> tuple[int, int | None]:
        """Vectors for a file's passages (`dimension` long, when given); how many, and
        their length."""
        rows = self._db.execute(
            "SELECT id, heading, text FROM passages WHERE file_id = ? ORDER BY id", (file_id,)
        ).fetchall()
        for start in range(0, len(rows), EMBED_BATCH):
            if cancel is not None and cancel.is_set():
                self._db.rollback()
                return 0, dimension
            batch = rows[start : start + EMBED_BATCH]
            got = embedder.vectors(
                [f"{heading}\n{text}" if heading else text for _id, heading, text in batch],
                EMBED_TIMEOUT,
                dimension=dimension,
            )
            dimension = len(got[0])
            schema.keep_vectors_of(self._db, embedder.model, dimension)
            blobs = [vectors.pack(v) for v in got]
            self._db.executemany(
                "INSERT INTO passage_vectors (rowid, session_id, coarse, embedding)"
                " VALUES (?, ?, vec_quantize_binary(?), ?)",
                [
                    (pid, key, vectors.coarse(blob), blob)
                    for (pid, _h, _t), blob in zip(batch, blobs)
                ],
            )
            time.sleep(0)  # the GIL for the GUI thread between requests
        self._db.execute("INSERT INTO embedded_files (file_id) VALUES (?)", (file_id,))
        self._db.commit()
        return len(rows), dimension

    def _nearest(
        self,
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
        # The vectors' keys: a chat's session id, a project's id negated (see the top).
        owners = [session_id] if session_id is not None else []
        if project_id is not None:
            owners.append(-project_id)
        if not self.vectors or not owners:
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
        marks = ",".join("?" * len(owners))
        try:
            # With IN, sqlite-vec finds the k nearest of each partition: the chat's and
            # its project's candidates are ranked together.
            rows = self._db.execute(
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

    # ------------------------------------------------------------------ search

    def search(
        self,
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
        ranked = self._bm25(query, chat, CANDIDATES)
        near = (
            self._nearest(query, session_id, embedder, CANDIDATES, project_id) if embedder else []
        )
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
                path = Path(_loaded(root)) / _loaded(rel) if rel else Path(_loaded(root))
                out.append(Hit(path, page, heading, text, -score))
        return out

    def _bm25(self, query: str, chat: _Chat, count: int) -> list[int]:
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
        span = self._db.execute(
            "SELECT MIN((SELECT MIN(id) FROM passages WHERE file_id = f.id)),"
            " MAX((SELECT MAX(id) FROM passages WHERE file_id = f.id))"
            f" FROM libraries l JOIN files f ON f.library_id = l.id WHERE {_CHATS}",
            chat,
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
            return self._ranked(fts_query(chosen), chat, low, high, count)
        common = [word for word in words if found[word]]
        ids: list[int] = []
        every = fts_query(common, "AND")
        if len(common) > 1 and self._matches(every, low, high) <= RANK_BUDGET:
            ids = self._ranked(every, chat, low, high, count)
        if len(ids) < count:
            # The first RANK_BUDGET passages holding a word, ranked.
            match = fts_query(common)
            cut = self._db.execute(
                "SELECT MAX(rowid) FROM (SELECT rowid FROM passages_fts WHERE passages_fts"
                " MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?)",
                (match, low, high, RANK_BUDGET),
            ).fetchone()[0]
            more = self._ranked(match, chat, low, cut, count)
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

    def _ranked(self, match: str, chat: _Chat, low: int, high: int, count: int) -> list[int]:
        """The chat's (and its project's) `count` best passages for `match` by FTS5's rank
        (BM25), best first."""
        if not match:
            return []
        rows = self._db.execute(
            "SELECT s.rowid FROM (SELECT rowid, rank FROM passages_fts"
            "       WHERE passages_fts MATCH ? AND rowid BETWEEN ? AND ?) s"
            " JOIN passages p ON p.id = s.rowid JOIN files f ON f.id = p.file_id"
            " JOIN libraries l ON l.id = f.library_id"
            f" WHERE {_CHATS} ORDER BY s.rank LIMIT ?",
            (match, low, high, *chat, count),
        ).fetchall()
        return [int(rowid) for (rowid,) in rows]
