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

`History` is the one interface; its larger parts are plain functions it calls with its
connection and plain values (none of them knows History): `file` (opening, migrating,
salvaging, purging), `tree` (adding messages, versions, branches, forks), `search` and
`export` (Markdown, JSON, the checked import). `rows` holds the row types, their coding,
the errors (re-exported here) and the transaction. `import_file` imports a JSON export,
`import_chats` a file of any format `importers` reads (one chat or thousands), over a
connection of their own, for a worker thread.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Self, cast

from llamachat.history import database, drafts, export, importers, search, tree
from llamachat.history.database import MIGRATIONS, _Corrupt
from llamachat.history.export import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MAX_MESSAGE_CHARS,
    ImportCancelled,
    Imported,
)
from llamachat.history.memories import Memories, MemoryRow
from llamachat.history.projects import ProjectRow, Projects
from llamachat.history.rows import (
    _SESSION_COLUMNS,
    MODES,
    ROLES,
    STATUSES,
    HistoryError,
    HistoryUnavailable,
    MessageRow,
    NewMessage,
    NewSession,
    SearchHit,
    SessionRow,
    _decode,
    _unavailable,
    transaction,
)
from llamachat.history.search import NO_FILTER, SearchFilter
from llamachat.history.tree import TITLE_CHARS

# What callers import from here, several of them defined in the modules History uses.
__all__ = [
    "BUSY_TIMEOUT_S",
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "MAX_MESSAGE_CHARS",
    "MIGRATIONS",
    "MODES",
    "PURGE_AFTER_S",
    "ROLES",
    "STATUSES",
    "TITLE_CHARS",
    "History",
    "HistoryError",
    "HistoryUnavailable",
    "ImportCancelled",
    "ImportIds",
    "Imported",
    "MemoryRow",
    "MessageRow",
    "NewMessage",
    "NewSession",
    "ProjectRow",
    "SearchHit",
    "SessionRow",
    "import_chats",
    "import_file",
]

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 5.0
# Deleted chats older than this are purged when a History opens. Undo is offered for
# seconds; the margin keeps a second llamachat process (`ask --print`) from purging a
# chat the window still offers to restore.
PURGE_AFTER_S = 600.0
# The share of an import's progress that reading the file takes (writing is the rest):
# 200,000 messages of our export read in about a second and are written in about eight;
# another app's export is read, converted and checked in about the time it takes to write.
_READ_SHARE = 0.1
_CONVERT_SHARE = 0.5


def import_file(
    db_path: Path,
    source: Path,
    *,
    max_message_chars: int = MAX_MESSAGE_CHARS,
    on_progress: Callable[[float], None] | None = None,
) -> int:
    """Import the JSON export at `source` into the history at `db_path` as a user's import
    (titled "(imported)", at the top of the list); the new session's id.

    It opens a connection of its own, so it can run on a worker thread while the window's
    History stays on the GUI thread. `on_progress(share done)` is called as it goes; if it
    raises (ImportCancelled), nothing of the import is kept and the exception passes on.
    """
    report = on_progress or (lambda _share: None)
    imported = export.read_import(
        source,
        max_message_chars=max_message_chars,
        on_progress=lambda share: report(share * _READ_SHARE),
    )
    return _write_imports(db_path, [imported], report, _READ_SHARE)[0]


def import_chats(
    db_path: Path,
    source: Path,
    *,
    max_message_chars: int = MAX_MESSAGE_CHARS,
    on_progress: Callable[[float], None] | None = None,
    own_project: bool = True,
) -> ImportIds:
    """Import every chat in `source`, a file of any format `importers.read_chats` reads,
    as import_file does one; the new sessions' ids, the last one at the top of the list.
    Another app's chats go into a project of their own unless `own_project` is False.

    The whole file is checked before anything is written: a mistake anywhere raises
    HistoryError naming it and adds nothing. A chat imported before (the same content,
    still in the history) is not added again: `skipped` lists those chats' ids.
    """
    report = on_progress or (lambda _share: None)
    chats = importers.read_chats(
        source,
        max_message_chars=max_message_chars,
        on_progress=lambda share: report(share * _CONVERT_SHARE),
        own_project=own_project,
    )
    for chat in chats:
        chat.fingerprint = export.fingerprint(chat)
    return _write_imports(db_path, chats, report, _CONVERT_SHARE)


