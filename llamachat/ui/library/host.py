"""The App's libraries: which chats and projects have one, indexing off the GUI thread,
folders followed.

`LibraryHost(path)` is the one owner of library.db for the GUI. It never keeps a
connection: each call opens one in the thread it runs on (the GUI thread for the short
reads and writes of attaching and listing, a background task for indexing), so no SQLite
connection crosses threads. Indexing runs one library at a time through `tasks`, the
files read in a child process (`library.child`: pypdf would hold the GIL the window
needs), which `close()` ends at once; `progress` says how far it got (files, and pages
of a PDF), `changed` that what the panel lists changed. Attached
folders are followed while the app runs: a folder's change (QFileSystemWatcher) or a
re-scan every `RESCAN_MS` re-indexes, which reads only the files that changed.

A damaged library.db (checked once at the first use, and whenever SQLite says so) is
mended as the history is (`index.recover`): moved aside, a fresh file keeping the list
of libraries, every library indexed again; `failed` says where the old file went.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal, Slot

from llamachat.library.child import ChildReader, ReadingStopped
from llamachat.library.extract import Passage, extract
from llamachat.library.index import (
    STORE_ERRORS,
    FileRow,
    IndexReport,
    LibraryError,
    LibraryRow,
    LibraryStore,
    is_damage,
    recover,
    walk,
)
from llamachat.library.vectors import Embedder
from llamachat.tools.inputs import LibraryConfig
from llamachat.ui import tasks

log = logging.getLogger(__name__)
T = TypeVar("T")

RESCAN_MS = 60_000
"""How often attached folders are looked at again (an edit in place changes no folder)."""
SETTLE_MS = 1000
"""How long a folder must stay quiet after a change before it is indexed again."""
MAX_WATCHED_DIRS = 512
PROGRESS_SECONDS = 0.1
"""The least time between two progress signals: a re-scan of many unchanged files is quick."""


class LibraryHost(QObject):
    """The libraries of every chat and project: attach, index in the background, follow,
    remove."""

    changed = Signal()  # a library was attached, removed or indexed
    # Files done, files in all, the file now (0, 0, "": idle), its pages read and its
    # pages (0, 0: not a PDF, or not begun).
    progress = Signal(int, int, str, int, int)
    failed = Signal(str)  # library.db could not be used: what to tell the user

    def __init__(
        self,
        path: Path,
        parent: QObject | None = None,
        embedder: Callable[[], Embedder | None] = lambda: None,
    ) -> None:
        super().__init__(parent)
        self.path = path
        # The embedding model in effect now (None: none is configured).
        self._embedder = embedder
        self.vectors_note = ""
        """Why the last indexing run left passages without vectors ('' when it did not)."""
        # The chats and the projects with a library, read once (the builder asks at every
        # request it builds), again after a removal.
        self._sessions: set[int] | None = None
        self._projects: set[int] = set()
        self._queue: list[int] = []
        self._running: tuple[int, Future] | None = None
        self._reader: ChildReader | None = None
        # Removed while indexed: its run's failure (its rows are gone) is no news.
        self._removed: set[int] = set()
        self._cancel = threading.Event()
        self._watcher = QFileSystemWatcher(self)
        self._watcher.directoryChanged.connect(self._on_folder_changed)
        self._settle = QTimer(self, singleShot=True, interval=SETTLE_MS)
        self._settle.timeout.connect(self.reindex_all)
        self._rescan = QTimer(self, interval=RESCAN_MS)
        self._rescan.timeout.connect(self.reindex_all)
        self._checked = False  # whether the file was checked for damage this run

    @contextmanager
    def _store(self) -> Iterator[LibraryStore]:
        if not self._checked and self.path.exists():
            self._checked = True
            self._mend()
        store = LibraryStore(self.path)
        try:
            yield store
        finally:
            store.close()

    # ------------------------------------------------------------------ reading

    def config_for(
        self, session_id: int | None, project_id: int | None = None
    ) -> LibraryConfig | None:
        """What offers search_documents to the chat `session_id` in the project
        `project_id`; None when neither has a library."""
        sessions = self._known()
        if session_id not in sessions and project_id not in self._projects:
            return None
        return LibraryConfig(self.path, session_id, self._embedder(), project_id)

    def _known(self) -> set[int]:
        """The chats with a library (and `_projects` the projects), read once."""
        if self._sessions is None:
            self._sessions, self._projects = set(), set()
            # No file yet: no library anywhere, and none is made just to find that out.
            if self.path.exists():
                rows = self.libraries()
                self._sessions = {row.session_id for row in rows if row.session_id is not None}
                self._projects = {row.project_id for row in rows if row.project_id is not None}
                self._follow(rows)
                # A first indexing cut short (llamachat quit meanwhile) goes on now: a
                # search waits for a library never read whole.
                running = self._running[0] if self._running is not None else None
                for row in rows:
                    if not row.indexed_at and row.id != running:
                        self.reindex(row.id)
        return self._sessions

    def embedding_model(self) -> str:
        """The model whose vectors the search uses too ('' for none: words only)."""
        embedder = self._embedder()
        return embedder.model if embedder is not None else ""

    def libraries(
        self, session_id: int | None = None, project_id: int | None = None
    ) -> list[LibraryRow]:
        """The chat's libraries, or the project's (neither: every one), with their counts."""
        empty: list[LibraryRow] = []
        return self._read(lambda store: store.libraries(session_id, project_id), empty)

    def files(self, library_id: int) -> list[FileRow]:
        """A library's files, the skipped ones with why."""
        empty: list[FileRow] = []
        return self._read(lambda store: store.files(library_id), empty)

    def busy(self) -> bool:
        """Whether an indexing run is going on or waiting."""
        return self._running is not None or bool(self._queue)

    def _read(self, call: Callable[[LibraryStore], T], default: T) -> T:
        for _attempt in range(2):
            try:
                with self._store() as store:
                    return call(store)
            except STORE_ERRORS as exc:
                if not (is_damage(exc) and self._mend()):
                    self.failed.emit(f"The libraries file cannot be used: {exc}")
                    return default
        return default

    def _mend(self) -> bool:
        """Set a damaged library.db aside for a fresh one (`index.recover`) and index every
        library again; whether it was damaged and mended."""
        try:
            aside = recover(self.path)
        except LibraryError as exc:
            self.failed.emit(f"The libraries file cannot be used: {exc}")
            return False
        if aside is None:
            return False
        self.failed.emit(
            f"The libraries file was damaged: it was moved to {aside.name} and a new one "
            "made; the libraries are read again."
        )
        self._sessions = None
        QTimer.singleShot(0, self, self._reindex_mended)
        return True

    @Slot()
    def _reindex_mended(self) -> None:
        self._known()
        self.reindex_all()

    # ------------------------------------------------------------------ changing

    def attach(self, session_id: int, folder: Path) -> None:
        """Attach `folder` (or a file) to the chat and index it in the background."""
        sessions = self._known()  # the known chats are read first
        library_id = self._read(lambda store: store.attach(session_id, folder), None)
        if library_id is not None:
            sessions.add(session_id)
            self._attached(library_id, self.libraries(session_id))

    def attach_to_project(self, project_id: int, folder: Path) -> None:
        """Attach `folder` (or a file) to the project, for each of its chats, and index
        it in the background (once: its chats share the index)."""
        self._known()
        library_id = self._read(lambda store: store.attach_to_project(project_id, folder), None)
        if library_id is not None:
            self._projects.add(project_id)
            self._attached(library_id, self.libraries(project_id=project_id))

    def _attached(self, library_id: int, rows: list[LibraryRow]) -> None:
        self._follow(rows)
        self.changed.emit()
        self.reindex(library_id)

    def remove(self, library_id: int) -> None:
        """Forget a library, a chat's or a project's (its files are left alone)."""
        self._forget([library_id], lambda store: store.remove(library_id))

    def forget_project(self, project_id: int) -> None:
        """Forget the libraries of a project (deleted): their index, not their files."""
        ids = [row.id for row in self.libraries(project_id=project_id)]
        if ids:
            self._forget(ids, lambda store: store.forget_project(project_id))

    def forget_chats(self, session_ids: Iterable[int]) -> None:
        """Forget the libraries of chats deleted for good: their index, not their files."""
        gone = set(session_ids)
        ids = [row.id for row in self.libraries() if row.session_id in gone]

        def remove_all(store: LibraryStore) -> None:
            for library_id in ids:
                store.remove(library_id)

        if ids:
            self._forget(ids, remove_all)

    def forget_gone_chats(self, exists: Callable[[int], bool]) -> None:
        """Forget the libraries of chats that `exists` says are gone (purged while
        llamachat was not running, or by a start that purged old deletions)."""
        if self.path.exists():
            self.forget_chats(sid for sid in self._known().copy() if not exists(sid))

    def _forget(self, library_ids: list[int], call: Callable[[LibraryStore], None]) -> None:
        for library_id in library_ids:
            if library_id in self._queue:
                self._queue.remove(library_id)
            self._removed.add(library_id)
        self._read(call, None)
        self._sessions = None  # which chats and projects have one: read again when asked
        self.changed.emit()

    def reindex(self, library_id: int) -> None:
        """Bring a library's index up to date in the background (changed files only)."""
        if library_id not in self._queue:
            self._queue.append(library_id)
        self._next()

    @Slot()
    def reindex_all(self) -> None:
        """Re-index every attached library (what changed on disk since)."""
        if self._sessions or self._projects:
            for row in self.libraries():
                self.reindex(row.id)

    def close(self) -> None:
        """Stop indexing soon (what is indexed so far is kept) and stop following folders."""
        self._queue.clear()
        self._cancel.set()
        if self._reader is not None:
            self._reader.stop()
        self._rescan.stop()
        self._settle.stop()

    # ------------------------------------------------------------------ indexing

    def _next(self) -> None:
        if self._running is not None or not self._queue or self._cancel.is_set():
            return
        library_id = self._queue.pop(0)
        path, cancel, embedder = self.path, self._cancel, self._embedder()
        reader = self._reader = ChildReader()
        report = _Report(lambda *args: tasks.run_on_main(lambda: self.progress.emit(*args)))

        def read(file: Path, size: int) -> list[Passage]:
            def on_page(page: int, pages: int) -> None:
                if cancel.is_set():
                    raise ReadingStopped
                report.pages(page, pages)

            return extract(file, size, reader.read, on_page)

        def run() -> object:
            # Its own connection, in the task's thread.
            store = LibraryStore(path)
            try:
                return store.index(library_id, report.files, cancel, read, embedder)
            except ReadingStopped:
                return None  # closing: what was committed stays
            finally:
                reader.close()
                store.close()

        future = tasks.run_in_background(run, self._on_indexed, receiver=self)
        self._running = (library_id, future)

    def _on_indexed(self, future: Future) -> None:
        library_id = self._running[0] if self._running is not None else None
        self._running = None
        self._reader = None
        try:
            result = future.result()
            if isinstance(result, IndexReport):
                self.vectors_note = result.vectors
        except STORE_ERRORS as exc:
            if is_damage(exc):
                self._mend()  # says what it did, and indexes every library again
            elif library_id not in self._removed:
                self.failed.emit(f"A library could not be indexed: {exc}")
        if not self._queue:
            self.progress.emit(0, 0, "", 0, 0)
        self.changed.emit()
        self._next()

    # ------------------------------------------------------------------ following

    def _follow(self, rows: list[LibraryRow]) -> None:
        folders = [str(folder) for row in rows for folder in _folders(row.root)]
        have = set(self._watcher.directories())
        new = [folder for folder in folders if folder not in have]
        room = MAX_WATCHED_DIRS - len(have)
        if new and room > 0:
            self._watcher.addPaths(new[:room])
        if not self._rescan.isActive():
            self._rescan.start()

    @Slot(str)
    def _on_folder_changed(self, _folder: str) -> None:
        self._settle.start()


