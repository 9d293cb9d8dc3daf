"""The libraries' index: one SQLite file of its own (library.db), searched with FTS5.

A library is a folder (or a file) attached to a chat, keyed by the history's session id.
`LibraryStore(path)` opens the file (WAL, so the indexing thread writes while another
thread reads, each through its own connection) and holds:

    libraries   id, session_id, root
    files       each file under a root: its size and mtime (what re-indexing compares),
                its passage count, or why it was skipped
    passages    file, page, heading, text; `passages_fts` indexes them (BM25)

`index(library_id)` walks the root and re-reads only the files whose size or mtime
changed (new files included), and forgets the files gone; `search(query, session_id)`
gives the best passages of a chat's libraries. A store, like any SQLite connection,
belongs to the thread that opened it.

Qt-free.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from llamachat.library.extract import Passage, Skipped, extract

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
"""

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
    seconds: float = 0.0


Progress = Callable[[int, int, str], None]
"""Called with (files done, files in all, the file now) while indexing."""


def default_path(history_path: Path) -> Path:
    """library.db, next to the history file (its own file: the history is never migrated)."""
    return history_path.with_name("library.db")


def fts_query(text: str) -> str:
    """The words of `text` (but common ones) as an FTS5 query any may match; BM25 ranks."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    words = [w for w in words if w not in STOPWORDS] or words
    words = words[:MAX_QUERY_WORDS]
    return " OR ".join(f'"{word}"' for word in words)


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
            self._db = sqlite3.connect(path, timeout=10)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise LibraryError(f"cannot open the library file {path}: {exc}") from exc

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
            self._db.execute(
                "DELETE FROM passages WHERE file_id IN (SELECT id FROM files WHERE library_id = ?)",
                (library_id,),
            )
            self._db.execute("DELETE FROM files WHERE library_id = ?", (library_id,))
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
    ) -> IndexReport:
        """Bring a library's index up to date: new and changed files (by size and mtime)
        are read again (by `read`), files gone are forgotten. Stops early when `cancel` is set."""
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
                self._db.execute("DELETE FROM passages WHERE file_id = ?", (old[0],))
                self._db.execute("DELETE FROM files WHERE id = ?", (old[0],))
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
            time.sleep(0)  # the GIL for the GUI thread between files (see extract._pdf)
            if time.monotonic() - committed > COMMIT_SECONDS:
                self._db.commit()
                committed = time.monotonic()
        else:
            for rel in known.keys() - seen:
                fid = known[rel][0]
                self._db.execute("DELETE FROM passages WHERE file_id = ?", (fid,))
                self._db.execute("DELETE FROM files WHERE id = ?", (fid,))
                report.removed += 1
            self._db.execute(
                "UPDATE libraries SET indexed_at = ? WHERE id = ?", (time.time(), library_id)
            )
        self._db.commit()
        if progress is not None:
            progress(len(found), len(found), "")
        report.seconds = time.perf_counter() - started
        log.info("indexed library %s (%s): %s", library_id, root, report)
        return report

    # ------------------------------------------------------------------ search

    def search(self, query: str, session_id: int, limit: int = 5) -> list[Hit]:
        """The `limit` passages of the chat's libraries that match `query` best (BM25)."""
        match = fts_query(query)
        if not match:
            return []
        rows = self._db.execute(
            "SELECT l.root, f.path, p.page, p.heading, p.text, s.rank"
            " FROM (SELECT rowid, bm25(passages_fts, 1.0, 0.5) AS rank FROM passages_fts"
            "       WHERE passages_fts MATCH ?) s"
            " JOIN passages p ON p.id = s.rowid"
            " JOIN files f ON f.id = p.file_id"
            " JOIN libraries l ON l.id = f.library_id"
            " WHERE l.session_id = ? ORDER BY s.rank LIMIT ?",
            (match, session_id, limit),
        ).fetchall()
        out = []
        for root, rel, page, heading, text, rank in rows:
            path = Path(root) / rel if rel else Path(root)
            out.append(Hit(path, page, heading, text, float(rank)))
        return out
