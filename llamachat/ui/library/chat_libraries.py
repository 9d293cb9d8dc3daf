"""The chat window's libraries: Attach > Add folder as library, dropped folders, the
progress bar while indexing, and the Libraries panel.

A folder added to a chat not saved yet waits for its first message (when the chat gets
its session id), then is attached; the request of that message offers search_documents.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QProgressBar, QStatusBar, QWidget

from llamachat.ui import plain
from llamachat.ui.app import App
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.library.libraries_panel import LibrariesPanel, progress_text, show_progress
from llamachat.ui.views.composer import Composer
from llamachat.ui.views.popup import UpwardMenu


class ChatLibraries(QObject):
    """Adds folders to the window's chat as libraries and shows their indexing."""

    status = Signal(str)  # a status-bar line

    def __init__(
        self,
        app: App,
        chat: Conversation,
        *,
        composer: Composer,
        status_bar: QStatusBar,
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._host = app.libraries
        self._chat = chat
        self._window = parent
        self._pending: list[Path] = []
        self._takes_tools = chat.context.takes_tools()
        self.panel: LibrariesPanel | None = None
        self.progress = QProgressBar()
        self.progress.setAccessibleName("Indexing documents")
        self.progress.setMaximumWidth(180)
        self.progress.setVisible(False)
        status_bar.addPermanentWidget(self.progress)
        menu = UpwardMenu(composer.attach_button)
        menu.addAction("Files…", composer.choose_files)
        self.add_action = QAction("Add folder as library…", self)
        self.add_action.triggered.connect(self.choose_folder)
        menu.addAction(self.add_action)
        self.add_files_action = QAction("Add files as library…", self)
        self.add_files_action.triggered.connect(self.choose_files)
        menu.addAction(self.add_files_action)
        self.panel_action = QAction("Libraries…", self)
        self.panel_action.triggered.connect(self.open_panel)
        menu.addAction(self.panel_action)
        composer.attach_button.setMenu(menu)
        composer.takes_folders = True
        composer.folders_dropped.connect(self.add_folders)
        chat.session_changed.connect(self._on_session_changed)
        self._host.progress.connect(self._on_progress)
        self._host.changed.connect(self._on_changed)
        self._host.failed.connect(self.status)
        chat.context.changed.connect(self._on_watch_changed)

    @Slot()
    def choose_folder(self) -> None:
        """Ask for a folder and add it to the chat as a library."""
        # From home, as the other file dialogs: the folder llamachat was started in
        # (often a desktop launcher's) means nothing to the user.
        folder = QFileDialog.getExistingDirectory(
            self._window, "Add folder as library", str(Path.home())
        )
        if folder:
            self.add_folders([Path(folder)])

    @Slot()
    def choose_files(self) -> None:
        """Ask for files and add each to the chat as a library (searched, not pasted)."""
        files, _ = QFileDialog.getOpenFileNames(
            self._window, "Add files as library", str(Path.home())
        )
        if files:
            self.add_folders([Path(file) for file in files])

    @Slot(list)
    def add_folders(self, folders: list) -> None:
        """Attach `folders` (or single files) to the chat (once it is saved) and index them."""
        if self._chat.state.temporary:
            self.status.emit("A temporary chat has no libraries: keep the chat first.")
            return
        session_id = self._chat.state.session_id
        for folder in folders:
            if session_id is None:
                self._pending.append(Path(folder))
            else:
                self._host.attach(session_id, Path(folder))
        names = ", ".join(Path(folder).name for folder in folders)
        when = " with your first message" if session_id is None else ""
        context = self._chat.context
        how = (
            "This model cannot search it itself: llamachat searches it for each message."
            if not context.takes_tools()
            else "The model can search it."
            if context.tools_known()
            else "The model searches it if it can call tools; if not, llamachat searches "
            "it for each message."
        )
        self.status.emit(f"Library added{when}: {names}. {how}")

    @Slot()
    def open_panel(self) -> None:
        """Show the Libraries panel for the chat."""
        if self.panel is None:
            self.panel = LibrariesPanel(
                self._host,
                self._chat.state.session_id,
                self._window,
                self._project,
                takes_tools=self._chat.context.takes_tools,
            )
            self.panel.add_requested.connect(self.choose_folder)
        self.panel.set_session(self._chat.state.session_id)
        self.panel.show()
        self.panel.raise_()

    def _project(self) -> tuple[int, str] | None:
        """The chat's project, its id and name (None: none), as the history has it now."""
        if self._chat.state.temporary:
            return None
        project_id = self._chat.builder.project_id()
        project = self._chat.history.projects.get(project_id) if project_id else None
        return (project["id"], project["name"]) if project is not None else None

    @Slot(object)
    def _on_session_changed(self, session_id: object) -> None:
        pending, self._pending = self._pending, []
        # A chat just saved for its first message has none yet; another chat opened
        # does not take the folders added to the unsaved one.
        if isinstance(session_id, int) and not self._chat.history.messages(session_id):
            for folder in pending:
                self._host.attach(session_id, folder)
        if self.panel is not None:
            self.panel.set_session(session_id if isinstance(session_id, int) else None)

    @Slot(int, int, str, int, int)
    def _on_progress(self, done: int, total: int, name: str, page: int, pages: int) -> None:
        show_progress(self.progress, done, total, page, pages)
        text = progress_text(done, total, name, page, pages)
        self.progress.setToolTip(plain.tooltip(f"Indexing: {text}"))

    @Slot()
    def _on_watch_changed(self) -> None:
        # The meter's every change, a few a second while a reply streams: the panel is
        # listed again only when the model's way to search (tools or not) changed.
        takes = self._chat.context.takes_tools()
        if takes != self._takes_tools:
            self._takes_tools = takes
            if self.panel is not None and self.panel.isVisible():
                self.panel.refresh()

    @Slot()
    def _on_changed(self) -> None:
        # search_documents is offered or not: the meter counts the request again.
        self._chat.context.base_changed()
