"""The sidebar's notice bar, and the Undo it offers for deleted chats and projects.

`Deletions(history)` owns the bar under the list (`bar`): it says what happened (an export
done, a move refused) and, after a deletion, offers Undo for as long as it is up. A chat
is deleted softly (`History.delete_session`) and purged when the bar goes; a project is
deleted at once (its chats move to no project, its memories go) and Undo makes it again
under its own id, with its chats and memories back in it. Once the bar goes, deleted means gone: the chats are purged and
the libraries of those chats and projects forgotten (`LibraryHost`), and so are the
chats' slot files (`router.slot_cache`: what the server read of them). GUI thread only;
History's errors pass through `delete_chat`, `delete_project` and `undo`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QToolButton, QWidget

from llamachat.history.store import History, HistoryError, MemoryRow, ProjectRow
from llamachat.router.slot_cache import SlotFiles
from llamachat.ui import plain
from llamachat.ui.library.host import LibraryHost

log = logging.getLogger(__name__)

NOTICE_MS = 15_000


@dataclass(frozen=True)
class DeletedProject:
    """A project deleted while Undo is offered: its row and the chats it held."""

    project: ProjectRow
    chats: list[int]
    memories: list[MemoryRow] = field(default_factory=list)
    """The project's memories, deleted with it."""


class Deletions(QObject):
    """The notice bar under the sessions list, with Undo of the deletions it announced."""

    restored = Signal()  # Undo brought a chat or a project back: the list must show it

    def __init__(self, history: History, parent: QWidget) -> None:
        super().__init__(parent)
        self._history = history
        self.libraries: LibraryHost | None = None
        """The App's libraries: those of deleted chats and projects are forgotten with them."""
        self.slot_files: Callable[[], SlotFiles | None] = lambda: None
        """The slot files of llamachat's own server: deleted chats' go with them."""
        self._deleted: list[int | DeletedProject] = []
        self.label = plain.Label()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAccessibleName("Sessions notice")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setAccessibleName("Undo delete")
        self.undo_button.clicked.connect(self.undo)
        close = QToolButton()
        close.setText("✕")
        close.setAccessibleName("Close notice")
        close.clicked.connect(self.hide)
        self.bar = QFrame()
        self.bar.setFrameShape(QFrame.Shape.StyledPanel)
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(6, 2, 2, 2)
        row.addWidget(self.label, 1)
        row.addWidget(self.undo_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.bar.hide()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(NOTICE_MS)
        self._timer.timeout.connect(self.hide)

    def show(self, text: str, *, undo: bool = False) -> None:
        """Say `text` (outside text welcome) for a while; `undo` offers to undo a deletion."""
        self.label.setText(text)
        # A narrow sidebar cuts a long unbroken word (an import's field path): the whole
        # text stays one hover away.
        self.label.setToolTip(plain.tooltip(text))
        self.undo_button.setVisible(undo and bool(self._deleted))
        self.bar.show()
        self._timer.start()

    def text(self) -> str:
        """What the bar says ('' when hidden)."""
        return self.label.text() if not self.bar.isHidden() else ""

    def delete_chat(self, session_id: int, title: str) -> None:
        """Hide a chat (soft delete) and offer Undo."""
        self._history.delete_session(session_id)
        self._deleted.append(session_id)
        self.show(f"Deleted “{title}”.", undo=True)

    def delete_project(self, project_id: int) -> None:
        """Delete a project, its chats staying in no project, and offer Undo."""
        project = self._history.projects.get(project_id)
        if project is None:
            return
        chats = self._history.projects.chats(project_id)
        every = self._history.memories.listed(every=True)
        memories = [memory for memory in every if memory["project_id"] == project_id]
        self._history.projects.delete(project_id)
        self._deleted.append(DeletedProject(project, chats, memories))
        held = f"its {len(chats)} chats are" if len(chats) != 1 else "its chat is"
        said = f"Deleted the project “{project['name']}”; {held} in no project now."
        self.show(said if chats else f"Deleted the project “{project['name']}”.", undo=True)

    @Slot()
    def undo(self) -> int | None:
        """Bring back what was deleted last; a chat's id (None: a project, or nothing)."""
        if not self._deleted:
            return None
        last = self._deleted.pop()
        if isinstance(last, DeletedProject):
            self._history.projects.restore(last.project, last.chats)
            self._history.memories.restore(last.memories)
        else:
            self._history.undelete_session(last)
        self.restored.emit()
        if self._deleted:
            self.show(f"Restored. {len(self._deleted)} more deleted.", undo=True)
        else:
            self.hide()
        return last if isinstance(last, int) else None

    @Slot()
    def hide(self) -> None:
        """Hide the bar; what it offered to undo goes for good."""
        self.bar.hide()
        self.label.clear()
        deleted, self._deleted = self._deleted, []
        chats = [item for item in deleted if isinstance(item, int)]
        projects = [item.project["id"] for item in deleted if isinstance(item, DeletedProject)]
        try:
            self._history.purge_deleted(chats)
        except HistoryError as exc:
            log.warning("deleted chats stay until the next start: %s", exc)
            chats = []
        files = self.slot_files() if chats else None
        if files is not None:
            for chat in chats:
                files.forget(chat)
        if self.libraries is not None:
            if chats:
                self.libraries.forget_chats(chats)
            for project_id in projects:
                self.libraries.forget_project(project_id)
