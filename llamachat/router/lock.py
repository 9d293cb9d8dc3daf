"""Which llamachat runs which server: the lock file, and the key of a server llamachat manages.

Each config's managed server has a lock file in the user's runtime folder, flock'd by the
llamachat process that runs the server and holding its URL, pid and API key (0600): a second
llamachat of the same config finds the server there instead of starting another, and
``managed_key(url)`` gives any client of that URL the key it needs. Only a loopback URL can
be a managed server's (`is_loopback`). Raises nothing: a missing or unreadable lock is no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import ipaddress
import json
import os
import time
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import platformdirs


def is_loopback(url: str) -> bool:
    """True when ``url`` points at this machine (localhost, 127/8, ::1)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


class ServerLock:
    """An flock'd file holding the managed server's URL, pid and API key for other llamachats.

    The kernel drops an flock when its holder dies, however it dies, so a stale lock cannot
    keep the next llamachat from starting a server. The file is the user's alone (0600):
    it holds the key.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._recorded: tuple[str, str] | None = None

    def acquire(self) -> bool:
        """Take the lock; False when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        # A file left by an older llamachat may have the umask's wider mode.
        os.fchmod(fd, 0o600)
        fh = os.fdopen(fd, "r+")
        # A server's keeper takes the free lock for a moment to see that it is free: a few tries.
        deadline = time.monotonic() + 0.3
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    fh.close()
                    return False
                time.sleep(0.02)
        self._fh = fh
        return True

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._fh is not None

    def record(self, url: str, key: str, *, server: int | None = None) -> None:
        """Write the server's URL, key (and pid, for an adopter) into the held lock;
        this process's clients know it."""
        assert self._fh is not None
        self._fh.seek(0)
        self._fh.truncate()
        state: dict[str, object] = {"url": url, "pid": os.getpid(), "key": key}
        if server is not None:
            state["server"] = server
        self._fh.write(json.dumps(state))
        self._fh.flush()
        _MANAGED_KEYS[url] = key
        self._recorded = (url, key)

    def read_url(self, *, timeout: float = 5.0) -> str:
        """The URL the holder recorded ('' when none comes within `timeout`)."""
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

    def release(self, *, keep: bool = False) -> None:
        """Forget the recorded server and let go of the lock (`keep`: its record stays, for
        the next llamachat to adopt the server left running)."""
        if self._recorded is not None:
            url, key = self._recorded
            if _MANAGED_KEYS.get(url) == key:
                del _MANAGED_KEYS[url]
            self._recorded = None
        if self._fh is None:
            return
        if not keep:
            self._fh.seek(0)
            self._fh.truncate()
        self._fh.close()
        self._fh = None
