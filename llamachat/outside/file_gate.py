"""The one way llamachat opens a file from outside, and walks a folder from outside.

The faults every surface met, each handled here once:

- a FIFO, socket or device (or a link to one, such as ``/dev/zero``) is never read: it is
  opened non-blocking (a FIFO with no writer would block forever), its type is checked on
  the open file (nothing can swap it in between), and it is refused with the reason;
- a size is bounded by the bytes read, never by ``stat`` alone: a device reports 0 and a
  sparse file reports what it likes, so a read asks for one byte past the limit and stops;
- a folder is never left through a link inside it: a link whose target is outside is left
  out with the reason (a link *to* the folder, such as one to a whole skill folder, is the
  folder: the caller resolves it before walking);
- a name that is not UTF-8 is kept as it is on disk (``str`` paths carry its bytes as
  surrogates, so the file can still be opened) and `shown` with replacement characters.

Qt-free.

Errors: `Refused` and its kinds (see the package's docstring); ``.reason`` is a phrase
that follows the file's name ("is a pipe (FIFO), not a regular file").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

TEXT_PROBE = 8192
"""Bytes at a file's start searched for a NUL: one there means the file is not text."""

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)

StrPath = str | os.PathLike[str]


class Refused(Exception):
    """A file from outside that is not read; ``reason`` follows its name in a sentence."""

    def __init__(self, path: StrPath, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{shown(path)} {reason}")


class NotRegular(Refused):
    """A FIFO, socket, device or folder where a file was wanted; it was not read."""


class TooLarge(Refused):
    """More bytes than the caller's limit, counted while reading."""


class NotText(Refused):
    """NUL bytes, or bytes that are not UTF-8, where text was wanted."""


class Unreadable(Refused):
    """The system's error opening or reading the file (permissions, gone, I/O); ``why`` is it."""

    def __init__(self, path: StrPath, error: OSError) -> None:
        self.why = error.strerror or str(error)
        super().__init__(path, f"cannot be read ({self.why})")


def shown(path: StrPath | bytes) -> str:
    """`path` for people: bytes that are not UTF-8 become replacement characters.

    The path itself stays as it was (it is what opens the file); only this text is
    changed, so it can go into SQLite, a label, a log line or a message to the model.
    """
    return os.fsencode(path).decode("utf-8", "replace")


def kind(mode: int) -> str:
    """Why a file of `mode` is not read, as a phrase after its name ('' for a regular file)."""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "is a pipe (FIFO), not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    return "is not a regular file"


def open_regular(path: StrPath) -> BinaryIO:
    """`path` opened for reading in binary; NotRegular or Unreadable unless it is a regular file.

    Opened non-blocking and checked on the open descriptor: a FIFO is refused without
    waiting for a writer, and a file swapped for one after a check is caught too.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        # A socket cannot be opened at all (ENXIO): say what it is rather than the errno.
        try:
            what = kind(os.stat(path).st_mode)
        except OSError:
            what = ""
        if what:
            raise NotRegular(path, what) from None
        raise Unreadable(path, exc) from None
    try:
        what = kind(os.fstat(fd).st_mode)
        if what:
            raise NotRegular(path, what)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_head(file: BinaryIO, path: StrPath, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the open `file`, and whether more followed (Unreadable on an error)."""
    data = _read(file, path, limit + 1)
    return data[:limit], len(data) > limit


def _read(file: BinaryIO, path: StrPath, count: int) -> bytes:
    try:
        return file.read(count) if count > 0 else b""
    except OSError as exc:
        raise Unreadable(path, exc) from None


def read_bytes(path: StrPath, limit: int, *, cut: bool = False) -> tuple[bytes, bool]:
    """The bytes of the regular file at `path`, at most `limit`, and whether it held more.

    With `cut` False a file holding more raises TooLarge; at most `limit` + 1 bytes are
    read either way, whatever ``stat`` says.
    """
    with open_regular(path) as file:
        if not cut:
            # A regular file's size is a fair early answer; the read still counts.
            size = os.fstat(file.fileno()).st_size
            if size > limit:
                raise TooLarge(path, _too_large(size, limit))
        data, more = read_head(file, path, limit)
    if more and not cut:
        raise TooLarge(path, _too_large(None, limit))
    return data, more


def read_text(path: StrPath, limit: int, *, encoding: str = "utf-8") -> str:
    """The text of the regular file at `path`, of at most `limit` bytes.

    Raises TooLarge past `limit`, NotText for a NUL in its first TEXT_PROBE bytes (read
    before the rest, so ``/dev/zero``'s like is refused at once) or for bytes that are not
    `encoding`; NotRegular and Unreadable as `open_regular`.
    """
    with open_regular(path) as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise TooLarge(path, _too_large(size, limit))
        head = _read(file, path, min(TEXT_PROBE, limit + 1))
        if b"\0" in head:
            raise NotText(path, "is not a text file (it holds NUL bytes)")
        data = head + _read(file, path, limit + 1 - len(head))
    if len(data) > limit:
        raise TooLarge(path, _too_large(None, limit))
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise NotText(path, "is not UTF-8 text") from None


def _too_large(size: int | None, limit: int) -> str:
    said = f" ({_mb(size)})" if size is not None else ""
    return f"is too large{said}; the limit is {_mb(limit)}"


def _mb(count: int) -> str:
    if count < 1024 * 1024:
        return f"{max(count // 1024, 1)} KB"
    return f"{count / (1024 * 1024):.1f} MB"


@dataclass(frozen=True)
class Walked:
    """One entry `walk` found: a regular file (`reason` empty, `stat` its target's), or one
    left out and why."""

    path: Path
    rel: str
    reason: str = ""
    stat: os.stat_result | None = None


def walk(
    root: StrPath,
    *,
    skip_dirs: frozenset[str] = frozenset(),
    hidden: bool = False,
    within: StrPath | None = None,
) -> Iterator[Walked]:
    """The files under the folder `root`, sorted by name, folder by folder, never leaving it.

    A link inside that leads out of `root` is left out with its reason; a link to a folder
    inside is not followed (its files come where they are); a FIFO, socket or device is
    left out with its reason (it is never opened). Names starting with "." are left out
    unless `hidden`, and so are folders named in `skip_dirs`. A `root` that is itself a
    regular file is its only entry (`rel` ""). `rel` is the path below `root` with "/".
    `within` (a folder holding `root`) widens where links may lead, `root` by default.
    """
    top = Path(root)
    base = os.path.realpath(within if within is not None else top)
    try:
        mode = os.stat(top).st_mode
    except OSError as exc:
        yield Walked(top, "", f"cannot be read ({exc.strerror or exc})")
        return
    if not stat.S_ISDIR(mode):
        yield _file(top, "", base, single=True) or Walked(top, "", kind(mode))
        return
    yield from _walk(top, "", base, skip_dirs, hidden)


def _walk(
    folder: Path, rel: str, base: str, skip_dirs: frozenset[str], hidden: bool
) -> Iterator[Walked]:
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        yield Walked(folder, rel, f"cannot be listed ({exc.strerror or exc})")
        return
    folders: list[os.DirEntry[str]] = []
    for entry in entries:
        if entry.name.startswith(".") and not hidden:
            continue
        here = f"{rel}/{entry.name}" if rel else entry.name
        try:
            is_folder = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_folder = False
        if is_folder:
            if entry.name not in skip_dirs:
                folders.append(entry)
            continue
        found = _file(Path(entry.path), here, base)
        if found is not None:
            yield found
    for entry in folders:
        here = f"{rel}/{entry.name}" if rel else entry.name
        yield from _walk(Path(entry.path), here, base, skip_dirs, hidden)


def inside(base: str, target: str) -> bool:
    """Whether the real path `target` is the real folder `base` or under it."""
    try:
        return os.path.commonpath([base, target]) == base
    except ValueError:  # another drive (Windows)
        return False


def _file(path: Path, rel: str, base: str, single: bool = False) -> Walked | None:
    """A file entry as `walk` reports it; None for a link to a folder inside `base`."""
    if not single and os.path.islink(path):
        target = os.path.realpath(path)
        if not inside(base, target):
            return Walked(
                path,
                rel,
                f"is a link to {shown(target)}, outside the folder; links never lead out of it",
            )
    try:
        info = os.stat(path)
    except OSError as exc:
        return Walked(path, rel, f"cannot be read ({exc.strerror or exc})")
    if stat.S_ISDIR(info.st_mode):
        return None
    return Walked(path, rel, kind(info.st_mode), info)
