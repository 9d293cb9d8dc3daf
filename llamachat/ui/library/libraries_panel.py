"""The Libraries panel: a chat's libraries, and those of its project (marked "From project
…"), their files, sizes, passages, what was skipped and why, with Add folder, Re-index and
Remove (a project's library too: it is gone for each chat of the project), how far
indexing got (files, and the page of a big PDF), and how the chat's model uses them: it
searches them itself, or (a model that cannot call tools) llamachat searches them for
each message (`how_searched`). File and project names are plain text."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llamachat import outside
from llamachat.context import NO_TOOLS
from llamachat.library.index import LibraryRow
from llamachat.ui.library.host import LibraryHost

STEPS_PER_FILE = 1000
"""A progress bar's steps per file: a big PDF's pages move it too."""


def size_text(size: int) -> str:
    """A file size for people: bytes, KB or MB."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def counted(count: int, one: str, many: str = "") -> str:
    """`count` and its noun, `one` for one, else `many` (default: `one` + "s")."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def progress_text(done: int, total: int, name: str, page: int, pages: int) -> str:
    """How far indexing got, in words: files done, the file now and the page of a PDF."""
    text = f"{done:,} of {counted(total, 'file')}"
    if name and pages:
        return f"{text}: {name}, page {page:,} of {pages:,}"
    return f"{text}: {name}" if name else text


def show_progress(bar: QProgressBar, done: int, total: int, page: int, pages: int) -> None:
    """Set `bar` to files done of `total`, a PDF's pages read counting as part of its file;
    hidden when idle (total 0)."""
    bar.setVisible(total > 0)
    bar.setRange(0, max(total, 1) * STEPS_PER_FILE)
    bar.setValue(done * STEPS_PER_FILE + (page * STEPS_PER_FILE // pages if pages else 0))


class LibrariesPanel(QDialog):
    """A chat's libraries and their files; re-index or remove one, or add a folder."""

    add_requested = Signal()

    def __init__(
        self,
        host: LibraryHost,
        session_id: int | None,
        parent: QWidget | None = None,
        project: Callable[[], tuple[int, str] | None] = lambda: None,
        takes_tools: Callable[[], bool] = lambda: True,
    ):
        super().__init__(parent)
        self._host = host
        self.session_id = session_id
        # The chat's project now, its id and name (None: none): asked at each refresh,
        # as the chat may be moved while the panel is open.
        self._project = project
        # Whether the chat's model can call tools now (it may be switched while open).
        self._takes_tools = takes_tools
        self.setWindowTitle("Libraries")
        self.resize(720, 480)
        self.summary = QLabel(self)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.tree = QTreeWidget(self)
        self.tree.setAccessibleName("Libraries")
        self.tree.setHeaderLabels(["File", "Size", "Passages", "Skipped because"])
        self.tree.setColumnWidth(0, 320)
        self.progress = QProgressBar(self)
        self.progress.setVisible(False)
        # The file's name goes in a plain-text label: a bar's format reads %v and %m in it.
        self.progress.setTextVisible(False)
        self.progress_label = QLabel(self)
        self.progress_label.setTextFormat(Qt.TextFormat.PlainText)
        self.progress_label.setVisible(False)
        self.add_button = QPushButton("Add folder…", self)
        self.reindex_button = QPushButton("Re-index", self)
        self.remove_button = QPushButton("Remove", self)
        row = QHBoxLayout()
        for button in (self.add_button, self.reindex_button, self.remove_button):
            row.addWidget(button)
        row.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        row.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.progress_label)
        layout.addLayout(row)
        self.add_button.clicked.connect(self.add_requested)
        self.reindex_button.clicked.connect(self._on_reindex)
        self.remove_button.clicked.connect(self._on_remove)
        host.changed.connect(self.refresh)
        host.progress.connect(self._on_progress)
        self.refresh()

    def set_session(self, session_id: int | None) -> None:
        """Show another chat's libraries."""
        self.session_id = session_id
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """List the chat's libraries and their files again."""
        rows = self._host.libraries(self.session_id) if self.session_id is not None else []
        project = self._project()
        if project is not None:
            rows += self._host.libraries(project_id=project[0])
        self.tree.clear()
        for library in rows:
            where = outside.shown(library.root)
            if library.project_id is not None and project is not None:
                where = f"From project {project[1]}: {where}"
            top = QTreeWidgetItem(
                [where, "", f"{library.passages:,}", f"{library.skipped} skipped"]
            )
            top.setData(0, Qt.ItemDataRole.UserRole, library.id)
            for file in self._host.files(library.id):
                name = (
                    outside.shown(file.path.relative_to(library.root).as_posix())
                    if file.path != library.root
                    else outside.shown(file.path.name)
                )
                QTreeWidgetItem(
                    top, [name, size_text(file.size), f"{file.passages:,}", file.skipped]
                )
            self.tree.addTopLevelItem(top)
            top.setExpanded(True)
        # Whoever set embedding_model wants to see it at work (or why it is not).
        note = self._host.vectors_note
        if rows and not note and (model := self._host.embedding_model()):
            note = f"It finds passages by meaning too, with vectors from {model}."
        summary = _summary(rows) + (f" {how_searched(self._takes_tools())}" if rows else "")
        self.summary.setText(summary + (f"\n{note}" if note else ""))
        has = bool(rows)
        self.reindex_button.setEnabled(has)
        self.remove_button.setEnabled(has)

    def _selected(self) -> int | None:
        item = self.tree.currentItem() or self.tree.topLevelItem(0)
        while item is not None and item.parent() is not None:
            item = item.parent()
        return item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None

    @Slot()
    def _on_reindex(self) -> None:
        library_id = self._selected()
        if library_id is not None:
            self._host.reindex(library_id)

    @Slot()
    def _on_remove(self) -> None:
        library_id = self._selected()
        if library_id is not None:
            self._host.remove(library_id)

    @Slot(int, int, str, int, int)
    def _on_progress(self, done: int, total: int, name: str, page: int, pages: int) -> None:
        show_progress(self.progress, done, total, page, pages)
        self.progress_label.setVisible(total > 0)
        self.progress_label.setText(progress_text(done, total, name, page, pages))


def _summary(rows: list[LibraryRow]) -> str:
    if not rows:
        return "No library in this chat: Add folder… attaches one (or drop a folder on the message box)."
    files = sum(row.files for row in rows)
    passages = sum(row.passages for row in rows)
    skipped = sum(row.skipped for row in rows)
    return (
        f"{counted(len(rows), 'library', 'libraries')}, {counted(files, 'file')}, "
        f"{counted(passages, 'passage')}, {skipped:,} skipped."
    )


def how_searched(takes_tools: bool) -> str:
    """How the chat's model uses its libraries, in a sentence."""
    if takes_tools:
        return "The model searches them itself (search_documents) when a question needs them."
    return (
        f"This model cannot search them itself ({NO_TOOLS}): llamachat searches them for "
        "each message you send and puts the best passages, marked as excerpts, before it; "
        "their sources are listed under the reply."
    )
