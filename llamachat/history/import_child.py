"""Importing chats in a child process, so that reading and checking never hold the app's GIL.

An import is pure Python for most of its time (decoding and checking every message): on a
thread of the app it takes turns at the GIL with the window's thread, which then stalled
up to 25 ms at p99 while a 2,000-conversation ChatGPT export was imported.
`import_in_child(db_path, source, on_progress)` runs `file_import.import_chats` in a spawned
child process at a lower CPU priority (as `library.child` reads files) over a connection
of its own to the history file, and passes its progress on. When `on_progress` raises
ImportCancelled, the child is told to stop: its own import then removes what it wrote.

Errors: HistoryError (a bad file, a history that cannot be written, a child that ended
by itself: nothing of the import is kept visible) or ImportCancelled, raised in the caller.

Qt-free.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from llamachat import outside
from llamachat.history.export import ImportCancelled
from llamachat.history.file_import import ImportIds, import_chats
from llamachat.history.rows import HistoryError

NICENESS = 10
"""How much lower the child's CPU priority is (POSIX)."""
END_SECONDS = 5.0
"""How long the child has to end after its answer before it is ended."""


def import_in_child(
    db_path: Path,
    source: Path,
    on_progress: Callable[[float], None],
    *,
    own_project: bool = True,
) -> ImportIds:
    """The ids of the chats imported from `source` into the history at `db_path` by a
    child process, newest last (`skipped`: those imported before); `on_progress(share
    done)` may raise ImportCancelled. `own_project` as `file_import.import_chats` takes it."""
    context = multiprocessing.get_context("spawn")
    conn, child_end = context.Pipe()
    stop = context.Event()
    process = context.Process(
        target=_serve,
        args=(child_end, Path(db_path), Path(source), stop, own_project),
        name="llamachat-import",
        daemon=True,
    )
    process.start()
    # Only the child holds its end now: its death reads as EOF here.
    child_end.close()
    try:
        while True:
            try:
                kind, value = conn.recv()
            except (EOFError, OSError):
                process.join(END_SECONDS)
                raise HistoryError(
                    f"cannot import {outside.shown(Path(source).name)}: the import process ended "
                    f"(exit code {process.exitcode}); nothing was added"
                ) from None
            if kind == "progress":
                try:
                    on_progress(value)
                except ImportCancelled:
                    stop.set()  # the child stops at its next step and removes its writes
            elif kind == "done":
                return ImportIds(value, value.skipped)
            else:
                raise value
    finally:
        process.join(END_SECONDS)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()
        process.close()


def _serve(conn: Connection, db_path: Path, source: Path, stop: Any, own_project: bool) -> None:
    """The child: import, sending ("progress", share) as it goes, then ("done", ids) or
    ("error", HistoryError or ImportCancelled)."""
    # The app ends it; Ctrl+C in the terminal reaches the whole process group.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "nice"):
        os.nice(NICENESS)

    def progress(share: float) -> None:
        if stop.is_set():
            raise ImportCancelled
        conn.send(("progress", share))

    answer: tuple[str, object]
    try:
        answer = (
            "done",
            import_chats(db_path, source, on_progress=progress, own_project=own_project),
        )
    except (HistoryError, ImportCancelled) as exc:
        answer = ("error", exc)
    except Exception as exc:  # noqa: BLE001 - the app is told, as a refusal
        answer = ("error", HistoryError(f"cannot import {outside.shown(source.name)}: {exc}"))
    try:
        conn.send(answer)
    except OSError:
        pass  # the app is gone
