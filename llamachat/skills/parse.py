"""Reading and validating one SKILL.md: its frontmatter when scanned, its body when loaded.

Parsing is as lenient as other harnesses: a description over 1,024 characters, a
value YAML cannot read as written (retried as quoted text), a `name:` unlike its
folder (the `name:` wins) or a missing or invalid one (the folder's name) load with
a warning. Only a skill with no usable name or description, or unreadable, is left
out: `parse_skill` turns whatever is wrong into `Problem`s and never raises.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from llamachat import outside

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""

NAME_MAX = 64
"""Longest skill name allowed by agentskills.io."""

DESCRIPTION_MAX = 1024
"""Longest description allowed by agentskills.io."""

COMPATIBILITY_MAX = 500
"""Longest ``compatibility`` value allowed by agentskills.io."""

BODY_MAX = 64 * 1024
"""Bytes of instructions sent to the model; the rest is cut with a note."""

FRONTMATTER_MAX = 64 * 1024
"""Bytes of frontmatter read before giving up on finding its closing ``---``."""

CATALOG_DESCRIPTION_CHARS = 200
"""Characters of each description shown in the tool's catalog."""

_BOM = codecs.BOM_UTF8

_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# A top-level `key: value` line whose value is not a block scalar or a comment.
_TOP_PAIR = re.compile(r"([A-Za-z0-9_-]+):[ \t]+(?![|>#])(.*?\S)[ \t]*$")


class SkillError(Exception):
    """Base of the exceptions the skills package raises."""


@dataclass(frozen=True)
class Skill:
    """One skill: its frontmatter, its instructions and where it lives."""

    name: str
    description: str
    text: str
    path: Path | None = None
    folder: Path | None = None
    model_invocable: bool = True
    user_invocable: bool = True
    metadata: dict = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Problem:
    """Something wrong with a skill, a file or a root: where, and how to fix it.

    `skipped` is True when the skill was left out because of it, False for a
    warning about a skill that loads anyway.
    """

    path: Path
    message: str
    skipped: bool = True

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class Entry:
    """A skill as scanned: its frontmatter and where its body starts.

    Equality compares the raw header, not the parsed metadata: YAML aliases can
    nest one list inside another thousands of times over, and comparing two such
    parses element by element would take forever.
    """

    name: str
    description: str
    path: Path
    folder: Path
    model_invocable: bool
    user_invocable: bool
    header: bytes
    metadata: dict = field(compare=False)
    body_offset: int
    body_size: int
    sig: tuple
    skill: Skill | None = field(default=None, compare=False)
    body_problems: list[Problem] = field(default_factory=list, compare=False)


class Unusable(SkillError):
    """Internal: why a SKILL.md cannot become a skill (becomes a Problem)."""


