"""The conversation history: sessions and their messages in one SQLite file.

`History` owns one sqlite3 connection, used only by the thread that made it (the GUI
thread). Every write commits at once, so a crash loses nothing that was saved; the
UI saves a streaming reply at most once a second, which bounds the loss to a second.

Errors, split as qutebrowser's misc/sql.py does:

    HistoryError            everything the user should read (a folder that cannot be
    │                       written, a database from a newer llamachat or of another
    │                       program, a bad import)
    └── HistoryUnavailable  SQLite failed for the environment's sake (BUSY, READONLY,
                            IOERR, CORRUPT, FULL, CANTOPEN, NOTADB); `code` is SQLite's
                            error name and the message says what to do

Any other sqlite3.Error is a bug in llamachat and is raised as it is, so it reaches the
crash handler with its traceback. A corrupt file is not an error: it is moved aside to
`<name>.corrupt-<YYYYmmdd-HHMMSS>`, every row that can still be read is copied into a
fresh database (`History.salvaged` counts the messages), and `History.recovered_from`
says where the old file went. An SQLite file of another program is never taken over.

The schema is versioned with `PRAGMA user_version`; `MIGRATIONS` is append-only, the
N-th entry moves a database from version N to N+1. Databases written before versioning
(the seed's schema, user_version 0 with tables present) first gain any missing column.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Self, TypedDict, cast

log = logging.getLogger(__name__)

MODES = ("chat", "oneshot")
ROLES = ("user", "assistant", "system", "tool")
STATUSES = ("complete", "streaming", "stopped", "error")
EXPORT_FORMAT = "llamachat-session"
# 1: one list of messages, a single path. 2: every message has an "id" and a "parent"
# (null for a first question) and the session names its "active" leaf: the whole tree.
EXPORT_VERSION = 2
BUSY_TIMEOUT_S = 5.0
# Deleted chats older than this are purged when a History opens. Undo is offered for
# seconds; the margin keeps a second llamachat process (`ask --print`) from purging a
# chat the window still offers to restore.
PURGE_AFTER_S = 600.0

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

_SESSION_COLUMNS = (
    "id, mode, title, model, prompt_name, prompt_custom, skills, created_at, updated_at"
)
_MESSAGE_COLUMNS = (
    "id, session_id, parent_id, role, content, reasoning, tool_calls, attachments, model, "
    "status, error, usage, timings, created_at"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, parent_id, role, content, reasoning, tool_calls,"
    " attachments, model, status, error, usage, timings, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# The path from a root to a leaf (bound twice: the leaf, its session), as message ids.
_PATH_TO = (
    "WITH RECURSIVE path(id) AS (SELECT ? UNION ALL"
    " SELECT m.parent_id FROM messages m JOIN path ON m.id = path.id"
    " WHERE m.parent_id IS NOT NULL)"
    " SELECT {columns} FROM messages WHERE session_id = ? AND id IN (SELECT id FROM path)"
    " ORDER BY id"
)
_JSON_LISTS = ("skills", "tool_calls", "attachments")
_JSON_DICTS = ("usage", "timings")
_CORRUPT = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
# Salvage reads rowids in blocks this size, and gives up on a table after this many
# blocks in a row came back empty (a damaged page can hide where the table ends).
_SALVAGE_BLOCK = 256
_SALVAGE_EMPTY_BLOCKS = 1024
TITLE_CHARS = 80


class NewSession(TypedDict):
    """A session's stored fields, as export_json writes them and import_json reads them."""

    mode: str
    title: str
    model: str
    prompt_name: str
    prompt_custom: str
    skills: list[str]
    created_at: float
    updated_at: float


class SessionRow(NewSession):
    """A session as History returns it."""

    id: int


class SearchHit(SessionRow):
    """A session found by History.search, with a snippet of its best matching message."""

    snippet: str


class NewMessage(TypedDict):
    """A message's stored fields, before it has an id (add_message, import_json)."""

    role: str
    content: str
    reasoning: str
    tool_calls: list[Any]
    attachments: list[dict[str, Any]]
    model: str
    status: str
    error: str
    usage: dict[str, Any]
    timings: dict[str, Any]
    created_at: float


class MessageRow(NewMessage):
    """A message as History returns it, on its session's active path.

    `versions` are the ids of the message and its siblings (the other replies to the
    same question, the other edits of the same message), oldest first; [] when it has
    none.
    """

    id: int
    session_id: int
    parent_id: int | None
    versions: list[int]


