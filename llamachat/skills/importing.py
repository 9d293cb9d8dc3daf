"""Importing skill folders into a skills folder, validated, never overwriting."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from llamachat import outside
from llamachat.skills.parse import SKILL_FILE, Problem, SkillError, file_sig, parse_skill

log = logging.getLogger(__name__)


class SkillImportError(SkillError):
    """import_folder refused folders: `problems` says why, `imported` lists what was copied."""

    def __init__(self, problems: Sequence[Problem], *, imported: Sequence[Path] = ()) -> None:
        self.problems = list(problems)
        self.imported = list(imported)
        lines = "\n".join(f"- {problem}" for problem in self.problems)
        done = f" ({len(self.imported)} imported)" if self.imported else ""
        super().__init__(f"{len(self.problems)} skill folder(s) not imported{done}:\n{lines}")


def import_folder(src: Path, dest_root: Path) -> list[Path]:
    """Copy a skill folder, or each skill folder one level inside `src`, into `dest_root`.

    Each folder is validated first and lands under its frontmatter `name`;
    symlinks are copied as what they point to, when that is inside `src` (see
    `_copy_files`). An invalid skill, or one whose
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
        entry, found = parse_skill(path, file_sig(path), None)
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
            _copy_skill(folder, target, src)
        except OSError as error:
            problems.append(Problem(folder, f"could not be copied ({error}); nothing was kept."))
            continue
        imported.append(target)
    if problems:
        raise SkillImportError(problems, imported=imported)
    return imported


def _copy_files(folder: Path, staging: Path, chosen: Path) -> None:
    """Copy the regular files of `folder` into `staging` through the gate: a link is copied
    as the file it points to when that is inside the folder the person chose (`chosen`: a
    collection's skills may share files); a FIFO, socket, device or a link out of it is
    left behind (logged), so an import never copies a secret from elsewhere into a skill
    the model reads, nor reads /dev/zero forever."""
    for item in outside.walk(folder, hidden=True, within=chosen):
        if item.reason:
            log.info("not imported with the skill: %s %s", outside.shown(item.path), item.reason)
            continue
        dest = staging / item.rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with outside.open_regular(item.path) as source, open(dest, "wb") as copy:
                shutil.copyfileobj(source, copy)
        except outside.Refused as exc:
            log.info("not imported with the skill: %s", exc)


def _copy_skill(folder: Path, target: Path, chosen: Path) -> None:
    # Copy beside the target under a hidden name, then rename: a scan running
    # meanwhile skips dot-folders, so it never sees half a skill.
    staging = Path(tempfile.mkdtemp(prefix=f".import-{target.name}-", dir=target.parent))
    try:
        _copy_files(folder.resolve(), staging, chosen.resolve())
        if os.path.lexists(target):
            raise FileExistsError(f"{target} appeared while copying")
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
