"""The managed server's grace period: it outlives a llamachat that dies, and is taken over.

A llama-server that llamachat runs would die with it, and a reply being written with it.
Instead (``server_grace`` > 0) each one gets a keeper, ``python -m llamachat.router.keeper``,
in a session of its own: while no llamachat holds the server lock (its owner was killed,
crashed, or quit letting a reply finish) the keeper writes the server's output to its log
(nobody else reads the pipe then, and a full pipe would stall the server), and when the
lock has stayed free for the grace period it stops the server, holding the lock meanwhile
so that nobody takes over a server being stopped. It ends when the server ends.

The next llamachat takes the lock, finds the dead owner's record (URL, key, the server's
pid) and a server that answers, and adopts it (`orphan`, `AdoptedProcess`): same port,
same key, supervised from then on, so a reply it is still writing is read on (issue 40).

Errors: none raised; what cannot be adopted is not, and llamachat starts a server as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

from llamachat.router.lock import ServerLock, is_loopback

# How often the keeper looks at the lock.
TICK = 0.5
# llama-server's first SIGTERM lets a request finish; the second ends it (see ServerProcess.kill).
TERM_GRACE = 1.0
STOP_TIMEOUT = 5.0


def start_keeper(
    server_pid: int, pipe_fd: int, lock: Path, log: Path, grace: int
) -> subprocess.Popen[bytes]:
    """Start the keeper of the server `server_pid` whose output is the pipe `pipe_fd`."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llamachat.router.keeper",
            *(str(part) for part in (server_pid, pipe_fd, lock, log, grace, os.getpid())),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(pipe_fd,),
        # Its own session: neither llamachat's death nor a Ctrl-C in its terminal reaches it.
        start_new_session=True,
    )


def stop_keeper(keeper: subprocess.Popen[bytes] | None) -> None:
    """End a keeper whose server llamachat stopped or restarted itself."""
    if keeper is None:
        return
    with contextlib.suppress(ProcessLookupError):
        keeper.kill()
    keeper.wait()


class AdoptedProcess:
    """A llama-server that another (dead) llamachat started, watched like a child (a pidfd)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        # Not our child: its exit is seen through a pidfd, and its code is not ours to know.
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        """None while it runs; -1 once it ended."""
        return self.wait(0.0, check=False)

    def wait(self, timeout: float | None = None, *, check: bool = True) -> int | None:
        """Wait until it ends; subprocess.TimeoutExpired after `timeout` (unless not `check`)."""
        if self.returncode is None:
            ready, _, _ = select.select([self._pidfd], [], [], timeout)
            if ready:
                self.returncode = -1
                os.close(self._pidfd)
            elif check:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        return self.returncode


def orphan(lock: ServerLock) -> tuple[str, str, int] | None:
    """The URL, key and pid of the server a dead llamachat left in `lock` (held), if it answers."""
    try:
        state = json.loads(lock.path.read_text() or "{}")
        url, key, pid = state["url"], state["key"], int(state["server"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(url, str) and isinstance(key, str) and is_loopback(url)):
        return None
    try:
        os.kill(pid, 0)
        if not hasattr(os, "pidfd_open"):
            return None
        ok = httpx.get(f"{url}/health", timeout=2.0, trust_env=False).status_code == 200
    except (OSError, httpx.HTTPError):
        return None
    return (url, key, pid) if ok else None


# ---------------------------------------------------------------- the keeper process


def _free_lock(path: Path) -> IO[str] | None:
    """The lock, taken, when no llamachat holds it (the caller lets go at once or later)."""
    try:
        fh = open(path, "r+")  # noqa: SIM115 - held beyond this function on purpose
    except OSError:
        return None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


def _recorded_server(lock: Path) -> int | None:
    """The server pid the lock's holder recorded (None while it has not yet, or unreadable)."""
    try:
        server = json.loads(lock.read_text() or "{}").get("server")
    except (OSError, ValueError, AttributeError):
        return None
    return server if isinstance(server, int) else None


def _stop(server: AdoptedProcess) -> None:
    for wait in (TERM_GRACE, STOP_TIMEOUT):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, signal.SIGTERM)
            os.killpg(server.pid, signal.SIGCONT)
        if server.wait(wait, check=False) is not None:
            break
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(server.pid, signal.SIGKILL)


def keep(server_pid: int, pipe_fd: int, lock: Path, log: Path, grace: float, owner: int) -> None:
    """Pump the server's output once the owner is gone; stop it after `grace` s without one."""
    from llamachat.logs import RotatingLog

    try:
        server = AdoptedProcess(server_pid)
    except OSError:
        return
    out: RotatingLog | None = None
    free_since: float | None = None
    while server.poll() is None:
        if out is None and os.getppid() != owner:
            out = RotatingLog(log)
        watch = [pipe_fd] if out is not None and pipe_fd >= 0 else []
        ready, _, _ = select.select(watch, [], [], TICK)
        if ready:
            chunk = os.read(pipe_fd, 65536)
            if chunk:
                assert out is not None
                out.write(chunk)
            else:
                os.close(pipe_fd)
                pipe_fd = -1
        held = _free_lock(lock)
        # A llamachat holding the lock but running a server of its own did not adopt this one.
        if held is None and _recorded_server(lock) in (server.pid, None):
            free_since = None
            continue
        free_since = free_since or time.monotonic()
        if time.monotonic() - free_since < grace:
            if held is not None:
                held.close()
            continue
        # Nobody came back: stopped under the lock, then the record goes with it.
        _stop(server)
        if held is not None:
            held.truncate(0)
            held.close()
        if out is not None:
            out.write(
                f"==== llamachat keeper: nobody took the server over in {grace:g} s; stopped\n".encode()
            )
        return


if __name__ == "__main__":
    pid, fd, lock_file, log_file, grace_s, owner_pid = sys.argv[1:7]
    keep(int(pid), int(fd), Path(lock_file), Path(log_file), float(grace_s), int(owner_pid))
