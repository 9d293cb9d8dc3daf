"""The files of a skill's folder, which the model reads through ``read_skill_file``."""

from __future__ import annotations

import codecs
import difflib
import os
import re
from pathlib import Path

from llamachat import outside
from llamachat.skills.parse import SKILL_FILE, Skill, SkillError, size_text

READ_FILE_NAME = "read_skill_file"
"""The name of the tool the model calls to read a file of a loaded skill's folder."""

FILE_MAX = 256 * 1024
"""Bytes of a skill's file read_skill_file gives the model; the rest is cut, as it says."""

# Local models run with small contexts: the file list names a few dozen files, and
# the walk that builds it stops early in a folder holding a whole project.
FILES_LISTED = 40

_FILES_WALKED = 500


def files_line(skill: Skill) -> str:
    """The line telling the model which files the skill's folder holds ('' when none)."""
    files = resource_files(skill)
    if not files:
        return ""
    more = len(files) - FILES_LISTED
    listed = ", ".join(files[:FILES_LISTED]) + (f" and {more} more" if more > 0 else "")
    return f"Files in its folder, read with {READ_FILE_NAME}: {listed}"


def resource_files(skill: Skill) -> list[str]:
    """The files in a skill's folder besides SKILL.md, as sorted relative paths.

    Dot-files and dot-folders are left out, and so is a symbolic link that leads out
    of the folder; the walk stops after a few hundred entries.
    """
    if skill.folder is None:
        return []
    try:
        # A link the person made to a whole skill folder is the folder: resolved first,
        # and then no link inside it leads out.
        base = skill.folder.resolve(strict=True)
    except OSError:
        return []
    found: list[str] = []
    for seen, item in enumerate(outside.walk(base), start=1):
        if seen > _FILES_WALKED:
            break
        if not item.reason and item.rel != SKILL_FILE:
            found.append(outside.shown(item.rel))
    return sorted(found)


def _on_disk(base: Path, wanted: str) -> str:
    """The name on disk of `wanted` as the file list showed it: a name that is not UTF-8 is
    listed with U+FFFD, which the model sends back."""
    if "\N{REPLACEMENT CHARACTER}" not in wanted:
        return wanted
    for item in outside.walk(base):
        if not item.reason and outside.shown(item.rel) == wanted:
            return item.rel
    return wanted


def read_file_schema(names: list[str]) -> dict:
    """The OpenAI ``read_skill_file`` function for the loaded skills `names` that have files."""
    return {
        "type": "function",
        "function": {
            "name": READ_FILE_NAME,
            "description": (
                "Read a text file from the folder of a loaded skill, such as a reference, "
                "form or script its instructions name. Read one when the instructions say "
                f"to; files over {FILE_MAX // 1024} KB are cut."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "skill": {"type": "string", "description": "The loaded skill.", "enum": names},
                    "path": {
                        "type": "string",
                        "description": "The file's path relative to the skill's folder.",
                    },
                },
                "required": ["skill", "path"],
            },
        },
    }


class SkillFileError(SkillError):
    """read_skill_file cannot answer; str() is the sentence the model reads."""


def read_skill_file(skill: Skill, path: str) -> tuple[str, str]:
    """A text file of `skill`'s folder: (what the model reads, a short line for the window).

    `path` must be relative; it is resolved (symbolic links too) and must stay inside
    the folder. Only UTF-8 text is read, at most FILE_MAX bytes (the cap is stated in
    the result). A path that is not there is answered with the closest existing ones.
    Raises SkillFileError with the sentence the model reads.
    """
    if skill.folder is None:
        raise SkillFileError(f"the skill {skill.name} has no folder to read files from.")
    wanted = path.strip().replace("\\", "/").removeprefix("./")
    if not wanted or wanted.startswith("/") or re.match(r"[A-Za-z]:/", wanted) or "\0" in wanted:
        raise SkillFileError(
            f"give a path relative to the {skill.name} folder, such as "
            f"{(resource_files(skill) or ['reference.md'])[0]}."
        )
    try:
        base = skill.folder.resolve(strict=True)
    except OSError as error:
        raise SkillFileError(
            f"the {skill.name} folder cannot be read ({error.strerror})."
        ) from None
    target = os.path.realpath(base / _on_disk(base, wanted))
    if target == str(base) or not outside.inside(str(base), target):
        raise SkillFileError(
            f"{wanted} is outside the {skill.name} folder; only files inside it can be read."
        )
    if os.path.isdir(target):
        inside = [f for f in resource_files(skill) if f.startswith(wanted.rstrip("/") + "/")]
        listed = ", ".join(inside[:FILES_LISTED]) or "no files"
        raise SkillFileError(f"{wanted} is a folder; it holds {listed}. Read one of those.")
    try:
        with outside.open_regular(target) as file:
            info = os.fstat(file.fileno())
            raw, cut = outside.read_head(file, target, FILE_MAX)
    except outside.NotRegular:
        raise SkillFileError(
            f"{wanted} is not a regular file; only text files can be read."
        ) from None
    except outside.Refused as error:
        if os.path.lexists(target):
            raise SkillFileError(f"{wanted} {error.reason}.") from None
        files = resource_files(skill)
        close = difflib.get_close_matches(wanted, files, n=3, cutoff=0.3)
        close += [f for f in files if os.path.basename(f) == os.path.basename(wanted)]
        hint = ", ".join(dict.fromkeys(close)) or ", ".join(files[:FILES_LISTED]) or "none"
        raise SkillFileError(
            f"{wanted} is not in the {skill.name} folder. Closest existing files: {hint}."
        ) from None
    if b"\0" in raw[:8192]:
        raise SkillFileError(f"{wanted} is not a text file; only text files can be read.")
    try:
        text = codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=not cut)
    except UnicodeDecodeError:
        raise SkillFileError(f"{wanted} is not UTF-8 text; only text files can be read.") from None
    size = size_text(info.st_size) if info.st_size >= 1024 else f"{info.st_size} bytes"
    if cut:
        note = f"cut at {size_text(FILE_MAX)}: the file holds {size} and only {size_text(FILE_MAX)} is read"
    else:
        note = f"{size}, whole (files over {size_text(FILE_MAX)} are cut)"
    shown = f"{skill.name}/{wanted}"
    summary = f"{shown}, {size}" + (f", cut at {size_text(FILE_MAX)}" if cut else "")
    return f"[{shown}: {note}]\n\n{text}", summary
