"""Sessions as files: a Markdown document to read, a versioned JSON export, and its import.

An import is read and checked whole before anything is written (`read_import` from a
file, `validate_import` from parsed JSON; `importers` reads other apps' exports into the
same `Imported`): every field's type, finite numbers and times, how deep free-form values
nest, the parameters against `params.PARAMS` (and the chat's own `context_overflow` and
memory switch, `_CHAT_KEYS`), and from a file the size of each message. A mistake raises HistoryError naming the field. `add_imports`
then writes one or many, at once or in batches that a callback can stop (nothing is
kept then). `write_file` writes an export to a file whole or not at all. A chat's
export carries the memories it kept (`memories`), and its import brings them back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import sqlite3
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from llamachat import compact, outside
from llamachat import params as params_module
from llamachat.history import database, memories, projects
from llamachat.history.rows import (
    _INSERT_MESSAGE,
    _MESSAGE_COLUMNS,
    _MESSAGE_FIELDS,
    _SESSION_FIELDS,
    MODES,
    ROLES,
    STATUSES,
    HistoryError,
    MessageRow,
    NewMessage,
    NewSession,
    SessionRow,
    _decode,
    _message_row,
    _stored,
    transaction,
)

log = logging.getLogger(__name__)

EXPORT_FORMAT = "llamachat-session"
# 1: one list of messages, a single path. 2: every message has an "id" and a "parent"
# (null for a first question) and the session names its "active" leaf: the whole tree.
EXPORT_VERSION = 2
# A message larger than this in the file is refused, not cut: two of the largest images
# the composer attaches (20 MB each, in base64) fit, a runaway 100 MB text does not.
MAX_MESSAGE_CHARS = 64_000_000
# Free-form values (tool calls, attachments, figures) nest no deeper than this.
MAX_DEPTH = 32
# Messages written per transaction by a batched import: a few tens of milliseconds,
# so the window's own saves wait no longer than that.
IMPORT_BATCH = 1000
MAX_PROJECT_NAME = 200
# The largest file an import reads: a heavy user's ChatGPT export is a few hundred MB.
MAX_IMPORT_BYTES = 512 * 1024 * 1024
# An imported title is cut here: a title is a line in the list, and one of 20 MB stalled
# the window each time the list was drawn.
MAX_TITLE_CHARS = 500
# Times must be seconds from 1970 up to the end of year 9999 (what time.localtime shows).
_LAST_TIME = 253402300799.0
_SPACE = re.compile(r"[ \t\n\r]*")


class ImportCancelled(Exception):
    """An import stopped on request (raised by its progress callback); nothing was kept."""


@dataclass
class Imported:
    """A checked import: the session, its parameters, its messages, each message's parent
    (an index into the messages, None for a first question), the active leaf's index and
    the name of its project ('' for none; made when this history has none of that name)."""

    session: NewSession
    params: dict[str, Any]
    messages: list[NewMessage]
    parents: list[int | None]
    active: int | None
    project: str = ""
    fingerprint: str = ""
    """A digest of the chat's content, kept with a user's import (`fingerprint`)."""
    memories: list[dict[str, Any]] = field(default_factory=list)
    """The memories the chat kept (`memories`): text, pinned, author, in_project,
    created_at, and `message`, the index of the message it came from (None: none)."""


def fingerprint(imported: Imported) -> str:
    """A digest of what a chat of a file holds (its title, its messages and their tree),
    the same each time the file is read: a chat imported again is known by it."""
    digest = hashlib.sha256(imported.session["title"].encode())
    for message, parent in zip(imported.messages, imported.parents, strict=True):
        digest.update(
            json.dumps(
                [message["role"], message["content"], message["reasoning"], parent],
                ensure_ascii=False,
            ).encode()
        )
    return digest.hexdigest()


def already_imported(conn: sqlite3.Connection, fingerprints: Sequence[str]) -> dict[str, int]:
    """Of `fingerprints`, those of chats imported before and still in the history (not
    deleted), with the session of each."""
    found: dict[str, int] = {}
    unique = list(dict.fromkeys(fingerprints))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        rows = conn.execute(
            "SELECT i.fingerprint, i.session_id FROM imported i JOIN sessions s"
            " ON s.id = i.session_id WHERE s.deleted_at IS NULL AND i.fingerprint IN"
            f" ({', '.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        found.update((str(row[0]), int(row[1])) for row in rows)
    return found


def export_markdown(session: SessionRow, messages: list[MessageRow]) -> str:
    """A session and the messages of its active path as a Markdown document a person can read."""
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(session["created_at"]))
    facts = [session["mode"], stamp] + ([session["model"]] if session["model"] else [])
    parts = [f"# {session['title'] or 'Untitled'}", "*" + " · ".join(facts) + "*"]
    headers = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}
    for message in messages:
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


def export_path_json(session: SessionRow, messages: list[MessageRow]) -> dict[str, Any]:
    """A session with the messages of one path (given, not read) as a version-1 export
    that validate_import reads back: what is on screen when History cannot be read from."""
    return {
        "format": EXPORT_FORMAT,
        "version": 1,
        "session": {key: session[key] for key in _SESSION_FIELDS},  # type: ignore[literal-required]
        "messages": [_stored(message) for message in messages],
    }


def export_json(
    conn: sqlite3.Connection, source: SessionRow, params: dict[str, Any]
) -> dict[str, Any]:
    """The session `source` with its `params` as a versioned JSON-ready dict that
    validate_import reads back: every message of every branch, each with an "id" and
    its "parent", and the "active" leaf."""
    session_id = source["id"]
    # Pinning is where a chat sits in this history's list, not part of the chat; its
    # project goes by name, which means something in another history too.
    session: dict[str, Any] = {
        k: v for k, v in source.items() if k not in ("id", "pinned", "project_id")
    }
    project = projects.get(conn, source["project_id"]) if source["project_id"] else None
    if project is not None:
        session["project"] = project["name"]
    rows = conn.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()
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
    active = conn.execute("SELECT active_leaf FROM sessions WHERE id = ?", (session_id,)).fetchall()
    session["active"] = local.get(active[0][0]) if active and active[0][0] else None
    session["params"] = params
    out = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": session,
        "messages": messages,
    }
    kept = conn.execute(
        "SELECT text, pinned, author, project_id, message_id, created_at FROM memories"
        " WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()
    if kept:
        # A project's memory goes with the chat's project (by name, as the chat does).
        out["memories"] = [
            {
                "text": row["text"],
                "pinned": bool(row["pinned"]),
                "author": row["author"],
                "in_project": row["project_id"] is not None,
                "message": local.get(row["message_id"]),
                "created_at": row["created_at"],
            }
            for row in kept
        ]
    return out


def write_file(path: Path, text: str) -> None:
    """Write `text` to `path` (UTF-8) whole or not at all: a full disk leaves the file as
    it was (none, or the old one), never empty or cut. Raises HistoryError."""
    path = Path(path)
    temp: Path | None = None
    try:
        # Beside the file, so the rename stays on one file system and is one step.
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        temp = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file private: a file replaced keeps its mode, a new one
        # gets the usual rw-r--r--.
        os.chmod(temp, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644)
        os.replace(temp, path)
        temp = None
    except OSError as exc:
        raise HistoryError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if temp is not None:
            temp.unlink(missing_ok=True)


def add_import(
    conn: sqlite3.Connection,
    path: Path,
    imported: Imported,
    *,
    mark: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Write a checked import into the history `conn` (the file at `path`) under a new id;
    its id. `add_imports` of this one import."""
    return add_imports(conn, path, [imported], mark=mark, on_batch=on_batch)[0]


