"""The managed llama-server's process group: spawning it, pumping its output, stopping it.

`ServerProcess` owns the one running server process of a `ManagedServer` (``server``):
the child it spawns (in its own process group, with the log pump thread and, with a
grace period, its keeper from ``keeper``) or the one adopted from a llamachat that died,
and the stopping of that whole group (SIGTERM twice, then SIGKILL). When to start,
restart or give up is the supervisor's business, not this one's.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from llamachat.logs import RotatingLog
from llamachat.router.keeper import AdoptedProcess, start_keeper, stop_keeper

log = logging.getLogger("llamachat.router.server")

STOP_TIMEOUT = 5.0
# How long llama-server's first SIGTERM is given before the second (see ServerProcess.kill).
TERM_GRACE = 1.0

# The server process: llamachat's child, or one adopted from a llamachat that died (keeper).
Process = subprocess.Popen[bytes] | AdoptedProcess


def _death_signal_setter() -> Callable[[], None] | None:
    """A preexec_fn making the kernel SIGKILL the child when its parent thread dies."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    # Looked up before fork: the child runs only the bare prctl call, nothing that takes locks.
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    pr_set_pdeathsig = 1
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl; then nobody would send the signal.
        if os.getppid() != parent:
            os._exit(1)

    return set_death_signal


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ServerProcess:
    """The server's process group: spawned (log pump, keeper) or adopted, and stopped whole."""

    def __init__(
        self, log_file: RotatingLog, lock_path: Path, notify: Callable[[str, str], None]
    ) -> None:
        self._log_file = log_file
        self._lock_path = lock_path
        self._emit = notify
        self._proc: Process | None = None
        self._keeper: subprocess.Popen[bytes] | None = None
        self._proc_lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The pid of the running llama-server (also its process group id), if any."""
        with self._proc_lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._proc.pid
        return None

    def take(self, proc: AdoptedProcess) -> None:
        """Make an adopted server (``keeper``) the one running."""
        with self._proc_lock:
            self._proc = proc

    def spawn(
        self,
        cmd: list[str],
        env: dict[str, str],
        *,
        grace: int,
        lost_in: Callable[[bytes], list[str]],
    ) -> subprocess.Popen[bytes]:
        """Start `cmd` in its own process group, its output pumped into the log.

        `grace` > 0 gives it a keeper (it outlives llamachat for that long); `lost_in` names the
        RPC workers a chunk of its output tells are lost (then it is restarted without them).
        """
        self._emit("starting", " ".join(cmd))
        self._log_file.write(
            f"==== llamachat {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(cmd)}\n".encode()
        )
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            # Its own process group: stop() signals the router and the per-model servers it
            # spawned together, and a Ctrl-C in llamachat's terminal does not reach them.
            start_new_session=True,
            # With a grace period its keeper stops it, not llamachat's death.
            preexec_fn=None if grace else _death_signal_setter(),  # noqa: PLW1509 - a prctl only
        )
        with self._proc_lock:
            self._proc = proc
        if grace:
            assert proc.stdout is not None
            self._keeper = start_keeper(
                proc.pid, proc.stdout.fileno(), self._lock_path, self._log_file.path, grace
            )
        threading.Thread(
            target=self._pump, args=(proc, lost_in), name="llama-server log", daemon=True
        ).start()
        return proc

    def _pump(self, proc: subprocess.Popen[bytes], lost_in: Callable[[bytes], list[str]]) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            self._log_file.write(chunk)
            if lost_in(chunk):
                # Restarted, so that the next start leaves the lost worker out.
                _kill_group(proc.pid, signal.SIGTERM)
        proc.stdout.close()

    def reap(self, proc: Process) -> None:
        """Stop what is left of a server that exited or hung, and say how it ended."""
        stop_keeper(self._keeper)
        self._keeper = None
        code = proc.poll()
        if code is None:
            self.kill(proc, STOP_TIMEOUT)
            code = proc.returncode
        else:
            # The router is gone; per-model servers it started may linger in its group.
            _kill_group(proc.pid, signal.SIGKILL)
        tail = self._log_file.tail(600).strip()
        self._emit(
            "exited",
            f"llama-server exited with code {code}" + (f"; last output:\n{tail}" if tail else ""),
        )

    def terminate(self, timeout: float) -> None:
        """Stop the running server (and its keeper), if any."""
        stop_keeper(self._keeper)
        self._keeper = None
        with self._proc_lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            self.kill(proc, timeout)
            self._emit("stopped", f"llama-server (pid {proc.pid}) stopped")

    @staticmethod
    def kill(proc: Process, timeout: float) -> None:
        """Stop the group: SIGTERM, a second SIGTERM after a grace, SIGKILL after `timeout`.

        llama-server's first SIGTERM lets the requests in flight finish (a reply being
        generated, a warm-up) and only then exits, which may take minutes; its second one
        ends it at once ("Received second interrupt, terminating immediately"), the router
        and the model servers alike. An idle server exits on the first within ~0.1 s.
        """
        deadline = time.monotonic() + timeout
        for grace in (min(TERM_GRACE, timeout), None):
            if proc.poll() is not None:
                break
            _kill_group(proc.pid, signal.SIGTERM)
            # A stopped (hung) process acts on SIGTERM only once it runs again.
            _kill_group(proc.pid, signal.SIGCONT)
            wait = deadline - time.monotonic() if grace is None else grace
            try:
                proc.wait(max(wait, 0.0))
            except subprocess.TimeoutExpired:
                if grace is None:
                    log.warning("llama-server (pid %s) ignored SIGTERM; killing it", proc.pid)
        # Whatever is left in the group (the router, or per-model servers) is killed outright.
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
