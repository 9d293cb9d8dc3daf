"""The freedesktop entries: llamachat in the applications menu, and at login if asked.

`install(command)` writes, under $XDG_DATA_HOME (~/.local/share), the menu entry
`applications/llamachat.desktop` (with the actions "New chat" and "Quick ask") and
the icon (`icons/hicolor/scalable/apps/llamachat.svg` plus PNG sizes drawn from it);
`uninstall()` removes them, with the folders that held only them.
`set_autostart(command, on)` writes or removes `$XDG_CONFIG_HOME/autostart/llamachat.desktop`,
which starts llamachat in the background (tray and quick ask shortcut) at login: it
exists exactly when the `autostart` setting is true. `command` is how this llamachat is
started (`launcher()`). `set_worker_autostart` does the same for `llamachat worker`
(`llamachat-worker.desktop`), lending this machine to another's llama-server from login.
Errors: OSError from the file system.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import platformdirs

from llamachat.config import APP_NAME
from llamachat.ui.desktop import icon

DESKTOP_FILE = f"{APP_NAME}.desktop"
WORKER_DESKTOP_FILE = f"{APP_NAME}-worker.desktop"

# Characters that make an Exec argument need quotes (Desktop Entry Specification, "Exec key").
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def data_home() -> Path:
    """$XDG_DATA_HOME, else ~/.local/share."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def config_home() -> Path:
    """$XDG_CONFIG_HOME, else ~/.config."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def menu_entry_path() -> Path:
    """Where the applications menu entry goes."""
    return data_home() / "applications" / DESKTOP_FILE


def autostart_path() -> Path:
    """Where the autostart entry goes."""
    return config_home() / "autostart" / DESKTOP_FILE


def worker_autostart_path() -> Path:
    """Where the worker's autostart entry goes."""
    return config_home() / "autostart" / WORKER_DESKTOP_FILE


def icon_paths() -> list[Path]:
    """Where the icon goes: the SVG, then one PNG per size."""
    theme = data_home() / "icons" / "hicolor"
    return [theme / "scalable" / "apps" / f"{APP_NAME}.svg"] + [
        theme / f"{size}x{size}" / "apps" / f"{APP_NAME}.png" for size in icon.PNG_SIZES
    ]


def launcher(config_path: Path | None = None) -> list[str]:
    """The command that starts this llamachat, with `--config` for a file not the default one."""
    if getattr(sys, "frozen", False):
        command = [sys.executable]  # the one-folder build's own program
    else:
        # The console script pip put beside this interpreter, else one on PATH; a menu
        # has no virtual environment activated, so the path is absolute.
        beside = Path(sys.executable).parent / APP_NAME
        found = str(beside) if beside.is_file() else shutil.which(APP_NAME)
        command = [str(Path(found).absolute())] if found else [sys.executable, "-m", APP_NAME]
    default = Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"
    if config_path is not None and config_path.absolute() != default:
        command += ["--config", str(config_path.absolute())]
    return command


def exec_line(command: Sequence[str]) -> str:
    """`command` as the value of an Exec key: quoted where the specification asks, % doubled."""
    quoted = []
    for arg in command:
        arg = arg.replace("%", "%%")
        if arg and not _RESERVED.intersection(arg):
            quoted.append(arg)
        else:
            quoted.append('"' + re.sub(r'([\\"`$])', r"\\\1", arg) + '"')
    # A string value escapes its backslashes once more.
    return " ".join(quoted).replace("\\", "\\\\")


def menu_entry(command: Sequence[str]) -> str:
    """The applications menu entry's text."""
    run = exec_line(command)
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Version=1.4\n"
        f"Name={APP_NAME}\n"
        "GenericName=Local AI chat\n"
        "Comment=Chat with the models you run yourself with llama.cpp\n"
        f"Icon={APP_NAME}\n"
        f"Exec={run}\n"
        "Terminal=false\n"
        "StartupNotify=true\n"
        "Categories=Utility;\n"
        "Keywords=llama;llama.cpp;LLM;AI;assistant;\n"
        "Actions=new-chat;quick-ask;\n"
        "\n"
        "[Desktop Action new-chat]\n"
        "Name=New chat\n"
        f"Exec={run} --new-chat\n"
        "\n"
        "[Desktop Action quick-ask]\n"
        "Name=Quick ask\n"
        f"Exec={run} ask\n"
    )


def autostart_entry(command: Sequence[str]) -> str:
    """The autostart entry's text: llamachat in the background, no window."""
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Version=1.4\n"
        f"Name={APP_NAME}\n"
        "Comment=llamachat in the tray, with its quick ask shortcut\n"
        f"Icon={APP_NAME}\n"
        f"Exec={exec_line(command)} --background\n"
        "Terminal=false\n"
        "NoDisplay=true\n"
    )


def worker_autostart_entry(command: Sequence[str]) -> str:
    """The worker's autostart entry: `command` (a `llamachat worker ...` line) at login."""
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Version=1.4\n"
        f"Name={APP_NAME} worker\n"
        "Comment=Lend this machine's memory and compute to llama.cpp on another machine\n"
        f"Icon={APP_NAME}\n"
        f"Exec={exec_line(command)}\n"
        "Terminal=false\n"
        "NoDisplay=true\n"
    )


def set_worker_autostart(command: Sequence[str], on: bool) -> Path | None:
    """Write the worker's autostart entry when `on`, else remove it; its path when written."""
    path = worker_autostart_path()
    if on:
        return _write(path, worker_autostart_entry(command).encode())
    if path.is_file():
        path.unlink()
        _prune(path.parent, stop={config_home()})
    return None


def install(command: Sequence[str], *, autostart: bool = False) -> list[Path]:
    """Write the menu entry and the icon (and the autostart entry if asked); the files written."""
    svg, *pngs = icon_paths()
    written = [_write(svg, icon.SVG.read_bytes())]
    written += [
        _write(path, icon.png(size)) for path, size in zip(pngs, icon.PNG_SIZES, strict=True)
    ]
    written.append(_write(menu_entry_path(), menu_entry(command).encode()))
    started = set_autostart(command, autostart)
    return written + ([started] if started else [])


def uninstall() -> list[Path]:
    """Remove what `install` wrote, and the folders left empty by it; the files removed."""
    removed = []
    for path in (menu_entry_path(), autostart_path(), *icon_paths()):
        if path.is_file() or path.is_symlink():
            path.unlink()
            removed.append(path)
            _prune(path.parent, stop={data_home(), config_home()})
    return removed


def set_autostart(command: Sequence[str], on: bool) -> Path | None:
    """Write the autostart entry when `on`, else remove it; the entry's path when written."""
    path = autostart_path()
    if on:
        return _write(path, autostart_entry(command).encode())
    if path.is_file():
        path.unlink()
        _prune(path.parent, stop={config_home()})
    return None


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _prune(folder: Path, *, stop: set[Path]) -> None:
    """Remove `folder` and its parents while they are empty, up to (not including) `stop`."""
    while folder not in stop and folder != folder.parent and folder.is_dir():
        if any(folder.iterdir()):
            return
        folder.rmdir()
        folder = folder.parent