def add_imports(
    conn: sqlite3.Connection,
    path: Path,
    imports: Sequence[Imported],
    *,
    mark: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> list[int]:
    """Write checked imports into the history `conn` (the file at `path`), each under a
    new id, in their order; their ids.

    `mark` makes them a user's import: "(imported)" ends each title and they go to the
    top of the list, the last one first (their messages keep their dates). Without
    `on_batch` it is one transaction. With it, sessions and messages go in IMPORT_BATCH
    at a time, across sessions, all of them hidden until the last, and `on_batch(messages
    written)` after each; if that raises, what was written is removed and the exception
    passes on.
    """
    writer = _Writer(conn, imports, mark=mark, hidden=on_batch is not None)
    if on_batch is None:
        with transaction(conn, path):
            writer.write(None)
        return writer.session_ids
    try:
        while True:
            with transaction(conn, path):
                if writer.write(IMPORT_BATCH):
                    _each_chunk(conn, "UPDATE sessions SET deleted_at = NULL", writer.session_ids)
                    return writer.session_ids
            on_batch(writer.written)
    except BaseException:
        _remove_unfinished(conn, path, writer.session_ids, writer.projects)
        raise


def _remove_unfinished(
    conn: sqlite3.Connection, path: Path, session_ids: list[int], made: list[int]
) -> None:
    """Remove the sessions of an import that did not finish and the projects it `made`, or
    have the next open purge the sessions at once when they cannot be removed now (a full
    disk; the projects then stay, empty)."""
    try:
        with transaction(conn, path):
            for chunk in _chunks(session_ids):
                # Its memories go with it: an import stopped halfway keeps nothing.
                marks = ", ".join("?" * len(chunk))
                conn.execute(f"DELETE FROM memories WHERE session_id IN ({marks})", chunk)
                database.purge(conn, f"id IN ({', '.join('?' * len(chunk))})", tuple(chunk))
            for project_id in made:
                projects.delete(conn, project_id)
        return
    except HistoryError as exc:
        log.warning("an unfinished import could not be removed now: %s", exc)
    try:
        # Deleted "in 1970": older than any purge's limit. A write of a few pages, where
        # the removal writes each message's: it fits in the room the failed batch left.
        with transaction(conn, path):
            _each_chunk(conn, "UPDATE sessions SET deleted_at = 0", session_ids)
    except HistoryError as exc:
        # Still hidden as deleted: a start PURGE_AFTER_S after the import purges them.
        log.warning("an unfinished import stays hidden until a later start: %s", exc)


def _each_chunk(conn: sqlite3.Connection, statement: str, ids: list[int]) -> None:
    """Run `statement` WHERE id IN each chunk of `ids`."""
    for chunk in _chunks(ids):
        conn.execute(f"{statement} WHERE id IN ({', '.join('?' * len(chunk))})", chunk)


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    # An SQLite older than 3.32 takes at most 999 values in one statement.
    for start in range(0, len(ids), 500):
        yield ids[start : start + 500]


class _Writer:
    """Where a batched import is: the sessions written, the messages of the one under way."""

    def __init__(
        self, conn: sqlite3.Connection, imports: Sequence[Imported], *, mark: bool, hidden: bool
    ) -> None:
        self.conn, self.imports, self.mark, self.hidden = conn, imports, mark, hidden
        self.session_ids: list[int] = []
        self.projects: list[int] = []
        """The projects the import made (removed with its sessions when it stops)."""
        self.written = 0
        """Messages written so far, in every session."""
        self._ids: list[int] = []  # the message ids of the session under way

    def write(self, budget: int | None) -> bool:
        """Write up to `budget` rows (a session counts as one; None: all); whether all are."""
        while True:
            if self._between_sessions():
                if len(self.session_ids) == len(self.imports):
                    return True
                if budget is not None and budget <= 0:
                    return False
                imported = self.imports[len(self.session_ids)]
                self.session_ids.append(
                    _add_session(
                        self.conn, imported, mark=self.mark, hidden=self.hidden, made=self.projects
                    )
                )
                self._ids = []
                budget = None if budget is None else budget - 1
            imported = self.imports[len(self.session_ids) - 1]
            left = len(imported.messages) - len(self._ids)
            count = left if budget is None else min(left, budget)
            _add_messages(self.conn, self.session_ids[-1], imported, self._ids, count)
            self.written += count
            if budget is not None:
                budget -= count
                if count < left:
                    return False

    def _between_sessions(self) -> bool:
        """Whether no session is under way (none begun, or the last one has all its messages)."""
        if not self.session_ids:
            return True
        return len(self._ids) == len(self.imports[len(self.session_ids) - 1].messages)


def _add_session(
    conn: sqlite3.Connection, imported: Imported, *, mark: bool, hidden: bool, made: list[int]
) -> int:
    """Write an import's session (in its project, made if need be and added to `made`); its id."""
    session = imported.session
    now = time.time()
    title = f"{session['title'] or 'Untitled'} (imported)" if mark else session["title"]
    cursor = conn.execute(
        "INSERT INTO sessions (mode, title, model, prompt_name, prompt_custom, skills,"
        " created_at, updated_at, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session["mode"],
            title,
            session["model"],
            session["prompt_name"],
            session["prompt_custom"],
            json.dumps(session["skills"]),
            session["created_at"],
            now if mark else session["updated_at"],
            now if hidden else None,
        ),
    )
    session_id = int(cursor.lastrowid)  # type: ignore[arg-type]
    if imported.fingerprint:
        conn.execute(
            "INSERT INTO imported (session_id, fingerprint) VALUES (?, ?)",
            (session_id, imported.fingerprint),
        )
    if imported.project:
        project = projects.by_name(conn, imported.project)
        if project is not None:
            project_id = project["id"]
        else:
            project_id = projects.create(conn, imported.project)
            # Folded: an import's thousand chats do not push the list's own off the screen.
            projects.update(conn, project_id, {"collapsed": True})
            made.append(project_id)
        conn.execute("UPDATE sessions SET project_id = ? WHERE id = ?", (project_id, session_id))
    if imported.params:
        conn.execute(
            "INSERT INTO session_params (session_id, params) VALUES (?, ?)",
            (session_id, json.dumps(imported.params)),
        )
    return session_id


