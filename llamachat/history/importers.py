"""Chats from a file of another app, or from our own exports, as checked imports.

`read_chats(source)` tells the file's format from its content, not its name:

- llamachat's JSON export (`export.read_import`), one or a list of them;
- ChatGPT's `conversations.json`: a list of conversations whose `mapping` of nodes (each
  naming its `parent`) is the chat's tree, so a regenerated answer or an edited question
  is another version; `current_node` is the active leaf;
- Open WebUI's chat export: a list of chats whose `chat.history.messages` (each naming
  its `parentId`) are the tree and `currentId` the active leaf;
- llama.cpp web UI's export, `{conv, messages}` or a list of them, each message naming
  its `parent` and the conversation its `currNode` (the Svelte web UI's
  `ExportedConversation` in tools/server/webui/src/lib/types/database.d.ts; the older
  React web UI wrote the same shape with numbered ids and reasoning in <think> tags);
- llamachat's Markdown export (`export.export_markdown`): the path it shows.

Only a conversation's text is kept. A message left out (ChatGPT's root, system and hidden
nodes, the web UI's root) passes its children to its parent. Images and files become a
short placeholder ("[image]", "[file: name]"); reasoning (ChatGPT's "thoughts" before an
answer, Open WebUI's reasoning block, the web UI's `thinking`) becomes the reply's
reasoning. Tool calls and their results (ChatGPT's browsing and code runs, Open WebUI's
and the web UI's tool messages) are left out: the answer that used them is kept.

The chats of another app go into a project of their own, "Imported from ChatGPT" (or
Open WebUI, llama.cpp), made folded when this history has none of that name, so that
thousands of them do not push the person's own chats off the list; `own_project=False`
leaves them in no project. Our own exports keep the project they name.

Every conversation is converted and checked (`export.validate_import`, the times with
`export.check_time`, each message against the size limit) before anything is written.

Errors: HistoryError naming the conversation (its number and title) and the field.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llamachat import outside
from llamachat.history import export
from llamachat.history.export import EXPORT_FORMAT, MAX_MESSAGE_CHARS, Imported
from llamachat.history.rows import MODES, HistoryError
from llamachat.history.tree import _title_from

UNKNOWN = (
    "not a chat export llamachat reads (its own JSON or Markdown export, ChatGPT's "
    "conversations.json, Open WebUI's or llama.cpp web UI's JSON export)"
)
_SPACE = re.compile(r"[ \t\n\r]*")
CHATGPT, OPEN_WEBUI, LLAMA_CPP = (
    "Imported from ChatGPT",
    "Imported from Open WebUI",
    "Imported from llama.cpp",
)
"""The projects other apps' chats go into."""

# A message left out, with its children passed to its parent: None; reasoning for the
# next reply below it: a str; a message: a dict of export's message fields.
_Node = tuple[str | None, dict[str, Any] | str | None]


def read_chats(
    source: Path,
    *,
    max_message_chars: int = MAX_MESSAGE_CHARS,
    on_progress: Callable[[float], None] | None = None,
    own_project: bool = True,
) -> list[Imported]:
    """The checked imports of every chat in the file at `source`, the least recently
    updated first; `on_progress(share read)` as it goes (raising there stops it).
    `own_project`: another app's chats go into its project (`CHATGPT`...)."""
    report = on_progress or (lambda _share: None)
    text = export.read_text(source).removeprefix("\ufeff")
    start = text[_SPACE.match(text).end() :][:1]  # type: ignore[union-attr]
    chats: list[Imported] = []
    if start == "#":
        chats.append(_markdown(text))
    elif start in ("{", "["):
        try:
            if start == "[":
                # Each converted as soon as it is decoded: the decoded conversations are
                # not all alive at once (fewer objects for the cycle collector to visit).
                _parse_list(
                    text,
                    lambda item: chats.append(_convert(item, len(chats) + 1, own_project)),
                    report,
                )
            else:
                data = export.parse_object(text, max_message_chars, report)
                own = data.get("format") == EXPORT_FORMAT
                # Its own export keeps its own messages, as read_import does.
                chats.append(
                    export.validate_import(data) if own else _convert(data, 1, own_project)
                )
        except json.JSONDecodeError as exc:
            raise HistoryError(
                f"cannot import {outside.shown(source)}: it is not JSON ({exc})"
            ) from None
        if not chats:
            raise HistoryError("cannot import: the file holds no conversations")
    else:
        raise HistoryError(f"cannot import {outside.shown(source)}: {UNKNOWN}")
    del text
    for number, chat in enumerate(chats, start=1):
        for place, message in enumerate(chat.messages, start=1):
            size = len(message["content"]) + len(message["reasoning"])
            if size > max_message_chars:
                raise HistoryError(
                    f"cannot import: conversation {number}{_quoted(chat.session['title'])}: "
                    f"message {place} is {size:,} characters long; the limit is "
                    f"{max_message_chars:,} per message"
                )
    report(1.0)
    # Written in this order, the most recently updated ends at the top of the list.
    return sorted(chats, key=lambda chat: chat.session["updated_at"])


