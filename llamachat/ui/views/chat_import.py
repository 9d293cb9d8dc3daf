"""Importing chats from a file in the background, for the sidebar (`sidebar.SessionSidebar`).

`ChatImporter(history)` owns the Import menu action; `start(path)` reads, checks and
writes every chat of the file (any format `history.importers` reads: our JSON or
Markdown, ChatGPT's, Open WebUI's, llama.cpp web UI's) in a child process over a
connection of its own (`import_child.import_in_child`, waited for on a worker thread),
with a progress dialog (`progress`) whose Cancel keeps nothing of it. Chats imported
before (the same file again) are skipped, and said so. Another app's chats go into a
project of their own (`importers`). It says how it ended with `imported(the chat to
open, what to say)`, `cancelled(what to say)` or `refused(why)`; it raises nothing.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QProgressDialog, QWidget

from llamachat.history.import_child import import_in_child
from llamachat.history.store import History, HistoryError, ImportCancelled, ImportIds
from llamachat.ui import plain
from llamachat.ui.tasks import run_in_background


class ChatImporter(QObject):
    """The Import action and the background import it starts, one at a time."""

    # The chat to open (the newest imported), what to say ("Imported 2,000 chats from …").
    imported = Signal(int, str)
    refused = Signal(str)  # why nothing was imported (a bad file, a history that cannot take it)
    cancelled = Signal(str)  # the import was cancelled: what to say
    # An import's progress in percent, emitted from its worker thread (queued to this one).
    _progress = Signal(int)

    def __init__(self, history: History, parent: QWidget) -> None:
        super().__init__(parent)
        self._history = history
        self._parent = parent
        self.progress: QProgressDialog | None = None
        """The progress dialog of the import under way (None: none is)."""
        self.action = QAction("Import chats…", parent)
        self.action.triggered.connect(self._choose)

    def start(self, path: Path, *, own_project: bool = True) -> None:
        """Import `path` on a worker thread with a progress dialog whose Cancel keeps nothing;
        another app's chats go into a project of their own unless `own_project` is False."""
        path = Path(path)
        cancelled = threading.Event()
        dialog = QProgressDialog("", "Cancel", 0, 100, self._parent)
        # The file's name is outside text: its label must not guess rich text.
        label = plain.Label(f"Importing {path.name}…", dialog)
        label.setAccessibleName("Import progress")
        dialog.setLabel(label)
        dialog.setWindowTitle("Import chats")
        dialog.setMinimumDuration(300)
        dialog.setAutoClose(False)
        # Not `cancelled.set`: PySide watches a bound method's object with a weakref that
        # disconnects when it dies, and the worker's closure can hold the Event's last
        # reference. Dying there, its disconnect takes Qt's lock and waits for the GIL
        # while this thread, holding the GIL, waits for that lock in `done` (a deadlock
        # seen in the bench). The lambda keeps the Event alive with the dialog, on this thread.
        dialog.canceled.connect(lambda: cancelled.set())
        self._progress.connect(dialog.setValue)
        self.progress = dialog
        self.action.setEnabled(False)
        shown = [-1]

        def on_progress(share: float) -> None:
            if cancelled.is_set():
                raise ImportCancelled
            percent = int(share * 100)
            if percent != shown[0]:  # one signal per percent, not per message
                shown[0] = percent
                self._progress.emit(percent)

        def done(future: Future) -> None:
            self._progress.disconnect(dialog.setValue)
            dialog.close()
            dialog.deleteLater()
            self.progress = None
            self.action.setEnabled(True)
            try:
                ids = future.result()
            except ImportCancelled:
                self.cancelled.emit(f"Import of {path.name} cancelled; nothing was added.")
                return
            except HistoryError as exc:
                self.refused.emit(str(exc))
                return
            self.imported.emit(*_outcome(path.name, ids, self._project_of(ids)))

        db_path = self._history.path
        run_in_background(
            lambda: import_in_child(db_path, path, on_progress, own_project=own_project),
            done,
            receiver=self,
        )

    def _project_of(self, ids: ImportIds) -> str:
        """The name of the project the import's newest chat went into ('' for none)."""
        session = self._history.get_session(ids[-1]) if ids else None
        project_id = session["project_id"] if session else None
        project = self._history.projects.get(project_id) if project_id else None
        return project["name"] if project is not None else ""

    @Slot()
    def _choose(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self._parent,
            "Import chats",
            str(Path.home()),
            "Chat exports (*.json *.md *.markdown);;All files (*)",
        )
        if path:
            self.start(Path(path))


def _outcome(name: str, ids: ImportIds, project: str = "") -> tuple[int, str]:
    """The chat to open after an import of the file `name` (its chats added to `project`,
    '' for none), and what to say of it."""
    skipped = len(ids.skipped)
    if not ids:
        # Nothing new: the chat imported before opens, and the user learns why.
        if skipped == 1:
            return ids.skipped[-1], f"{name} was imported before; it was not added again."
        return ids.skipped[-1], (
            f"The {skipped:,} chats of {name} were imported before; none was added again."
        )
    said = (
        f"Imported {name}"
        if len(ids) == 1 and not skipped
        else (f"Imported {len(ids):,} chat{'s' if len(ids) > 1 else ''} from {name}")
    )
    said += f" into the project “{project}”." if project else "."
    if skipped:
        said += (
            f" {skipped:,} chat{'s were' if skipped > 1 else ' was'} imported before and skipped."
        )
    return ids[-1], said