def _add_messages(
    conn: sqlite3.Connection, session_id: int, imported: Imported, ids: list[int], count: int
) -> None:
    """Write the next `count` messages after the `ids` written (extending them); after the
    last, set the active leaf."""
    start = len(ids)
    for message, parent in zip(
        imported.messages[start : start + count],
        imported.parents[start : start + count],
        strict=True,
    ):
        row = _message_row(session_id, None if parent is None else ids[parent], message)
        ids.append(int(conn.execute(_INSERT_MESSAGE, row).lastrowid))  # type: ignore[arg-type]
    if len(ids) == len(imported.messages):
        active = imported.active
        leaf = ids[active] if active is not None else (ids[-1] if ids else None)
        conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (leaf, session_id))
        _add_memories(conn, session_id, imported, ids)


def _add_memories(
    conn: sqlite3.Connection, session_id: int, imported: Imported, ids: list[int]
) -> None:
    """The chat's memories, in its project when they were in the exported chat's."""
    if not imported.memories:
        return
    project_id = conn.execute(
        "SELECT project_id FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()[0]
    for memory in imported.memories:
        index = memory["message"]
        memories.add(
            conn,
            memory["text"],
            project_id=project_id if memory["in_project"] else None,
            session_id=session_id,
            message_id=ids[index] if index is not None else None,
            author=memory["author"],
            pinned=memory["pinned"],
            at=memory["created_at"],
        )


def read_import(
    source: Path,
    *,
    max_message_chars: int = MAX_MESSAGE_CHARS,
    on_progress: Callable[[float], None] | None = None,
) -> Imported:
    """The checked import of the JSON export at `source`; `on_progress(share read)` is
    called as messages are read (raising there stops the reading).

    Each message is decoded on its own, so one too large is refused by its number and
    size, and one nested too deeply is named instead of exhausting the stack.
    """
    text = read_text(source)
    try:
        data = parse_object(text, max_message_chars, on_progress or (lambda _share: None))
    except json.JSONDecodeError as exc:
        raise HistoryError(
            f"cannot import {outside.shown(source)}: it is not JSON ({exc})"
        ) from None
    del text  # the file's text is not needed while the messages are checked
    return validate_import(data)


def read_text(source: Path) -> str:
    """The text of the file to import at `source`, through the gate: HistoryError unless it
    is a regular file of UTF-8 text of at most MAX_IMPORT_BYTES."""
    try:
        return outside.read_text(source, MAX_IMPORT_BYTES)
    except outside.Refused as exc:
        raise HistoryError(f"cannot import {exc}") from None


def parse_object(text: str, max_chars: int, on_progress: Callable[[float], None]) -> dict[str, Any]:
    """The top-level JSON object in `text`, its "messages" decoded one by one: each at most
    `max_chars` long, `on_progress(share of the text read)` after each (JSONDecodeError
    if it is not JSON, HistoryError naming what is too deep or too long)."""
    decoder = json.JSONDecoder()

    def value(at: int, where: str) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(text, at)
        except RecursionError:
            raise HistoryError(
                f"cannot import: {where} nests lists or objects too deeply"
            ) from None

    def expect(at: int, char: str) -> int:
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
        if not text.startswith(char, at):
            raise json.JSONDecodeError(f"Expecting '{char}'", text, at)
        return _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]

    if not text.startswith("{", _SPACE.match(text).end()):  # type: ignore[union-attr]
        raise HistoryError(f"cannot import: not a llamachat session (no format '{EXPORT_FORMAT}')")
    data: dict[str, Any] = {}
    at = expect(0, "{")
    while not text.startswith("}", at):
        if data:
            at = expect(at, ",")
        if not text.startswith('"', at):
            raise json.JSONDecodeError("Expecting property name in double quotes", text, at)
        key, at = decoder.raw_decode(text, at)
        at = expect(at, ":")
        if key != "messages" or not text.startswith("[", at):
            data[key], at = value(at, key)
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            continue
        messages: list[Any] = []
        at = expect(at, "[")
        while not text.startswith("]", at):
            if messages:
                at = expect(at, ",")
            where = f"messages[{len(messages) + 1}]"
            start = at
            item, at = value(at, where)
            if at - start > max_chars:
                raise HistoryError(
                    f"cannot import: {where} is {at - start:,} characters long; the limit "
                    f"is {max_chars:,} per message"
                )
            messages.append(item)
            on_progress(at / len(text))
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            if at >= len(text):
                raise json.JSONDecodeError("Expecting ']'", text, at)
        data[key] = messages
        at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
        if at >= len(text):
            raise json.JSONDecodeError("Expecting '}'", text, at)
    if text[at + 1 :].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, at + 1)
    return data


