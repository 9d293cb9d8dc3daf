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

`History` is the one interface: it owns the connection (`connection`: opening it, a corrupt
file salvaged, and lending it out for reads and writes) and hands it, with plain values, to
the modules that do the work (none of them knows History): `database` (opening, migrating,
salvaging, purging), `sessions` (a chat's own row: its settings, listing, deletion),
`active_paths` (the active paths of the chats read, kept up to date by a reply's writes),
`tree` (adding messages, versions, branches, forks), `drafts`, `projects` (`History.projects`),
`memories` (`History.memories`), `picks` (`History.picks`, blind comparisons' winners), `search` and `export` (Markdown, JSON, the checked import). `rows` holds the row types, their
coding, the errors (re-exported here) and the transaction. `file_import` imports a file
(`import_file`: a JSON export, `import_chats`: any format `importers` reads) over a
connection of its own, for a worker thread; its names are re-exported here too.

A new family of rows (a table of its own) gets a module of plain functions taking the
connection, and a line here: `projects.py` and `Projects` are the example.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Self

from llamachat.history import database, drafts, export, search, sessions, streams, tree
from llamachat.history.active_paths import ActivePaths
from llamachat.history.connection import Connection
from llamachat.history.database import BUSY_TIMEOUT_S, MIGRATIONS
from llamachat.history.export import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    MAX_MESSAGE_CHARS,
    ImportCancelled,
    Imported,
)
from llamachat.history.file_import import ImportIds, import_chats, import_file
from llamachat.history.memories import Memories, MemoryRow
from llamachat.history.picks import Picks
from llamachat.history.projects import ProjectRow, Projects
from llamachat.history.rows import (
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
    transaction,
)
from llamachat.history.search import NO_FILTER, SearchFilter
from llamachat.history.sessions import Project
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

# Deleted chats older than this are purged when a History opens. Undo is offered for
# seconds; the margin keeps a second llamachat process (`ask --print`) from purging a
# chat the window still offers to restore.
PURGE_AFTER_S = 600.0


class History:
    """The conversation store: sessions, messages, search, export and import."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser()
        # Any write may change a kept path, so they are forgotten first.
        self._db = Connection(self.path, on_write=lambda: self._paths.clear())
        self._conn = self._db.conn
        self.recovered_from = self._db.recovered_from
        self.salvaged = self._db.salvaged
        self.projects = Projects(self._db.transaction, self._db.reading)  # groups of chats
        # A memory's write touches no chat: the chats' paths as last read stay valid (a
        # request marks its memories used, and the next one must not read the chat again).
        self.memories = Memories(lambda: transaction(self._conn, self.path), self._db.reading)
        # Where streaming replies stand in the server's copy of their streams.
        self.reply_streams = streams.ReplyStreams(self._db.write, self._db.read)
        # A comparison's pick touches no chat either (`picks`).
        self.picks = Picks(lambda: transaction(self._conn, self.path), self._db.reading)
        self._paths = ActivePaths(self._conn, self.path)
        # A chat deleted in an earlier run can no longer be undone (the undo offer lives
        # only as long as the window that made it): it goes for good now.
        self.purge_deleted(older_than=PURGE_AFTER_S)

    def _write(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        return self._db.write(sql, params)

    def _read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        return self._db.read(sql, params)

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards."""
        self._db.close()

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
        with self._db.writing() as conn:
            return sessions.create(
                conn,
                mode,
                model,
                title=title,
                prompt_name=prompt_name,
                prompt_custom=prompt_custom,
                project_id=project_id,
            )

    def get_session(self, session_id: int) -> SessionRow | None:
        """The session with this id (deleted ones too), or None."""
        with self._db.reading() as conn:
            return sessions.get(conn, session_id)

    def list_sessions(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        mode: str | None = None,
        project: Project = "any",
        matching: SearchFilter = NO_FILTER,
    ) -> list[SessionRow]:
        """One page of live sessions, pinned ones first, then most recently updated first;
        `project`: only that project's (None: only those in none); only those `matching` keeps."""
        with self._db.reading() as conn:
            return sessions.listed(
                conn, limit=limit, offset=offset, mode=mode, project=project, matching=matching
            )

    def count_sessions(
        self,
        *,
        mode: str | None = None,
        project: Project = "any",
        matching: SearchFilter = NO_FILTER,
    ) -> int:
        """How many live (not deleted) sessions there are (of `mode`, in `project`, kept by
        `matching`)."""
        with self._db.reading() as conn:
            return sessions.count(conn, mode=mode, project=project, matching=matching)

    def rename_session(self, session_id: int, title: str) -> None:
        """Set a session's title."""
        with self._db.writing() as conn:
            sessions.update(conn, session_id, title=title)

    def set_pinned(self, session_id: int, pinned: bool) -> None:
        """Pin a session to the top of the list, or unpin it."""
        with self._db.writing() as conn:
            sessions.update(conn, session_id, pinned=int(pinned))

    def set_model(self, session_id: int, model: str) -> None:
        """Record the model a session uses."""
        with self._db.writing() as conn:
            sessions.update(conn, session_id, model=model)

    def set_prompt(self, session_id: int, prompt_name: str, prompt_custom: str = "") -> None:
        """Record the session's prompt preset name, or its custom prompt text."""
        with self._db.writing() as conn:
            sessions.update(conn, session_id, prompt_name=prompt_name, prompt_custom=prompt_custom)

    def set_mode(self, session_id: int, mode: str) -> None:
        """Turn a session into a "chat" or a "oneshot" one (a quick question continued in chat)."""
        with self._db.writing() as conn:
            sessions.update(conn, session_id, mode=mode)

    def set_skills(self, session_id: int, names: list[str]) -> None:
        """Record which skills the session has loaded."""
        with self._db.writing() as conn:
            sessions.set_skills(conn, session_id, names)

    def session_params(self, session_id: int) -> dict[str, Any]:
        """The request parameters the session overrides ({} when none)."""
        with self._db.reading() as conn:
            return sessions.params(conn, session_id)

    def set_session_params(self, session_id: int, values: dict[str, Any]) -> None:
        """Record the request parameters the session overrides (replacing the earlier ones)."""
        with self._db.writing() as conn:
            sessions.set_params(conn, session_id, values)

    def draft(self, session_id: int | None) -> str:
        """The text typed in a chat and not sent yet ('' when none; None: the new chat)."""
        return drafts.read(self._conn, self.path, session_id)

    def set_draft(self, session_id: int | None, text: str) -> None:
        """Keep `text` as the chat's unsent draft (None: the new chat); '' forgets it."""
        # Not through _writing: a draft changes no path, so the kept paths stay.
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
        with self._db.writing() as conn:
            sessions.delete(conn, session_id)

    def undelete_session(self, session_id: int) -> None:
        """Bring back a session hidden by delete_session."""
        with self._db.writing() as conn:
            sessions.undelete(conn, session_id)

    def purge_deleted(
        self, session_ids: Iterable[int] | None = None, *, older_than: float = 0.0
    ) -> int:
        """Remove deleted sessions for good (those in `session_ids`, else every one deleted
        `older_than` seconds ago or more) with their messages and full-text rows; how many."""
        chosen = sessions.deleted(session_ids, older_than)
        if chosen is None:
            return 0
        with self._db.transaction() as conn:
            purged = database.purge(conn, *chosen)
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
        message: NewMessage = {
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
        }
        return self._paths.add(session_id, message, parent)

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
        if changes:
            self._paths.update(message_id, changes)

    def messages(self, session_id: int) -> list[MessageRow]:
        """The messages on a session's active path, first question first."""
        return self._paths.read(session_id)

    def version_models(self, message_id: int) -> list[tuple[int, str]]:
        """A message and each of its versions (siblings), oldest first: (id, model)."""
        rows = self._read(
            "SELECT s.id, s.model FROM messages m JOIN messages s ON s.session_id = m.session_id"
            " AND s.parent_id IS m.parent_id AND s.role = m.role WHERE m.id = ? ORDER BY s.id",
            (message_id,),
        )
        return [(int(row[0]), str(row[1] or "")) for row in rows]

    def message_count(self, session_id: int) -> int:
        """How many messages a session holds, on every branch."""
        rows = self._read("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,))
        return int(rows[0][0])

    def select_version(self, session_id: int, message_id: int) -> list[MessageRow]:
        """Make the path through `message_id` the active one; its messages.

        Below `message_id` the path follows the newest reply at each step, so switching
        to a version shows it with everything that followed it.
        """
        with self._db.transaction() as conn:
            return tree.select_version(conn, session_id, message_id)

    def add_branch(self, session_id: int, messages: list[NewMessage]) -> list[int]:
        """Add `messages` in one transaction as a new branch from the root, the active path
        from now on (a compacted chat: the original path stays another version); their ids."""
        for message in messages:
            if message["role"] not in ROLES or message["status"] not in STATUSES:
                raise ValueError(f"not a message History stores: {message['role']!r}")
        with self._db.transaction() as conn:
            return tree.insert_branch(conn, session_id, messages)

    def delete_branch(self, message_id: int) -> None:
        """Delete a message and every message that follows it, on all branches (a failed
        reply that a retry replaces). The active path then ends at its parent."""
        with self._db.transaction() as conn:
            tree.delete_branch(conn, message_id)

    def fork(self, session_id: int, message_id: int) -> int:
        """A new chat holding the active path up to `message_id`, with the session's
        model, prompt, skills and parameters; its id."""
        source, path = self._require(session_id), self.messages(session_id)
        with self._db.transaction() as conn:
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
        with self._db.reading() as conn:
            return search.search(conn, query, limit=limit, matching=matching)

    def models(self) -> list[str]:
        """The models the live chats were set to or that wrote a message, by name."""
        with self._db.reading() as conn:
            return search.models(conn)

    # ------------------------------------------------------------------ export / import

    def export_markdown(self, session_id: int) -> str:
        """The session as a Markdown document a person can read."""
        return export.export_markdown(self._require(session_id), self.messages(session_id))

    def export_json(self, session_id: int) -> dict[str, Any]:
        """The session as a versioned JSON-ready dict that import_json reads back: every
        message of every branch, each with an "id" and its "parent", and the "active" leaf."""
        source, params = self._require(session_id), self.session_params(session_id)
        with self._db.reading() as conn:
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
