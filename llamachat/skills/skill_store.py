"""`SkillStore`: the skills under one or more folders, scanned and cached.

Scanning reads only each file's frontmatter; a body is read, capped, the first
time the skill is loaded. Everything stays cached in one snapshot until
`SkillStore.refresh()` sees a changed mtime, so a send costs dictionary look-ups,
not file reads. When two roots hold one name the earlier wins; `SkillStore.hidden`
lists the rest.

Problems are logged: as warnings when they differ from the ones last reported
(a digest of them is kept in the user's state folder, so each start and each
`ask --print` does not repeat the same list), otherwise at info level, which
`llamachat --debug` shows.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from llamachat import outside
from llamachat.skills.parse import (
    SKILL_FILE,
    Entry,
    Problem,
    Skill,
    file_sig,
    parse_skill,
    read_body,
)
from llamachat.skills.text import (
    CATALOG_CHARS,
    LOAD_SKILL_NAME,
    TOOL_INTRO,
    budgeted_catalog,
    full_catalog,
)

log = logging.getLogger(__name__)

# Filesystem timestamps come from a coarse clock (a kernel tick, or a whole
# second on some filesystems), so a file changed just before a scan can change
# again without its mtime moving. Anything that recent is re-checked on the
# next refresh, as git does with "racily clean" index entries.
_RACY_NS = 2_000_000_000

_WORD = re.compile(r"[\w-]+")


def reported_problems_path() -> Path:
    """Where the digest of the skill problems last reported is kept (the user's state folder)."""
    return Path(platformdirs.user_state_dir("llamachat")) / "skill-problems.sha256"


@dataclass(frozen=True)
class _Snapshot:
    """One consistent scan of every root; replaced whole so readers need no lock."""

    scanned_ns: int
    root_sigs: tuple
    file_sigs: dict[Path, tuple | None]
    parsed: dict[Path, tuple[Entry | None, list[Problem]]]
    entries: dict[str, Entry]
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
        if file_sig(entry.path) != entry.sig or _racy(entry.sig, snap.scanned_ns):
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
                "description": TOOL_INTRO + catalog,
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
            if (files or sig is None) and (file_sig(path) != sig or _racy(sig, snap.scanned_ns)):
                return True
        return False

    def _scan(self, old: _Snapshot | None) -> _Snapshot:
        scanned_ns = time.time_ns()
        root_sigs: list[tuple | None] = []
        file_sigs: dict[Path, tuple | None] = {}
        parsed: dict[Path, tuple[Entry | None, list[Problem]]] = {}
        problems: list[Problem] = []
        entries: dict[str, Entry] = {}
        hidden: dict[str, list[Path]] = {}
        for root in self._roots:
            root_sig = _dir_sig(root)
            root_sigs.append(root_sig)
            for folder in _candidates(root, root_sig, problems):
                path = folder / SKILL_FILE
                sig = file_sig(path)
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
                    result = parse_skill(path, sig, folder.name)
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
            catalog=full_catalog(model),
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

    def _skill(self, entry: Entry) -> Skill | None:
        if entry.skill is not None:
            return entry.skill
        try:
            text, bad_bytes = read_body(entry)
        except (OSError, outside.Refused) as error:
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


def _dir_sig(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return ("error", error.errno)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, stat.S_IFMT(st.st_mode))


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
