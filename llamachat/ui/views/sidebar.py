"""The sessions sidebar: past chats newest first, full-text search, rename, delete, export.

`SessionSidebar(history)` lists sessions through `session_list.SessionListModel`, which
reads them a page at a time as the list scrolls, pinned chats first. Typing in "Search
sessions" (`session_search.SessionSearch`) runs `History.search` after a short pause and
lists the chats whose title or messages match, each with a snippet shown as plain text
and the matched words marked (`SearchHitDelegate`), or says "No matches". The funnel beside the field
(`session_filter.SessionFilters`) keeps the list and the search to a project, a model or
a time of last update, shown flat with a bar saying so. A chat dragged onto a project's
header or chats moves into it, onto the chats in no project out of it (`SessionView`).
Deleting a chat, or a project (after asking), is undoable from the bar that appears under
the list (`deletions.Deletions`). The highlighted row is always the chat the window
shows (`set_current`), whatever the list does meanwhile.

Everything here runs on the GUI thread, which owns the History's connection, except
the import the menu starts (`start_import`, `chat_import.ChatImporter`): it reads,
checks and writes the file on a worker thread over a connection of its own, with a
progress dialog whose Cancel keeps nothing of it.

A chat's Export… writes it through `chat_export`.

Errors: `export_session` and `import_file` raise `store.HistoryError` (a file that
cannot be read or written is reported as one, naming the file); the menu actions
catch it and show its message in the sidebar's notice bar.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import (
    QEvent,
    QModelIndex,
    QObject,
    QPoint,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtGui import (
    QAction,
    QKeySequence,
    QMouseEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QMenu,
    QProgressDialog,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.history.store import (
    History,
    HistoryError,
    import_file,
)
from llamachat.ui import plain
from llamachat.ui.library.host import LibraryHost
from llamachat.ui.views.chat_export import ask_and_export, export_chat
from llamachat.ui.views.chat_import import ChatImporter
from llamachat.ui.views.deletions import Deletions
from llamachat.ui.views.project_menus import (
    ProjectChoices,
    ProjectDialog,
    confirm_delete,
    edit_project,
    move_menu,
    new_project,
    project_menu,
)
from llamachat.ui.views.session_filter import SessionFilters
from llamachat.ui.views.session_list import (
    PAGE_SIZE,
    UNTITLED,
    SearchHitDelegate,
    SessionListModel,
    SessionView,
)
from llamachat.ui.views.session_search import SessionSearch

log = logging.getLogger(__name__)


class SessionSidebar(QWidget):
    """The list of past chats with search, a New chat button and per-chat actions."""

    session_activated = Signal(int)
    # A search hit was opened: the message that matched, and the query (after session_activated).
    match_requested = Signal(int, str)
    new_chat_requested = Signal()
    session_deleted = Signal(int)
    session_renamed = Signal(int, str)
    new_chat_in_project = Signal(int)  # a project's id: start a chat with its defaults
    problem = Signal(str)  # a problem to show whole, above the chat (an import refused)

    def __init__(
        self,
        history: History,
        *,
        page_size: int = PAGE_SIZE,
        mode: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.history = history
        self.model = SessionListModel(history, page_size=page_size, mode=mode)
        self._current: int | None = None
        self.project_choices: Callable[[], ProjectChoices] = ProjectChoices
        """What a project's defaults are chosen from (the window's presets, models, skills)."""
        self._build()
        self.model.reload()

    def _build(self) -> None:
        self._search = SessionSearch(self.model, self)
        self.search_field = self._search.field
        self.filters = SessionFilters(self.history, self)
        self.filters.changed.connect(self.model.set_filter)

        self.new_button = QPushButton("New chat")
        self.new_button.setAccessibleName("New chat")
        self.new_button.clicked.connect(self.new_chat_requested)

        self.importer = ChatImporter(self.history, self)
        self.importer.imported.connect(self._on_imported)
        self.importer.cancelled.connect(self.show_notice)
        # Why a file was refused is long (a conversation, a field path): the window shows
        # it whole, not squeezed under the list.
        self.importer.refused.connect(self.problem)
        self.import_action = self.importer.action
        more = QToolButton()
        more.setText("⋯")
        more.setAccessibleName("More session actions")
        more.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(more)
        menu.addAction("New project…", lambda: self._act(lambda: new_project(self, self.history)))
        menu.addAction(self.import_action)
        more.setMenu(menu)

        self.no_matches = plain.Label("No matches")
        self.no_matches.setAccessibleName("No matches")
        self.no_matches.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_matches.setEnabled(False)
        self.no_matches.hide()

        self.list_view = SessionView()
        self.list_view.setAccessibleName("Sessions")
        self.list_view.setModel(self.model)
        self.list_view.setItemDelegate(SearchHitDelegate(self.list_view))
        self.list_view.setUniformItemSizes(True)
        self.list_view.setWordWrap(False)
        self.list_view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list_view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # A right click opens the menu without moving the highlight off the open chat.
        self.list_view.viewport().installEventFilter(self)
        self.list_view.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list_view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list_view.customContextMenuRequested.connect(self._on_context_menu)
        self.list_view.clicked.connect(self._on_activated)
        self.list_view.activated.connect(self._on_activated)
        delete = QAction("Delete chat", self.list_view)
        delete.setShortcut(QKeySequence.StandardKey.Delete)
        delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete.triggered.connect(self._on_delete_selected)
        self.list_view.addAction(delete)
        self.model.modelReset.connect(self._on_model_reset)
        self.model.rowsRemoved.connect(self._select_current)
        self.model.renamed.connect(self._on_renamed)
        self.model.move_refused.connect(self.show_notice)

        self.deletions = Deletions(self.history, self)
        self.deletions.restored.connect(self.refresh)
        self.notice = self.deletions.bar
        self.notice_label = self.deletions.label
        self.undo_button = self.deletions.undo_button

        top = QHBoxLayout()
        top.addWidget(self.new_button, 1)
        top.addWidget(more)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        searching = QHBoxLayout()
        searching.addWidget(self.search_field, 1)
        searching.addWidget(self.filters.button)
        layout.addLayout(searching)
        layout.addWidget(self.filters.bar)
        layout.addWidget(self.no_matches)
        layout.addWidget(self.list_view, 1)
        layout.addWidget(self.notice)

    # ------------------------------------------------------------------ public

    def refresh(self) -> None:
        """Re-read the list (after the window added messages or a session)."""
        self.model.reload(at_least=self.model.rowCount())

    def set_current(self, session_id: int | None) -> None:
        """Highlight the session the window shows (None: a new, unsaved chat).

        A session the list does not hold yet (a quick question just continued in chat,
        a chat just created) is read in first, so it is listed and highlighted at once.
        """
        self._current = session_id
        if session_id is not None and not self.model.flat() and self.model.row_of(session_id) < 0:
            self.refresh()
        self._select_current()

    def current(self) -> int | None:
        """The session the window shows, as last told by set_current or a click."""
        return self._current

    def focus_search(self) -> None:
        """Put the cursor in the search field (the Ctrl+K shortcut)."""
        self._search.focus()

    def search(self, query: str) -> None:
        """Show the sessions matching `query` now (typing does this after a pause)."""
        self._search.search(query)

    def rename_session(self, session_id: int, title: str) -> None:
        """Give a session a new title."""
        self.history.rename_session(session_id, title.strip())
        self.refresh()
        self.session_renamed.emit(session_id, title.strip())

    def set_pinned(self, session_id: int, pinned: bool) -> None:
        """Pin a chat to the top of the list, or unpin it."""
        self._act(lambda: self.model.set_pinned(session_id, pinned))

    @Slot(object, bool)
    def show_draft(self, session_id: object, drafted: bool) -> None:
        """Mark a chat in the list as holding a draft not sent, or no longer (None: the
        new chat, which is not listed)."""
        if isinstance(session_id, int):
            self.model.set_drafted(session_id, drafted)

    def _act(self, action: Callable[[], object]) -> None:
        """Do a menu's `action`, then show the list as it is; a refusal goes to the notice bar."""
        try:
            action()
        except HistoryError as exc:
            self.show_notice(str(exc))
        self.refresh()
        self._back_to_window()

    @Slot()
    def _back_to_window(self) -> None:
        # A dialog closed (a project's name, its defaults) hands the keyboard back to no
        # window on some desktops: Ctrl+N and Ctrl+K would wait for a click on the window.
        window = self.window()
        if window.isVisible() and not window.isActiveWindow():
            window.activateWindow()

    def project_menu(self, project_id: int) -> QMenu:
        """The menu of a project's header, not yet shown."""
        return project_menu(
            self,
            lambda: self.new_chat_in_project.emit(project_id),
            lambda: self.edit_project(project_id),
            lambda: self.delete_project(project_id),
        )

    @property
    def libraries(self) -> LibraryHost | None:
        """The App's libraries: a project's are edited in its dialog; those of deleted chats
        and projects are forgotten once their Undo is gone."""
        return self.deletions.libraries

    @libraries.setter
    def libraries(self, libraries: LibraryHost | None) -> None:
        self.deletions.libraries = libraries

    def delete_project(self, project_id: int, *, ask: bool = True) -> None:
        """Delete a project (after asking, with `ask`), its chats staying in no project, and
        offer Undo in the notice bar."""
        project = self.history.projects.get(project_id)
        if project is None:
            return
        chats = self.history.count_sessions(project=project_id)
        if ask and not confirm_delete(self, project, chats):
            self._back_to_window()
            return
        self._act(lambda: self.deletions.delete_project(project_id))

    def edit_project(self, project_id: int) -> ProjectDialog | None:
        """Open the dialog of a project's name and defaults; OK saves them."""
        choices = self.project_choices()
        dialog = edit_project(self, self.history, project_id, choices, self._act, self.libraries)
        if dialog is not None:
            dialog.finished.connect(self._back_to_window)
        return dialog

    def delete_session(self, session_id: int) -> None:
        """Hide a session (soft delete) and offer Undo in the notice bar."""
        session = self.history.get_session(session_id)
        self.deletions.delete_chat(session_id, (session["title"] if session else "") or UNTITLED)
        self.model.remove(session_id)
        if session_id == self._current:
            self._current = None
        self.session_deleted.emit(session_id)

    def undo_delete(self) -> int | None:
        """Bring back what was deleted last; a chat's id (None: a project, or nothing)."""
        try:
            return self.deletions.undo()
        except HistoryError as exc:
            self.show_notice(str(exc))
            return None

    def export_session(self, session_id: int, path: Path, fmt: str) -> None:
        """Write a session to `path` as "markdown" or "json"."""
        export_chat(self.history, session_id, path, fmt)

    def import_file(self, path: Path) -> int:
        """Add a session from a JSON export, titled "(imported)", at the top; its new id."""
        session_id = import_file(self.history.path, Path(path))
        self.refresh()
        return session_id

    def start_import(self, path: Path) -> None:
        """Import a file of chats on a worker thread with a progress dialog (`import_progress`)
        whose Cancel keeps nothing; then open the newest chat, or say why it was refused."""
        self.importer.start(path)

    @property
    def import_progress(self) -> QProgressDialog | None:
        """The progress dialog of the import under way (None: none is)."""
        return self.importer.progress

    @Slot(int, str)
    def _on_imported(self, session_id: int, said: str) -> None:
        self.refresh()
        self.show_notice(said)
        self._current = session_id
        self._select_current()
        self.session_activated.emit(session_id)

    def session_ids(self) -> list[int]:
        """The ids of the rows loaded in the list, top to bottom."""
        ids = (self.model.session_id(row) for row in range(self.model.rowCount()))
        return [session_id for session_id in ids if session_id is not None]

    # ------------------------------------------------------------------ notice bar

    def show_notice(self, text: str) -> None:
        """Say something under the list (an export done, an import refused)."""
        self.deletions.show(text)

    def notice_text(self) -> str:
        """What the notice bar says ('' when hidden)."""
        return self.deletions.text()

    # ------------------------------------------------------------------ slots

    @Slot()
    def _on_model_reset(self) -> None:
        # Uniform rows keep 10,000 titles cheap; search hits carry a second line.
        self.list_view.setUniformItemSizes(not self.model.query())
        self.no_matches.setVisible(self.model.flat() and self.model.rowCount() == 0)
        self._select_current()

    @Slot()
    def _select_current(self) -> None:
        row = self.model.row_of(self._current) if self._current is not None else -1
        selection = self.list_view.selectionModel()
        if row < 0:
            # The current index goes too: Delete acts on it, and it is not the open chat.
            selection.clear()
            return
        self.list_view.setCurrentIndex(self.model.index(row))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Keep a right click on the list from selecting the row under it (the menu still opens)."""
        if (
            watched is self.list_view.viewport()
            and event.type() in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonDblClick)
            and isinstance(event, QMouseEvent)
            and event.button() == Qt.MouseButton.RightButton
        ):
            return True
        return super().eventFilter(watched, event)

    @Slot(int, str)
    def _on_renamed(self, session_id: int, title: str) -> None:
        self.session_renamed.emit(session_id, title)

    @Slot(QModelIndex)
    def _on_activated(self, index: QModelIndex) -> None:
        if not index.isValid():
            return
        session_id = self.model.session_id(index.row())
        project = self.model.project(index.row())
        if session_id is None and project is not None:
            self._act(lambda: self.model.toggle(project["id"]))
            return
        # Platforms that activate on a single click send clicked and activated both.
        if session_id != self._current:
            self._current = session_id
            self.session_activated.emit(session_id)
        row = self.model.session(index.row())
        message_id = row.get("message_id") if row is not None else None
        if self.model.query() and isinstance(message_id, int):
            self.match_requested.emit(message_id, self.model.query())

    @Slot()
    def _on_delete_selected(self) -> None:
        index = self.list_view.currentIndex()
        session_id = self.model.session_id(index.row()) if index.isValid() else None
        if session_id is not None:
            self.delete_session(session_id)

    def session_menu(self, session_id: int | None) -> QMenu:
        """The menu of a chat in the list (None: of the list itself), not yet shown."""
        menu = QMenu(self)
        row = self.model.row_of(session_id) if session_id is not None else -1
        if session_id is not None and row >= 0:
            # Looked up when chosen: the list may have been read again meanwhile.
            menu.addAction(
                "Rename",
                lambda: self.list_view.edit(self.model.index(self.model.row_of(session_id))),
            )
            session = self.model.session(row)
            pinned = bool(session and session["pinned"])
            menu.addAction(
                "Unpin" if pinned else "Pin to top",
                lambda: self.set_pinned(session_id, not pinned),
            )
            project = session["project_id"] if session else None
            move_menu(menu, self.history, session_id, project, self._act)
            menu.addAction("Delete", lambda: self.delete_session(session_id))
            menu.addSeparator()
            menu.addAction("Export as Markdown…", lambda: self._on_export(session_id, "markdown"))
            menu.addAction("Export as JSON…", lambda: self._on_export(session_id, "json"))
            menu.addSeparator()
        menu.addAction(self.import_action)
        return menu

    @Slot(QPoint)
    def _on_context_menu(self, pos: QPoint) -> None:
        index = self.list_view.indexAt(pos)
        session_id = self.model.session_id(index.row()) if index.isValid() else None
        project = self.model.project(index.row()) if index.isValid() else None
        if session_id is None and project is not None:
            menu = self.project_menu(project["id"])
        else:
            menu = self.session_menu(session_id)
        menu.exec(self.list_view.viewport().mapToGlobal(pos))
        menu.deleteLater()

    def _on_export(self, session_id: int, fmt: str) -> None:
        said = ask_and_export(self, self.history, session_id, fmt)
        if said:
            self.show_notice(said)