def file_sig(path: Path) -> tuple | None:
    """What tells a changed SKILL.md: mtime, ctime, size, inode, type; or why it has none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ("dangling",) if os.path.lexists(path) else None
    except OSError as error:
        return ("error", error.errno)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, stat.S_IFMT(st.st_mode))


def parse_skill(
    path: Path, sig: tuple | None, folder_name: str | None
) -> tuple[Entry | None, list]:
    """Read one SKILL.md's frontmatter: (entry or None, problems).

    `folder_name` is the name the skill must have; None (importing) takes the
    frontmatter's `name`, since the import creates the folder.
    """
    problems: list[Problem] = []
    try:
        entry = _parse_or_raise(path, sig, folder_name, problems)
    except Unusable as why:
        problems.append(Problem(path, str(why)))
        return None, problems
    except Exception as error:
        # Start-up must survive any file: a parser surprise is logged as the bug
        # it is, and the skill is reported instead of taking the rest down.
        log.exception("unexpected error reading skill %s", path)
        problems.append(Problem(path, f"could not be read ({error!r}); please report this."))
        return None, problems
    return entry, problems


def _parse_or_raise(
    path: Path, sig: tuple | None, folder_name: str | None, problems: list[Problem]
) -> Entry:
    if sig == ("dangling",):
        try:
            target = os.readlink(path)
        except OSError:
            target = "a file"
        raise Unusable(
            f"is a symbolic link to {target}, which does not exist; point it at a real file "
            "or replace it with one."
        )
    if sig is None or sig[0] == "error":
        reason = os.strerror(sig[1]) if sig else "it vanished"
        raise Unusable(f"cannot be read ({reason}); check that it exists and is readable.")
    if sig[4] != stat.S_IFREG:
        raise Unusable(
            f"is not a regular file (a folder?); the skill's instructions must be a file "
            f"named {SKILL_FILE}."
        )
    try:
        header, body_offset = _read_frontmatter(path)
    except OSError as error:
        raise Unusable(f"cannot be read ({error.strerror}); check its permissions.") from error
    except outside.NotRegular as error:
        raise Unusable(f"{error.reason}; the skill's instructions must be a file.") from None
    except outside.Unreadable as error:
        raise Unusable(f"{error.reason}; check its permissions.") from None
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError:
        text = header.decode("utf-8", errors="replace")
        problems.append(
            Problem(
                path,
                "has bytes in its frontmatter that are not UTF-8; they are shown as "
                "\N{REPLACEMENT CHARACTER}. Save the file as UTF-8.",
                skipped=False,
            )
        )
    data = _load_yaml(path, text.replace("\r\n", "\n"), problems)
    name = _check_name(path, data.get("name"), folder_name, problems)
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise Unusable("has a `description:` that is not text; put it in quotes.")
    if description is None or not description.strip():
        raise Unusable(
            "has no `description:`; add one saying what the skill does and when to use "
            "it, since it is all the model sees before loading the skill."
        )
    description = description.strip()
    if len(description) > DESCRIPTION_MAX:
        # Published skills break this limit and other harnesses load them: so does this one.
        problems.append(
            Problem(
                path,
                f"has a description of {len(description)} characters, over the "
                f"{DESCRIPTION_MAX} agentskills.io allows; it loads, and the model's list of "
                f"skills shows its first {CATALOG_DESCRIPTION_CHARS}. Shorten it and move the "
                "details into the instructions.",
                skipped=False,
            )
        )
    _check_optional(path, data, problems)
    size = sig[2]
    body_size = max(size - body_offset, 0)
    if body_size > BODY_MAX:
        problems.append(
            Problem(
                path,
                f"has {size_text(body_size)} of instructions; only the first {size_text(BODY_MAX)} "
                "reach the model. Move reference material into separate files in the "
                "skill folder and name them in the instructions.",
                skipped=False,
            )
        )
    return Entry(
        name=name,
        description=description,
        path=path,
        folder=path.parent,
        model_invocable=not _flag(path, data, "disable-model-invocation", False, problems),
        user_invocable=_flag(path, data, "user-invocable", True, problems),
        header=header,
        metadata={k: v for k, v in data.items() if k not in ("name", "description")},
        body_offset=body_offset,
        body_size=body_size,
        sig=sig,
    )


def _read_frontmatter(path: Path) -> tuple[bytes, int]:
    """The frontmatter's bytes and the offset where the body starts.

    Reads line by line with a limit, so a huge SKILL.md costs only its header.
    """
    with outside.open_regular(path) as f:
        first = f.readline(FRONTMATTER_MAX)
        if first.startswith(_UTF16_BOMS):
            raise Unusable("is saved as UTF-16; save it as UTF-8.")
        first = first.removeprefix(_BOM)
        if first.rstrip() != b"---":
            raise Unusable(
                "does not start with frontmatter; make its first line `---`, then "
                "`name:` and `description:` lines, then a line holding only `---`."
            )
        lines: list[bytes] = []
        total = 0
        while True:
            line = f.readline(FRONTMATTER_MAX + 1)
            if not line:
                raise Unusable(
                    "has frontmatter that is never closed; add a line holding only `---` "
                    "after the last key."
                )
            if line.rstrip() == b"---":
                return b"".join(lines), f.tell()
            total += len(line)
            if total > FRONTMATTER_MAX:
                raise Unusable(
                    f"has no closing `---` in its first {size_text(FRONTMATTER_MAX)}; add a "
                    "line holding only `---` after the last frontmatter key."
                )
            lines.append(line)


def _load_yaml(path: Path, text: str, problems: list[Problem]) -> dict:
    try:
        data = yaml.load(text, Loader=_Loader)
    except ValueError as error:
        # PyYAML raises ValueError, not YAMLError, for dates like 2024-13-45.
        raise Unusable(
            f"has frontmatter YAML cannot read ({error}); quote the value that looks like "
            "a date or number."
        ) from error
    except yaml.YAMLError as error:
        # People write `description: Use when: ...` or `argument-hint: [a] [b]`, and
        # YAML rejects them. Quoting such values is what they meant.
        quoted: list[str] = []
        fixed = _quote_plain_values(text, quoted)
        try:
            data = yaml.load(fixed, Loader=_Loader) if quoted else None
        except yaml.YAMLError:
            data = None
        if data is None:
            raise Unusable(_yaml_message(error)) from error
        keys = ", ".join(f"`{key}:`" for key in quoted)
        problems.append(
            Problem(
                path,
                f"has a value YAML cannot read in {keys} (such as ': ' inside it, which "
                "YAML reads as another key); it was read as text, but put the value in "
                "quotes.",
                skipped=False,
            )
        )
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise Unusable(
            "has frontmatter that is not `key: value` lines; write `name: ...` and "
            "`description: ...` between the `---` lines."
        )
    return data


def _quote_plain_values(text: str, quoted: list[str]) -> str:
    """`text` with each top-level value YAML cannot read on its own put in single quotes.

    Such values are text their authors did not quote: `Use when: ...` (a second
    `: `), `[file] [format]` (two flow lists). A value may go on over indented lines,
    as published skills' long descriptions do; those lines are joined into the quoted
    value, as YAML folds them. Block scalars (`|`, `>`) and nested keys are kept.
    """
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        match = _TOP_PAIR.match(lines[index])
        end = index + 1
        if match is None:
            out.append(lines[index])
            index = end
            continue
        pieces = [match.group(2)]
        while end < len(lines) and lines[end][:1] in (" ", "\t") and lines[end].strip():
            pieces.append(lines[end].strip())
            end += 1
        if _reads(lines[index:end]):
            out.extend(lines[index:end])
        else:
            value = " ".join(pieces)
            quoted.append(match.group(1))
            out.append(f"{match.group(1)}: '" + value.replace("'", "''") + "'")
        index = end
    return "\n".join(out)


def _reads(lines: list[str]) -> bool:
    """True when one `key: value` (and its continuation lines) is valid YAML on its own."""
    try:
        yaml.load("\n".join(lines), Loader=_Loader)
    except (yaml.YAMLError, ValueError):
        return False
    return True


def _yaml_message(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    # +2: the opening `---` line, and marks count from zero.
    where = f" at line {mark.line + 2}" if mark is not None else ""
    what = getattr(error, "problem", None) or "parse error"
    return (
        f"has frontmatter that is not valid YAML{where} ({what}); quote values that "
        "contain ': ' or start with a character such as `*`, `&`, `[` or `{`."
    )


def _check_name(path: Path, name: object, folder_name: str | None, problems: list[Problem]) -> str:
    """The skill's name: the frontmatter's if valid, else its folder's; Unusable if neither."""
    rule = "1-64 lower-case letters, digits and single hyphens, like `pdf-tools`"
    given = name.strip() if isinstance(name, str) else ""
    if folder_name is None:
        if not given:
            raise Unusable(f"has no `name:`; add a `name:` ({rule}).")
        if not _valid_name(given):
            raise Unusable(f"has `name: {given}`, which is not a valid skill name ({rule}).")
        return given

    def warn(message: str) -> None:
        problems.append(Problem(path, message, skipped=False))

    if _valid_name(given):
        if given != folder_name:
            # Other harnesses go by the frontmatter, so `/name` works as the skill's
            # author documented it.
            warn(
                f"has `name: {given}` but its folder is `{folder_name}`; it loads as "
                f"{given}. Rename the folder to `{given}` so the two agree."
            )
        return given
    if _valid_name(folder_name):
        if given:
            warn(
                f"has `name: {given}`, which is not a valid skill name ({rule}); it loads "
                f"under its folder's name, {folder_name}. Set `name: {folder_name}`."
            )
        else:
            warn(f"has no `name:`; it loads as {folder_name}. Add `name: {folder_name}`.")
        return folder_name
    named = f"nor is its `name: {given}`" if given else "and it has no `name:`"
    raise Unusable(
        f"has no usable name: its folder {folder_name!r} is not a valid skill name ({rule}), "
        f"{named}; rename the folder and set `name:` to match."
    )


