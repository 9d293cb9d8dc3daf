"""The sessions sidebar: past chats newest first, full-text search, rename, delete, export.

`SessionSidebar(history)` lists sessions through `SessionListModel`, which reads
them a page at a time (`canFetchMore`/`fetchMore`) as the list scrolls, so ten
thousand sessions open as fast as ten. Typing in "Search sessions" runs
`History.search` after a short pause and lists the chats whose title or messages
match, each with a snippet shown as plain text and the matched words marked
(`SearchHitDelegate`), or says "No matches". Deleting is soft and undoable from the
bar that appears under the list. The highlighted row is always the chat the window
shows (`set_current`), whatever the list does meanwhile.

Everything here runs on the GUI thread, which owns the History's connection, except
the import the menu starts (`start_import`): it reads, checks and writes the file on a
worker thread over a connection of its own (`store.import_file`), with a progress
dialog whose Cancel keeps nothing of it.

Errors: `export_session` and `import_file` raise `store.HistoryError` (a file that
cannot be read or written is reported as one, naming the file); the menu actions
catch it and show its message in the sidebar's notice bar.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
import time
import unicodedata
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QSize,
    Qt,
    QTimer,
    Signal,
    Slot,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QAction,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPalette,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLineEdit,
    QListView,
    QMenu,
    QProgressDialog,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.history.store import (
    History,
    HistoryError,
    ImportCancelled,
    SessionRow,
    import_file,
)
from llamachat.ui import plain
from llamachat.ui.tasks import run_in_background
from llamachat.ui.views.markdown import plain_text

log = logging.getLogger(__name__)

PAGE_SIZE = 200
SEARCH_DELAY_MS = 200
SEARCH_LIMIT = 200
NOTICE_MS = 15_000
UNTITLED = "Untitled chat"
FORMATS = {"markdown": ".md", "json": ".json"}
# A snippet starts at most this many characters before its first marked word.
SNIPPET_LEAD = 24
SNIPPET_LINES = 2

_Index = QModelIndex | QPersistentModelIndex


def _fold(text: str) -> str:
    """`text` lower-cased without accents, one character for each of `text`'s."""
    return "".join(unicodedata.normalize("NFD", c)[0].lower()[:1] or c for c in text)


def matches(text: str, query: str) -> list[tuple[int, int]]:
    """The (start, end) spans of `text` holding a word of `query`, ignoring case and accents."""
    words = [re.escape(_fold(word)) for word in query.split()]
    if not words:
        return []
    pattern = re.compile("|".join(sorted(words, key=len, reverse=True)))
    return [m.span() for m in pattern.finditer(_fold(text)) if m.end() > m.start()]


