"""Log files of ours: the rotating log, and the folder logs go in.

Here, outside `router/`, because both llama-server's output (`router.server`) and each MCP
server's stderr (`tools.mcp.mcp_log`) are written through it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

import platformdirs

LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3


def log_dir() -> Path:
    """The per-user folder llamachat's log files go in."""
    return Path(platformdirs.user_log_dir("llamachat"))


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

    def _rotate_locked(self) -> None:
        # The current file becomes <name>.1 and the oldest is dropped.
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
