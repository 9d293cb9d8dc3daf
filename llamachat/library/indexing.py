"""Bringing a library's index up to date: its files walked, the changed ones read again
into passages, the gone ones forgotten, and the vectors asked for.

`index(db, has_vectors, library_id, root, ...)` walks the root and re-reads only the files
whose size or mtime changed (new files included), forgets the files gone, then asks the
router for the vectors of the files that have none (all of them again when the model or its
dimension changed); a router that fails leaves the full-text index as it is and says why
in the report. `forget_file` deletes a file's passages and vectors (a library removed
forgets its files with it). Each function takes `LibraryStore`'s connection and whether
sqlite-vec is loaded in it, and runs on the thread that opened it.

Qt-free.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamachat import outside
from llamachat.library import schema, vectors
from llamachat.library.extract import Passage, Skipped, extract
from llamachat.library.schema import loaded_path, stored_path
from llamachat.library.vectors import Embedder, EmbeddingError

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


def walk(root: Path) -> Iterator[outside.Walked]:
    """The files under `root` in a stable order, without hidden files and dependency folders;
    a file left out (a FIFO, a link out of the folder...) comes with the reason."""
    return outside.walk(root, skip_dirs=IGNORED_DIRS)


def index(
    db: Any,
    has_vectors: bool,
    library_id: int,
    root: Path,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    read: Callable[[Path, int], list[Passage]] = extract,
    embedder: Embedder | None = None,
) -> IndexReport:
    """Bring the index of the library `library_id` (at `root`) up to date: new and changed
    files (by size and mtime) are read again (by `read`), files gone are forgotten; with
    an `embedder`, then the passages without a vector get one (`report.vectors` says why
    not, if not). Stops early when `cancel` is set."""
    started = time.perf_counter()
    report = IndexReport()
    known = {
        loaded_path(path): (fid, size, mtime)
        for fid, path, size, mtime in db.execute(
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
            forget_file(db, has_vectors, old[0])
        cursor = db.execute(
            "INSERT INTO files (library_id, path, size, mtime_ns, passages, skipped)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (library_id, stored_path(rel), size, mtime, len(passages), why),
        )
        db.executemany(
            "INSERT INTO passages (file_id, page, heading, text) VALUES (?, ?, ?, ?)",
            [(cursor.lastrowid, p.page, p.heading, p.text) for p in passages],
        )
        report.indexed += 1
        report.skipped += bool(why)
        report.passages += len(passages)
        time.sleep(0)  # the GIL for the GUI thread between files
        if time.monotonic() - committed > COMMIT_SECONDS:
            db.commit()
            committed = time.monotonic()
    else:
        for rel in known.keys() - seen:
            forget_file(db, has_vectors, known[rel][0])
            report.removed += 1
        db.execute("UPDATE libraries SET indexed_at = ? WHERE id = ?", (time.time(), library_id))
    db.commit()
    if embedder is not None and not (cancel is not None and cancel.is_set()):
        _embed(db, has_vectors, library_id, embedder, report, progress, cancel)
    if progress is not None:
        progress(len(found), len(found), "")
    report.seconds = time.perf_counter() - started
    log.info("indexed library %s (%s): %s", library_id, root, report)
    return report


def forget_file(db: Any, has_vectors: bool, file_id: int) -> None:
    """Delete a file's row, its passages and their vectors (in the open transaction)."""
    if schema.has_vector_table(db):
        if has_vectors:
            ids = db.execute("SELECT id FROM passages WHERE file_id = ?", (file_id,))
            db.executemany("DELETE FROM passage_vectors WHERE rowid = ?", ids.fetchall())
        else:
            # Vectors that cannot be deleted now: the passages' ids may come back on
            # other passages, so every vector is made again when sqlite-vec loads.
            db.execute("DELETE FROM vector_model")
    db.execute("DELETE FROM passages WHERE file_id = ?", (file_id,))
    db.execute("DELETE FROM files WHERE id = ?", (file_id,))


def _embed(
    db: Any,
    has_vectors: bool,
    library_id: int,
    embedder: Embedder,
    report: IndexReport,
    progress: Progress | None,
    cancel: threading.Event | None,
) -> None:
    """Vectors for the library's files that have none, a file per transaction."""
    if not has_vectors:
        report.vectors = f"No vectors: {vectors.problem()}; searching uses full text only."
        return
    if db.execute("PRAGMA user_version").fetchone()[0] == 1:
        schema.upgrade_vectors(db)
    schema.keep_vectors_of(db, embedder.model, None)
    done = 0
    # The vectors' length this indexing got first: one that changes is refused.
    dimension: int | None = None
    while cancel is None or not cancel.is_set():
        pending = db.execute(
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
            progress(done, done + len(pending), f"{outside.shown(loaded_path(rel))} (vectors)")
        try:
            embedded, dimension = _embed_file(db, file_id, key, embedder, cancel, dimension)
            report.embedded += embedded
        except EmbeddingError as exc:
            db.rollback()
            report.vectors = f"{exc}. Searching uses full text only until it works."
            log.warning("library %s: %s", library_id, exc)
            return
        done += 1


def _embed_file(
    db: Any,
    file_id: int,
    key: int,
    embedder: Embedder,
    cancel: threading.Event | None,
    dimension: int | None,
) -> tuple[int, int | None]:
    """Vectors for a file's passages (`dimension` long, when given); how many, and
    their length."""
    rows = db.execute(
        "SELECT id, heading, text FROM passages WHERE file_id = ? ORDER BY id", (file_id,)
    ).fetchall()
    for start in range(0, len(rows), EMBED_BATCH):
        if cancel is not None and cancel.is_set():
            db.rollback()
            return 0, dimension
        batch = rows[start : start + EMBED_BATCH]
        got = embedder.vectors(
            [f"{heading}\n{text}" if heading else text for _id, heading, text in batch],
            EMBED_TIMEOUT,
            dimension=dimension,
        )
        dimension = len(got[0])
        schema.keep_vectors_of(db, embedder.model, dimension)
        blobs = [vectors.pack(v) for v in got]
        db.executemany(
            "INSERT INTO passage_vectors (rowid, session_id, coarse, embedding)"
            " VALUES (?, ?, vec_quantize_binary(?), ?)",
            [(pid, key, vectors.coarse(blob), blob) for (pid, _h, _t), blob in zip(batch, blobs)],
        )
        time.sleep(0)  # the GIL for the GUI thread between requests
    db.execute("INSERT INTO embedded_files (file_id) VALUES (?)", (file_id,))
    db.commit()
    return len(rows), dimension
