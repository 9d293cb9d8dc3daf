"""Sessions as files: a Markdown document to read, a versioned JSON export and its import."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, cast

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
    _decode,
    _message_row,
    _stored,
)

if TYPE_CHECKING:
    from llamachat.history.store import History

EXPORT_FORMAT = "llamachat-session"
# 1: one list of messages, a single path. 2: every message has an "id" and a "parent"
# (null for a first question) and the session names its "active" leaf: the whole tree.
EXPORT_VERSION = 2


def export_markdown(history: History, session_id: int) -> str:
    """The session as a Markdown document a person can read."""
    session = history._require(session_id)
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(session["created_at"]))
    facts = [session["mode"], stamp] + ([session["model"]] if session["model"] else [])
    parts = [f"# {session['title'] or 'Untitled'}", "*" + " · ".join(facts) + "*"]
    headers = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}
    for message in history.messages(session_id):
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


def export_json(history: History, session_id: int) -> dict[str, Any]:
    """The session as a versioned JSON-ready dict that import_json reads back: every
    message of every branch, each with an "id" and its "parent", and the "active" leaf."""
    session: dict[str, Any] = {k: v for k, v in history._require(session_id).items() if k != "id"}
    rows = history._read(
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
    active = history._read("SELECT active_leaf FROM sessions WHERE id = ?", (session_id,))
    session["active"] = local.get(active[0][0]) if active and active[0][0] else None
    session["params"] = history.session_params(session_id)
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": session,
        "messages": messages,
    }


def import_json(history: History, data: dict[str, Any]) -> int:
    """Add a session exported by export_json (either version), under a new id; its id.

    Nothing is imported unless all of it can be: a file with a mistake raises
    HistoryError naming the field.
    """
    session, messages, parents, active = _validate_import(data)
    params = data["session"].get("params") or {}
    if not isinstance(params, dict):
        raise HistoryError("cannot import: session.params must be an object")
    with history._transaction() as conn:
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
        if params:
            conn.execute(
                "INSERT INTO session_params (session_id, params) VALUES (?, ?)",
                (session_id, json.dumps(params)),
            )
    return session_id


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
