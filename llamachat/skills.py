"""Skills: instruction folders loaded into a conversation on demand.

A skill is a folder ``<root>/<name>/SKILL.md`` (agentskills.io): YAML frontmatter
with ``name`` and ``description`` (plus optional ``license``, ``compatibility``,
``metadata``, ``allowed-tools`` and any other keys, which are kept), then markdown
instructions, and any files those point at. The model loads one through the
``load_skill`` tool and reads its files through ``read_skill_file``
(`read_skill_file`, `resource_files`); the user loads one by typing ``/name`` or by
naming it in a message (`SkillStore.mentions` says which mentions load at once and
which are only suggested).

Parsing is as lenient as other harnesses: a description over 1,024 characters, a
value YAML cannot read as written (retried as quoted text), a `name:` unlike its
folder (the `name:` wins) or a missing or invalid one (the folder's name) load with
a warning. Only a skill with no usable name or description, or unreadable, is left
out. When two roots hold one name the earlier wins; `SkillStore.hidden` lists the rest.

Scanning reads only each file's frontmatter; a body is read, capped, the first
time the skill is loaded. Everything stays cached until `SkillStore.refresh()`
sees a changed mtime, so a send costs dictionary look-ups, not file reads.

Problems are logged: as warnings when they differ from the ones last reported
(a digest of them is kept in the user's state folder, so each start and each
`ask --print` does not repeat the same list), otherwise at info level, which
`llamachat --debug` shows.

Errors: scanning never raises. Whatever is wrong with a root, a folder or a file
becomes a `Problem` (its path and a sentence saying what to fix; `skipped` tells an
error from a warning), and the good skills load regardless. Only these raise:

    SkillError              base of this module's exceptions
    ├── SkillImportError    import_folder refused one or more folders
    │                       (.problems: list[Problem], .imported: list[Path])
    └── SkillFileError      read_skill_file cannot answer (the sentence the model reads)
"""

from __future__ import annotations

import codecs
import difflib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs
import yaml

log = logging.getLogger(__name__)

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

CATALOG_CHARS = 6000
"""Characters of catalog lines in the tool description (about 1500 tokens)."""

READ_FILE_NAME = "read_skill_file"
"""The name of the tool the model calls to read a file of a loaded skill's folder."""

FILE_MAX = 256 * 1024
"""Bytes of a skill's file read_skill_file gives the model; the rest is cut, as it says."""

# Local models run with small contexts: the file list names a few dozen files, and
# the walk that builds it stops early in a folder holding a whole project.
_FILES_LISTED = 40
_FILES_WALKED = 500

# Filesystem timestamps come from a coarse clock (a kernel tick, or a whole
# second on some filesystems), so a file changed just before a scan can change
# again without its mtime moving. Anything that recent is re-checked on the
# next refresh, as git does with "racily clean" index entries.
_RACY_NS = 2_000_000_000

