"""Whether Qt's X11 platform plugin can load, asked before Qt starts.

On a bare Linux, Qt's xcb plugin needs system libraries that PySide6's wheel does not
ship (libxcb-icccm4, libxcb-keysyms1, ...). Without them Qt aborts the process (exit
134) with a message naming a library that is installed. `problem()` loads the plugin's
libraries first, as Qt would, and when that fails lists what is missing (`ldd`) with
the packages that provide it on Debian/Ubuntu, Fedora and Arch.

Qt-free: PySide6 is found on disk, never imported. Errors: none; a check that cannot
run (no PySide6, no ldd) reports no problem and leaves the rest to Qt.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

PLUGIN = Path("Qt/plugins/platforms/libqxcb.so")
QPA_LIBRARY = Path("Qt/lib/libQt6XcbQpa.so.6")

# soname: (Debian/Ubuntu, Fedora, Arch) package.
PACKAGES: dict[str, tuple[str, str, str]] = {
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-render-util.so.0": (
        "libxcb-render-util0",
        "xcb-util-renderutil",
        "xcb-util-renderutil",
    ),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util", "xcb-util"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb", "libxcb"),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0", "libxcb", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb", "libxcb"),
    "libxcb.so.1": ("libxcb1", "libxcb", "libxcb"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libSM.so.6": ("libsm6", "libSM", "libsm"),
    "libICE.so.6": ("libice6", "libICE", "libice"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
}
"""The libraries Qt's xcb plugin links to, and the packages that install them."""

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)
_CANNOT_OPEN = re.compile(r"(\S+\.so[.\d]*): cannot open shared object file")


def uses_xcb(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Qt would pick its X11 (xcb) plugin: DISPLAY set, QT_QPA_PLATFORM unset or xcb.

    With QT_QPA_PLATFORM unset in a Wayland session, Qt picks Wayland instead.
    """
    env = os.environ if environ is None else environ
    if not sys.platform.startswith(("linux", "freebsd", "openbsd")) or not env.get("DISPLAY"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "").split(":")[0].split(";")[0].strip()
    if chosen:
        return chosen == "xcb"
    return not env.get("WAYLAND_DISPLAY")


def plugin_files() -> list[Path]:
    """PySide6's xcb plugin and the Qt library behind it ([] when PySide6 is not found)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    return [path for path in (root / QPA_LIBRARY, root / PLUGIN) if path.is_file()]


def missing_libraries(files: Sequence[Path]) -> list[str]:
    """The sonames `files` need and the system cannot find, in order, without repeats."""
    try:
        for path in files:
            ctypes.CDLL(str(path))
    except OSError as exc:
        failure = str(exc)
    else:
        return []  # the quick way: everything loads, as Qt will find it
    found: list[str] = []
    ldd = shutil.which("ldd")
    if ldd is not None:
        try:
            done = subprocess.run(
                [ldd, *map(str, files)], capture_output=True, text=True, timeout=10, check=False
            )
            found = _NOT_FOUND.findall(done.stdout)
        except (OSError, subprocess.SubprocessError) as exc:
            log.info("ldd could not list the missing libraries: %s", exc)
    if not found:
        found = _CANNOT_OPEN.findall(failure)
    return list(dict.fromkeys(found))


def install_advice(missing: Sequence[str]) -> str:
    """What to tell the user about `missing` sonames: the packages to install, per system."""
    system = [name for name in missing if name in PACKAGES]
    qt_own = [name for name in missing if name.startswith("libQt6")]
    other = [name for name in missing if name not in PACKAGES and name not in qt_own]
    first = (
        "llamachat: Qt's X11 support (the xcb platform plugin) cannot start: these system "
        f"libraries are missing: {', '.join(missing)}."
    )
    lines = [first]
    if system:
        debian, fedora, arch = (
            " ".join(dict.fromkeys(PACKAGES[name][column] for name in system))
            for column in range(3)
        )
        lines += [
            "Install them, then start llamachat again:",
            f"  Debian, Ubuntu:  sudo apt install {debian}",
            f"  Fedora:          sudo dnf install {fedora}",
            f"  Arch:            sudo pacman -S {arch}",
        ]
    if qt_own:
        lines.append(
            "Qt's own libraries are missing from PySide6: reinstall it "
            "(pip install --force-reinstall PySide6)."
        )
    if other:
        lines.append(f"Install the packages that provide {', '.join(other)}.")
    lines.append("On a Wayland desktop, QT_QPA_PLATFORM=wayland uses Wayland instead.")
    return "\n".join(lines)


def problem(environ: Mapping[str, str] | None = None) -> str:
    """'' when Qt can start here; else the message that says what to install."""
    if not uses_xcb(environ):
        return ""
    files = plugin_files()
    if not files:
        return ""
    missing = missing_libraries(files)
    return install_advice(missing) if missing else ""