class HistoryError(Exception):
    """The history cannot be opened, written or imported; the message says why."""


class HistoryUnavailable(HistoryError):
    """SQLite failed for a reason outside llamachat (disk full, locked, read-only...)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


# The environment's faults, by SQLite primary result code, with what the user can do.
_ADVICE = {
    sqlite3.SQLITE_BUSY: "another program is using it; close that program and try again",
    sqlite3.SQLITE_READONLY: "the file or its folder cannot be written; make them writable",
    sqlite3.SQLITE_IOERR: "the disk failed to read or write; check the disk and try again",
    sqlite3.SQLITE_CORRUPT: "the file is damaged; restart llamachat to set it aside and "
    "recover what can be read",
    sqlite3.SQLITE_FULL: "the disk is full; free some space and try again",
    sqlite3.SQLITE_CANTOPEN: "check that its folder exists and is writable",
    sqlite3.SQLITE_NOTADB: "the file is not a database; move it away and restart llamachat",
}


class _Corrupt(Exception):
    """Internal: the file is damaged and must be moved aside."""


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    item = dict(row)
    for key, value in item.items():
        if key in _JSON_LISTS or key in _JSON_DICTS:
            empty: list | dict = [] if key in _JSON_LISTS else {}
            try:
                # Most rows hold no tool calls, attachments or figures: skip the parser.
                decoded = json.loads(value) if value and value not in ("[]", "{}") else empty
            except ValueError:
                decoded = empty
            item[key] = decoded if isinstance(decoded, type(empty)) else empty
        elif value is None and key not in ("id", "session_id", "parent_id"):
            item[key] = ""  # the seed's schema allowed NULL titles and models
        elif key in ("created_at", "updated_at"):
            item[key] = float(value)
    return item


def _fts_query(text: str) -> str:
    """Match every word the user typed, as a literal prefix: FTS syntax is never parsed."""
    return " ".join(
        '"' + term.replace('"', '""') + '"*' for term in text.replace("\x00", " ").split()
    )


def _like_escape(text: str) -> str:
    """`text` matched literally by LIKE ... ESCAPE '\\' (its % and _ are not wildcards)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _message_row(session_id: int, parent_id: int | None, message: NewMessage) -> tuple:
    """The values of _INSERT_MESSAGE for a message dict, lists and dicts as JSON."""
    return (
        session_id,
        parent_id,
        message["role"],
        message["content"],
        message["reasoning"],
        json.dumps(message["tool_calls"]),
        json.dumps(message["attachments"]),
        message["model"],
        message["status"],
        message["error"],
        json.dumps(message["usage"]),
        json.dumps(message["timings"]),
        message["created_at"],
    )


def _stored(message: MessageRow) -> NewMessage:
    """A message's stored fields, without its place in a session."""
    return cast(NewMessage, {key: message[key] for key in _MESSAGE_FIELDS})  # type: ignore[literal-required]


def _title_from(content: str) -> str:
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    return first if len(first) <= TITLE_CHARS else first[: TITLE_CHARS - 1].rstrip() + "…"