_BOM = codecs.BOM_UTF8
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_WORD = re.compile(r"[\w-]+")
_COMMAND = re.compile(r"(?<!\S)/([a-z0-9]+(?:-[a-z0-9]+)*)(?!\S)")
_CODE = re.compile(
    r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)|`[^`\n]+`", re.MULTILINE | re.DOTALL
)
# A top-level `key: value` line whose value is not a block scalar or a comment.
_TOP_PAIR = re.compile(r"([A-Za-z0-9_-]+):[ \t]+(?![|>#])(.*?\S)[ \t]*$")

_TOOL_INTRO = (
    "Load a skill: instructions for one kind of task. When the user's request "
    "matches a skill below, load it before you start and follow what it says. "
    "A skill already loaded in this conversation need not be loaded again.\n\n"
    "Skills:\n"
)


def reported_problems_path() -> Path:
    """Where the digest of the skill problems last reported is kept (the user's state folder)."""
    return Path(platformdirs.user_state_dir("llamachat")) / "skill-problems.sha256"


class SkillError(Exception):
    """Base of the exceptions this module raises."""


class SkillImportError(SkillError):
    """import_folder refused folders: `problems` says why, `imported` lists what was copied."""

    def __init__(self, problems: Sequence[Problem], *, imported: Sequence[Path] = ()) -> None:
        self.problems = list(problems)
        self.imported = list(imported)
        lines = "\n".join(f"- {problem}" for problem in self.problems)
        done = f" ({len(self.imported)} imported)" if self.imported else ""
        super().__init__(f"{len(self.problems)} skill folder(s) not imported{done}:\n{lines}")


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
class _Entry:
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


class _Unusable(SkillError):
    """Internal: why a SKILL.md cannot become a skill (becomes a Problem)."""


@dataclass(frozen=True)
class _Snapshot:
    """One consistent scan of every root; replaced whole so readers need no lock."""

    scanned_ns: int
    root_sigs: tuple
    file_sigs: dict[Path, tuple | None]
    parsed: dict[Path, tuple[_Entry | None, list[Problem]]]
    entries: dict[str, _Entry]
    hidden: dict[str, list[Path]]
    problems: list[Problem]
    names: list[str]
    user_names: list[str]
    model_names: list[str]
    mentionable: frozenset[str]
    catalog: str


class SkillStore:
    """The skills under one or more roots; earlier roots win a name clash."""

    def __init__(
        self, directory: Path | str | Sequence[Path | str], *, reported: Path | None = None
    ) -> None:
        given = [directory] if isinstance(directory, (str, os.PathLike)) else list(directory)
        # Every llamachat process scans the same folders: the digest file lets only the
        # first to see a new set of problems warn about it.
        self._reported = reported or reported_problems_path()
        # The last budgeted catalog: (id of its snapshot, budget), the snapshot, the result.
        self._budget_cache: tuple[tuple[int, int], _Snapshot, tuple] | None = None
        self._roots: list[Path] = []
        seen: set[str] = set()
        for root in given:
            path = Path(os.path.abspath(Path(root).expanduser()))
            # The same folder listed twice would shadow every skill with itself.
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                self._roots.append(path)
        self._lock = threading.Lock()
        self._snap: _Snapshot | None = None

    def roots(self) -> list[Path]:
        """The folders searched for skills, earliest (winning) first."""
        return list(self._roots)

    def names(self) -> list[str]:
        """Every skill's name, in store order (alphabetical)."""
        return list(self._current().names)

    def user_names(self) -> list[str]:
        """Names the user may load with /name or a mention (not `user-invocable: false`)."""
        return list(self._current().user_names)

    def descriptions(self) -> dict[str, str]:
        """Every skill's description by name, from the scan (no instructions are read)."""
        return {name: entry.description for name, entry in self._current().entries.items()}

    def skills(self) -> list[Skill]:
        """Every skill with its instructions, in store order (reads bodies not yet loaded)."""
        snap = self._current()
        found = (self._skill(entry) for entry in snap.entries.values())
        return [skill for skill in found if skill is not None]

    def load(self, name: str) -> Skill | None:
        """The skill called `name`, or None; the name is looked up, never used as a path."""
        if not isinstance(name, str) or not name:
            return None
        snap = self._current()
        entry = snap.entries.get(name)
        if entry is None:
            return None
        # One stat keeps a body from being read at the offset of an older version.
        if _file_sig(entry.path) != entry.sig or _racy(entry.sig, snap.scanned_ns):
            self.refresh()
            entry = self._current().entries.get(name)
            if entry is None:
                return None
        return self._skill(entry)

    def hidden(self) -> dict[str, list[Path]]:
        """By name, the SKILL.md files a skill of an earlier root hides, in root order."""
        return {name: list(paths) for name, paths in self._current().hidden.items()}

    def mentions(self, text: str, *, always: Iterable[str] = ()) -> tuple[list[str], list[str]]:
        """The skills `text` mentions: (to load now, to suggest), each in store order.

        A mention loads at once only when it cannot be an ordinary word: the exact
        name of a hyphenated skill (`pdf-tools`, as written), or any mention of a
        skill in `always` (the user turned mentions on for it). Any other mention (a
        one-word name like `pdf`, or `PDF-Tools` in other case) is only suggested.
        """
        found = self.match_mentions(text)
        if not found:
            return [], []
        words = set(_WORD.findall(text))
        keep = set(always)
        now = [name for name in found if name in keep or ("-" in name and name in words)]
        return now, [name for name in found if name not in now]

    def problems(self) -> list[Problem]:
        """What is wrong with the skills found, each with its path and the fix."""
        snap = self._current()
        found = list(snap.problems)
        for entry in snap.entries.values():
            found.extend(entry.body_problems)
        return found

    def directory(self) -> str:
        """The catalog the model sees: one capped ``- name: description`` line per skill."""
        return self._current().catalog

    def tool_schema(self, *, max_chars: int | None = None) -> dict | None:
        """The OpenAI ``load_skill`` function, or None when no skill is model-invocable.

        `max_chars` caps the catalog (the context's budget for it, `budgeted_catalog`):
        shorter descriptions first, then skills left out of the catalog and the enum.
        """
        snap = self._current()
        if not snap.model_names:
            return None
        catalog, names = snap.catalog, snap.model_names
        if max_chars is not None:
            catalog, names, _left_out = self._budgeted(snap, max_chars)
        return {
            "type": "function",
            "function": {
                "name": LOAD_SKILL_NAME,
                "description": _TOOL_INTRO + catalog,
                "parameters": {
                    "type": "object",
                    "properties": {
                        "name": {
                            "type": "string",
                            "description": "The skill to load.",
                            "enum": list(names),
                        },
                    },
                    "required": ["name"],
                },
            },
        }

    def left_out(self, max_chars: int) -> list[str]:
        """The model-invocable skills a catalog of `max_chars` leaves out, in store order."""
        snap = self._current()
        return self._budgeted(snap, max_chars)[2] if snap.model_names else []

    def _budgeted(self, snap: _Snapshot, max_chars: int) -> tuple[str, list[str], list[str]]:
        # Asked at every measure and send: kept for the snapshot and budget it was made for.
        key = (id(snap), max_chars)
        cached = self._budget_cache
        if cached is not None and cached[0] == key and cached[1] is snap:
            return cached[2]
        entries = [snap.entries[name] for name in snap.model_names]
        result = budgeted_catalog(entries, min(max_chars, CATALOG_CHARS))
        self._budget_cache = (key, snap, result)
        return result

    def watch_paths(self) -> list[Path]:
        """What a file watcher should watch to call refresh(): roots, their folders, SKILL.mds.

        A folder watch sees files appear, vanish or be replaced (editors that
        save by renaming); only a watch on the file sees it edited in place.
        """
        snap = self._current()
        paths = [root for root, sig in zip(self._roots, snap.root_sigs) if sig is not None]
        for path, sig in snap.file_sigs.items():
            paths.append(path.parent)
            if sig is not None:
                paths.append(path)
        return paths

    def match_mentions(self, text: str) -> list[str]:
        """User-invocable skills named in `text` as whole words, any case, in store order."""
        snap = self._current()
        if not text or not snap.mentionable:
            return []
        # A name is a run of word characters and hyphens, so a mention is exactly
        # such a run; splitting once beats trying 500 alternatives at every offset.
        found = {word for word in _WORD.findall(text.lower()) if word in snap.mentionable}
        if not found:
            return []
        return [name for name in snap.user_names if name in found]

    def refresh(self, *, files: bool = True) -> bool:
        """Re-scan if any root or SKILL.md changed (stat calls only otherwise); True on change.

        With `files=False` only the roots and the skill folders that had no SKILL.md are
        looked at: a skill added, removed or renamed is seen at the cost of a few stat
        calls, a SKILL.md edited in place only by a full refresh.
        """
        with self._lock:
            old = self._snap
            if old is None:
                self._snap = self._scan(None)
                return True
            if not self._stale(old, files=files):
                return False
            new = self._scan(old)
            self._snap = new
            return (new.root_sigs, new.file_sigs, new.parsed) != (
                old.root_sigs,
                old.file_sigs,
                old.parsed,
            )

    def _current(self) -> _Snapshot:
        snap = self._snap
        if snap is None:
            with self._lock:
                if self._snap is None:
                    self._snap = self._scan(None)
                snap = self._snap
        return snap

    def _stale(self, snap: _Snapshot, *, files: bool = True) -> bool:
        for root, sig in zip(self._roots, snap.root_sigs):
            if _dir_sig(root) != sig or _racy(sig, snap.scanned_ns):
                return True
        for path, sig in snap.file_sigs.items():
            if (files or sig is None) and (_file_sig(path) != sig or _racy(sig, snap.scanned_ns)):
                return True
        return False

    def _scan(self, old: _Snapshot | None) -> _Snapshot:
        scanned_ns = time.time_ns()
        root_sigs: list[tuple | None] = []
        file_sigs: dict[Path, tuple | None] = {}
        parsed: dict[Path, tuple[_Entry | None, list[Problem]]] = {}
        problems: list[Problem] = []
        entries: dict[str, _Entry] = {}
        hidden: dict[str, list[Path]] = {}
        for root in self._roots:
            root_sig = _dir_sig(root)
            root_sigs.append(root_sig)
            for folder in _candidates(root, root_sig, problems):
                path = folder / SKILL_FILE
                sig = _file_sig(path)
                file_sigs[path] = sig
                if sig is None:
                    continue  # a folder without SKILL.md is simply not a skill
                if (
                    old is not None
                    and old.file_sigs.get(path) == sig
                    and path in old.parsed
                    and not _racy(sig, old.scanned_ns)
                ):
                    result = old.parsed[path]
                else:
                    result = _parse(path, sig, folder.name)
                parsed[path] = result
                entry, found = result
                problems.extend(found)
                if entry is None:
                    continue
                winner = entries.get(entry.name)
                if winner is not None:
                    hidden.setdefault(entry.name, []).append(path)
                    problems.append(
                        Problem(
                            path,
                            f"is hidden by {winner.path}, a skill with the same name in an "
                            "earlier skills folder; rename one of the two folders (and its "
                            "`name:`) to use both.",
                        )
                    )
                    continue
                entries[entry.name] = entry
        ordered = dict(sorted(entries.items()))
        self._log_problems(problems, old)
        model = [entry for entry in ordered.values() if entry.model_invocable]
        user_names = [name for name, entry in ordered.items() if entry.user_invocable]
        return _Snapshot(
            scanned_ns=scanned_ns,
            root_sigs=tuple(root_sigs),
            file_sigs=file_sigs,
            parsed=parsed,
            entries=ordered,
            hidden=hidden,
            problems=problems,
            names=list(ordered),
            user_names=user_names,
            model_names=[entry.name for entry in model],
            mentionable=frozenset(user_names),
            catalog=_catalog(model),
        )

    def _log_problems(self, problems: list[Problem], old: _Snapshot | None) -> None:
        """Log the problems new to this store: warnings only when the set was not reported."""
        known = set(old.problems) if old is not None else set()
        fresh = [problem for problem in problems if problem not in known]
        if old is not None and not fresh and len(problems) == len(old.problems):
            return
        listed = "\n".join(sorted(map(str, problems)))
        # No file stands for no problems, so that problems which come back are told again.
        digest = hashlib.sha256(listed.encode()).hexdigest() if problems else ""
        try:
            reported = self._reported.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            reported = ""
        level = logging.INFO if digest == reported else logging.WARNING
        for problem in fresh:
            log.log(level, "skill problem: %s", problem)
        if digest == reported:
            return
        try:
            if digest:
                self._reported.parent.mkdir(parents=True, exist_ok=True)
                self._reported.write_text(digest + "\n", encoding="ascii")
            else:
                self._reported.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("cannot remember the reported skill problems: %s", exc)

    def _skill(self, entry: _Entry) -> Skill | None:
        if entry.skill is not None:
            return entry.skill
        try:
            text, bad_bytes = _read_body(entry)
        except OSError as error:
            log.warning("cannot read skill %s: %s", entry.path, error)
            return None
        if bad_bytes and not entry.body_problems:
            problem = Problem(
                entry.path,
                "has bytes in its instructions that are not UTF-8; they are shown as "
                "\N{REPLACEMENT CHARACTER}. Save the file as UTF-8.",
                skipped=False,
            )
            log.warning("skill problem: %s", problem)
            entry.body_problems.append(problem)
        # Racing threads would build equal Skills; keeping either is fine.
        entry.skill = Skill(
            name=entry.name,
            description=entry.description,
            text=text,
            path=entry.path,
            folder=entry.folder,
            model_invocable=entry.model_invocable,
            user_invocable=entry.user_invocable,
            metadata=entry.metadata,
        )
        return entry.skill


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


def system_part(skill: Skill) -> str:
    """The ``[skill: name]`` chunk a loaded skill adds to the system prompt."""
    lines = [SKILL_HEADER.format(name=skill.name)]
    files = _files_line(skill)
    if files:
        lines.append(files)
    return "\n".join([*lines, skill.text])


def import_folder(src: Path, dest_root: Path) -> list[Path]:
    """Copy a skill folder, or each skill folder one level inside `src`, into `dest_root`.

    Each folder is validated first and lands under its frontmatter `name`;
    symlinks are copied as what they point to. An invalid skill, or one whose
    name already exists in `dest_root`, is refused and never overwrites. The
    valid ones are copied regardless; if any was refused, SkillImportError
    lists why and carries the copied paths in `imported`.
    """
    src = Path(src).expanduser()
    dest_root = Path(dest_root).expanduser()
    if os.path.lexists(src / SKILL_FILE):
        folders = [src]
    elif src.is_dir():
        try:
            folders = sorted(
                child
                for child in src.iterdir()
                if not child.name.startswith(".")
                and child.is_dir()
                and os.path.lexists(child / SKILL_FILE)
            )
        except OSError as error:
            raise SkillImportError(
                [Problem(src, f"cannot be listed ({error.strerror}); check its permissions.")]
            ) from error
    else:
        raise SkillImportError([Problem(src, "is not a folder; choose a skill folder.")])
    if not folders:
        raise SkillImportError(
            [
                Problem(
                    src,
                    f"holds no {SKILL_FILE}, and neither does any folder inside it; choose a "
                    "skill folder or a folder of skill folders.",
                )
            ]
        )
    try:
        dest_root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SkillImportError(
            [Problem(dest_root, f"cannot be created ({error.strerror}); check its permissions.")]
        ) from error
    problems: list[Problem] = []
    imported: list[Path] = []
    for folder in folders:
        path = folder / SKILL_FILE
        entry, found = _parse(path, _file_sig(path), None)
        if entry is None:
            problems.extend(problem for problem in found if problem.skipped)
            continue
        target = dest_root / entry.name
        if os.path.lexists(target):
            problems.append(
                Problem(
                    folder,
                    f"was not imported: {target} already exists and is never overwritten; "
                    "remove or rename it first.",
                )
            )
            continue
        try:
            _copy_skill(folder, target)
        except OSError as error:
            problems.append(Problem(folder, f"could not be copied ({error}); nothing was kept."))
            continue
        imported.append(target)
    if problems:
        raise SkillImportError(problems, imported=imported)
    return imported


def _copy_skill(folder: Path, target: Path) -> None:
    # Copy beside the target under a hidden name, then rename: a scan running
    # meanwhile skips dot-folders, so it never sees half a skill.
    staging = Path(tempfile.mkdtemp(prefix=f".import-{target.name}-", dir=target.parent))
    try:
        shutil.copytree(folder, staging, dirs_exist_ok=True, ignore_dangling_symlinks=True)
        if os.path.lexists(target):
            raise FileExistsError(f"{target} appeared while copying")
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _dir_sig(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return ("error", error.errno)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, stat.S_IFMT(st.st_mode))


def _file_sig(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ("dangling",) if os.path.lexists(path) else None
    except OSError as error:
        return ("error", error.errno)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, stat.S_IFMT(st.st_mode))


def _racy(sig: tuple | None, scanned_ns: int) -> bool:
    return sig is not None and isinstance(sig[0], int) and sig[0] >= scanned_ns - _RACY_NS


def _candidates(root: Path, root_sig: tuple | None, problems: list[Problem]) -> list[Path]:
    """The folders directly inside `root` (symlinks followed), or [] with a problem."""
    if root_sig is None:
        return []  # a root that does not exist yet is the normal fresh-install case
    if root_sig[0] == "error":
        problems.append(
            Problem(root, f"cannot be read ({os.strerror(root_sig[1])}); check its permissions.")
        )
        return []
    if root_sig[3] != stat.S_IFDIR:
        problems.append(
            Problem(
                root,
                "is not a folder; skills live in <skills folder>/<name>/SKILL.md, so point "
                "the skills setting at a folder.",
            )
        )
        return []
    try:
        with os.scandir(root) as listing:
            # Dot-folders are version control, tool state or an import in progress.
            names = [e.name for e in listing if not e.name.startswith(".") and _is_dir(e)]
    except OSError as error:
        problems.append(
            Problem(root, f"cannot be listed ({error.strerror}); check its permissions.")
        )
        return []
    return [root / name for name in sorted(names)]


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _parse(path: Path, sig: tuple | None, folder_name: str | None) -> tuple[_Entry | None, list]:
    """Read one SKILL.md's frontmatter: (entry or None, problems).

    `folder_name` is the name the skill must have; None (importing) takes the
    frontmatter's `name`, since the import creates the folder.
    """
    problems: list[Problem] = []
    try:
        entry = _parse_or_raise(path, sig, folder_name, problems)
    except _Unusable as why:
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
) -> _Entry:
    if sig == ("dangling",):
        try:
            target = os.readlink(path)
        except OSError:
            target = "a file"
        raise _Unusable(
            f"is a symbolic link to {target}, which does not exist; point it at a real file "
            "or replace it with one."
        )
    if sig is None or sig[0] == "error":
        reason = os.strerror(sig[1]) if sig else "it vanished"
        raise _Unusable(f"cannot be read ({reason}); check that it exists and is readable.")
    if sig[4] != stat.S_IFREG:
        raise _Unusable(
            f"is not a regular file (a folder?); the skill's instructions must be a file "
            f"named {SKILL_FILE}."
        )
    try:
        header, body_offset = _read_frontmatter(path)
    except OSError as error:
        raise _Unusable(f"cannot be read ({error.strerror}); check its permissions.") from error
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
        raise _Unusable("has a `description:` that is not text; put it in quotes.")
    if description is None or not description.strip():
        raise _Unusable(
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
                f"has {_size(body_size)} of instructions; only the first {_size(BODY_MAX)} "
                "reach the model. Move reference material into separate files in the "
                "skill folder and name them in the instructions.",
                skipped=False,
            )
        )
    return _Entry(
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
    with open(path, "rb") as f:
        first = f.readline(FRONTMATTER_MAX)
        if first.startswith(_UTF16_BOMS):
            raise _Unusable("is saved as UTF-16; save it as UTF-8.")
        first = first.removeprefix(_BOM)
        if first.rstrip() != b"---":
            raise _Unusable(
                "does not start with frontmatter; make its first line `---`, then "
                "`name:` and `description:` lines, then a line holding only `---`."
            )
        lines: list[bytes] = []
        total = 0
        while True:
            line = f.readline(FRONTMATTER_MAX + 1)
            if not line:
                raise _Unusable(
                    "has frontmatter that is never closed; add a line holding only `---` "
                    "after the last key."
                )
            if line.rstrip() == b"---":
                return b"".join(lines), f.tell()
            total += len(line)
            if total > FRONTMATTER_MAX:
                raise _Unusable(
                    f"has no closing `---` in its first {_size(FRONTMATTER_MAX)}; add a "
                    "line holding only `---` after the last frontmatter key."
                )
            lines.append(line)


def _load_yaml(path: Path, text: str, problems: list[Problem]) -> dict:
    try:
        data = yaml.load(text, Loader=_Loader)
    except ValueError as error:
        # PyYAML raises ValueError, not YAMLError, for dates like 2024-13-45.
        raise _Unusable(
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
            raise _Unusable(_yaml_message(error)) from error
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
        raise _Unusable(
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
    """The skill's name: the frontmatter's if valid, else its folder's; _Unusable if neither."""
    rule = "1-64 lower-case letters, digits and single hyphens, like `pdf-tools`"
    given = name.strip() if isinstance(name, str) else ""
    if folder_name is None:
        if not given:
            raise _Unusable(f"has no `name:`; add a `name:` ({rule}).")
        if not _valid_name(given):
            raise _Unusable(f"has `name: {given}`, which is not a valid skill name ({rule}).")
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
    raise _Unusable(
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


def _read_body(entry: _Entry) -> tuple[str, bool]:
    """The instructions, capped at BODY_MAX bytes with a note; and whether bytes were bad."""
    with open(entry.path, "rb") as f:
        f.seek(entry.body_offset)
        raw = f.read(BODY_MAX)
        cut = bool(f.read(1))
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
            f"\n\n[Cut here: these instructions are {_size(entry.body_size)}; only the first "
            f"{_size(BODY_MAX)} are loaded.]"
        )
    return text, bad


def _catalog(entries: list[_Entry]) -> str:
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


def budgeted_catalog(entries: Sequence[_Entry], max_chars: int) -> tuple[str, list[str], list[str]]:
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


def _tool_content(skill: Skill) -> str:
    lines = [SKILL_HEADER.format(name=skill.name)]
    if skill.folder is not None:
        lines.append(f"Folder: {skill.folder} (relative paths below are inside it)")
        files = _files_line(skill)
        if files:
            lines.append(files)
    return "\n".join(lines) + "\n\n" + skill.text


def _files_line(skill: Skill) -> str:
    """The line telling the model which files the skill's folder holds ('' when none)."""
    files = resource_files(skill)
    if not files:
        return ""
    more = len(files) - _FILES_LISTED
    listed = ", ".join(files[:_FILES_LISTED]) + (f" and {more} more" if more > 0 else "")
    return f"Files in its folder, read with {READ_FILE_NAME}: {listed}"


def resource_files(skill: Skill) -> list[str]:
    """The files in a skill's folder besides SKILL.md, as sorted relative paths.

    Dot-files and dot-folders are left out, and so is a symbolic link that leads out
    of the folder; the walk stops after a few hundred entries.
    """
    if skill.folder is None:
        return []
    try:
        base = skill.folder.resolve(strict=True)
    except OSError:
        return []
    found: list[str] = []
    seen = 0
    for here, folders, names in os.walk(base):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(names):
            seen += 1
            if seen > _FILES_WALKED:
                return sorted(found)
            if name.startswith(".") or (here == str(base) and name == SKILL_FILE):
                continue
            path = os.path.join(here, name)
            if _inside(base, path) and os.path.isfile(path):
                found.append(os.path.relpath(path, base).replace(os.sep, "/"))
    return sorted(found)


def _inside(base: Path, path: str) -> bool:
    # realpath follows symlinks, so a link pointing out of the folder is caught too.
    return os.path.realpath(path).startswith(os.path.join(base, ""))


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
    target = os.path.realpath(base / wanted)
    if not target.startswith(os.path.join(base, "")):
        raise SkillFileError(
            f"{wanted} is outside the {skill.name} folder; only files inside it can be read."
        )
    if os.path.isdir(target):
        inside = [f for f in resource_files(skill) if f.startswith(wanted.rstrip("/") + "/")]
        listed = ", ".join(inside[:_FILES_LISTED]) or "no files"
        raise SkillFileError(f"{wanted} is a folder; it holds {listed}. Read one of those.")
    try:
        # Non-blocking: a FIFO with no writer would otherwise hang the tool round.
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        files = resource_files(skill)
        close = difflib.get_close_matches(wanted, files, n=3, cutoff=0.3)
        close += [f for f in files if os.path.basename(f) == os.path.basename(wanted)]
        hint = ", ".join(dict.fromkeys(close)) or ", ".join(files[:_FILES_LISTED]) or "none"
        raise SkillFileError(
            f"{wanted} is not in the {skill.name} folder. Closest existing files: {hint}."
        ) from None
    except OSError as error:
        raise SkillFileError(f"{wanted} cannot be read ({error.strerror}).") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SkillFileError(f"{wanted} is not a regular file; only text files can be read.")
        raw = file.read(FILE_MAX)
        cut = bool(file.read(1))
    if b"\0" in raw[:8192]:
        raise SkillFileError(f"{wanted} is not a text file; only text files can be read.")
    try:
        text = codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=not cut)
    except UnicodeDecodeError:
        raise SkillFileError(f"{wanted} is not UTF-8 text; only text files can be read.") from None
    size = _size(info.st_size) if info.st_size >= 1024 else f"{info.st_size} bytes"
    if cut:
        note = f"cut at {_size(FILE_MAX)}: the file holds {size} and only {_size(FILE_MAX)} is read"
    else:
        note = f"{size}, whole (files over {_size(FILE_MAX)} are cut)"
    shown = f"{skill.name}/{wanted}"
    summary = f"{shown}, {size}" + (f", cut at {_size(FILE_MAX)}" if cut else "")
    return f"[{shown}: {note}]\n\n{text}", summary


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MB"
    return f"{count // 1024} KB"
