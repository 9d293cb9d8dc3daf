"""Whose is the router at a local URL: llamachat's own, or which program's (Linux /proc).

A router llamachat finds already running is used as it is; when it lists no models the
user should learn whose it is, to fix it there or let llamachat run its own beside it.
`router_owner(url)` says so in a sentence: a llama-server some llamachat started (its lock
file names the URL), the program listening on the port (its pid and command line, read
from /proc for the user's own processes), or another user's program.

Errors: none raised; what cannot be found out is said as unknown ('' from `listener`).
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from llamachat.router.lock import is_loopback, managed_key

_LISTEN = "0A"
# Characters of a command line quoted at most.
COMMAND_CAP = 160


@dataclass(frozen=True)
class Listener:
    """A process listening on a TCP port: its owner's uid, and pid and command line if ours."""

    uid: int
    pid: int | None = None
    command: str = ""


def listener(port: int, *, proc: Path = Path("/proc")) -> Listener | None:
    """The process listening on local TCP `port` (None when none is found, or not on Linux)."""
    inodes: dict[str, int] = {}
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes[f"socket:[{fields[9]}]"] = int(fields[7])
    if not inodes:
        return None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:  # another user's process, or gone
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in inodes:
                return Listener(inodes[target], int(entry.name), _command(entry))
    return Listener(next(iter(inodes.values())))


def _command(entry: Path) -> str:
    try:
        raw = (entry / "cmdline").read_bytes()
    except OSError:
        return ""
    text = " ".join(raw.decode("utf-8", "replace").replace("\0", " ").split())
    return text if len(text) <= COMMAND_CAP else text[: COMMAND_CAP - 1] + "…"


def router_owner(url: str) -> str:
    """Whose the router at local `url` is, as a clause ('' for a remote URL or when unknown)."""
    if not is_loopback(url):
        return ""
    if managed_key(url):
        return "it is a llama-server another llamachat started"
    parts = urlsplit(url)
    found = listener(parts.port or (443 if parts.scheme == "https" else 80))
    if found is None:
        return ""
    if found.uid != os.getuid():
        try:
            user = pwd.getpwuid(found.uid).pw_name
        except KeyError:
            user = f"uid {found.uid}"
        return f"it is a program of the user {user}, not llamachat's"
    if found.pid is None:
        return "it is not llamachat's"
    program = Path(found.command.split(" ", 1)[0]).name or "a program"
    return f"it is not llamachat's: {program} (pid {found.pid}), started as: {found.command}"
