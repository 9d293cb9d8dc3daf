"""The history's SQLite file: opening and checking it, its schema and migrations, moving
a damaged file aside and salvaging what it still holds. store.py describes the policy.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from llamachat.history.rows import HistoryError, _primary_code, _unavailable

log = logging.getLogger(__name__)

# Links a message to the one written before it in its session: `_CHAIN` every message
# without a parent (the migration to trees: each session becomes one path), `_REPAIR`
# those whose parent is gone (after a salvage). Both give a session without a live
# active leaf its newest message.
_PARENT_BEFORE = """
    UPDATE messages SET parent_id = (
        SELECT max(p.id) FROM messages p
        WHERE p.session_id = messages.session_id AND p.id < messages.id)
"""
_ACTIVE_NEWEST = """
    UPDATE sessions SET active_leaf = (
        SELECT max(m.id) FROM messages m WHERE m.session_id = sessions.id)
    WHERE active_leaf IS NULL OR active_leaf NOT IN (
        SELECT m.id FROM messages m WHERE m.session_id = sessions.id);
"""
_CHAIN = _PARENT_BEFORE + " WHERE parent_id IS NULL;\n" + _ACTIVE_NEWEST
_REPAIR = (
    _PARENT_BEFORE
    + " WHERE parent_id IS NOT NULL AND parent_id NOT IN (SELECT id FROM messages);\n"
    + _ACTIVE_NEWEST
)

# Append-only: never edit an entry once released, add a new one.
MIGRATIONS: list[str] = [
    # 1: sessions, messages, full-text index over message text.
    """
    CREATE TABLE IF NOT EXISTS sessions (
        id            INTEGER PRIMARY KEY,
        mode          TEXT NOT NULL DEFAULT 'chat',
        title         TEXT NOT NULL DEFAULT '',
        model         TEXT NOT NULL DEFAULT '',
        prompt_name   TEXT NOT NULL DEFAULT '',
        prompt_custom TEXT NOT NULL DEFAULT '',
        skills        TEXT NOT NULL DEFAULT '[]',
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL,
        deleted_at    REAL
    );
    CREATE INDEX IF NOT EXISTS sessions_live_by_update
        ON sessions (updated_at) WHERE deleted_at IS NULL;
    CREATE TABLE IF NOT EXISTS messages (
        id          INTEGER PRIMARY KEY,
        session_id  INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        role        TEXT NOT NULL,
        content     TEXT NOT NULL DEFAULT '',
        reasoning   TEXT NOT NULL DEFAULT '',
        tool_calls  TEXT NOT NULL DEFAULT '[]',
        attachments TEXT NOT NULL DEFAULT '[]',
        model       TEXT NOT NULL DEFAULT '',
        status      TEXT NOT NULL DEFAULT 'complete',
        error       TEXT NOT NULL DEFAULT '',
        usage       TEXT NOT NULL DEFAULT '{}',
        timings     TEXT NOT NULL DEFAULT '{}',
        created_at  REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS messages_by_session ON messages (session_id, id);
    CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5 (
        content, reasoning, content='messages', content_rowid='id',
        tokenize='unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content, reasoning)
            VALUES (new.id, new.content, new.reasoning);
    END;
    CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content, reasoning)
            VALUES ('delete', old.id, old.content, old.reasoning);
    END;
    CREATE TRIGGER IF NOT EXISTS messages_fts_update
        AFTER UPDATE OF content, reasoning ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content, reasoning)
            VALUES ('delete', old.id, old.content, old.reasoning);
        INSERT INTO messages_fts (rowid, content, reasoning)
            VALUES (new.id, new.content, new.reasoning);
    END;
    -- Index rows that a pre-versioned database already held.
    INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
    """,
    # 2: conversations as trees. A message's parent is the one it answers or follows
    # (NULL for a first question); a session shows the path from a root to its
    # active leaf. Every existing session becomes one path, in the order it was written.
    """
    ALTER TABLE messages ADD COLUMN parent_id INTEGER;
    ALTER TABLE sessions ADD COLUMN active_leaf INTEGER;
    CREATE INDEX IF NOT EXISTS messages_by_parent ON messages (session_id, parent_id, id);
    """
    + _CHAIN,
    # 3: request parameters a chat overrides (temperature, top_p, ...), as a JSON object.
    """
    CREATE TABLE IF NOT EXISTS session_params (
        session_id INTEGER PRIMARY KEY,
        params TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TRIGGER IF NOT EXISTS session_params_purged AFTER DELETE ON sessions BEGIN
        DELETE FROM session_params WHERE session_id = old.id;
    END;
    """,
    # 4: what the user typed in a chat and has not sent yet, by session (0: the new chat
    # that has no session yet).
    """
    CREATE TABLE IF NOT EXISTS drafts (
        session_id INTEGER PRIMARY KEY,
        text       TEXT NOT NULL DEFAULT '',
        updated_at REAL NOT NULL
    );
    CREATE TRIGGER IF NOT EXISTS drafts_purged AFTER DELETE ON sessions BEGIN
        DELETE FROM drafts WHERE session_id = old.id;
    END;
    """,
    # 5: pinned chats, listed above the others.
    """
    ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX IF NOT EXISTS sessions_live_by_pin
        ON sessions (pinned, updated_at) WHERE deleted_at IS NULL;
    """,
    # 6: projects, named groups of chats with the defaults a new chat in one starts with.
    """
    CREATE TABLE IF NOT EXISTS projects (
        id            INTEGER PRIMARY KEY,
        name          TEXT NOT NULL,
        prompt_name   TEXT NOT NULL DEFAULT '',
        prompt_custom TEXT NOT NULL DEFAULT '',
        model         TEXT NOT NULL DEFAULT '',
        skills        TEXT NOT NULL DEFAULT '[]',
        params        TEXT NOT NULL DEFAULT '{}',
        collapsed     INTEGER NOT NULL DEFAULT 0,
        created_at    REAL NOT NULL
    );
    CREATE UNIQUE INDEX IF NOT EXISTS projects_by_name ON projects (name COLLATE NOCASE);
    ALTER TABLE sessions ADD COLUMN project_id INTEGER
        REFERENCES projects (id) ON DELETE SET NULL;
    CREATE INDEX IF NOT EXISTS sessions_by_project
        ON sessions (project_id, pinned, updated_at) WHERE deleted_at IS NULL;
    """,
    # 7: the models that wrote messages, for filtering chats by model (a scan of every
    # message otherwise: 0.2 s over 200,000).
    """
    CREATE INDEX IF NOT EXISTS messages_by_model ON messages (model, session_id);
    """,
    # 8: a project's id is never given again (a deleted project's id, still held by
    # another window, must not name the next project made). SQLite adds AUTOINCREMENT
    # only by making the table again; foreign keys are off while migrating (`_migrate`),
    # so dropping the old table does not take the chats out of their projects.
    """
    CREATE TABLE projects_numbered (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        name          TEXT NOT NULL,
        prompt_name   TEXT NOT NULL DEFAULT '',
        prompt_custom TEXT NOT NULL DEFAULT '',
        model         TEXT NOT NULL DEFAULT '',
        skills        TEXT NOT NULL DEFAULT '[]',
        params        TEXT NOT NULL DEFAULT '{}',
        collapsed     INTEGER NOT NULL DEFAULT 0,
        created_at    REAL NOT NULL
    );
    INSERT INTO projects_numbered
        SELECT id, name, prompt_name, prompt_custom, model, skills, params, collapsed,
            created_at FROM projects;
    DROP TABLE projects;
    ALTER TABLE projects_numbered RENAME TO projects;
    CREATE UNIQUE INDEX projects_by_name ON projects (name COLLATE NOCASE);
    """,
    # 9: what each chat imported from a file was (a digest of its content), so that
    # importing the same file again skips the chats already there.
    """
    CREATE TABLE IF NOT EXISTS imported (
        session_id  INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS imported_by_fingerprint ON imported (fingerprint);
    CREATE TRIGGER IF NOT EXISTS imported_purged AFTER DELETE ON sessions BEGIN
        DELETE FROM imported WHERE session_id = old.id;
    END;
    """,
    # 10: when a chat was last opened, so the window opens on the chat it showed last.
    """
    ALTER TABLE sessions ADD COLUMN opened_at REAL;
    """,
    # 11: memories, short facts across chats (`memories`): everywhere (project_id NULL)
    # or in one project (gone with it); where each came from (a chat and a message,
    # NULL once gone) and when a request last carried it.
    """
    CREATE TABLE IF NOT EXISTS memories (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        text        TEXT NOT NULL,
        project_id  INTEGER REFERENCES projects (id) ON DELETE CASCADE,
        session_id  INTEGER REFERENCES sessions (id) ON DELETE SET NULL,
        message_id  INTEGER REFERENCES messages (id) ON DELETE SET NULL,
        author      TEXT NOT NULL DEFAULT 'user',
        pinned      INTEGER NOT NULL DEFAULT 0,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        used_at     REAL NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS memories_by_project ON memories (project_id, id);
    """,
    # 12: where a reply streaming from llama.cpp stands in the server's copy of its
    # stream (its X-Conversation-Id, the bytes read, the text they brought), so a reply
    # a crash left "streaming" is picked up again where it stopped.
    """
    CREATE TABLE IF NOT EXISTS reply_streams (
        message_id      INTEGER PRIMARY KEY,
        conversation    TEXT NOT NULL,
        byte_offset     INTEGER NOT NULL DEFAULT 0,
        content_chars   INTEGER NOT NULL DEFAULT 0,
        reasoning_chars INTEGER NOT NULL DEFAULT 0
    );
    CREATE TRIGGER IF NOT EXISTS reply_streams_purged AFTER DELETE ON messages BEGIN
        DELETE FROM reply_streams WHERE message_id = old.id;
    END;
    """,
    # 13: the picks of blind comparisons (`picks`): one row for each model the picked
    # one won against, in which project (NULL: none, or gone) and chat.
    """
    CREATE TABLE IF NOT EXISTS compare_picks (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        winner      TEXT NOT NULL,
        loser       TEXT NOT NULL,
        project_id  INTEGER REFERENCES projects (id) ON DELETE SET NULL,
        session_id  INTEGER REFERENCES sessions (id) ON DELETE SET NULL,
        picked_at   REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS compare_picks_by_project ON compare_picks (project_id);
    """,
]

# Columns a pre-versioned table may lack, with the definitions ALTER TABLE can add
# (it needs a constant default for NOT NULL).
_LEGACY_COLUMNS = {
    "sessions": {
        "mode": "TEXT NOT NULL DEFAULT 'chat'",
        "title": "TEXT NOT NULL DEFAULT ''",
        "model": "TEXT NOT NULL DEFAULT ''",
        "prompt_name": "TEXT NOT NULL DEFAULT ''",
        "prompt_custom": "TEXT NOT NULL DEFAULT ''",
        "skills": "TEXT NOT NULL DEFAULT '[]'",
        "created_at": "REAL NOT NULL DEFAULT 0",
        "updated_at": "REAL NOT NULL DEFAULT 0",
        "deleted_at": "REAL",
    },
    "messages": {
        "content": "TEXT NOT NULL DEFAULT ''",
        "reasoning": "TEXT NOT NULL DEFAULT ''",
        "tool_calls": "TEXT NOT NULL DEFAULT '[]'",
        "attachments": "TEXT NOT NULL DEFAULT '[]'",
        "model": "TEXT NOT NULL DEFAULT ''",
        "status": "TEXT NOT NULL DEFAULT 'complete'",
        "error": "TEXT NOT NULL DEFAULT ''",
        "usage": "TEXT NOT NULL DEFAULT '{}'",
        "timings": "TEXT NOT NULL DEFAULT '{}'",
        "created_at": "REAL NOT NULL DEFAULT 0",
    },
}

# Salvage reads rowids in blocks this size, and gives up on a table after this many
# blocks in a row came back empty (a damaged page can hide where the table ends).
_SALVAGE_BLOCK = 256
_SALVAGE_EMPTY_BLOCKS = 1024
_CORRUPT = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


BUSY_TIMEOUT_S = 5.0
"""How long a connection waits for another's write to end before SQLITE_BUSY."""


class _Corrupt(Exception):
    """Internal: the file is damaged and must be moved aside."""


def connect(path: Path, timeout_s: float) -> sqlite3.Connection:
    """The history database at `path`, checked and migrated; raises _Corrupt for a damaged file."""
    conn = None
    try:
        # Autocommit: every statement outside an explicit transaction is saved at once.
        conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
        conn.row_factory = sqlite3.Row
        _check_size(conn, path)
        # Damaged pages past the header would only fail later, at the first read or
        # write that touches them, leaving a chat that can neither load nor save; a
        # quick_check (under 0.1 s for a 170 MB file) finds them while moving the
        # file aside is still possible.
        problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise _Corrupt(problem)
        # Before anything writes: not even WAL mode is forced on another program's file.
        _refuse_foreign(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # A purged chat must not linger in free pages of the file.
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        _migrate(conn, path)
        # A write probe: a database that opens but cannot be written must fail now,
        # with its path, not at the first message the user sends.
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return conn
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if _primary_code(exc) in _CORRUPT:
            raise _Corrupt(str(exc)) from None
        raise _unavailable(path, exc, "open") from None
    except BaseException:
        if conn is not None:
            conn.close()
        raise


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse an SQLite file another program made: migrating it would change its data."""
    if conn.execute("PRAGMA user_version").fetchone()[0] != 0:
        return
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    if tables and "sessions" not in tables and "messages" not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
        raise HistoryError(
            f"{path} is not a llamachat history: it is an SQLite database of another "
            f"program (tables {shown}), left as it is. Move it, or set history_path in "
            "the config to another file."
        )


def salvage(conn: sqlite3.Connection, source: Path) -> int:
    """Copy into `conn` (in the caller's transaction) every project, session, message and
    memory still readable in the damaged `source`; how many messages.

    SQLite's `.recover` is not in Python's sqlite3, so rows are read in rowid blocks,
    and a block that fails is read row by row: a damaged page costs its own rows only.
    """
    try:
        old = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True)
        names = {
            table: [row[1] for row in old.execute(f"PRAGMA table_info({table})")]
            for table in ("projects", "sessions", "messages", "memories")
        }
    except sqlite3.Error as exc:
        log.warning("nothing could be read from the damaged history %s: %s", source, exc)
        return 0
    try:
        projects = _copy_rows(conn, old, "projects", _shared_columns(conn, names, "projects"))
        known = _LEGACY_COLUMNS["sessions"]
        columns = [
            c
            for c in names["sessions"]
            if c in known or c in ("id", "active_leaf", "pinned", "project_id")
        ]
        # A chat whose project was lost is kept, outside any project.
        sessions = _copy_rows(conn, old, "sessions", columns, nulled={"project_id": projects})
        messages = _salvage_messages(conn, old, names["messages"], sessions)
        # Each memory goes where its references allow: a memory of a lost project goes
        # with it (as deleting the project does), one whose chat or message was lost
        # stays, no longer linked to them.
        memories = _copy_rows(
            conn,
            old,
            "memories",
            _shared_columns(conn, names, "memories"),
            nulled={"session_id": sessions, "message_id": messages},
            required={"project_id": projects},
        )
    finally:
        old.close()
    log.warning(
        "salvaged %d projects, %d sessions, %d messages and %d memories from %s",
        len(projects),
        len(sessions),
        len(messages),
        len(memories),
        source,
    )
    return len(messages)


def _shared_columns(conn: sqlite3.Connection, names: dict[str, list[str]], table: str) -> list[str]:
    """The columns of the damaged file's `table` that the fresh one has too."""
    ours = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    return [c for c in names[table] if c in ours]


def _copy_rows(
    conn: sqlite3.Connection,
    old: sqlite3.Connection,
    table: str,
    columns: list[str],
    *,
    nulled: dict[str, set[int]] | None = None,
    required: dict[str, set[int]] | None = None,
) -> set[int]:
    """Copy the readable rows of `table`; the ids copied.

    A reference in `nulled` to a row that was not salvaged becomes NULL; a row with a
    reference in `required` to a row that was not salvaged is left out.
    """
    copied: set[int] = set()
    if "id" not in columns:
        return copied
    at = {
        name: columns.index(name)
        for name in {**(nulled or {}), **(required or {})}
        if name in columns
    }
    insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    for row in _readable_rows(old, table, columns):
        values = list(row)
        if any(
            values[at[name]] is not None and values[at[name]] not in kept
            for name, kept in (required or {}).items()
            if name in at
        ):
            continue
        for name, kept in (nulled or {}).items():
            if name in at and values[at[name]] not in kept:
                values[at[name]] = None
        try:
            conn.execute(insert, values)
        except sqlite3.IntegrityError:
            continue
        copied.add(values[columns.index("id")])
    return copied


def _salvage_messages(
    conn: sqlite3.Connection, old: sqlite3.Connection, names: list[str], sessions: set[int]
) -> set[int]:
    """Copy the readable messages; those whose chat was lost go to a "Recovered
    messages" chat. The ids copied."""
    known = _LEGACY_COLUMNS["messages"]
    columns = [c for c in names if c in known or c in ("id", "session_id", "parent_id")]
    if "session_id" not in columns or "role" not in names:
        return set()
    columns.append("role")
    orphans: int | None = None
    copied: set[int] = set()
    insert = f"INSERT INTO messages ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    for row in _readable_rows(old, "messages", columns):
        values = list(row)
        at = columns.index("session_id")
        if values[at] not in sessions:
            if orphans is None:
                orphans = int(
                    conn.execute(
                        "INSERT INTO sessions (title, created_at, updated_at)"
                        " VALUES ('Recovered messages', ?, ?)",
                        (time.time(), time.time()),
                    ).lastrowid  # type: ignore[arg-type]
                )
            values[at] = orphans
        try:
            conn.execute(insert, values)
        except sqlite3.IntegrityError:
            continue
        if "id" in columns:
            copied.add(values[columns.index("id")])
    # A damaged page cost some messages their parent: they follow the one written
    # before them (a file from before trees gets each session as a path).
    relink = _REPAIR if "parent_id" in names else _CHAIN
    for statement in _statements(relink):
        conn.execute(statement)
    return copied


def purge(conn: sqlite3.Connection, where: str, params: tuple) -> int:
    """Remove the sessions matching `where` with their messages and full-text rows, in the
    caller's transaction; how many sessions."""
    # Explicit, because a pre-versioned messages table may lack ON DELETE CASCADE.
    conn.execute(
        f"DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE {where})",
        params,
    )
    purged = conn.execute(f"DELETE FROM sessions WHERE {where}", params).rowcount
    if purged:
        # The full-text index keeps a deleted row's words in older segments until
        # they are merged; merging them all drops the words for good.
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
    return purged


def _check_size(conn: sqlite3.Connection, path: Path) -> None:
    """Catch a truncated file, which SQLite would only notice when reading the lost pages."""
    wal = path.with_name(path.name + "-wal")
    if not path.exists() or (wal.exists() and wal.stat().st_size > 0):
        return  # with a WAL pending, the header's page count is not yet in the main file
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    if pages * page_size > path.stat().st_size:
        raise _Corrupt(f"file is shorter than its {pages} pages")


def move_aside(path: Path, what: str = "history database") -> Path:
    """Move the damaged file at `path` (and its WAL) to `<name>.corrupt-<stamp>`; where.
    `what` names the file in the HistoryError raised when it cannot be moved."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    count = 1
    while target.exists():
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{count}")
        count += 1
    try:
        path.rename(target)
        # A stale WAL or shared-memory file would be replayed into the fresh database.
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                side.rename(target.with_name(target.name + suffix))
    except OSError as exc:
        raise HistoryError(
            f"the {what} {path} is damaged and could not be moved aside: {exc.strerror or exc}"
        ) from None
    return target


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise HistoryError(
            f"the history database {path} was written by a newer llamachat "
            f"(schema {version}; this version knows {len(MIGRATIONS)})"
        )
    # Off while a table is made again (SQLite's way to change a table): dropping the old
    # one must not fire ON DELETE actions on the rows that refer to it.
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        _run_migrations(conn, path, version)
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


def _run_migrations(conn: sqlite3.Connection, path: Path, version: int) -> None:
    for number in range(version, len(MIGRATIONS)):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if number == 0:
                _adopt_legacy(conn)
            for statement in _statements(MIGRATIONS[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("history %s migrated to schema %d", path, number + 1)


def _adopt_legacy(conn: sqlite3.Connection) -> None:
    """Give tables made before versioning the columns migration 1 expects."""
    for table, columns in _LEGACY_COLUMNS.items():
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not present:
            continue
        for name, definition in columns.items():
            if name not in present:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")


def _readable_rows(conn: sqlite3.Connection, table: str, columns: list[str]) -> Iterator[tuple]:
    """The rows of `table` that can be read, in rowid order, skipping what raises."""
    select = f"SELECT {', '.join(columns)} FROM {table}"
    try:
        top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        top = None
    low, empty = 0, 0
    while empty < _SALVAGE_EMPTY_BLOCKS and (top is None or low < top):
        high = low + _SALVAGE_BLOCK
        try:
            rows = conn.execute(
                f"{select} WHERE rowid > ? AND rowid <= ? ORDER BY rowid", (low, high)
            ).fetchall()
        except sqlite3.DatabaseError:
            rows = []
            for rowid in range(low + 1, high + 1):
                try:
                    rows += conn.execute(f"{select} WHERE rowid = ?", (rowid,)).fetchall()
                except sqlite3.DatabaseError:
                    continue
        empty = 0 if rows else empty + 1
        yield from rows
        low = high


def _statements(script: str) -> list[str]:
    """Split a migration into statements; sqlite3.complete_statement keeps triggers whole."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