def _parse_list(
    text: str, on_item: Callable[[Any], None], on_progress: Callable[[float], None]
) -> None:
    """Decode the top-level JSON list in `text` one item at a time, handing each to `on_item`."""
    decoder = json.JSONDecoder()
    count = 0
    at = _SPACE.match(text, _SPACE.match(text).end() + 1).end()  # type: ignore[union-attr]
    while not text.startswith("]", at):
        if count:
            if not text.startswith(",", at):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
            at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
        try:
            item, at = decoder.raw_decode(text, at)
        except RecursionError:
            raise HistoryError(
                f"cannot import: conversation {count + 1} nests lists or objects too deeply"
            ) from None
        count += 1
        on_item(item)
        on_progress(at / len(text))
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
        if at >= len(text):
            raise json.JSONDecodeError("Expecting ']'", text, at)
    if text[at + 1 :].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, at + 1)


def _convert(item: object, number: int, own_project: bool) -> Imported:
    """The `number`-th conversation of a file, in any format read here, checked; another
    app's in that app's project when `own_project`."""
    found = _format_of(item)
    if found is None or not isinstance(item, dict):
        if number == 1:
            raise HistoryError(f"cannot import: {UNKNOWN}")
        raise HistoryError(
            f"cannot import: conversation {number} is not a conversation of a format "
            "llamachat reads"
        )
    convert, project = found
    try:
        imported = convert(item)
    except HistoryError as exc:
        what = str(exc).removeprefix("cannot import: ")
        raise HistoryError(
            f"cannot import: conversation {number}{_quoted(_title_of(item))}: {what}"
        ) from None
    if own_project:
        imported.project = imported.project or project
    return imported


def _format_of(item: object) -> tuple[Callable[[dict[str, Any]], Imported], str] | None:
    """How to read `item`, and the project its app's chats go into ('' for our own)."""
    if not isinstance(item, dict):
        return None
    if item.get("format") == EXPORT_FORMAT:
        return export.validate_import, ""
    if "mapping" in item:
        return _chatgpt, CHATGPT
    if isinstance(item.get("chat"), dict):
        return _open_webui, OPEN_WEBUI
    if isinstance(item.get("conv"), dict) and "messages" in item:
        return _llama_cpp, LLAMA_CPP
    return None


def _title_of(item: dict[str, Any]) -> object:
    for holder, key in (
        (item, "title"),
        (item.get("conv"), "name"),
        (item.get("session"), "title"),
    ):
        if isinstance(holder, dict) and isinstance(holder.get(key), str):
            return holder[key]
    return ""


def _quoted(title: object) -> str:
    """' "title"' for an error message (shortened), '' for none."""
    if not isinstance(title, str) or not title.strip():
        return ""
    title = " ".join(title.split())
    return f' "{title if len(title) <= 60 else title[:59] + "…"}"'


