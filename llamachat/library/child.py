"""Reading files in a child process, so that pypdf never holds the app's GIL.

pypdf is pure Python: on a thread of the app it takes turns at the GIL with the window's
thread, and its garbage collections hold it for tens of milliseconds (the event loop
stalled 29 ms at p99 while a 1,000-page PDF was indexed on a busy 2-core machine).
`ChildReader.read(path, size, first_page)` (an `extract.PartReader`) reads each `Part` in
one child process instead, started at the first read (spawn: a fresh interpreter, also
in the frozen build, through `multiprocessing.freeze_support()` at the top of
`__main__.main`), at a lower CPU priority, so the window's process comes first when the
cores are busy. `close()` ends the child; `stop()`, from any thread, ends it at once and
the read waiting on it raises `ReadingStopped`. The child is a daemon: it also ends with the app.

Errors: a child that ends by itself during a read (killed, out of memory) skips that
file (Skipped says so); the next read starts another.

Qt-free.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from llamachat.library.extract import Part, Skipped, extract_part

NICENESS = 10
"""How much lower the child's CPU priority is (POSIX); Windows keeps the normal one."""
CLOSE_SECONDS = 5.0
"""How long `close()` waits for the child to end by itself before ending it."""


class ReadingStopped(Exception):
    """`ChildReader.stop()` ended the reading: the file being read is not done."""


class ChildReader:
    """Reads parts of files in one child process; used by one thread, stopped from any."""

    def __init__(self) -> None:
        # Guards the process and connection against stop() from another thread.
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._stopped = False

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        with self._lock:
            return self._process.pid if self._process is not None else None

    def read(self, path: Path, size: int, first_page: int) -> Part:
        """The part of `path` from `first_page` on, read in the child; raises Skipped or ReadingStopped."""
        conn = self._start()
        try:
            conn.send((path, size, first_page))
            reply = conn.recv()
        except (EOFError, OSError):
            with self._lock:
                stopped = self._stopped
            code = self._end()
            if stopped:
                raise ReadingStopped from None
            raise Skipped(f"reading it ended the reader process (exit code {code})") from None
        if isinstance(reply, BaseException):
            raise reply
        assert isinstance(reply, Part)
        return reply

    def stop(self) -> None:
        """End the child now (any thread): the read going on raises ReadingStopped, as do later ones."""
        with self._lock:
            self._stopped = True
            if self._process is not None:
                self._process.terminate()

    def close(self) -> None:
        """Let the child end (ended when it does not within CLOSE_SECONDS)."""
        with self._lock:
            conn = self._conn
        if conn is not None:
            try:
                conn.send(None)
            except OSError:
                pass  # it has ended already
        self._end()

    def _start(self) -> Connection:
        with self._lock:
            if self._stopped:
                raise ReadingStopped
            if self._conn is None:
                context = multiprocessing.get_context("spawn")
                conn, child_end = context.Pipe()
                process = context.Process(
                    target=_serve, args=(child_end,), name="llamachat-reader", daemon=True
                )
                process.start()
                # Only the child holds its end now: its death reads as EOF here.
                child_end.close()
                self._process, self._conn = process, conn
            return self._conn

    def _end(self) -> int | None:
        """Wait for the child to end (ending it after CLOSE_SECONDS); its exit code."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = self._conn = None
        if process is None or conn is None:
            return None
        process.join(CLOSE_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()
        code = process.exitcode
        process.close()
        return code


def _serve(conn: Connection) -> None:
    """The child: read each (path, size, first page) asked for, answer with the part or
    with what reading it raised, until asked None or the app is gone."""
    # The app quits it; Ctrl+C in the terminal reaches the whole process group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "nice"):
        os.nice(NICENESS)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        try:
            reply: object = extract_part(*request)
        except Exception as exc:  # noqa: BLE001 - raised again in the app, by read()
            reply = exc
        conn.send(reply)
