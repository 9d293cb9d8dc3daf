"""A folder holding each kind of file that outside input brings: the tests of every surface
that reads folders (skills, libraries, imports) and of `outside` itself use it.

`messy_folder(root)` makes, beside two ordinary text files:

    fifo.txt        a FIFO (opening it blocking would wait for a writer forever)
    socket.txt      a Unix socket
    zero.txt        a link to /dev/zero (endless bytes; stat says 0)
    sparse.txt      a 1 GB sparse file (no disk used; reading it whole takes 1 GB)
    passwd.txt      a link to a file outside the folder (a secret a search must not send)
    elsewhere       a link to a folder outside the folder
    caf\\xe9.txt     a file whose name is not UTF-8 (Latin-1 bytes)
    gone.txt        a link to nothing
    loop.txt        a link to itself
    locked.txt      a file no one may read (only when the tests do not run as root)

`returns_at_once(action)` runs `action` on a thread and fails the test if it blocks (a FIFO
opened blocking would hang the test instead).

Qt-free.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SPARSE_BYTES = 1024 * 1024 * 1024
"""The sparse file's size."""

SECRET = "outside-secret-words"
"""What the file outside the folder holds: it must never be indexed or sent."""

NON_UTF8_NAME = os.fsdecode(b"caf\xe9.txt")
"""The name that is not UTF-8, as a `str` path carries it (a surrogate for the byte)."""


@dataclass(frozen=True)
class MessyFolder:
    """What `messy_folder` made: the folder, the outside folder, and each entry's fate."""

    root: Path
    outside: Path
    readable: dict[str, str] = field(default_factory=dict)
    """Names (below root) of the regular text files inside, and a word each holds."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Names (below root) of the entries never read, and a word of the reason given."""
    large: str = "sparse.txt"
    """The regular file too large to read (1 GB, sparse): refused by its size."""


def messy_folder(root: Path) -> MessyFolder:
    """Make the messy folder at `root` (created) and its outside folder beside it."""
    root.mkdir(parents=True, exist_ok=True)
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir(exist_ok=True)
    (outside / "passwd").write_text(f"root:x:0:0:{SECRET}:/root:/bin/sh\n")
    (outside / "far.txt").write_text(f"far away {SECRET}\n")
    readable = {"normal.txt": "llamas", NON_UTF8_NAME: "vicunas", "sub/inner.md": "alpacas"}
    (root / "normal.txt").write_text("Plain notes about llamas and their wool.\n")
    (root / NON_UTF8_NAME).write_text("A file with an odd name, about vicunas.\n")
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "inner.md").write_text("# Inner\nNotes about alpacas.\n")
    left_out = {
        "fifo.txt": "pipe",
        "socket.txt": "socket",
        "zero.txt": "outside",
        "passwd.txt": "outside",
        "elsewhere": "outside",
        "gone.txt": "cannot be read",
        "loop.txt": "cannot be read",
    }
    os.mkfifo(root / "fifo.txt")
    _socket(root / "socket.txt")
    os.symlink("/dev/zero", root / "zero.txt")
    with open(root / "sparse.txt", "wb") as file:
        file.truncate(SPARSE_BYTES)
    os.symlink(outside / "passwd", root / "passwd.txt")
    os.symlink(outside, root / "elsewhere")
    os.symlink(root / "nothing-here.txt", root / "gone.txt")
    os.symlink(root / "loop.txt", root / "loop.txt")
    if os.geteuid() != 0:
        (root / "locked.txt").write_text("locked words\n")
        os.chmod(root / "locked.txt", 0)
        left_out["locked.txt"] = "cannot be read"
    return MessyFolder(root, outside, readable, left_out)


def _socket(path: Path) -> None:
    """A Unix socket file at `path`, bound in a short folder first (paths of sockets are
    limited to about 100 bytes) and moved into place."""
    short = tempfile.mkdtemp(prefix="sock")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(os.path.join(short, "s"))
        os.rename(os.path.join(short, "s"), path)
    finally:
        os.rmdir(short)


def returns_at_once(action: Callable[[], object], seconds: float = 10) -> object:
    """What `action` returns, or the exception it raises, run on a thread: one that blocks
    (a FIFO opened blocking) fails the test instead of hanging it."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(action())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{action} blocked for {seconds} s")
    return outcome[0]
