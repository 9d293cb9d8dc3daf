"""Start and supervise llamachat's own llama.cpp router (``llama-server`` in router mode).

A router the user already runs is used as it is and never touched; only when ``router_url``
does not answer, is a loopback URL and ``manage_server`` is on does llamachat start one
(`ensure_router`), keep it alive (`ManagedServer`: restarting it with backoff when it dies
or stops answering), log its output with rotation (`RotatingLog`), and stop it on exit
without leaving a process behind. The process group itself (spawning it with its log pump
and keeper, stopping it whole) is ``process``'s `ServerProcess`.

The server llamachat starts listens on loopback only and wants a random API key (given in
its environment, so no other user sees it in the process list), or any local program and
any web page the user visits could use it. The key is kept in the lock file (``lock``:
0600, in the user's runtime folder), never in config.toml or a log; ``lock.managed_key(url)``
gives it to every client of that URL, in this process or a second llamachat of the same user.
Which binary runs is ``binary``'s business; the models folder and preset, ``model_files``'.

Errors: the ``ManagedServerError`` tree of ``llamachat.errors`` (ServerNotFound, ServerLocked,
ServerStartError, RouterUnavailable), importable from here too.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from llamachat.errors import (
    ManagedServerError,
    RouterUnavailable,
    ServerLocked,
    ServerNotFound,
    ServerStartError,
)
from llamachat.logs import RotatingLog, log_dir
from llamachat.router.binary import (
    binary_version,
    find_binary,
    launch_environment,
    launch_prefix,
    not_found_message,
    supports_option,
)
from llamachat.router.keeper import AdoptedProcess, orphan
from llamachat.router.lock import ServerLock, config_suffix, default_lock_path, is_loopback
from llamachat.router.model_files import default_preset_path
from llamachat.router.process import STOP_TIMEOUT, Process, ServerProcess
from llamachat.router.rpc_workers import WorkerSet
from llamachat.router.slot_cache import SlotFiles, default_slot_dir

if TYPE_CHECKING:
    from llamachat.config import Config

# What callers import from here, the errors and helpers of the modules it uses included.
__all__ = [
    "EventCallback",
    "ManagedServer",
    "ManagedServerError",
    "RotatingLog",
    "RouterUnavailable",
    "ServerLocked",
    "ServerNotFound",
    "ServerStartError",
    "default_log_path",
    "ensure_router",
    "find_binary",
    "free_port",
    "is_loopback",
    "load_failure_lines",
]

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
# A server that stayed up this long is healthy again: the next crash restarts it at once.
BACKOFF_RESET_AFTER = 60.0
# Consecutive starts that never became healthy before the supervisor gives up.
MAX_FAILED_STARTS = 5
# A running server is asked for /health this often; this many missed answers in a row
# (each waits 2 s) mean it hangs (SIGSTOP, a deadlock) and it is restarted as if it died.
# The router answers /health while a model loads, so a slow load is never taken for one.
HEALTH_INTERVAL = 5.0
HEALTH_MISSES = 3

EventCallback = Callable[[str, str], None]


# ---------------------------------------------------------------- small network helpers


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _get(url: str, *, timeout: float, **kwargs: Any) -> httpx.Response:
    # A proxy from the environment must not stand between us and a server on this machine.
    return httpx.get(url, timeout=timeout, trust_env=not is_loopback(url), **kwargs)


def _probe(url: str, *, timeout: float = 2.0) -> str:
    """'answers' (an HTTP reply came back), 'refused' (nothing listens) or 'taken'."""
    try:
        _get(f"{url}/health", timeout=timeout)
    except httpx.ConnectError:
        return "refused"
    except httpx.HTTPError:
        # Something accepted the connection but does not speak HTTP (or hangs): the port is
        # someone else's, so a managed server has to go elsewhere.
        return "taken"
    return "answers"


def _healthy(url: str) -> bool:
    try:
        return _get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


# ---------------------------------------------------------------- log file


def default_log_path(config_path: Path | None = None) -> Path:
    """Where the managed server of a config writes its output."""
    return log_dir() / f"llama-server{config_suffix(config_path)}.log"


# ---------------------------------------------------------------- load failures in the log


_SPAWN_RE = re.compile(r"spawning server instance with name=(?P<name>.+?) on port (?P<port>\d+)")
# A model server's line in the router's log: "[port] 0.00.020.418 E message".
_CHILD_LINE_RE = re.compile(r"^\[(?P<port>\d+)\]\s+(?:[\d.]+\s+)?(?P<level>[EW])\s+(?P<text>.*)$")
FAILURE_LINES = 3


def load_failure_lines(log_text: str, model: str, *, limit: int = FAILURE_LINES) -> list[str]:
    """The error lines the server of `model`'s latest load wrote into the router's log.

    The router prefixes each line of a model's server with that server's port and
    names the port when it spawns it; a load that failed leaves its reason in the
    server's error (E) lines, the cause first and its consequences after: the first
    `limit` distinct ones are given.
    """
    port = ""
    for match in _SPAWN_RE.finditer(log_text):
        if match["name"].strip() == model:
            port = match["port"]
    if not port:
        return []
    start = log_text.rfind(f"name={model} on port {port}")
    found: list[str] = []
    for line in log_text[start:].splitlines():
        child = _CHILD_LINE_RE.match(line.strip())
        if child and child["port"] == port and child["level"] == "E":
            text = child["text"].strip()
            if text and text not in found:
                found.append(text)
    return found[:limit]


# ---------------------------------------------------------------- the supervisor


class ManagedServer:
    """A llama-server router that llamachat started, restarts when it dies, and stops on exit."""

    def __init__(
        self,
        cfg: Config,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        lock_path: Path | None = None,
        on_event: EventCallback | None = None,
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        self.cfg = cfg
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.log_file = RotatingLog(log_path or default_log_path(cfg.path))
        self.ready_timeout = ready_timeout
        self.events: list[tuple[float, str, str]] = []
        self.restarts = 0
        self._on_event = on_event
        self._lock = ServerLock(lock_path or default_lock_path(cfg.path))
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._done = threading.Event()
        self._adopted: AdoptedProcess | None = None
        self._leave = False
        self._thread: threading.Thread | None = None
        self._binary: Path | None = None
        self._stop_timeout = STOP_TIMEOUT
        self.health_interval = HEALTH_INTERVAL
        """Seconds between /health checks of the running server."""
        self.health_misses = HEALTH_MISSES
        """Missed /health answers in a row after which the server counts as hung."""
        self.api_key = secrets.token_urlsafe(32)
        """The key the server wants on every endpoint but /health; never logged."""
        self.workers = WorkerSet(cfg.rpc_workers, cfg.rpc_split, url=self.url, notify=self._emit)
        """The RPC workers (rpc_workers) the server spreads models over."""
        self._process = ServerProcess(self.log_file, self._lock.path, self._emit)
        self._slot_files = (
            SlotFiles(default_slot_dir(cfg.path), cfg.slot_cache_mb * 1024 * 1024)
            if cfg.slot_cache_mb > 0
            else None
        )

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid of the running llama-server (also its process group id), if any."""
        return self._process.pid

    @property
    def log_path(self) -> Path:
        """The current log file."""
        return self.log_file.path

    @property
    def lock_path(self) -> Path:
        """The lock file naming this server's URL and key for a second llamachat."""
        return self._lock.path

    def load_failure(self, model: str) -> str:
        """Why `model`'s last load failed, in the server's own words from its log ('' if unsaid)."""
        return "\n".join(load_failure_lines(self.log_file.tail(256 * 1024), model))

    def command(self) -> list[str]:
        """The llama-server command line, in router mode (no ``-m``)."""
        binary = self._binary or find_binary(self.cfg)
        if binary is None:
            raise ServerNotFound(not_found_message(self.cfg))
        # Host and port always explicit: llama.cpp's default port is not to be relied on.
        cmd = [
            *launch_prefix(binary),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--models-dir",
            str(Path(self.cfg.models_dir).expanduser().resolve()),
        ]
        # Always a preset, so Model options can set one model's context and reload only it.
        cmd += ["--models-preset", str(self.preset_path.resolve())]
        if self.sleeps_when_idle():
            cmd += ["--sleep-idle-seconds", str(self.cfg.sleep_idle_seconds)]
        if self.slot_files is not None and supports_option(binary, "--slot-save-path"):
            # Chats' KV caches saved there outlive a restart (``slot_cache``).
            cmd += ["--slot-save-path", str(self.slot_files.folder.resolve())]
        cmd += self.workers.arguments(binary)
        cmd += list(self.cfg.server_args)
        return cmd

    @property
    def slot_files(self) -> SlotFiles | None:
        """The folder the server saves chats' slots in (None: slot_cache_mb is 0)."""
        return self._slot_files

    @property
    def preset_path(self) -> Path:
        """The models preset file the server reads (the config's, else llamachat's own)."""
        if self.cfg.models_preset:
            return Path(self.cfg.models_preset).expanduser()
        return default_preset_path()

    @property
    def version(self) -> str:
        """The running binary's version ('' when it cannot say)."""
        binary = self._binary or find_binary(self.cfg)
        return binary_version(binary) if binary is not None else ""

    def sleeps_when_idle(self) -> bool:
        """Whether the server puts idle models to sleep itself (sleep_idle_seconds, and a
        llama-server that has --sleep-idle-seconds); else llamachat unloads them."""
        if self.cfg.sleep_idle_seconds <= 0:
            return False
        binary = self._binary or find_binary(self.cfg)
        return binary is not None and supports_option(binary, "--sleep-idle-seconds")

    def adopt(self) -> bool:
        """Take over (lock, key, port) the server a dead llamachat left running (``keeper``)."""
        if self._thread is not None or not self.lock_path.exists() or not self._lock.acquire():
            return False
        found = orphan(self._lock)
        if found is None:
            self._lock.release()
            return False
        url, self.api_key, pid = found
        self.port = urlsplit(url).port or self.port
        self.workers = WorkerSet(
            self.cfg.rpc_workers, self.cfg.rpc_split, url=self.url, notify=self._emit
        )
        self._adopted = AdoptedProcess(pid)
        self._emit("adopted", f"took over the server a previous llamachat left (pid {pid})")
        return True

    def leave(self) -> None:
        """Let `stop` leave the server running (a reply to finish) for its keeper (``keeper``)."""
        self._leave = self.cfg.server_grace > 0

    def start(self) -> None:
        """Take the lock and start the server under a supervisor thread; returns at once.

        Raises ServerLocked when another llamachat process manages a server, ServerNotFound
        when there is no binary to run.
        """
        if self._thread is not None:
            return
        if not self._lock.held and not self._lock.acquire():
            url = self._lock.read_url()
            raise ServerLocked(
                f"Another llamachat process manages the llama.cpp server at {url or '?'}.",
                url=url,
            )
        try:
            self._binary = find_binary(self.cfg)
            if self._binary is None:
                raise ServerNotFound(not_found_message(self.cfg))
            Path(self.cfg.models_dir).expanduser().mkdir(parents=True, exist_ok=True)
            if self.slot_files is not None:
                self.slot_files.folder.mkdir(parents=True, exist_ok=True)
            if not self.preset_path.exists():
                self.preset_path.parent.mkdir(parents=True, exist_ok=True)
                self.preset_path.write_text(
                    "; Per-model options for llamachat's llama-server (llama.cpp models preset).\n"
                )
            self._lock.record(self.url, self.api_key)
        except BaseException:
            self._lock.release()
            raise
        # Asked now, off the GUI thread, so Help > About and the log view find it known.
        threading.Thread(target=binary_version, args=(self._binary,), daemon=True).start()
        # No rotation at start: the previous run's output stays readable after a restart of
        # llamachat (each start writes a "==== llamachat <time>" line); only size rolls over.
        self._stop.clear()
        self._done.clear()
        # The supervisor thread spawns every child: PR_SET_PDEATHSIG fires when the *thread*
        # that forked exits, so a short-lived caller thread must never be the parent.
        self._thread = threading.Thread(
            target=self._supervise, name="llama-server supervisor", daemon=True
        )
        self._thread.start()
        atexit.register(self.stop)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the server answers /health; False on timeout or when it gave up."""
        deadline = time.monotonic() + timeout
        while not self._ready.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._done.is_set():
                return False
            self._ready.wait(min(remaining, 0.1))
        return True

    def is_running(self) -> bool:
        """True while the server process is alive and has answered /health."""
        return self._ready.is_set() and self.pid is not None

    def stop(self, *, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server: SIGTERM its process group, SIGKILL after ``timeout``; wait for it."""
        atexit.unregister(self.stop)
        thread, self._thread = self._thread, None
        self._stop_timeout = timeout
        self._stop.set()
        if thread is not None:
            thread.join()
        self._lock.release(keep=self._leave)
        self.log_file.close()

    # -- supervisor thread

    def _emit(self, kind: str, message: str) -> None:
        self.events.append((time.time(), kind, message))
        log.info("llama-server %s: %s", kind, message)
        if self._on_event is not None:
            try:
                self._on_event(kind, message)
            except Exception:
                log.exception("on_event callback failed for %s", kind)

    def _supervise(self) -> None:
        failures = 0
        delay = BACKOFF_FIRST
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    proc = self._next_process()
                except OSError as exc:
                    self._emit("failed", f"could not run {self._binary}: {exc}")
                    return
                became_ready = self._wait_healthy(proc)
                if became_ready:
                    failures = 0
                    self._emit("ready", f"llama-server is ready at {self.url} (pid {proc.pid})")
                    self._watch(proc)
                if self._stop.is_set():
                    return
                self._ready.clear()
                self._process.reap(proc)
                if not became_ready:
                    failures += 1
                if failures >= MAX_FAILED_STARTS:
                    self._emit(
                        "gave_up",
                        f"llama-server failed to start {failures} times in a "
                        f"row; see {self.log_path}",
                    )
                    return
                if time.monotonic() - started > BACKOFF_RESET_AFTER:
                    delay = BACKOFF_FIRST
                self._emit("restarting", f"restarting llama-server in {delay:g} s")
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, BACKOFF_MAX)
                self.restarts += 1
        finally:
            # The supervisor thread is the children's parent, so it is also the one that
            # stops them: nothing it spawned outlives it.
            self._ready.clear()
            if not self._leave:
                self._process.terminate(self._stop_timeout)
            self._done.set()

    def _watch(self, proc: Process) -> None:
        """Return when the server exits, hangs (then it is said why), or stop() is called."""
        misses = 0
        next_check = time.monotonic() + self.health_interval
        while not self._stop.is_set() and proc.poll() is None:
            self._stop.wait(min(0.25, self.health_interval))
            if time.monotonic() < next_check or self._stop.is_set() or proc.poll() is not None:
                continue
            misses = 0 if _healthy(self.url) else misses + 1
            next_check = time.monotonic() + self.health_interval
            if misses >= self.health_misses:
                self._emit(
                    "hung",
                    f"llama-server (pid {proc.pid}) stopped answering: no /health answer "
                    f"{misses} times in a row",
                )
                return

    def _next_process(self) -> Process:
        """The server to supervise: the adopted one first, then ones spawned anew."""
        proc, self._adopted = self._adopted, None
        if proc is None:
            return self._spawn()
        self._process.take(proc)
        self._lock.record(self.url, self.api_key, server=proc.pid)
        return proc

    def _spawn(self) -> Process:
        cmd = self.command()
        # The keeper watches the server through a pidfd (Linux): elsewhere, no grace period.
        grace = self.cfg.server_grace if hasattr(os, "pidfd_open") else 0
        proc = self._process.spawn(
            cmd, self._environment(Path(cmd[0])), grace=grace, lost_in=self.workers.lost_in
        )
        if self._slot_files is not None:
            self._slot_files.server_started()
        self._lock.record(self.url, self.api_key, server=proc.pid)
        return proc

    def _environment(self, binary: Path) -> dict[str, str]:
        env = launch_environment(binary)
        # In the environment, not on the command line, which every user can read in ps.
        # The router passes it on to the per-model servers it starts, so they want it too.
        env["LLAMA_API_KEY"] = self.api_key
        env.pop("LLAMA_ARG_API_KEY_FILE", None)
        return env

    def _wait_healthy(self, proc: Process) -> bool:
        deadline = time.monotonic() + self.ready_timeout
        while not self._stop.is_set():
            if proc.poll() is not None:
                return False
            if _healthy(self.url):
                self._ready.set()
                return True
            if time.monotonic() > deadline:
                self._emit("failed", f"llama-server did not answer within {self.ready_timeout:g} s")
                return False
            self._stop.wait(0.1)
        return False


