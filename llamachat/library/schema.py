"""library.db's tables, their migrations from older versions (`user_version`), and how
a path is kept in them (`stored_path`, `loaded_path`).

Qt-free.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from llamachat.library import vectors

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS libraries (
    id INTEGER PRIMARY KEY,
    session_id INTEGER,
    project_id INTEGER,
    root TEXT NOT NULL,
    indexed_at REAL NOT NULL DEFAULT 0,
    CHECK ((session_id IS NULL) != (project_id IS NULL)),
    UNIQUE (session_id, root),
    UNIQUE (project_id, root)
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

SCHEMA_VERSION = 3
"""library.db's `user_version`: 1 had float vectors only (searched by brute force), 2
libraries of chats only."""


def create(db: Any) -> None:
    """Make the tables of a new library.db."""
    db.executescript(SCHEMA)
    db.execute("INSERT INTO passages_fts(passages_fts, rank) VALUES ('rank', ?)", (RANK,))
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.commit()


def add_projects(db: Any, version: int) -> None:
    """Before version 3 a library was a chat's only: the table is made again with a
    project_id beside a session_id that may be NULL; its rows keep their ids, so files,
    passages and vectors stay (a version 1 file stays 1 until its vectors get bits)."""
    # Dropping the old table must not cascade to its files (the pragma is a no-op
    # inside a transaction, hence set before it).
    db.execute("PRAGMA foreign_keys=OFF")
    try:
        db.execute("BEGIN IMMEDIATE")  # another connection may be migrating it
        columns = {row[1] for row in db.execute("PRAGMA table_info(libraries)")}
        if "project_id" not in columns:
            # SQLite's way to change a table's constraints: a new table copied,
            # the old one dropped, the new one renamed (files refer to it by name).
            table = SCHEMA[: SCHEMA.index(");") + 2]
            db.execute(table.replace(" libraries (", " new_libraries (", 1))
            db.execute(
                "INSERT INTO new_libraries (id, session_id, root, indexed_at)"
                " SELECT id, session_id, root, indexed_at FROM libraries"
            )
            db.execute("DROP TABLE libraries")
            db.execute("ALTER TABLE new_libraries RENAME TO libraries")
        if version == 2:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.commit()
    finally:
        db.execute("PRAGMA foreign_keys=ON")


def upgrade_vectors(db: Any) -> None:
    """Version 1's float vectors kept, each given its bits: done by indexing, in its
    thread (~8 s for 50,000 vectors); until then a search finds no vector's nearest."""
    db.execute("BEGIN IMMEDIATE")  # another connection may be upgrading it
    if db.execute("PRAGMA user_version").fetchone()[0] == 1:
        model = db.execute("SELECT model, dimension FROM vector_model").fetchone()
        if model is not None and has_vector_table(db):
            db.execute(
                "CREATE TEMP TABLE old_vectors AS"
                " SELECT rowid AS id, session_id, embedding FROM passage_vectors"
            )
            db.execute("DROP TABLE passage_vectors")
            create_vector_table(db, int(model[1]))
            # Version 1's session ids are its chats' keys still.
            old = db.execute("SELECT id, session_id, embedding FROM old_vectors")
            db.executemany(
                "INSERT INTO passage_vectors (rowid, session_id, coarse, embedding)"
                " VALUES (?, ?, vec_quantize_binary(?), ?)",
                ((pid, sid, vectors.coarse(blob), blob) for pid, sid, blob in old),
            )
            db.execute("DROP TABLE old_vectors")
        # (Vectors of no model are dropped by `keep_vectors_of`.)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.commit()


def has_vector_table(db: Any) -> bool:
    """Whether library.db has its vector table (made with the first vectors)."""
    row = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'passage_vectors'").fetchone()
    return row is not None


def create_vector_table(db: Any, dimension: int) -> None:
    """Make the vector table for vectors of `dimension` values."""
    # The floats are an auxiliary column: stored by rowid, read for the few candidates.
    # The partition key is named for what it held before projects: now the owner.
    db.execute(
        "CREATE VIRTUAL TABLE passage_vectors USING vec0(session_id INTEGER PARTITION KEY,"
        f" coarse bit[{vectors.bits(dimension)}], +embedding BLOB)"
    )


def keep_vectors_of(db: Any, model: str, dimension: int | None) -> None:
    """Drop every vector unless they are `model`'s (and `dimension` long, when given);
    with a dimension, make the vector table for them if there is none."""
    row = db.execute("SELECT model, dimension FROM vector_model").fetchone()
    same = row is not None and row[0] == model
    if same and (dimension is None or row[1] == dimension):
        return
    if row is not None or has_vector_table(db):
        log.info("library vectors made again: %s -> %s (%s)", row, model, dimension)
        db.execute("DROP TABLE IF EXISTS passage_vectors")
        db.execute("DELETE FROM embedded_files")
        db.execute("DELETE FROM vector_model")
    if dimension is not None:
        create_vector_table(db, dimension)
        db.execute(
            "INSERT INTO vector_model (id, model, dimension) VALUES (1, ?, ?)",
            (model, dimension),
        )


def stored_path(path: str) -> str | bytes:
    """A path as library.db keeps it: text, or the bytes on disk when its name is not UTF-8
    (SQLite text cannot hold them, and the file must still be found by its name)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def loaded_path(value: str | bytes) -> str:
    """A path as `stored_path` kept it, as the `str` that opens the file."""
    return os.fsdecode(value) if isinstance(value, bytes) else value