def snippet_text(snippet: str, query: str) -> str:
    """A search snippet as one line of plain text, starting shortly before its first match."""
    text = plain_text(snippet)
    found = matches(text, query)
    if found and found[0][0] > SNIPPET_LEAD:
        start = text.rfind(" ", 0, found[0][0] - SNIPPET_LEAD // 2) + 1
        if start > 0:
            text = "…" + text[start:].lstrip("…")
    return text


def marked_html(text: str, query: str, style: str) -> str:
    """`text` escaped for HTML of ours, each match of `query` in a span styled `style`."""
    parts: list[str] = []
    done = 0
    for start, end in matches(text, query):
        if start < done:
            continue
        parts.append(html.escape(text[done:start]))
        parts.append(f'<span style="{style}">{html.escape(text[start:end])}</span>')
        done = end
    parts.append(html.escape(text[done:]))
    return "".join(parts)


class SessionListModel(QAbstractListModel):
    """Sessions newest first, fetched a page at a time; or the hits of a search."""

    SessionIdRole = Qt.ItemDataRole.UserRole + 1
    renamed = Signal(int, str)

    def __init__(
        self, history: History, *, page_size: int = PAGE_SIZE, mode: str | None = None
    ) -> None:
        super().__init__()
        self._history = history
        self._page_size = page_size
        self._mode = mode
        self._rows: list[SessionRow] = []
        self._total = 0
        self._query = ""

    # ------------------------------------------------------------------ queries

    def query(self) -> str:
        """The search shown ('' when browsing)."""
        return self._query

    def reload(self, *, at_least: int = 0) -> None:
        """Read the list again from the database, keeping at least `at_least` rows loaded."""
        self.beginResetModel()
        if self._query:
            self._rows = list(self._history.search(self._query, limit=SEARCH_LIMIT))
            self._total = len(self._rows)
        else:
            self._total = self._history.count_sessions()
            size = max(self._page_size, at_least)
            self._rows = self._history.list_sessions(limit=size, mode=self._mode)
        self.endResetModel()

    def set_query(self, query: str) -> None:
        """Show the sessions matching `query`, or every session when it is blank."""
        self._query = query.strip()
        self.reload()

    def session_id(self, row: int) -> int:
        """The id of the session in `row`."""
        return int(self._rows[row]["id"])

    def session(self, row: int) -> SessionRow:
        """The session dict in `row`."""
        return self._rows[row]

    def row_of(self, session_id: int) -> int:
        """The row showing `session_id`, or -1 when it is not loaded."""
        for row, session in enumerate(self._rows):
            if session["id"] == session_id:
                return row
        return -1

    def remove(self, session_id: int) -> None:
        """Drop a session's row (after it was deleted) without reloading the list."""
        row = self.row_of(session_id)
        if row < 0:
            return
        self.beginRemoveRows(QModelIndex(), row, row)
        del self._rows[row]
        self._total -= 1
        self.endRemoveRows()

    # ------------------------------------------------------------------ Qt model

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        """Rows loaded so far."""
        return 0 if parent.isValid() else len(self._rows)

    def canFetchMore(self, parent: _Index) -> bool:
        """Whether more sessions wait in the database (browsing only)."""
        return not parent.isValid() and not self._query and len(self._rows) < self._total

    def fetchMore(self, parent: _Index) -> None:
        """Load the next page of sessions."""
        if not self.canFetchMore(parent):
            return
        page = self._history.list_sessions(
            limit=self._page_size, offset=len(self._rows), mode=self._mode
        )
        if not page:
            self._total = len(self._rows)  # sessions were deleted meanwhile
            return
        self.beginInsertRows(QModelIndex(), len(self._rows), len(self._rows) + len(page) - 1)
        self._rows.extend(page)
        self.endInsertRows()

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """A session's title (and search snippet), tooltip and id."""
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        session = self._rows[index.row()]
        title = session["title"] or UNTITLED
        if role == Qt.ItemDataRole.DisplayRole:
            snippet = snippet_text(str(session.get("snippet") or ""), self._query)
            return f"{title}\n{snippet}" if snippet else title
        if role == Qt.ItemDataRole.EditRole:
            return session["title"]
        if role in (Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.AccessibleDescriptionRole):
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(session["updated_at"]))
            facts = [f"Last message {stamp}"]
            if session.get("model"):
                facts.append(f"Model {session['model']}")
            text = f"{title}\n" + " · ".join(facts)
            return plain.tooltip(text) if role == Qt.ItemDataRole.ToolTipRole else text
        if role == self.SessionIdRole:
            return session["id"]
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        """Sessions can be selected and renamed in place."""
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return super().flags(index) | Qt.ItemFlag.ItemIsEditable

    def setData(self, index: _Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        """Rename a session from the in-place editor."""
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        title = str(value).strip()
        if not title:
            return False
        session = self._rows[index.row()]
        self._history.rename_session(session["id"], title)
        session["title"] = title
        self.dataChanged.emit(index, index)
        self.renamed.emit(session["id"], title)
        return True


class SearchHitDelegate(QStyledItemDelegate):
    """Draws a search hit as its title and two lines of snippet, the matched words marked.

    Rows of the plain list (no search) are drawn as Qt draws them.
    """

    def _query(self, index: _Index) -> str:
        model = index.model()
        return model.query() if isinstance(model, SessionListModel) else ""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        """Draw the row; a search hit through a document of ours, outside text escaped."""
        query = self._query(index)
        if not query:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        # The option's copy has its line breaks turned into U+2028: read the model's text.
        text, opt.text = str(index.data(Qt.ItemDataRole.DisplayRole) or ""), ""
        widget = opt.widget
        style = widget.style() if widget is not None else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        palette = opt.palette
        if selected:
            mark = "font-weight:bold; text-decoration:underline"
            ink = palette.color(QPalette.ColorRole.HighlightedText)
        else:
            back = palette.color(QPalette.ColorRole.Highlight).name()
            front = palette.color(QPalette.ColorRole.HighlightedText).name()
            mark = f"font-weight:bold; background-color:{back}; color:{front}"
            ink = palette.color(QPalette.ColorRole.Text)
        title, _, snippet = text.partition("\n")
        title = opt.fontMetrics.elidedText(title, Qt.TextElideMode.ElideRight, rect.width())
        document = QTextDocument()
        document.setDocumentMargin(0)
        document.setDefaultFont(opt.font)
        document.setTextWidth(rect.width())
        document.setHtml(
            f'<p style="margin:0; white-space:pre">{marked_html(title, query, mark)}</p>'
            f'<p style="margin:0">{marked_html(snippet, query, mark)}</p>'
        )
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette.setColor(QPalette.ColorRole.Text, ink)
        painter.save()
        painter.translate(rect.topLeft())
        painter.setClipRect(0, 0, rect.width(), rect.height())
        document.documentLayout().draw(painter, context)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        """A search hit is a title and two snippet lines high; no row is wider than the view."""
        size = super().sizeHint(option, index)
        if self._query(index) and "\n" in str(index.data()):
            # Qt sized the title and one snippet line.
            size.setHeight(size.height() + (SNIPPET_LINES - 1) * option.fontMetrics.lineSpacing())
        # Long titles are elided to the view's width instead of widening the list.
        return QSize(1, size.height())


class SessionSidebar(QWidget):
    """The list of past chats with search, a New chat button and per-chat actions."""

    session_activated = Signal(int)
    # A search hit was opened: the message that matched, and the query (after session_activated).
    match_requested = Signal(int, str)
    new_chat_requested = Signal()
    session_deleted = Signal(int)
    session_renamed = Signal(int, str)
    # An import's progress in percent, emitted from its worker thread (queued to this one).
    _import_progress = Signal(int)

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
        self._deleted: list[int] = []
        self.import_progress: QProgressDialog | None = None
        self._build()
        self.model.reload()

    def _build(self) -> None:
        self.search_field = QLineEdit()
        self.search_field.setAccessibleName("Search sessions")
        self.search_field.setPlaceholderText("Search chats")
        self.search_field.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        # Debounced: one query per pause in typing, not one per key.
        self._search_timer.timeout.connect(self._run_search)
        self.search_field.textChanged.connect(lambda _: self._search_timer.start())
        self.search_field.returnPressed.connect(self._run_search)

        self.new_button = QPushButton("New chat")
        self.new_button.setAccessibleName("New chat")
        self.new_button.clicked.connect(self.new_chat_requested)

        self.import_action = QAction("Import chat from JSON…", self)
        self.import_action.triggered.connect(self._on_import)
        more = QToolButton()
        more.setText("⋯")
        more.setAccessibleName("More session actions")
        more.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(more)
        menu.addAction(self.import_action)
        more.setMenu(menu)

        self.no_matches = plain.Label("No matches")
        self.no_matches.setAccessibleName("No matches")
        self.no_matches.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_matches.setEnabled(False)
        self.no_matches.hide()

        self.list_view = QListView()
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

        self.notice_label = plain.Label()
        self.notice_label.setWordWrap(True)
        self.notice_label.setAccessibleName("Sessions notice")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setAccessibleName("Undo delete")
        self.undo_button.clicked.connect(self.undo_delete)
        close = QToolButton()
        close.setText("✕")
        close.setAccessibleName("Close notice")
        close.clicked.connect(self._hide_notice)
        self.notice = QFrame()
        self.notice.setFrameShape(QFrame.Shape.StyledPanel)
        row = QHBoxLayout(self.notice)
        row.setContentsMargins(6, 2, 2, 2)
        row.addWidget(self.notice_label, 1)
        row.addWidget(self.undo_button)
        row.addWidget(close)
        self.notice.hide()
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.setInterval(NOTICE_MS)
        self._notice_timer.timeout.connect(self._hide_notice)

        top = QHBoxLayout()
        top.addWidget(self.new_button, 1)
        top.addWidget(more)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.search_field)
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
        if session_id is not None and not self.model.query() and self.model.row_of(session_id) < 0:
            self.refresh()
        self._select_current()

    def current(self) -> int | None:
        """The session the window shows, as last told by set_current or a click."""
        return self._current

    def focus_search(self) -> None:
        """Put the cursor in the search field (the Ctrl+K shortcut)."""
        self.search_field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search_field.selectAll()

    def search(self, query: str) -> None:
        """Show the sessions matching `query` now (typing does this after a pause)."""
        self._search_timer.stop()
        if self.search_field.text() != query:
            self.search_field.blockSignals(True)
            self.search_field.setText(query)
            self.search_field.blockSignals(False)
        self.model.set_query(query)

    def rename_session(self, session_id: int, title: str) -> None:
        """Give a session a new title."""
        self.history.rename_session(session_id, title.strip())
        self.refresh()
        self.session_renamed.emit(session_id, title.strip())

    def delete_session(self, session_id: int) -> None:
        """Hide a session (soft delete) and offer Undo in the notice bar."""
        session = self.history.get_session(session_id)
        self.history.delete_session(session_id)
        self._deleted.append(session_id)
        self.model.remove(session_id)
        title = (session["title"] if session else "") or UNTITLED
        self._show_notice(f"Deleted “{title}”.", undo=True)
        if session_id == self._current:
            self._current = None
        self.session_deleted.emit(session_id)

    def undo_delete(self) -> int | None:
        """Bring back the most recently deleted session; its id, or None when none."""
        if not self._deleted:
            return None
        session_id = self._deleted.pop()
        self.history.undelete_session(session_id)
        self.refresh()
        if self._deleted:
            self._show_notice(f"Restored. {len(self._deleted)} more deleted.", undo=True)
        else:
            self._hide_notice()
        return session_id

    def export_session(self, session_id: int, path: Path, fmt: str) -> None:
        """Write a session to `path` as "markdown" or "json"."""
        if fmt == "markdown":
            text = self.history.export_markdown(session_id)
        elif fmt == "json":
            text = json.dumps(self.history.export_json(session_id), ensure_ascii=False, indent=2)
        else:
            raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise HistoryError(f"cannot write {path}: {exc.strerror or exc}") from None

    def import_file(self, path: Path) -> int:
        """Add a session from a JSON export, titled "(imported)", at the top; its new id."""
        session_id = import_file(self.history.path, Path(path))
        self.refresh()
        return session_id

    def start_import(self, path: Path) -> None:
        """Import a JSON export on a worker thread with a progress dialog (`import_progress`)
        whose Cancel keeps nothing; then open the new chat, or say why it was refused."""
        path = Path(path)
        cancelled = threading.Event()
        dialog = QProgressDialog(f"Importing {path.name}…", "Cancel", 0, 100, self)
        dialog.setWindowTitle("Import chat")
        dialog.setMinimumDuration(300)
        dialog.setAutoClose(False)
        dialog.canceled.connect(cancelled.set)
        self._import_progress.connect(dialog.setValue)
        self.import_progress = dialog
        self.import_action.setEnabled(False)
        shown = [-1]

        def on_progress(share: float) -> None:
            if cancelled.is_set():
                raise ImportCancelled
            percent = int(share * 100)
            if percent != shown[0]:  # one signal per percent, not per message
                shown[0] = percent
                self._import_progress.emit(percent)

        def done(future: Future) -> None:
            self._import_progress.disconnect(dialog.setValue)
            dialog.close()
            dialog.deleteLater()
            self.import_progress = None
            self.import_action.setEnabled(True)
            try:
                session_id = future.result()
            except ImportCancelled:
                self.show_notice(f"Import of {path.name} cancelled; nothing was added.")
                return
            except HistoryError as exc:
                self.show_notice(str(exc))
                return
            self.refresh()
            self.show_notice(f"Imported {path.name}.")
            self._current = session_id
            self._select_current()
            self.session_activated.emit(session_id)

        db_path = self.history.path
        run_in_background(
            lambda: import_file(db_path, path, on_progress=on_progress), done, receiver=self
        )

    def session_ids(self) -> list[int]:
        """The ids of the rows loaded in the list, top to bottom."""
        return [self.model.session_id(row) for row in range(self.model.rowCount())]

    # ------------------------------------------------------------------ notice bar

    def show_notice(self, text: str) -> None:
        """Say something under the list (an export done, an import refused)."""
        self._show_notice(text, undo=False)

    def notice_text(self) -> str:
        """What the notice bar says ('' when hidden)."""
        return self.notice_label.text() if not self.notice.isHidden() else ""

    def _show_notice(self, text: str, *, undo: bool) -> None:
        self.notice_label.setText(text)
        self.undo_button.setVisible(undo and bool(self._deleted))
        self.notice.show()
        self._notice_timer.start()

    @Slot()
    def _hide_notice(self) -> None:
        self.notice.hide()
        # Undo is offered only while the bar is up: once it goes, deleted means gone.
        deleted, self._deleted = self._deleted, []
        try:
            self.history.purge_deleted(deleted)
        except HistoryError as exc:
            log.warning("deleted chats stay until the next start: %s", exc)
        self.notice_label.clear()

    # ------------------------------------------------------------------ slots

    @Slot()
    def _run_search(self) -> None:
        self._search_timer.stop()
        query = self.search_field.text()
        if query.strip() != self.model.query():
            self.model.set_query(query)

    @Slot()
    def _on_model_reset(self) -> None:
        # Uniform rows keep 10,000 titles cheap; search hits carry a second line.
        self.list_view.setUniformItemSizes(not self.model.query())
        self.no_matches.setVisible(bool(self.model.query()) and self.model.rowCount() == 0)
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
        # Platforms that activate on a single click send clicked and activated both.
        if session_id != self._current:
            self._current = session_id
            self.session_activated.emit(session_id)
        message_id = self.model.session(index.row()).get("message_id")
        if self.model.query() and isinstance(message_id, int):
            self.match_requested.emit(message_id, self.model.query())

    @Slot()
    def _on_delete_selected(self) -> None:
        index = self.list_view.currentIndex()
        if index.isValid():
            self.delete_session(self.model.session_id(index.row()))

    @Slot(QPoint)
    def _on_context_menu(self, pos: QPoint) -> None:
        index = self.list_view.indexAt(pos)
        menu = QMenu(self)
        if index.isValid():
            session_id = self.model.session_id(index.row())
            menu.addAction("Rename", lambda: self.list_view.edit(index))
            menu.addAction("Delete", lambda: self.delete_session(session_id))
            menu.addSeparator()
            menu.addAction("Export as Markdown…", lambda: self._on_export(session_id, "markdown"))
            menu.addAction("Export as JSON…", lambda: self._on_export(session_id, "json"))
            menu.addSeparator()
        menu.addAction(self.import_action)
        menu.exec(self.list_view.viewport().mapToGlobal(pos))

    def _on_export(self, session_id: int, fmt: str) -> None:
        session = self.history.get_session(session_id)
        title = session["title"] if session else ""
        stem = "".join(c if c.isalnum() or c in " -_" else "_" for c in title)
        suggested = str(Path.home() / ((stem.strip() or "chat") + FORMATS[fmt]))
        kind = "Markdown (*.md)" if fmt == "markdown" else "JSON (*.json)"
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", suggested, kind)
        if not path:
            return
        try:
            self.export_session(session_id, Path(path), fmt)
        except HistoryError as exc:
            self.show_notice(str(exc))
            return
        self.show_notice(f"Exported to {path}.")

    @Slot()
    def _on_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Import chat", str(Path.home()), "llamachat JSON (*.json)"
        )
        if path:
            self.start_import(Path(path))