def _free_form(value: object, where: str) -> None:
    """Refuse a free-form value nested deeper than MAX_DEPTH or holding NaN or infinity."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise HistoryError(f"cannot import: {where} holds a number that is not finite ({item})")
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise HistoryError(
                    f"cannot import: {where} nests lists or objects more than {MAX_DEPTH} deep"
                )
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)


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
        if isinstance(value, (int, float)):
            check_time(value, f"{where}.{key}")
        if isinstance(value, (dict, list)):
            _free_form(value, f"{where}.{key}")
        out[key] = value
    return out


def check_time(value: object, where: str) -> float:
    """`value` as a time in seconds since 1970; HistoryError naming `where` if it is not one."""
    # NaN fails the range too: SQLite would store it as NULL.
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= _LAST_TIME
    ):
        raise HistoryError(
            f"cannot import: {where} must be a time in seconds since 1970, got {value}"
        )
    return float(value)


# A chat's own settings kept with its request parameters, never sent (not `params.PARAMS`
# names): its context_overflow policy and its memory switch (saved only when off).
_CHAT_KEYS: dict[str, tuple[object, ...]] = {
    compact.CHAT_KEY: compact.POLICIES,
    memories.SWITCH_KEY: (False,),
}


def _chat_keys_problem(params: dict[str, Any]) -> str | None:
    for key, allowed in _CHAT_KEYS.items():
        value = params.get(key)
        if key in params and not any(type(value) is type(a) and value == a for a in allowed):
            choices = ", ".join(json.dumps(a) for a in allowed)
            return f"session.params.{key} must be one of {choices}, got {value!r}"
    return None


def validate_import(data: object) -> Imported:
    """The checked import of an export of either version, already parsed from JSON."""
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
    if len(session["title"]) > MAX_TITLE_CHARS:
        session["title"] = session["title"][: MAX_TITLE_CHARS - 1] + "…"
    if session["mode"] not in MODES:
        raise HistoryError(f"cannot import: session.mode must be one of {', '.join(MODES)}")
    if not all(isinstance(name, str) for name in session["skills"]):
        raise HistoryError("cannot import: session.skills must be a list of names")
    params = data["session"].get("params") or {}
    if not isinstance(params, dict):
        raise HistoryError("cannot import: session.params must be an object")
    wrong = _chat_keys_problem(params) or params_module.problem(
        {k: v for k, v in params.items() if k not in _CHAT_KEYS}, "session.params"
    )
    if wrong:
        raise HistoryError(f"cannot import: {wrong}")
    project = data["session"].get("project") or ""
    if not isinstance(project, str) or len(project) > MAX_PROJECT_NAME:
        raise HistoryError(
            f"cannot import: session.project must be a name of at most {MAX_PROJECT_NAME} "
            "characters"
        )
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
    return Imported(
        cast(NewSession, session),
        params,
        messages,
        parents,
        active,
        " ".join(project.split()),
        memories=_imported_memories(data.get("memories"), places, len(messages), now),
    )


def _imported_memories(
    raw: object, places: dict[int, int], count: int, now: float
) -> list[dict[str, Any]]:
    """The checked `memories` of an export (none when absent); `message` becomes the
    index of the message in the import (a version 1 file numbers them from 1)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise HistoryError("cannot import: memories must be a list")
    out = []
    for number, item in enumerate(raw, start=1):
        where = f"memories[{number}]"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise HistoryError(f"cannot import: {where} must be an object with a text")
        try:
            text = memories.checked_text(item["text"])
        except HistoryError as exc:
            raise HistoryError(f"cannot import: {where}: {exc}") from None
        author = item.get("author", "user")
        if author not in memories.AUTHORS:
            raise HistoryError(
                f"cannot import: {where}.author must be one of {', '.join(memories.AUTHORS)}"
            )
        flags = {key: item.get(key, False) for key in ("pinned", "in_project")}
        if not all(isinstance(value, bool) for value in flags.values()):
            raise HistoryError(
                f"cannot import: {where}.pinned and .in_project must be true or false"
            )
        message = item.get("message")
        index: int | None = None
        if message is not None:
            wrong = HistoryError(f"cannot import: {where}.message must be null or a message's id")
            if not _is_int(message):
                raise wrong
            index = places.get(message) if places else message - 1
            if index is None or not 0 <= index < count:
                raise wrong
        created = check_time(item.get("created_at", now), f"{where}.created_at")
        out.append(
            {"text": text, "author": author, **flags, "message": index, "created_at": created}
        )
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
