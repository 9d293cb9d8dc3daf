"""Which program opens a PDF at a page: a viewer known to take the page on its command line.

`viewer_command(path, page)` is the command that opens the PDF at `path` at `page`
(1-based): the desktop's default application for PDFs (`xdg-mime query default
application/pdf`, then its .desktop file's Exec) when it is one of `VIEWERS`; when no
default is set, the first of `VIEWERS` on PATH. None otherwise (another default
application, a desktop without xdg-mime's answer and no known viewer, a file that is
not a PDF): the caller opens the file the desktop's way, at its first page, since
xdg-open drops a file URL's #page=N.

Qt-free.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

VIEWERS: dict[str, tuple[str, ...]] = {
    "evince": ("-i", "{page}"),
    "okular": ("--page", "{page}"),
    "zathura": ("-P", "{page}"),
    "xreader": ("-i", "{page}"),
    "atril": ("-i", "{page}"),
}
"""PDF viewers and the arguments that open a file at a page (1-based), in order of preference."""
XDG_MIME_SECONDS = 3.0


def viewer_command(path: Path, page: int) -> list[str] | None:
    """The command opening the PDF at `path` at `page`, or None: open it without a page."""
    if path.suffix.lower() != ".pdf" or page < 1:
        return None
    default = default_pdf_application()
    if default is not None:
        name = Path(default[0]).name
        program = shutil.which(default[0])
        if name not in VIEWERS or program is None:
            return None  # the user's choice, which takes no page we know of
        return _command(program, VIEWERS[name], path, page)
    for name, arguments in VIEWERS.items():
        program = shutil.which(name)
        if program is not None:
            return _command(program, arguments, path, page)
    return None


def default_pdf_application() -> list[str] | None:
    """The command line (Exec, without field codes) of the desktop's default application
    for PDFs; None when xdg-mime is missing or names none, or its .desktop file is not found."""
    try:
        found = subprocess.run(
            ["xdg-mime", "query", "default", "application/pdf"],
            capture_output=True,
            text=True,
            timeout=XDG_MIME_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no default PDF application: %s", exc)
        return None
    desktop_id = found.stdout.strip()
    if not desktop_id:
        return None
    for folder in _data_dirs():
        entry = folder / "applications" / desktop_id
        if entry.is_file():
            return _exec(entry)
    return None


def _command(program: str, arguments: tuple[str, ...], path: Path, page: int) -> list[str]:
    return [program, *(argument.format(page=page) for argument in arguments), str(path)]


def _data_dirs() -> list[Path]:
    """Where .desktop files live, the user's first (the XDG base directory spec)."""
    home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    others = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    return [Path(folder) for folder in [home, *others.split(os.pathsep)] if folder]


def _exec(entry: Path) -> list[str] | None:
    """The Exec line of a .desktop file's [Desktop Entry], split, its %f/%U codes left out."""
    try:
        lines = entry.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    section = ""
    for line in lines:
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Desktop Entry]" and line.startswith("Exec="):
            try:
                words = shlex.split(line.removeprefix("Exec="))
            except ValueError:
                return None
            words = [word for word in words if not word.startswith("%")]
            return words or None
    return None