class _Report:
    """An indexing run's progress, from its thread to `emit`, at most every PROGRESS_SECONDS
    but for the end and a PDF's first part (its page count)."""

    def __init__(self, emit: Callable[[int, int, str, int, int], None]) -> None:
        self._emit = emit
        self._shown = 0.0
        self._file = (0, 0, "")
        self._counted = False  # the file's page count was shown

    def files(self, done: int, total: int, name: str) -> None:
        """Files done of `total`, `name` now (a store.Progress)."""
        self._file = (done, total, name)
        self._counted = False
        self._show(0, 0, now=done == total)

    def pages(self, page: int, pages: int) -> None:
        """Pages read of the PDF now."""
        self._show(page, pages, now=not self._counted)
        self._counted = True

    def _show(self, page: int, pages: int, *, now: bool = False) -> None:
        if now or time.monotonic() - self._shown >= PROGRESS_SECONDS:
            self._shown = time.monotonic()
            self._emit(*self._file, page, pages)


def _folders(root: Path) -> list[Path]:
    """The folders to watch for a library: its root and the folders under it."""
    if not root.is_dir():
        return [root.parent] if root.parent.is_dir() else []
    found = {root}
    for item in walk(root):
        found.add(item.path.parent)
        if len(found) >= MAX_WATCHED_DIRS:
            break
    return sorted(found)