def _valid_name(name: str) -> bool:
    return len(name) <= NAME_MAX and _SLUG.fullmatch(name) is not None


def _check_optional(path: Path, data: dict, problems: list[Problem]) -> None:
    """Warn about optional agentskills.io keys of the wrong shape; the skill still loads."""

    def warn(message: str) -> None:
        problems.append(Problem(path, message, skipped=False))

    for key in ("license", "compatibility"):
        if key in data and not isinstance(data[key], str):
            warn(f"has a `{key}:` that is not text; put it in quotes.")
    compatibility = data.get("compatibility")
    if isinstance(compatibility, str) and len(compatibility) > COMPATIBILITY_MAX:
        warn(
            f"has a `compatibility:` of {len(compatibility)} characters; the limit is "
            f"{COMPATIBILITY_MAX}, so shorten it."
        )
    if "metadata" in data and not isinstance(data["metadata"], dict):
        warn("has a `metadata:` that is not `key: value` pairs; indent them under it.")
    tools = data.get("allowed-tools")
    names_ok = isinstance(tools, list) and all(isinstance(tool, str) for tool in tools)
    if tools is not None and not isinstance(tools, str) and not names_ok:
        warn("has an `allowed-tools:` that is not a list of tool names.")


def _flag(path: Path, data: dict, key: str, default: bool, problems: list[Problem]) -> bool:
    value = data.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    problems.append(
        Problem(
            path,
            f"has `{key}: {value}`, which is neither true nor false, so it counts as "
            f"{str(default).lower()}; write `{key}: true` or `{key}: false`.",
            skipped=False,
        )
    )
    return default


def read_body(entry: Entry) -> tuple[str, bool]:
    """The instructions, capped at BODY_MAX bytes with a note; and whether bytes were bad.

    Raises outside.Refused when the file is no longer one that can be read.
    """
    with outside.open_regular(entry.path) as f:
        f.seek(entry.body_offset)
        raw, cut = outside.read_head(f, entry.path, BODY_MAX)
    # An incremental decoder holds back a character split by the cap instead of
    # turning it into a replacement character.
    try:
        text = codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=not cut)
        bad = False
    except UnicodeDecodeError:
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(raw, final=not cut)
        bad = True
    text = text.replace("\r\n", "\n").strip()
    if cut:
        text += (
            f"\n\n[Cut here: these instructions are {size_text(entry.body_size)}; only the first "
            f"{size_text(BODY_MAX)} are loaded.]"
        )
    return text, bad


def size_text(count: int) -> str:
    """`count` bytes in KB or MB, for messages."""
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MB"
    return f"{count // 1024} KB"
