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

`LibraryStore` is the one way in: it keeps the libraries' rows (attach, list, remove) and
hands its connection to the two larger parts, plain functions that do not know it.
`index(library_id, embedder=...)` is `indexing`'s: the root walked, the changed files read
again, the gone ones forgotten, then the vectors asked for (a router that fails leaves the
full-text index as it is and says why in the report). `search(query, session_id,
embedder=..., project_id=...)` is `searching`'s: the best passages of a chat's libraries
and its project's, BM25's best and the vectors' nearest, fused. `schema` holds the tables
and how a path is kept in them. A store, like any SQLite connection, belongs to the thread
that opened it.

Qt-free.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llamachat.history.database import move_aside
from llamachat.history.rows import HistoryError
from llamachat.library import indexing, schema, searching, vectors
from llamachat.library.extract import Passage, extract
from llamachat.library.indexing import IGNORED_DIRS, IndexReport, Progress, walk
from llamachat.library.schema import loaded_path, stored_path
from llamachat.library.searching import (
    CANDIDATES,
    COARSE_CANDIDATES,
    Hit,
    fts_query,
    query_words,
)
from llamachat.library.vectors import DB_ERRORS, Embedder

# What callers import from here, several of them defined in the parts LibraryStore uses.
__all__ = [
    "CANDIDATES",
    "COARSE_CANDIDATES",
    "IGNORED_DIRS",
    "STORE_ERRORS",
    "FileRow",
    "Hit",
    "IndexReport",
    "LibraryError",
    "LibraryRow",
    "LibraryStore",
    "Progress",
    "default_path",
    "fts_query",
    "is_damage",
    "query_words",
    "recover",
    "walk",
]

log = logging.getLogger(__name__)


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


def default_path(history_path: Path) -> Path:
    """library.db, next to the history file (its own file: the history is never migrated)."""
    return history_path.with_name("library.db")


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
                (key, stored_path(str(root))),
            )
        row = self._db.execute(
            f"SELECT id FROM libraries WHERE {column} = ? AND root = ?",
            (key, stored_path(str(root))),
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
                indexing.forget_file(self._db, self.vectors, file_id)
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
            LibraryRow(
                int(i), s, Path(loaded_path(root)), int(n), int(p), int(k), float(at), project
            )
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
            FileRow(root / loaded_path(path) if path else root, int(size), int(n), str(why))
            for path, size, n, why in rows
        ]

    def has_passages(self, session_id: int) -> bool:
        """Whether a chat has a library attached (indexed or not yet)."""
        row = self._db.execute(
            "SELECT 1 FROM libraries WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        return row is not None

    def _root(self, library_id: int) -> Path:
        row = self._db.execute("SELECT root FROM libraries WHERE id = ?", (library_id,)).fetchone()
        if row is None:
            raise LibraryError(f"no library {library_id}")
        return Path(loaded_path(row[0]))

    # ------------------------------------------------------------------ indexing, search

    def index(
        self,
        library_id: int,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        read: Callable[[Path, int], list[Passage]] = extract,
        embedder: Embedder | None = None,
    ) -> IndexReport:
        """Bring a library's index up to date (`indexing.index`): new and changed files
        are read again, files gone are forgotten, then with an `embedder` the passages
        without a vector get one. Stops early when `cancel` is set."""
        root = self._root(library_id)
        return indexing.index(
            self._db, self.vectors, library_id, root, progress, cancel, read, embedder
        )

    def search(
        self,
        query: str,
        session_id: int | None,
        limit: int = 5,
        embedder: Embedder | None = None,
        project_id: int | None = None,
    ) -> list[Hit]:
        """The `limit` passages of the libraries of the chat and of its project that match
        `query` best (`searching.search`): BM25's best, fused with the nearest by vector
        when an `embedder` made the vectors."""
        return searching.search(
            self._db, self.vectors, query, session_id, limit, embedder, project_id
        )