class ImportIds(list[int]):
    """The ids of the chats an import added, newest last, and in `skipped` the ids of
    those of the file that were imported before (and not added again)."""

    def __init__(self, added: Iterable[int] = (), skipped: Iterable[int] = ()) -> None:
        super().__init__(added)
        self.skipped = list(skipped)


def _write_imports(
    db_path: Path, imports: list[Imported], report: Callable[[float], None], read: float
) -> ImportIds:
    """Write checked imports as a user's, in batches reported after the reading's share;
    those whose fingerprint a chat in the history has are skipped."""
    try:
        conn = database.connect(Path(db_path), BUSY_TIMEOUT_S)
    except _Corrupt as exc:
        raise HistoryError(
            f"cannot import into the history database {db_path}: it is damaged ({exc}); "
            "restart llamachat to set it aside"
        ) from None
    try:
        try:
            there = export.already_imported(conn, [i.fingerprint for i in imports if i.fingerprint])
        except sqlite3.Error as exc:
            raise _unavailable(Path(db_path), exc, "read") from None
        new = [imported for imported in imports if imported.fingerprint not in there]
        total = max(sum(len(imported.messages) for imported in new), 1)
        added = export.add_imports(
            conn,
            Path(db_path),
            new,
            mark=True,
            on_batch=lambda done: report(read + (1 - read) * done / total),
        )
        return ImportIds(added, [there[i.fingerprint] for i in imports if i.fingerprint in there])
    finally:
        conn.close()


def _live(
    mode: str | None, project: int | None | Literal["any"], matching: SearchFilter
) -> tuple[str, tuple]:
    """The WHERE clause (and its values) of the live sessions of `mode` in `project` that
    `matching` keeps."""
    where, params = "deleted_at IS NULL", cast(tuple, ())
    if mode:
        where, params = where + " AND mode = ?", (mode,)
    if project is None:
        where += " AND project_id IS NULL"
    elif project != "any":
        where, params = where + " AND project_id = ?", (*params, project)
    kept, kept_params = matching.sql("sessions")
    return where + kept, (*params, *kept_params)