class History:
    """The conversation store: sessions, messages, search, export and import."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser()
        self.recovered_from: Path | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(
                f"cannot create the folder for the history database {self.path}: "
                f"{exc.strerror or exc}"
            ) from None
        self.salvaged = 0
        try:
            self._conn = self._open()
        except _Corrupt as exc:
            self.recovered_from = self._move_aside()
            log.warning(
                "history %s is damaged (%s); moved to %s", self.path, exc, self.recovered_from
            )
            self._conn = self._open()
            self.salvaged = self._salvage(self.recovered_from)
        # A chat deleted in an earlier run can no longer be undone (the undo offer lives
        # only as long as the window that made it): it goes for good now.
        self.purge_deleted(older_than=PURGE_AFTER_S)

    def _open(self) -> sqlite3.Connection:
        conn = None
        try:
            # Autocommit: every statement outside an explicit transaction is saved at once.
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.row_factory = sqlite3.Row
            self._check_size(conn)
            # Damaged pages past the header would only fail later, at the first read or
            # write that touches them, leaving a chat that can neither load nor save; a
            # quick_check (under 0.1 s for a 170 MB file) finds them while moving the
            # file aside is still possible.
            problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                raise _Corrupt(problem)
            # Before anything writes: not even WAL mode is forced on another program's file.
            self._refuse_foreign(conn)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            # A purged chat must not linger in free pages of the file.
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._migrate(conn)
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
            raise self._unavailable(exc, "open") from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise

    def _unavailable(self, exc: sqlite3.Error, doing: str) -> HistoryUnavailable:
        """The HistoryUnavailable for an environment's fault; any other error is re-raised."""
        advice = _ADVICE.get(_primary_code(exc))  # type: ignore[arg-type]
        if advice is None:
            # A bug (bad SQL, a closed connection, a broken constraint): it must reach the
            # crash handler with its traceback, not pass for a full disk.
            raise exc
        return HistoryUnavailable(
            f"cannot {doing} the history database {self.path}: {exc}; {advice}",
            code=getattr(exc, "sqlite_errorname", "") or "",
        )

    def _refuse_foreign(self, conn: sqlite3.Connection) -> None:
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
                f"{self.path} is not a llamachat history: it is an SQLite database of another "
                f"program (tables {shown}), left as it is. Move it, or set history_path in "
                "the config to another file."
            )

    def _salvage(self, source: Path) -> int:
        """Copy every session and message still readable in the damaged `source`; messages copied.

        SQLite's `.recover` is not in Python's sqlite3, so rows are read in rowid blocks,
        and a block that fails is read row by row: a damaged page costs its own rows only.
        """
        try:
            old = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True)
            names = {
                table: [row[1] for row in old.execute(f"PRAGMA table_info({table})")]
                for table in ("sessions", "messages")
            }
        except sqlite3.Error as exc:
            log.warning("nothing could be read from the damaged history %s: %s", source, exc)
            return 0
        sessions: set[int] = set()
        orphans: int | None = None
        messages = 0
        try:
            with self._transaction() as conn:
                known = _LEGACY_COLUMNS["sessions"]
                columns = [c for c in names["sessions"] if c in known or c in ("id", "active_leaf")]
                for row in _readable_rows(old, "sessions", columns) if "id" in columns else ():
                    try:
                        conn.execute(
                            f"INSERT INTO sessions ({', '.join(columns)}) VALUES "
                            f"({', '.join('?' * len(columns))})",
                            row,
                        )
                    except sqlite3.IntegrityError:
                        continue
                    sessions.add(row[columns.index("id")])
                known = _LEGACY_COLUMNS["messages"]
                columns = [
                    c
                    for c in names["messages"]
                    if c in known or c in ("id", "session_id", "parent_id")
                ]
                if "session_id" not in columns or "role" not in names["messages"]:
                    columns = []
                else:
                    columns.append("role")
                for row in _readable_rows(old, "messages", columns) if columns else ():
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
                        conn.execute(
                            f"INSERT INTO messages ({', '.join(columns)}) VALUES "
                            f"({', '.join('?' * len(columns))})",
                            values,
                        )
                    except sqlite3.IntegrityError:
                        continue
                    messages += 1
                # A damaged page cost some messages their parent: they follow the one
                # written before them (a file from before trees gets each session as a path).
                relink = _REPAIR if "parent_id" in names["messages"] else _CHAIN
                for statement in _statements(relink):
                    conn.execute(statement)
        finally:
            old.close()
        log.warning("salvaged %d sessions and %d messages from %s", len(sessions), messages, source)
        return messages

    def _check_size(self, conn: sqlite3.Connection) -> None:
        """Catch a truncated file, which SQLite would only notice when reading the lost pages."""
        wal = self.path.with_name(self.path.name + "-wal")
        if not self.path.exists() or (wal.exists() and wal.stat().st_size > 0):
            return  # with a WAL pending, the header's page count is not yet in the main file
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        if pages * page_size > self.path.stat().st_size:
            raise _Corrupt(f"file is shorter than its {pages} pages")

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        count = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{count}")
            count += 1
        try:
            self.path.rename(target)
            # A stale WAL or shared-memory file would be replayed into the fresh database.
            for suffix in ("-wal", "-shm"):
                side = self.path.with_name(self.path.name + suffix)
                if side.exists():
                    side.rename(target.with_name(target.name + suffix))
        except OSError as exc:
            raise HistoryError(
                f"the history database {self.path} is damaged and could not be moved "
                f"aside: {exc.strerror or exc}"
            ) from None
        return target

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise HistoryError(
                f"the history database {self.path} was written by a newer llamachat "
                f"(schema {version}; this version knows {len(MIGRATIONS)})"
            )
        for number in range(version, len(MIGRATIONS)):
            conn.execute("BEGIN IMMEDIATE")
            try:
                if number == 0:
                    self._adopt_legacy(conn)
                for statement in _statements(MIGRATIONS[number]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            log.info("history %s migrated to schema %d", self.path, number + 1)

    @staticmethod
    def _adopt_legacy(conn: sqlite3.Connection) -> None:
        """Give tables made before versioning the columns migration 1 expects."""
        for table, columns in _LEGACY_COLUMNS.items():
            present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if not present:
                continue
            for name, definition in columns.items():
                if name not in present:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "save to") from None

    def _write(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "save to") from None

    def _read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._unavailable(exc, "read") from None

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards."""
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions

    def create_session(
        self,
        mode: str,
        model: str = "",
        *,
        title: str = "",
        prompt_name: str = "",
        prompt_custom: str = "",
    ) -> int:
        """Start a session and return its id."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        now = time.time()
        cursor = self._write(
            "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (mode, title, model, prompt_name, prompt_custom, now, now),
        )
        return int(cursor.lastrowid)  # type: ignore[arg-type]

    def get_session(self, session_id: int) -> SessionRow | None:
        """The session with this id (deleted ones too), or None."""
        rows = self._read(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return cast(SessionRow, _decode(rows[0])) if rows else None

    def list_sessions(
        self, *, limit: int = 100, offset: int = 0, mode: str | None = None
    ) -> list[SessionRow]:
        """One page of live sessions, most recently updated first."""
        where = "deleted_at IS NULL" + (" AND mode = ?" if mode else "")
        params = ((mode,) if mode else ()) + (limit, offset)
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where}"
            " ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            params,
        )
        return [cast(SessionRow, _decode(row)) for row in rows]

    def count_sessions(self) -> int:
        """How many live (not deleted) sessions there are."""
        return int(self._read("SELECT count(*) FROM sessions WHERE deleted_at IS NULL")[0][0])

    def rename_session(self, session_id: int, title: str) -> None:
        """Set a session's title."""
        self._write("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

    def set_model(self, session_id: int, model: str) -> None:
        """Record the model a session uses."""
        self._write("UPDATE sessions SET model = ? WHERE id = ?", (model, session_id))

    def set_prompt(self, session_id: int, prompt_name: str, prompt_custom: str = "") -> None:
        """Record the session's prompt preset name, or its custom prompt text."""
        self._write(
            "UPDATE sessions SET prompt_name = ?, prompt_custom = ? WHERE id = ?",
            (prompt_name, prompt_custom, session_id),
        )

    def set_mode(self, session_id: int, mode: str) -> None:
        """Turn a session into a "chat" or a "oneshot" one (a quick question continued in chat)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._write("UPDATE sessions SET mode = ? WHERE id = ?", (mode, session_id))

    def set_skills(self, session_id: int, names: list[str]) -> None:
        """Record which skills the session has loaded."""
        self._write(
            "UPDATE sessions SET skills = ? WHERE id = ?", (json.dumps(list(names)), session_id)
        )

    def delete_session(self, session_id: int) -> None:
        """Hide a session from the list and search; undelete_session brings it back."""
        self._write(
            "UPDATE sessions SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL",
            (time.time(), session_id),
        )

    def undelete_session(self, session_id: int) -> None:
        """Bring back a session hidden by delete_session."""
        self._write("UPDATE sessions SET deleted_at = NULL WHERE id = ?", (session_id,))

    def purge_deleted(
        self, session_ids: Iterable[int] | None = None, *, older_than: float = 0.0
    ) -> int:
        """Remove deleted sessions for good (those in `session_ids`, else every one deleted
        `older_than` seconds ago or more) with their messages and full-text rows; how many."""
        where = "deleted_at IS NOT NULL"
        params: tuple = ()
        if session_ids is not None:
            ids = [int(i) for i in session_ids]
            if not ids:
                return 0
            where += f" AND id IN ({', '.join('?' * len(ids))})"
            params = tuple(ids)
        else:
            where += " AND deleted_at <= ?"
            params = (time.time() - older_than,)
        with self._transaction() as conn:
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
        if purged:
            # The freed pages are zeroed (secure_delete), but the WAL still holds their
            # old versions until it is checkpointed and cut back.
            self._write("PRAGMA wal_checkpoint(TRUNCATE)")
            log.info("purged %d deleted sessions from %s", purged, self.path)
        return purged

    # ------------------------------------------------------------------ messages

    def add_message(
        self,
        session_id: int,
        role: str,
        content: str = "",
        *,
        reasoning: str = "",
        tool_calls: list[Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
        model: str = "",
        status: str = "complete",
        error: str = "",
        usage: dict | None = None,
        timings: dict | None = None,
        parent: int | None | Literal["active"] = "active",
    ) -> int:
        """Add a message and make it the session's active leaf; its id.

        It follows `parent` (by default the active leaf, so a session grows as one path;
        None: a first question). A sibling of an existing message is a new version of it.
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        return self._insert_message(
            session_id,
            {
                "role": role,
                "content": content,
                "reasoning": reasoning,
                "tool_calls": tool_calls or [],
                "attachments": attachments or [],
                "model": model,
                "status": status,
                "error": error,
                "usage": usage or {},
                "timings": timings or {},
                "created_at": time.time(),
            },
            parent,
        )

    def _insert_message(
        self, session_id: int, message: NewMessage, parent: int | None | Literal["active"]
    ) -> int:
        with self._transaction() as conn:
            session = conn.execute(
                "SELECT title, active_leaf FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if session is None:
                raise HistoryError(f"no session {session_id} in the history")
            parent_id = session["active_leaf"] if parent == "active" else parent
            if (
                parent_id is not None
                and conn.execute(
                    "SELECT 1 FROM messages WHERE id = ? AND session_id = ?",
                    (parent_id, session_id),
                ).fetchone()
                is None
            ):
                raise HistoryError(f"no message {parent_id} in session {session_id}")
            cursor = conn.execute(_INSERT_MESSAGE, _message_row(session_id, parent_id, message))
            message_id = int(cursor.lastrowid)  # type: ignore[arg-type]
            conn.execute(
                "UPDATE sessions SET updated_at = max(updated_at, ?), active_leaf = ? WHERE id = ?",
                (message["created_at"], message_id, session_id),
            )
            if message["role"] == "user":
                self._follow_first_question(conn, session_id, session["title"], message_id)
            return message_id

    @staticmethod
    def _follow_first_question(
        conn: sqlite3.Connection, session_id: int, title: str, message_id: int
    ) -> None:
        """Name the chat after its first question, or after a new version of it unless the
        user named the chat (a title taken from an earlier version is automatic too)."""
        row = conn.execute(
            "SELECT parent_id, content FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if title:
            earlier = conn.execute(
                "SELECT content FROM messages WHERE session_id = ? AND role = 'user' AND id != ?"
                " AND parent_id IS ?",
                (session_id, message_id, row["parent_id"]),
            ).fetchall()
            if all(_title_from(other[0]) != title for other in earlier):
                return
            asked_before = conn.execute(
                "WITH RECURSIVE up(id) AS (SELECT ? UNION ALL SELECT m.parent_id FROM messages m"
                " JOIN up ON m.id = up.id WHERE m.parent_id IS NOT NULL)"
                " SELECT 1 FROM messages WHERE id IN (SELECT id FROM up) AND role = 'user'",
                (row["parent_id"],),
            ).fetchone()
            if asked_before is not None:
                return
        conn.execute(
            "UPDATE sessions SET title = ? WHERE id = ?", (_title_from(row["content"]), session_id)
        )

    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        reasoning: str | None = None,
        status: str | None = None,
        error: str | None = None,
        usage: dict | None = None,
        timings: dict | None = None,
        tool_calls: list | None = None,
    ) -> None:
        """Change the given fields of a message and commit at once."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
        changes = {
            "content": content,
            "reasoning": reasoning,
            "status": status,
            "error": error,
            "usage": None if usage is None else json.dumps(usage),
            "timings": None if timings is None else json.dumps(timings),
            "tool_calls": None if tool_calls is None else json.dumps(tool_calls),
        }
        changes = {key: value for key, value in changes.items() if value is not None}
        if not changes:
            return
        assignments = ", ".join(f"{key} = ?" for key in changes)
        self._write(
            f"UPDATE messages SET {assignments} WHERE id = ?", (*changes.values(), message_id)
        )

    def messages(self, session_id: int) -> list[MessageRow]:
        """The messages on a session's active path, first question first."""
        rows = self._read(
            "SELECT coalesce(active_leaf, (SELECT max(id) FROM messages WHERE session_id = ?))"
            " FROM sessions WHERE id = ?",
            (session_id, session_id),
        )
        if not rows or rows[0][0] is None:
            return []
        return self._path(session_id, rows[0][0])

    def _path(self, session_id: int, leaf: int) -> list[MessageRow]:
        """The messages from a root down to `leaf`, each with its versions."""
        rows = self._read(_PATH_TO.format(columns=_MESSAGE_COLUMNS), (leaf, session_id))
        # Only the few parents with more than one child are looked at twice.
        siblings: dict[int | None, list[int]] = {}
        for row in self._read(
            "SELECT parent_id, id FROM messages WHERE session_id = ? AND coalesce(parent_id, 0)"
            " IN (SELECT coalesce(parent_id, 0) FROM messages WHERE session_id = ?"
            " GROUP BY coalesce(parent_id, 0) HAVING count(*) > 1) ORDER BY id",
            (session_id, session_id),
        ):
            siblings.setdefault(row[0], []).append(row[1])
        path = []
        for row in rows:
            message = cast(MessageRow, _decode(row))
            message["versions"] = siblings.get(message["parent_id"], [])
            path.append(message)
        return path

    def message_count(self, session_id: int) -> int:
        """How many messages a session holds, on every branch."""
        rows = self._read("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,))
        return int(rows[0][0])

    def select_version(self, session_id: int, message_id: int) -> list[MessageRow]:
        """Make the path through `message_id` the active one; its messages.

        Below `message_id` the path follows the newest reply at each step, so switching
        to a version shows it with everything that followed it.
        """
        rows = self._read(
            "WITH RECURSIVE down(id) AS (SELECT id FROM messages WHERE id = ? AND session_id = ?"
            " UNION ALL SELECT (SELECT max(c.id) FROM messages c"
            "  WHERE c.session_id = ? AND c.parent_id = down.id) FROM down"
            " WHERE down.id IS NOT NULL)"
            " SELECT max(id) FROM down",
            (message_id, session_id, session_id),
        )
        leaf = rows[0][0] if rows else None
        if leaf is None:
            raise HistoryError(f"no message {message_id} in session {session_id}")
        self._write("UPDATE sessions SET active_leaf = ? WHERE id = ?", (leaf, session_id))
        return self._path(session_id, leaf)

    def delete_branch(self, message_id: int) -> None:
        """Delete a message and every message that follows it, on all branches (a failed
        reply that a retry replaces). The active path then ends at its parent."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT session_id, parent_id FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            if row is None:
                return
            conn.execute(
                "WITH RECURSIVE branch(id) AS (SELECT ? UNION ALL"
                " SELECT m.id FROM messages m JOIN branch ON m.parent_id = branch.id"
                " WHERE m.session_id = ?)"
                " DELETE FROM messages WHERE id IN (SELECT id FROM branch)",
                (message_id, row["session_id"]),
            )
            conn.execute(
                "UPDATE sessions SET active_leaf = ? WHERE id = ? AND (active_leaf IS NULL"
                " OR active_leaf NOT IN (SELECT id FROM messages WHERE session_id = ?))",
                (row["parent_id"], row["session_id"], row["session_id"]),
            )

    def fork(self, session_id: int, message_id: int) -> int:
        """A new chat holding the active path up to `message_id`, with the session's
        model, prompt and skills; its id."""
        source = self._require(session_id)
        path = self.messages(session_id)
        upto = next((n for n, m in enumerate(path) if m["id"] == message_id), None)
        if upto is None:
            raise HistoryError(f"no message {message_id} on the path of session {session_id}")
        title = f"{source['title'] or 'Untitled'} (fork)"
        now = time.time()
        with self._transaction() as conn:
            new_id = int(
                conn.execute(
                    "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom,"
                    " skills, created_at, updated_at) VALUES ('chat', ?, ?, ?, ?, ?, ?, ?)",
                    (
                        title,
                        source["model"],
                        source["prompt_name"],
                        source["prompt_custom"],
                        json.dumps(source["skills"]),
                        now,
                        now,
                    ),
                ).lastrowid  # type: ignore[arg-type]
            )
            parent_id = None
            for message in path[: upto + 1]:
                row = _message_row(new_id, parent_id, _stored(message))
                parent_id = int(conn.execute(_INSERT_MESSAGE, row).lastrowid)  # type: ignore[arg-type]
            conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (parent_id, new_id))
        return new_id

    # ------------------------------------------------------------------ search

    def search(self, query: str, *, limit: int = 50) -> list[SearchHit]:
        """Live sessions matching every word of `query`, with a snippet of the best message.

        Sessions whose title holds every word come first (newest first; their snippet
        is '' when no message matches), then those with a message matching every word
        as a prefix, best first.
        """
        match = _fts_query(query)
        if not match:
            return []
        words = query.replace("\x00", " ").split()
        like = " AND ".join(["title LIKE ? ESCAPE '\\'"] * len(words))
        titled: list[SearchHit] = [
            {**cast(SessionRow, _decode(row)), "snippet": ""}
            for row in self._read(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE deleted_at IS NULL AND {like}"
                " ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*(f"%{_like_escape(word)}%" for word in words), limit),
            )
        ]
        found = self._search_messages(match, limit)
        snippets = {session["id"]: session["snippet"] for session in found}
        for session in titled:
            session["snippet"] = snippets.pop(session["id"], "")
        return (titled + [s for s in found if s["id"] in snippets])[:limit]

    def _search_messages(self, match: str, limit: int) -> list[SearchHit]:
        """Live sessions with a message matching the FTS `match`, best first, with a snippet."""
        # FTS5 refuses snippet() beside a window function, so the best message per
        # session is chosen first and only those few are given a snippet.
        best = self._read(
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
        )
        if not best:
            return []
        ids = [row["message_id"] for row in best]
        marks = ", ".join("?" * len(ids))
        snippets = {
            row[0]: row[1]
            for row in self._read(
                "SELECT rowid, snippet(messages_fts, -1, '', '', '…', 16) FROM messages_fts"
                f" WHERE messages_fts MATCH ? AND rowid IN ({marks})",
                (match, *ids),
            )
        }
        results: list[SearchHit] = []
        for row in best:
            session = self.get_session(row["session_id"])
            if session is not None:
                results.append({**session, "snippet": snippets.get(row["message_id"], "")})
        return results

    # ------------------------------------------------------------------ export / import

    def export_markdown(self, session_id: int) -> str:
        """The session as a Markdown document a person can read."""
        session = self._require(session_id)
        stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(session["created_at"]))
        facts = [session["mode"], stamp] + ([session["model"]] if session["model"] else [])
        parts = [f"# {session['title'] or 'Untitled'}", "*" + " · ".join(facts) + "*"]
        headers = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}
        for message in self.messages(session_id):
            header = headers.get(message["role"], message["role"])
            if message["role"] == "assistant" and message["model"]:
                header += f" ({message['model']})"
            parts.append(f"## {header}")
            if message["reasoning"]:
                parts.append(
                    f"<details><summary>Reasoning</summary>\n\n{message['reasoning']}\n\n</details>"
                )
            if message["content"]:
                parts.append(message["content"])
            for call in message["tool_calls"]:
                function = call.get("function", {}) if isinstance(call, dict) else {}
                parts.append(
                    f"*Tool call:* `{function.get('name', '?')}` `{function.get('arguments', '')}`"
                )
            for attachment in message["attachments"]:
                name = attachment.get("name") or attachment.get("path") or "attachment"
                parts.append(f"*Attachment:* {name}")
            if message["status"] == "stopped":
                parts.append("*(stopped)*")
            elif message["status"] == "error":
                parts.append(f"*(error: {message['error']})*")
        return "\n\n".join(parts) + "\n"

    def export_json(self, session_id: int) -> dict[str, Any]:
        """The session as a versioned JSON-ready dict that import_json reads back: every
        message of every branch, each with an "id" and its "parent", and the "active" leaf."""
        session: dict[str, Any] = {k: v for k, v in self._require(session_id).items() if k != "id"}
        rows = self._read(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        # Ids in the file count from 1, so they say nothing about the database they came from.
        local: dict[int, int] = {}
        messages = []
        for row in rows:
            message = cast(MessageRow, _decode(row))
            local[message["id"]] = len(local) + 1
            messages.append(
                {
                    "id": local[message["id"]],
                    "parent": local.get(message["parent_id"])
                    if message["parent_id"] is not None
                    else None,
                    **_stored(message),
                }
            )
        active = self._read("SELECT active_leaf FROM sessions WHERE id = ?", (session_id,))
        session["active"] = local.get(active[0][0]) if active and active[0][0] else None
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "session": session,
            "messages": messages,
        }

    def import_json(self, data: dict[str, Any]) -> int:
        """Add a session exported by export_json (either version), under a new id; its id.

        Nothing is imported unless all of it can be: a file with a mistake raises
        HistoryError naming the field.
        """
        session, messages, parents, active = _validate_import(data)
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom, skills,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session["mode"],
                    session["title"],
                    session["model"],
                    session["prompt_name"],
                    session["prompt_custom"],
                    json.dumps(session["skills"]),
                    session["created_at"],
                    session["updated_at"],
                ),
            )
            session_id = int(cursor.lastrowid)  # type: ignore[arg-type]
            ids: list[int] = []
            for message, parent in zip(messages, parents, strict=True):
                row = _message_row(session_id, None if parent is None else ids[parent], message)
                ids.append(int(conn.execute(_INSERT_MESSAGE, row).lastrowid))  # type: ignore[arg-type]
            leaf = ids[active] if active is not None else (ids[-1] if ids else None)
            conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (leaf, session_id))
        return session_id

    def _require(self, session_id: int) -> SessionRow:
        session = self.get_session(session_id)
        if session is None:
            raise HistoryError(f"no session {session_id} in the history")
        return session


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


_SESSION_FIELDS: dict[str, tuple[type | tuple[type, ...], object]] = {
    "mode": (str, "chat"),
    "title": (str, ""),
    "model": (str, ""),
    "prompt_name": (str, ""),
    "prompt_custom": (str, ""),
    "skills": (list, []),
    "created_at": ((int, float), None),
    "updated_at": ((int, float), None),
}
_MESSAGE_FIELDS: dict[str, tuple[type | tuple[type, ...], object]] = {
    "role": (str, None),
    "content": (str, ""),
    "reasoning": (str, ""),
    "tool_calls": (list, []),
    "attachments": (list, []),
    "model": (str, ""),
    "status": (str, "complete"),
    "error": (str, ""),
    "usage": (dict, {}),
    "timings": (dict, {}),
    "created_at": ((int, float), None),
}


def _fields(
    item: object, spec: dict[str, tuple[type | tuple[type, ...], object]], where: str, now: float
) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise HistoryError(f"cannot import: {where} must be an object")
    out: dict[str, Any] = {}
    for key, (kind, default) in spec.items():
        value = item.get(key, default)
        if value is None and key in ("created_at", "updated_at"):
            value = now
        if value is None or not isinstance(value, kind) or isinstance(value, bool):
            raise HistoryError(f"cannot import: {where}.{key} is missing or has the wrong type")
        out[key] = value
    return out


def _validate_import(
    data: object,
) -> tuple[NewSession, list[NewMessage], list[int | None], int | None]:
    """The session, its messages, each message's parent (an index into the messages, None
    for a first question) and the active leaf's index, from an export of either version."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise HistoryError(f"cannot import: not a llamachat session (no format '{EXPORT_FORMAT}')")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise HistoryError("cannot import: the version is missing or not a number")
    if version > EXPORT_VERSION:
        raise HistoryError(
            f"cannot import: the session was exported by a newer llamachat (format version "
            f"{version}; this version reads {EXPORT_VERSION})"
        )
    now = time.time()
    session = _fields(data.get("session"), _SESSION_FIELDS, "session", now)
    if session["mode"] not in MODES:
        raise HistoryError(f"cannot import: session.mode must be one of {', '.join(MODES)}")
    if not all(isinstance(name, str) for name in session["skills"]):
        raise HistoryError("cannot import: session.skills must be a list of names")
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise HistoryError("cannot import: messages must be a list")
    messages = []
    parents: list[int | None] = []
    places: dict[int, int] = {}  # a message's id in the file -> its index
    for number, raw in enumerate(raw_messages, start=1):
        where = f"messages[{number}]"
        message = _fields(raw, _MESSAGE_FIELDS, where, now)
        if message["role"] not in ROLES:
            raise HistoryError(f"cannot import: {where}.role must be one of {', '.join(ROLES)}")
        if message["status"] not in STATUSES:
            raise HistoryError(
                f"cannot import: {where}.status must be one of {', '.join(STATUSES)}"
            )
        if not all(isinstance(a, dict) for a in message["attachments"]):
            raise HistoryError(f"cannot import: {where}.attachments must be a list of objects")
        if version == 1:
            parents.append(number - 2 if number > 1 else None)
        else:
            own, parent = raw.get("id"), raw.get("parent")
            if not _is_int(own) or own in places:
                raise HistoryError(
                    f"cannot import: {where}.id must be a number no other message has"
                )
            if parent is not None and (not _is_int(parent) or parent not in places):
                raise HistoryError(
                    f"cannot import: {where}.parent must be null or the id of an earlier message"
                )
            places[own] = number - 1
            parents.append(None if parent is None else places[parent])
        messages.append(cast(NewMessage, message))
    active: int | None = None
    if version > 1:
        leaf = data["session"].get("active")
        if leaf is not None and (not _is_int(leaf) or leaf not in places):
            raise HistoryError("cannot import: session.active must be null or a message's id")
        active = None if leaf is None else places[leaf]
    return cast(NewSession, session), messages, parents, active


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
