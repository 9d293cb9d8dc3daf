"""The text skills become for the model, and the skill commands the user types.

The catalog in the ``load_skill`` tool (`full_catalog`, `budgeted_catalog`), the tool's
reply (`tool_message`), a loaded skill's part of the system prompt (`system_part`),
and ``/name`` commands taken out of a typed message (`parse_commands`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from llamachat.skills.files import files_line
from llamachat.skills.parse import CATALOG_DESCRIPTION_CHARS, Entry, Skill

LOAD_SKILL_NAME = "load_skill"
"""The name of the tool the model calls to load a skill."""

SKILL_HEADER = "[skill: {name}]"
"""The first line of a skill's text wherever it reaches the model."""

# A note must ride on the last tool result because a trailing system message is
# rejected by many chat templates ("System message must be at the beginning").
NO_MORE_TOOLS = (
    "This was your last available tool use for this turn and tools are now "
    "unavailable. Write your answer now using the information above. Do not "
    "request another tool."
)
"""Appended to the final round's tool result so the model answers instead of calling again."""

CATALOG_CHARS = 6000
"""Characters of catalog lines in the tool description (about 1500 tokens)."""

_COMMAND = re.compile(r"(?<!\S)/([a-z0-9]+(?:-[a-z0-9]+)*)(?!\S)")

_CODE = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)|`[^`\n]+`", re.MULTILINE | re.DOTALL
)

# The load_skill tool's description, before the catalog.
TOOL_INTRO = (
    "Load a skill: instructions for one kind of task. When the user's request "
    "matches a skill below, load it before you start and follow what it says. "
    "A skill already loaded in this conversation need not be loaded again.\n\n"
    "Skills:\n"
)


def full_catalog(entries: list[Entry]) -> str:
    """The catalog with no budget: one capped line per skill, up to CATALOG_CHARS."""
    lines: list[str] = []
    used = 0
    for index, entry in enumerate(entries):
        line = f"- {entry.name}: {_short(entry.description)}"
        if lines and used + len(line) + 1 > CATALOG_CHARS:
            rest = len(entries) - index
            noun = "skill" if rest == 1 else "skills"
            lines.append(f"({rest} more {noun} not listed; every name is in the enum of `name`.)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def budgeted_catalog(entries: Sequence[Entry], max_chars: int) -> tuple[str, list[str], list[str]]:
    """A catalog of at most `max_chars`: (its text, the skills in it, the skills left out).

    Descriptions are shortened first (to 100, then 50 characters, then names alone);
    when even the names do not fit, the skills past the budget are left out.
    """
    for limit in (CATALOG_DESCRIPTION_CHARS, 100, 50, 0):
        lines = [
            f"- {entry.name}: {_short(entry.description, limit)}" if limit else f"- {entry.name}"
            for entry in entries
        ]
        if sum(len(line) + 1 for line in lines) <= max_chars:
            return "\n".join(lines), [entry.name for entry in entries], []
    kept: list[str] = []
    used = 0
    for entry in entries:
        used += len(entry.name) + 3
        if used > max_chars:
            break
        kept.append(entry.name)
    left = [entry.name for entry in entries[len(kept) :]]
    return "\n".join(f"- {name}" for name in kept), kept, left


def _short(description: str, limit: int = CATALOG_DESCRIPTION_CHARS) -> str:
    text = " ".join(description.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "\N{HORIZONTAL ELLIPSIS}"


def parse_commands(text: str, names: Iterable[str]) -> tuple[str, list[str]]:
    """Take `/name` tokens of the given skills out of `text`; return (rest, names).

    Everything else stays exactly as typed: line breaks, indentation, other
    ``/words``, and anything inside code (fenced blocks or backticks). Each
    command takes one adjacent space (or its line break, when it stood alone on
    a line) with it, so no gap is left behind.
    """
    if "/" not in text:
        return text, []
    known = names if isinstance(names, (set, frozenset, dict)) else set(names)
    code: list[tuple[int, int]] | None = None
    loaded: list[str] = []
    cuts: list[tuple[int, int]] = []
    for match in _COMMAND.finditer(text):
        name = match.group(1)
        if name not in known:
            continue
        if code is None:
            code = [m.span() for m in _CODE.finditer(text)]
        start, end = match.span()
        if any(low <= start < high for low, high in code):
            continue
        if name not in loaded:
            loaded.append(name)
        cuts.append(_with_separator(text, start, end))
    if not cuts:
        return text, []
    pieces = []
    position = 0
    for start, end in cuts:
        start = max(start, position)
        pieces.append(text[position:start])
        position = max(position, end)
    pieces.append(text[position:])
    rest = "".join(pieces)
    return (rest if rest.strip() else ""), loaded


def _with_separator(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a command's span by one adjacent space, or its line break if alone on a line."""
    if end < len(text) and text[end] in " \t":
        return start, end + 1
    if start > 0 and text[start - 1] in " \t":
        return start - 1, end
    if text.startswith("\r\n", end):
        return start, end + 2
    if text.startswith("\n", end):
        return start, end + 1
    if start > 0 and text[start - 1] == "\n":
        return (start - 2 if text[start - 2 : start] == "\r\n" else start - 1), end
    return start, end


def parse_name(arguments: str) -> str:
    """The skill name in a tool call's JSON arguments (or a bare JSON string), or ''."""
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return ""
    name = parsed.get("name") if isinstance(parsed, dict) else parsed
    return name.strip() if isinstance(name, str) else ""


def tool_message(call_id: str, skill: Skill | None, error: str = "", last: bool = False) -> dict:
    """The ``role: tool`` reply to a load_skill call: the skill, or the error the model reads.

    A skill with ``disable-model-invocation`` is refused here too, so the model
    cannot reach it by naming it outside the enum.
    """
    if error:
        content = f"error: {error}"
    elif skill is None:
        content = "error: no such skill"
    elif not skill.model_invocable:
        content = (
            f"error: the skill {skill.name} can only be loaded by the user (by typing "
            f"/{skill.name}); carry on without it."
        )
    else:
        content = _tool_content(skill)
    if last:
        content = f"{content}\n\n{NO_MORE_TOOLS}"
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _tool_content(skill: Skill) -> str:
    lines = [SKILL_HEADER.format(name=skill.name)]
    if skill.folder is not None:
        lines.append(f"Folder: {skill.folder} (relative paths below are inside it)")
        files = files_line(skill)
        if files:
            lines.append(files)
    return "\n".join(lines) + "\n\n" + skill.text


def system_part(skill: Skill) -> str:
    """The ``[skill: name]`` chunk a loaded skill adds to the system prompt."""
    lines = [SKILL_HEADER.format(name=skill.name)]
    files = files_line(skill)
    if files:
        lines.append(files)
    return "\n".join([*lines, skill.text])