class History:
    """The conversation store: sessions, messages, search, export and import."""

    def __init__(self, path: Path | str) -> None:
        # Each session's active path as last read, by session: (leaf id, rows). Any write
        # empties it, but the two a reply makes (a message added at the end of the path,
        # a message's text saved) bring the path up to date instead, so the next request
        # and its count do not read a long chat back from the disk each time. Another
        # process's commit (PRAGMA data_version) empties it too.
        self._paths: dict[int, tuple[int, list[MessageRow]]] = {}
        self._data_version: int | None = None
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
        self.projects = Projects(self._transaction, self._reading)  # groups of chats
        # A memory's write touches no chat: the chats' paths as last read stay valid (a
        # request marks its memories used, and the next one must not read the chat again).
        self.memories = Memories(lambda: transaction(self._conn, self.path), self._reading)
        try:
            self._conn = database.connect(self.path, BUSY_TIMEOUT_S)
        except _Corrupt as exc:
            self.recovered_from = database.move_aside(self.path)
            log.warning(
                "history %s is damaged (%s); moved to %s", self.path, exc, self.recovered_from
            )
            self._conn = database.connect(self.path, BUSY_TIMEOUT_S)
            with self._transaction() as conn:
                self.salvaged = database.salvage(conn, self.recovered_from)
        # A chat deleted in an earlier run can no longer be undone (the undo offer lives
        # only as long as the window that made it): it goes for good now.
        self.purge_deleted(older_than=PURGE_AFTER_S)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._paths.clear()
        with transaction(self._conn, self.path) as conn:
            yield conn

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for a helper's reads; SQLite's failures become HistoryUnavailable."""
        try:
            yield self._conn
        except sqlite3.Error as exc:
            raise _unavailable(self.path, exc, "read") from None

    def _write(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        self._paths.clear()
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise _unavailable(self.path, exc, "save to") from None

    def _read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise _unavailable(self.path, exc, "read") from None

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
        project_id: int | None = None,
    ) -> int:
        """Start a session (in project `project_id`, when given) and return its id."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        now = time.time()
        cursor = self._write(
            "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom, created_at,"
            " updated_at, project_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (mode, title, model, prompt_name, prompt_custom, now, now, project_id),
        )
        return int(cursor.lastrowid)  # type: ignore[arg-type]

    def get_session(self, session_id: int) -> SessionRow | None:
        """The session with this id (deleted ones too), or None."""
        rows = self._read(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return cast(SessionRow, _decode(rows[0])) if rows else None

    def list_sessions(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        mode: str | None = None,
        project: int | None | Literal["any"] = "any",
        matching: SearchFilter = NO_FILTER,
    ) -> list[SessionRow]:
        """One page of live sessions, pinned ones first, then most recently updated first;
        `project`: only that project's (None: only those in none); only those `matching` keeps."""
        where, params = _live(mode, project, matching)
        rows = self._read(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {where}"
            " ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [cast(SessionRow, _decode(row)) for row in rows]

    def count_sessions(
        self,
        *,
        mode: str | None = None,
        project: int | None | Literal["any"] = "any",
        matching: SearchFilter = NO_FILTER,
    ) -> int:
        """How many live (not deleted) sessions there are (of `mode`, in `project`, kept by
        `matching`)."""
        where, params = _live(mode, project, matching)
        return int(self._read(f"SELECT count(*) FROM sessions WHERE {where}", params)[0][0])

    def rename_session(self, session_id: int, title: str) -> None:
        """Set a session's title."""
        self._write("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

    def set_pinned(self, session_id: int, pinned: bool) -> None:
        """Pin a session to the top of the list, or unpin it."""
        self._write("UPDATE sessions SET pinned = ? WHERE id = ?", (int(pinned), session_id))

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

    def session_params(self, session_id: int) -> dict[str, Any]:
        """The request parameters the session overrides ({} when none)."""
        rows = self._read("SELECT params FROM session_params WHERE session_id = ?", (session_id,))
        try:
            value = json.loads(rows[0]["params"]) if rows else {}
        except ValueError:
            log.warning("session %s has unreadable parameters; using none", session_id)
            return {}
        return value if isinstance(value, dict) else {}

    def set_session_params(self, session_id: int, values: dict[str, Any]) -> None:
        """Record the request parameters the session overrides (replacing the earlier ones)."""
        self._write(
            "INSERT INTO session_params (session_id, params) VALUES (?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET params = excluded.params",
            (session_id, json.dumps(values)),
        )

    def draft(self, session_id: int | None) -> str:
        """The text typed in a chat and not sent yet ('' when none; None: the new chat)."""
        return drafts.read(self._conn, self.path, session_id)

    def set_draft(self, session_id: int | None, text: str) -> None:
        """Keep `text` as the chat's unsent draft (None: the new chat); '' forgets it."""
        # Not through _write: a draft changes no path, so the cached paths stay.
        drafts.write(self._conn, self.path, session_id, text)

    def drafted(self) -> set[int]:
        """The chats that hold a draft not sent yet."""
        return drafts.drafted(self._conn, self.path)

    def mark_opened(self, session_id: int | None) -> None:
        """Remember that the chat was opened now (`last_opened`; None: the new chat)."""
        if session_id is None:
            drafts.forget_opened(self._conn, self.path)
        else:
            drafts.mark_opened(self._conn, self.path, session_id)

    def last_opened(self, mode: str = "chat") -> int | None:
        """The live chat of `mode` opened last (None: none was ever opened)."""
        return drafts.last_opened(self._conn, self.path, mode)

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
            purged = database.purge(conn, where, params)
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
        cached = self._paths.get(session_id)
        message_id = self._insert_message(
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
        if cached is not None:
            leaf, path = cached
            with self._reading() as conn:
                row = tree.message(conn, message_id)
            if row["parent_id"] == leaf:
                # The new active leaf ends the path it was added to.
                self._paths[session_id] = (message_id, [*path, row])
        return message_id

    def _insert_message(
        self, session_id: int, message: NewMessage, parent: int | None | Literal["active"]
    ) -> int:
        with self._transaction() as conn:
            return tree.insert_message(conn, session_id, message, parent)

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
        holding = [
            (session_id, path, index)
            for session_id, (_leaf, path) in self._paths.items()
            for index in range(len(path) - 1, -1, -1)
            if path[index]["id"] == message_id
        ]
        self._write(
            f"UPDATE messages SET {assignments} WHERE id = ?", (*changes.values(), message_id)
        )
        for session_id, path, index in holding:
            with self._reading() as conn:
                path[index] = tree.message(conn, message_id)
            self._paths[session_id] = (path[-1]["id"], path)

    def messages(self, session_id: int) -> list[MessageRow]:
        """The messages on a session's active path, first question first."""
        rows = self._read(
            "SELECT coalesce(active_leaf, (SELECT max(id) FROM messages WHERE session_id = ?))"
            " FROM sessions WHERE id = ?",
            (session_id, session_id),
        )
        if not rows or rows[0][0] is None:
            return []
        leaf = rows[0][0]
        version = self._read("PRAGMA data_version")[0][0]
        if version != self._data_version:
            self._data_version = version
            self._paths.clear()
        cached = self._paths.get(session_id)
        if cached is None or cached[0] != leaf:
            with self._reading() as conn:
                cached = self._paths[session_id] = (leaf, tree.path_to(conn, session_id, leaf))
        # Copies: what a caller does with its rows never reaches the next caller's.
        return [cast(MessageRow, {**row, "versions": list(row["versions"])}) for row in cached[1]]

    def message_count(self, session_id: int) -> int:
        """How many messages a session holds, on every branch."""
        rows = self._read("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,))
        return int(rows[0][0])

    def select_version(self, session_id: int, message_id: int) -> list[MessageRow]:
        """Make the path through `message_id` the active one; its messages.

        Below `message_id` the path follows the newest reply at each step, so switching
        to a version shows it with everything that followed it.
        """
        with self._transaction() as conn:
            return tree.select_version(conn, session_id, message_id)

    def add_branch(self, session_id: int, messages: list[NewMessage]) -> list[int]:
        """Add `messages` in one transaction as a new branch from the root, the active path
        from now on (a compacted chat: the original path stays another version); their ids."""
        for message in messages:
            if message["role"] not in ROLES or message["status"] not in STATUSES:
                raise ValueError(f"not a message History stores: {message['role']!r}")
        with self._transaction() as conn:
            return tree.insert_branch(conn, session_id, messages)

    def delete_branch(self, message_id: int) -> None:
        """Delete a message and every message that follows it, on all branches (a failed
        reply that a retry replaces). The active path then ends at its parent."""
        with self._transaction() as conn:
            tree.delete_branch(conn, message_id)

    def fork(self, session_id: int, message_id: int) -> int:
        """A new chat holding the active path up to `message_id`, with the session's
        model, prompt, skills and parameters; its id."""
        source, path = self._require(session_id), self.messages(session_id)
        with self._transaction() as conn:
            return tree.fork(conn, session_id, source, path, message_id)

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, *, limit: int = 50, matching: SearchFilter = NO_FILTER
    ) -> list[SearchHit]:
        """Live sessions matching every word of `query`, with a snippet of the best message;
        only those `matching` keeps (a project, a model, a time of last update).

        Sessions whose title holds every word come first (newest first; their snippet
        is '' when no message matches), then those with a message matching every word
        as a prefix, best first.
        """
        with self._reading() as conn:
            return search.search(conn, query, limit=limit, matching=matching)

    def models(self) -> list[str]:
        """The models the live chats were set to or that wrote a message, by name."""
        with self._reading() as conn:
            return search.models(conn)

    # ------------------------------------------------------------------ export / import

    def export_markdown(self, session_id: int) -> str:
        """The session as a Markdown document a person can read."""
        return export.export_markdown(self._require(session_id), self.messages(session_id))

    def export_json(self, session_id: int) -> dict[str, Any]:
        """The session as a versioned JSON-ready dict that import_json reads back: every
        message of every branch, each with an "id" and its "parent", and the "active" leaf."""
        source, params = self._require(session_id), self.session_params(session_id)
        with self._reading() as conn:
            return export.export_json(conn, source, params)

    def import_json(self, data: dict[str, Any]) -> int:
        """Add a session exported by export_json (either version), under a new id; its id.

        Nothing is imported unless all of it can be: a file with a mistake raises
        HistoryError naming the field.
        """
        self._paths.clear()
        return export.add_import(self._conn, self.path, export.validate_import(data))

    def _require(self, session_id: int) -> SessionRow:
        session = self.get_session(session_id)
        if session is None:
            raise HistoryError(f"no session {session_id} in the history")
        return session