# ---------------------------------------------------------------- entry point for the app


def ensure_router(
    cfg: Config,
    *,
    on_event: EventCallback | None = None,
    ready_timeout: float = READY_TIMEOUT,
    beside: bool = False,
) -> tuple[str, ManagedServer | None]:
    """The router URL to talk to, and the ManagedServer when llamachat had to start one.

    A router that answers at cfg.router_url is used and never touched; with `beside`
    (the user asked for llamachat's own), llamachat's server starts on a free port instead.
    """
    url = cfg.router_url.rstrip("/")
    if cfg.manage_server and not beside:
        # A server a llamachat that died left running (its grace period) is taken over first:
        # it may answer at router_url, and its reply in flight is read on (issue 40).
        server = ManagedServer(cfg, on_event=on_event, ready_timeout=ready_timeout)
        if server.adopt():
            server.start()
            if server.wait_ready(ready_timeout):
                return server.url, server
            server.stop()
        else:
            server.log_file.close()
    state = "taken" if beside else _probe(url)
    if state == "answers":
        return url, None
    if not cfg.manage_server:
        raise RouterUnavailable(
            f"No llama.cpp router answers at {url}. Start `llama-server --models-dir <folder>` "
            "there, or set manage_server = true to let llamachat run one."
        )
    parts = urlsplit(url)
    if not is_loopback(url) or parts.scheme != "http":
        raise RouterUnavailable(
            f"No llama.cpp router answers at {url}. llamachat only starts its own server for a "
            "local http://127.0.0.1 URL; start the router there or change router_url."
        )
    port = parts.port or 80
    if state == "taken":
        port = free_port()
        if on_event is not None:
            on_event("port_taken", f"{url} is in use by something else; using port {port}")
    server = ManagedServer(cfg, port=port, on_event=on_event, ready_timeout=ready_timeout)
    try:
        server.start()
    except ServerLocked as locked:
        if locked.url and _wait_answers(locked.url, ready_timeout):
            return locked.url, None
        raise ServerStartError(
            f"Another llamachat process manages the llama.cpp server, but it does not answer "
            f"at {locked.url or '(no URL recorded)'}."
        ) from locked
    if not server.wait_ready(ready_timeout):
        reason = server.events[-1][2] if server.events else "no answer"
        tail = server.log_file.tail(1500).strip()
        server.stop()
        raise ServerStartError(
            f"llama-server did not start ({reason}); its log is {server.log_path}"
            + (f"\n\n{tail}" if tail else "")
        )
    return server.url, server


def _wait_answers(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _healthy(url):
            return True
        time.sleep(0.1)
    return False