# ---------------------------------------------------------------- checks of fields


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HistoryError(f"cannot import: {where} must be an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise HistoryError(f"cannot import: {where} must be a list")
    return value


def _text(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise HistoryError(f"cannot import: {where} must be text")
    return value


def _key(value: object, where: str) -> str | None:
    """A node's id (text, or a number in the older web UI), None for none."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise HistoryError(f"cannot import: {where} must be null or a message's id")


def _role(value: object, where: str) -> str:
    """A message's role: text, and present (a message without one is not left out unsaid)."""
    if value is None or value == "":
        raise HistoryError(f"cannot import: {where} is missing")
    return _text(value, where)


def _keys(value: object, where: str) -> list[str | None]:
    """A node's list of children's ids ([] for none)."""
    return [_key(item, f"{where}[{n}]") for n, item in enumerate(_list(value, where), start=1)]


def _check_links(
    nodes: dict[str, _Node],
    children: dict[str, list[str | None]],
    active: str | None,
    field: Callable[[str], str],
    names: tuple[str, str, str],
) -> None:
    """Refuse a tree whose links do not hold: a parent, a child or the active message that
    is not in the conversation, or children that do not name their node as their parent
    (a cycle among the children). `names`: the parent's, the children's and the active
    message's fields."""
    parent_name, children_name, active_name = names
    for key, (parent, _value) in nodes.items():
        if parent is not None and parent not in nodes:
            raise HistoryError(
                f"cannot import: {field(key)}.{parent_name} is {parent!r}, which is not a "
                "message of the conversation"
            )
    for key, kids in children.items():
        for kid in kids:
            if kid is None or kid not in nodes:
                raise HistoryError(
                    f"cannot import: {field(key)}.{children_name} names {kid!r}, which is not "
                    "a message of the conversation"
                )
            if nodes[kid][0] != key:
                raise HistoryError(
                    f"cannot import: {field(key)}.{children_name} names {kid!r}, whose "
                    f"{parent_name} is {nodes[kid][0]!r}"
                )
    if active is not None and active not in nodes:
        raise HistoryError(
            f"cannot import: {active_name} {active!r} is not a message of the conversation"
        )


def _time(value: object, where: str, default: float, *, per_second: int = 1) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HistoryError(f"cannot import: {where} must be a time, got {value!r}")
    if per_second == 1:
        return export.check_time(value, where)
    try:
        return export.check_time(value / per_second, where)
    except HistoryError:
        raise HistoryError(
            f"cannot import: {where} must be a time in milliseconds since 1970, got {value}"
        ) from None


# ---------------------------------------------------------------- the tree


def _imported(
    title: str, created: float, updated: float, nodes: dict[str, _Node], active: str | None
) -> Imported:
    """A chat from its nodes (in the file's order) checked as our own export is."""
    children: dict[str | None, list[str]] = {}
    for key, (parent, _value) in nodes.items():
        # A parent that is not in the file (the web UI leaves its root out of a path it
        # exports) makes a first message.
        children.setdefault(parent if parent in nodes else None, []).append(key)
    messages: list[dict[str, Any]] = []
    place: dict[str, int | None] = {}  # a node -> its message, or its nearest kept ancestor's
    carried: dict[str, str] = {}  # a node -> reasoning not yet given to a reply
    pending = list(reversed(children.get(None, [])))
    while pending:
        key = pending.pop()
        parent, value = nodes[key]
        above = place.get(parent) if parent is not None else None
        reasoning = carried.get(parent, "") if parent is not None else ""
        if isinstance(value, dict):
            if value["role"] == "assistant" and not value.get("reasoning") and reasoning:
                value["reasoning"] = reasoning
            place[key], carried[key] = len(messages), ""
            messages.append(
                {"id": len(messages) + 1, "parent": None if above is None else above + 1, **value}
            )
        else:
            place[key] = above
            carried[key] = "\n\n".join(part for part in (reasoning, value or "") if part)
        pending.extend(reversed(children.get(key, [])))
    if len(place) < len(nodes):
        loop = next(key for key in nodes if key not in place)
        raise HistoryError(f"cannot import: message {loop!r} is among its own parents")
    leaf = place.get(active) if active is not None else None
    path = []
    at = leaf if leaf is not None else (len(messages) - 1 if messages else None)
    while at is not None:
        path.append(messages[at])
        at = None if messages[at]["parent"] is None else messages[at]["parent"] - 1
    model = next((m.get("model", "") for m in path if m["role"] == "assistant"), "")
    if not title.strip():
        first = next((m["content"] for m in reversed(path) if m["role"] == "user"), "")
        title = _title_from(first)
    return export.validate_import(
        {
            "format": EXPORT_FORMAT,
            "version": export.EXPORT_VERSION,
            "session": {
                "title": title,
                "model": model,
                "created_at": created,
                "updated_at": max(updated, created),
                "active": None if leaf is None else leaf + 1,
            },
            "messages": messages,
        }
    )


def _message(role: str, content: str, created: float, **fields: str) -> dict[str, Any]:
    return {"role": role, "content": content, "created_at": created, **fields}


# ---------------------------------------------------------------- ChatGPT

# Content a person did not write or read as the conversation: custom instructions,
# memory, the "Thought for 5 seconds" line.
_CHATGPT_LEFT_OUT = ("reasoning_recap", "user_editable_context", "model_editable_context")
_PLACEHOLDERS = {"image_asset_pointer": "[image]", "audio_asset_pointer": "[audio]"}


def _chatgpt(item: dict[str, Any]) -> Imported:
    now = time.time()
    title = _text(item.get("title"), "title")
    created = _time(item.get("create_time"), "create_time", now)
    updated = _time(item.get("update_time"), "update_time", created)
    nodes: dict[str, _Node] = {}
    children: dict[str, list[str | None]] = {}
    for key, node in _object(item.get("mapping"), "mapping").items():
        where = f"mapping[{json.dumps(key)}]"
        node = _object(node, where)
        parent = _key(node.get("parent"), f"{where}.parent")
        nodes[key] = (parent, _chatgpt_message(node.get("message"), f"{where}.message", created))
        children[key] = _keys(node.get("children"), f"{where}.children")
    active = _key(item.get("current_node"), "current_node")
    _check_links(nodes, children, active, _mapping_field, ("parent", "children", "current_node"))
    return _imported(title, created, updated, nodes, active)


def _mapping_field(key: str) -> str:
    return f"mapping[{json.dumps(key)}]"


def _webui_field(key: str) -> str:
    return f"chat.history.messages[{json.dumps(key)}]"


def _chatgpt_message(raw: object, where: str, default_time: float) -> dict[str, Any] | str | None:
    if raw is None:
        return None
    raw = _object(raw, where)
    role = _role(_object(raw.get("author"), f"{where}.author").get("role"), f"{where}.author.role")
    metadata = _object(raw.get("metadata") or {}, f"{where}.metadata")
    content = _object(raw.get("content"), f"{where}.content")
    kind = _text(content.get("content_type"), f"{where}.content.content_type")
    created = _time(raw.get("create_time"), f"{where}.create_time", default_time)
    if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation"):
        return None
    if raw.get("recipient") not in (None, "all"):
        return None  # a call to a tool (browsing, code): the answer after it is kept
    if kind == "thoughts":
        thoughts = _list(content.get("thoughts"), f"{where}.content.thoughts")
        texts = []
        for number, thought in enumerate(thoughts, start=1):
            thought = _object(thought, f"{where}.content.thoughts[{number}]")
            texts.append(_text(thought.get("content"), f"{where}.content.thoughts[{number}]"))
        return "\n\n".join(text for text in texts if text)
    if kind in _CHATGPT_LEFT_OUT:
        return None
    text = _chatgpt_text(content, kind, f"{where}.content")
    for attachment in _list(metadata.get("attachments"), f"{where}.metadata.attachments"):
        # An image is in the parts already; another file is only named here.
        if isinstance(attachment, dict) and not str(attachment.get("mime_type")).startswith(
            "image/"
        ):
            text += f"\n\n[file: {attachment.get('name') or 'attachment'}]"
    if not text.strip():
        return None
    model = _text(metadata.get("model_slug"), f"{where}.metadata.model_slug")
    if role == "assistant":
        return _message(role, text.strip(), created, model=model)
    return _message(role, text.strip(), created)


def _chatgpt_text(content: dict[str, Any], kind: str, where: str) -> str:
    if kind == "code":
        language = _text(content.get("language"), f"{where}.language")
        code = _text(content.get("text"), f"{where}.text")
        return f"```{'' if language == 'unknown' else language}\n{code}\n```"
    if "parts" not in content:
        return _text(content.get("text"), f"{where}.text")
    texts = []
    for number, part in enumerate(_list(content["parts"], f"{where}.parts"), start=1):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if part.get("content_type") == "audio_transcription":
                texts.append(_text(part.get("text"), f"{where}.parts[{number}].text"))
            else:
                texts.append(_PLACEHOLDERS.get(str(part.get("content_type")), "[file]"))
        elif part is not None:
            raise HistoryError(f"cannot import: {where}.parts[{number}] must be text or an object")
    return "\n\n".join(text for text in texts if text)


# ---------------------------------------------------------------- Open WebUI

_REASONING_BLOCK = re.compile(
    r'\A\s*<details type="reasoning"[^>]*>\s*(?:<summary>.*?</summary>)?\s*(.*?)\s*</details>\s*',
    re.DOTALL,
)
_TOOL_BLOCK = re.compile(
    r'<details type="(?:tool_calls|code_interpreter)".*?</details>\s*', re.DOTALL
)
_THINK = re.compile(r"\A\s*<think>(.*?)</think>\s*", re.DOTALL)


def _open_webui(item: dict[str, Any]) -> Imported:
    now = time.time()
    chat = _object(item.get("chat"), "chat")
    title = _text(item.get("title") or chat.get("title"), "title")
    created = _time(item.get("created_at"), "created_at", now)
    updated = _time(item.get("updated_at"), "updated_at", created)
    nodes: dict[str, _Node] = {}
    if chat.get("history") is None:
        # An older export: the path only, in order.
        previous = None
        for number, raw in enumerate(_list(chat.get("messages"), "chat.messages"), start=1):
            where = f"chat.messages[{number}]"
            nodes[str(number)] = (previous, _open_webui_message(raw, where, created))
            previous = str(number)
        return _imported(title, created, updated, nodes, previous)
    history = _object(chat.get("history"), "chat.history")
    children: dict[str, list[str | None]] = {}
    for key, raw in _object(history.get("messages"), "chat.history.messages").items():
        where = _webui_field(key)
        parent = _key(_object(raw, where).get("parentId"), f"{where}.parentId")
        nodes[key] = (parent, _open_webui_message(raw, where, created))
        children[key] = _keys(raw.get("childrenIds"), f"{where}.childrenIds")
    active = _key(history.get("currentId"), "chat.history.currentId")
    _check_links(
        nodes, children, active, _webui_field, ("parentId", "childrenIds", "chat.history.currentId")
    )
    return _imported(title, created, updated, nodes, active)


def _open_webui_message(raw: object, where: str, default_time: float) -> dict[str, Any] | None:
    raw = _object(raw, where)
    role = _role(raw.get("role"), f"{where}.role")
    content = _text(raw.get("content"), f"{where}.content")
    created = _time(raw.get("timestamp"), f"{where}.timestamp", default_time)
    if role not in ("user", "assistant", "system"):
        return None
    reasoning = ""
    found = _REASONING_BLOCK.match(content) or _THINK.match(content)
    if found:
        lines = found.group(1).splitlines()
        # Open WebUI quotes the reasoning ("> ") inside its block.
        reasoning = "\n".join(line.removeprefix(">").removeprefix(" ") for line in lines)
        content = content[found.end() :]
    content = _TOOL_BLOCK.sub("", content).strip()
    for number, attached in enumerate(_list(raw.get("files"), f"{where}.files"), start=1):
        attached = _object(attached, f"{where}.files[{number}]")
        if attached.get("type") == "image":
            content += "\n\n[image]"
        else:
            content += f"\n\n[file: {attached.get('name') or 'attachment'}]"
    if not content.strip() and not reasoning:
        return None
    if role == "assistant":
        model = _text(raw.get("model"), f"{where}.model")
        return _message(role, content.strip(), created, reasoning=reasoning.strip(), model=model)
    return _message(role, content.strip(), created)


# ---------------------------------------------------------------- llama.cpp web UI


def _llama_cpp(item: dict[str, Any]) -> Imported:
    now = time.time()
    conv = _object(item.get("conv"), "conv")
    title = _text(conv.get("name"), "conv.name")
    updated = _time(conv.get("lastModified"), "conv.lastModified", now, per_second=1000)
    nodes: dict[str, _Node] = {}
    first = updated
    for number, raw in enumerate(_list(item.get("messages"), "messages"), start=1):
        where = f"messages[{number}]"
        raw = _object(raw, where)
        key = _key(raw.get("id"), f"{where}.id")
        if key is None or key in nodes:
            raise HistoryError(f"cannot import: {where}.id must be an id no other message has")
        parent = _key(raw.get("parent"), f"{where}.parent")
        created = _time(raw.get("timestamp"), f"{where}.timestamp", updated, per_second=1000)
        first = min(first, created)
        nodes[key] = (parent, _llama_cpp_message(raw, where, created))
    active = _key(conv.get("currNode"), "conv.currNode")
    # A parent missing from the file is allowed here: the web UI leaves out the root of
    # a path it exports.
    if active is not None and active not in nodes:
        raise HistoryError(f"cannot import: conv.currNode {active!r} is not a message of the file")
    return _imported(title, first, updated, nodes, active)


def _llama_cpp_message(raw: dict[str, Any], where: str, created: float) -> dict[str, Any] | None:
    if raw.get("type") == "root":
        return None  # the tree's root
    role = _role(raw.get("role"), f"{where}.role")
    content = _text(raw.get("content"), f"{where}.content")
    if role not in ("user", "assistant", "system"):
        return None  # the tree's root, or a tool's result
    reasoning = _text(raw.get("thinking"), f"{where}.thinking")
    found = _THINK.match(content)
    if found and not reasoning:
        reasoning, content = found.group(1), content[found.end() :]
    for number, extra in enumerate(_list(raw.get("extra"), f"{where}.extra"), start=1):
        extra = _object(extra, f"{where}.extra[{number}]")
        name = extra.get("name") or "attachment"
        is_image = str(extra.get("type")).lower() in ("image", "imagefile")
        content += f"\n\n[image: {name}]" if is_image else f"\n\n[file: {name}]"
    if not content.strip() and not reasoning.strip():
        return None
    if role == "assistant":
        model = _text(raw.get("model"), f"{where}.model")
        return _message(role, content.strip(), created, reasoning=reasoning.strip(), model=model)
    return _message(role, content.strip(), created)


# ---------------------------------------------------------------- our Markdown

_HEADINGS = {"You": "user", "Assistant": "assistant", "System": "system", "Tool": "tool"}
_HEADING = re.compile(r"## (You|Assistant|System|Tool)(?: \((.+)\))?")
_FENCE = re.compile(r"(`{3,}|~{3,})")
_REASONING_OPEN = "<details><summary>Reasoning</summary>\n\n"
_REASONING_CLOSE = "\n\n</details>"
_TOOL_CALL = re.compile(r"\*Tool call:\* `(.*?)` `(.*)`", re.DOTALL)
_ATTACHMENT = re.compile(r"\*Attachment:\* (.+)", re.DOTALL)
_ERROR = re.compile(r"\*\(error: (.*)\)\*", re.DOTALL)


def _markdown(text: str) -> Imported:
    """The path of messages `export.export_markdown` wrote, as a chat."""
    lines = text.splitlines()
    if not lines[0].startswith("# "):
        raise HistoryError(f"cannot import: {UNKNOWN}")
    title = lines[0][2:].strip()
    mode, created, model = "chat", time.time(), ""
    at = 1
    while at < len(lines) and not lines[at].strip():
        at += 1
    if at < len(lines) and lines[at].startswith("*") and lines[at].endswith("*"):
        facts = lines[at][1:-1].split(" · ", 2)
        try:
            created = time.mktime(time.strptime(facts[1], "%Y-%m-%d %H:%M"))
        except (IndexError, ValueError):
            raise HistoryError(
                f"cannot import: line {at + 1} must be '*mode · YYYY-mm-dd HH:MM · model*'"
            ) from None
        if facts[0] not in MODES:
            raise HistoryError(
                f"cannot import: line {at + 1}: the mode must be one of {', '.join(MODES)}"
            )
        mode, model = facts[0], facts[2] if len(facts) > 2 else ""
        at += 1
    sections: list[tuple[str, str, list[str]]] = []  # role, model, lines
    fence = ""
    for number in range(at, len(lines)):
        line = lines[number]
        heading = None if fence else _HEADING.fullmatch(line)
        if heading:
            sections.append((_HEADINGS[heading.group(1)], heading.group(2) or "", []))
            continue
        if sections:
            sections[-1][2].append(line)
        elif line.strip():
            raise HistoryError(
                f"cannot import: line {number + 1} is not under a '## You' or '## Assistant' "
                "heading of a llamachat Markdown export"
            )
        opening = _FENCE.match(line.lstrip())
        if opening and not fence:
            fence = opening.group(1)
        elif fence and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = ""
    nodes: dict[str, _Node] = {}
    for number, (role, reply_model, body) in enumerate(sections, start=1):
        message = _markdown_message("\n".join(body).strip("\n"), role, created)
        if role == "assistant":
            message["model"] = reply_model
        nodes[str(number)] = (str(number - 1) if number > 1 else None, message)
    chat = _imported(title, created, created, nodes, str(len(sections)) if sections else None)
    chat.session["mode"], chat.session["model"] = mode, model or chat.session["model"]
    return chat


def _markdown_message(body: str, role: str, created: float) -> dict[str, Any]:
    message = _message(role, "", created)
    if body.startswith(_REASONING_OPEN) and _REASONING_CLOSE in body:
        end = body.index(_REASONING_CLOSE)
        message["reasoning"] = body[len(_REASONING_OPEN) : end]
        body = body[end + len(_REASONING_CLOSE) :].lstrip("\n")
    paragraphs = body.split("\n\n") if body else []
    # What export_markdown writes after the content, last first: the status, the
    # attachments, the tool calls.
    if paragraphs and paragraphs[-1] == "*(stopped)*":
        message["status"] = "stopped"
        paragraphs.pop()
    elif paragraphs and (error := _ERROR.fullmatch(paragraphs[-1])):
        message["status"], message["error"] = "error", error.group(1)
        paragraphs.pop()
    attachments: list[dict[str, str]] = []
    while paragraphs and (attached := _ATTACHMENT.fullmatch(paragraphs[-1])):
        # The file's content is not in the Markdown: its name is kept for the chip.
        attachments.insert(0, {"kind": "text", "name": attached.group(1), "mime": "", "data": ""})
        paragraphs.pop()
    calls: list[dict[str, Any]] = []
    while paragraphs and (found := _TOOL_CALL.fullmatch(paragraphs[-1])):
        function = {"name": found.group(1), "arguments": found.group(2)}
        calls.insert(0, {"type": "function", "function": function})
        paragraphs.pop()
    for number, call in enumerate(calls, start=1):
        call["id"] = f"call_{number}"
    message.update(content="\n\n".join(paragraphs), attachments=attachments, tool_calls=calls)
    return message
