"""The sessions list's model and its rows' drawing, for the sidebar (`sidebar.SessionSidebar`).

`SessionListModel` reads sessions a page at a time (`canFetchMore`/`fetchMore`) as the
list scrolls, so ten thousand sessions open as fast as ten, or holds the hits of a
search; projects come first, each a header (click: fold) over its chats, then the
chats in no project, set apart by a rule; pinned chats lead their group, marked with
`pin_icon` at the row's end; a chat holding a draft says "draft", an empty project "no
chats yet". A search or a filter (`search.SearchFilter`: a project, a model, a time of
last update, the quick questions) shows its chats flat, without the projects' headers. A chat dragged onto a project's header or one
of its chats moves into that project; onto a chat in no project or the empty space below
the list, out of any (`SESSION_MIME` carries the chats' ids). `SearchHitDelegate` draws a
hit as its title and a snippet with the matched words marked, outside text escaped.
GUI thread only; History's errors pass through (`setData` and `set_pinned` write), except
a drop's, which `move_refused` says.
"""

from __future__ import annotations

import functools
import html
import json
import re
import time
import unicodedata
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QMimeData,
    QModelIndex,
    QPersistentModelIndex,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QDropEvent,
    QFont,
    QFontMetrics,
    QIcon,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QListView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from llamachat.history.search import NO_FILTER, SearchFilter
from llamachat.history.store import History, HistoryError, ProjectRow, SessionRow
from llamachat.ui import plain
from llamachat.ui.views.markdown import plain_text

PAGE_SIZE = 200
SEARCH_LIMIT = 200
UNTITLED = "Untitled chat"
# A snippet starts at most this many characters before its first marked word.
SNIPPET_LEAD = 24
SNIPPET_LINES = 2
# A drag of chats in the list: their history file and ids, as JSON. Private to llamachat,
# so a drag from another program is never taken for one; the file, so one from a window
# over another history is refused.
SESSION_MIME = "application/x-llamachat-session-ids"

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


@functools.cache
def pin_icon() -> QIcon:
    """A small drawn pin (no emoji font needed): a pinned chat's mark in the list; on a
    selected row in the selection's text colour, so it stays seen."""
    palette = QApplication.palette()
    icon = QIcon()
    for mode, role in (
        (QIcon.Mode.Normal, QPalette.ColorRole.Highlight),
        (QIcon.Mode.Selected, QPalette.ColorRole.HighlightedText),
    ):
        pixmap = QPixmap(16, 16)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = palette.color(role)
        painter.setPen(QPen(color, 2))
        painter.drawLine(8, 8, 8, 15)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(3, 1, 10, 9)
        painter.end()
        icon.addPixmap(pixmap, mode)
    return icon


class SessionListModel(QAbstractListModel):
    """Projects (each a header, then its chats unless folded), then the chats in no
    project, newest first and fetched a page at a time; or, flat, the hits of a search
    or the chats a filter keeps."""

    SessionIdRole = Qt.ItemDataRole.UserRole + 1
    DepthRole = Qt.ItemDataRole.UserRole + 2  # 1 for a chat shown under its project
    # True for the first chat in no project below the projects: a rule sets them apart.
    AfterProjectsRole = Qt.ItemDataRole.UserRole + 3
    # True for an unfolded project's header with no chat under it.
    EmptyRole = Qt.ItemDataRole.UserRole + 4
    DraftRole = Qt.ItemDataRole.UserRole + 5  # True for a chat holding a draft not sent
    renamed = Signal(int, str)
    move_refused = Signal(str)  # a drop's move failed: History's message

    def __init__(
        self, history: History, *, page_size: int = PAGE_SIZE, mode: str | None = None
    ) -> None:
        super().__init__()
        self._history = history
        self._page_size = page_size
        self._mode = mode
        # The projects' rows: a header (session None), then its chats when unfolded.
        self._top: list[tuple[ProjectRow, SessionRow | None]] = []
        self._rows: list[SessionRow] = []
        self._total = 0
        self._query = ""
        self._filter = NO_FILTER
        self._names: dict[int, str] = {}  # the projects' names, by id
        self._drafted: set[int] = set()  # the chats holding a draft not sent

    # ------------------------------------------------------------------ queries

    def query(self) -> str:
        """The search shown ('' when browsing)."""
        return self._query

    def search_filter(self) -> SearchFilter:
        """The filter the list and the search keep to (NO_FILTER: none)."""
        return self._filter

    def flat(self) -> bool:
        """Whether the list shows a search's hits or a filter's chats, without projects."""
        return bool(self._query) or self._filter.active

    def reload(self, *, at_least: int = 0) -> None:
        """Read the list again from the database, keeping at least `at_least` rows loaded."""
        self.beginResetModel()
        self._top = []
        self._drafted = self._history.drafted()
        projects = self._history.projects.listed()
        self._names = {project["id"]: project["name"] for project in projects}
        if self._query:
            self._rows = list(
                self._history.search(self._query, limit=SEARCH_LIMIT, matching=self._filter)
            )
            self._total = len(self._rows)
        else:
            for project in projects if not self._filter.active else []:
                self._top.append((project, None))
                if not project["collapsed"]:
                    chats = self._history.list_sessions(
                        limit=-1, mode=self._mode, project=project["id"]
                    )
                    self._top.extend((project, chat) for chat in chats)
            self._total = self._history.count_sessions(**self._page_of())
            size = max(self._page_size, at_least - len(self._top))
            self._rows = self._history.list_sessions(limit=size, **self._page_of())
        self.endResetModel()

    def _page_of(self) -> dict[str, Any]:
        """What the paged part of the list holds: the chats in no project, or, filtered,
        every chat the filter keeps."""
        if self._filter.active:
            mode = None if self._filter.mode else self._mode  # the filter's mode rules
            return {"mode": mode, "project": "any", "matching": self._filter}
        return {"mode": self._mode, "project": None}

    def set_query(self, query: str) -> None:
        """Show the sessions matching `query`, or every session when it is blank."""
        self._query = query.strip()
        self.reload()

    def set_filter(self, search_filter: SearchFilter) -> None:
        """Keep the list and the search to the chats `search_filter` keeps."""
        self._filter = search_filter
        self.reload()

    def session(self, row: int) -> SessionRow | None:
        """The session dict in `row` (None: a project's header)."""
        if row < len(self._top):
            return self._top[row][1]
        return self._rows[row - len(self._top)]

    def session_id(self, row: int) -> int | None:
        """The id of the session in `row` (None: a project's header)."""
        session = self.session(row)
        return None if session is None else int(session["id"])

    def project(self, row: int) -> ProjectRow | None:
        """The project whose header or chat `row` is (None: a chat in no project)."""
        return self._top[row][0] if row < len(self._top) else None

    def row_of(self, session_id: int) -> int:
        """The row showing `session_id`, or -1 when it is not loaded."""
        for row in range(self.rowCount()):
            if self.session_id(row) == session_id:
                return row
        return -1

    def set_pinned(self, session_id: int, pinned: bool) -> None:
        """Pin a chat to the top of the list (or of its project), or unpin it; raises
        HistoryError."""
        self._history.set_pinned(session_id, pinned)
        self.reload(at_least=self.rowCount())

    def set_drafted(self, session_id: int, drafted: bool) -> None:
        """Mark a chat as holding a draft not sent, or no longer."""
        if (session_id in self._drafted) == drafted:
            return
        if drafted:
            self._drafted.add(session_id)
        else:
            self._drafted.discard(session_id)
        row = self.row_of(session_id)
        if row >= 0:
            self.dataChanged.emit(self.index(row), self.index(row))

    def toggle(self, project_id: int) -> None:
        """Fold a project's chats under its header, or unfold them (remembered)."""
        project = self._history.projects.get(project_id)
        if project is not None:
            self._history.projects.update(project_id, collapsed=not project["collapsed"])
            self.reload(at_least=self.rowCount())

    def remove(self, session_id: int) -> None:
        """Drop a session's row (after it was deleted) without reloading the list."""
        row = self.row_of(session_id)
        if row < 0:
            return
        self.beginRemoveRows(QModelIndex(), row, row)
        if row < len(self._top):
            del self._top[row]
        else:
            del self._rows[row - len(self._top)]
            self._total -= 1
        self.endRemoveRows()

    # ------------------------------------------------------------------ Qt model

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        """Rows loaded so far."""
        return 0 if parent.isValid() else len(self._top) + len(self._rows)

    def canFetchMore(self, parent: _Index) -> bool:
        """Whether more sessions wait in the database (browsing only)."""
        return not parent.isValid() and not self._query and len(self._rows) < self._total

    def fetchMore(self, parent: _Index) -> None:
        """Load the next page of sessions."""
        if not self.canFetchMore(parent):
            return
        page = self._history.list_sessions(
            limit=self._page_size, offset=len(self._rows), **self._page_of()
        )
        if not page:
            self._total = len(self._rows)  # sessions were deleted meanwhile
            return
        start = self.rowCount()
        self.beginInsertRows(QModelIndex(), start, start + len(page) - 1)
        self._rows.extend(page)
        self.endInsertRows()

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """A session's title (and search snippet), tooltip and id; a project's name."""
        if not index.isValid() or not 0 <= index.row() < self.rowCount():
            return None
        session = self.session(index.row())
        if session is None:
            return self._header(self._top[index.row()][0], role, index.row())
        title = session["title"] or UNTITLED
        if role == Qt.ItemDataRole.DisplayRole:
            snippet = snippet_text(str(session.get("snippet") or ""), self._query)
            return f"{title}\n{snippet}" if snippet else title
        if role == Qt.ItemDataRole.EditRole:
            return session["title"]
        if role in (Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.AccessibleDescriptionRole):
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(session["updated_at"]))
            facts = ["Pinned"] if session.get("pinned") else []
            if session["id"] in self._drafted:
                facts.append("Draft not sent")
            facts.append(f"Last message {stamp}")
            if session.get("model"):
                facts.append(f"Model {session['model']}")
            project_id = session.get("project_id")
            if project_id is not None and project_id in self._names:
                facts.append(f"Project {self._names[project_id]}")
            text = f"{title}\n" + " · ".join(facts)
            return plain.tooltip(text) if role == Qt.ItemDataRole.ToolTipRole else text
        if role == Qt.ItemDataRole.DecorationRole and session.get("pinned"):
            return pin_icon()
        if role == self.SessionIdRole:
            return session["id"]
        if role == self.DepthRole:
            return 1 if index.row() < len(self._top) else 0
        if role == self.AfterProjectsRole:
            return index.row() == len(self._top) > 0
        if role == self.DraftRole:
            return session["id"] in self._drafted
        return None

    def _header(self, project: ProjectRow, role: int, row: int) -> Any:
        if role == self.EmptyRole:
            below = self._top[row + 1][1] if row + 1 < len(self._top) else None
            return not project["collapsed"] and below is None
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{'▸' if project['collapsed'] else '▾'} {project['name']}"
        if role == Qt.ItemDataRole.FontRole:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain.tooltip(
                f"Project {project['name']}: click to fold or unfold; its menu starts a "
                "new chat with the project's defaults"
            )
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        """Sessions can be selected and renamed in place; a project's header is clicked.
        Browsing by project, chats are dragged, and dropped on a header, a chat or the
        empty space below the list (the view asks for the invalid index)."""
        grouped = Qt.ItemFlag.NoItemFlags if self.flat() else Qt.ItemFlag.ItemIsDropEnabled
        if not index.isValid():
            return grouped
        if self.session(index.row()) is None:
            return Qt.ItemFlag.ItemIsEnabled | grouped
        if not self.flat():
            grouped |= Qt.ItemFlag.ItemIsDragEnabled
        return super().flags(index) | Qt.ItemFlag.ItemIsEditable | grouped

    def setData(self, index: _Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        """Rename a session from the in-place editor."""
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        title = str(value).strip()
        session = self.session(index.row())
        if not title or session is None:
            return False
        self._history.rename_session(session["id"], title)
        session["title"] = title
        self.dataChanged.emit(index, index)
        self.renamed.emit(session["id"], title)
        return True

    # ------------------------------------------------------------------ drag and drop

    def mimeTypes(self) -> list[str]:
        """A drag of chats is their ids, in SESSION_MIME."""
        return [SESSION_MIME]

    def supportedDropActions(self) -> Qt.DropAction:
        """A dropped chat moves (into the project dropped on)."""
        return Qt.DropAction.MoveAction

    def mimeData(self, indexes: list[QModelIndex]) -> QMimeData | None:  # type: ignore[override]
        """The ids of the chats among `indexes` (None: only headers)."""
        ids = [self.session_id(index.row()) for index in indexes if index.isValid()]
        chats = [session_id for session_id in ids if session_id is not None]
        if not chats:
            return None
        data = QMimeData()
        drag = {"history": str(self._history.path), "ids": chats}
        data.setData(SESSION_MIME, json.dumps(drag).encode())
        return data

    def canDropMimeData(
        self, data: QMimeData, action: Qt.DropAction, row: int, column: int, parent: _Index
    ) -> bool:
        """Whether dropping `data` there moves a chat: onto a project's header or chat, a
        chat in no project or the space below the list, for a chat not already there."""
        return self._drop(data, row, parent) is not None

    def dropMimeData(
        self, data: QMimeData, action: Qt.DropAction, row: int, column: int, parent: _Index
    ) -> bool:
        """Move the dragged chats into the project dropped on (or out of any), as the Move
        menu does; pins stay. A refusal is said by `move_refused`."""
        drop = self._drop(data, row, parent)
        if drop is None:
            return False
        chats, project_id = drop
        try:
            for session_id in chats:
                self._history.projects.move(session_id, project_id)
        except HistoryError as exc:
            self.move_refused.emit(str(exc))
            return False
        finally:
            self.reload(at_least=self.rowCount())
        return True

    def _drop(
        self, data: QMimeData, row: int, parent: _Index
    ) -> tuple[list[int], int | None] | None:
        """The chats a drop at (row, parent) moves and the project they go into (None: out
        of any); None when it moves nothing (no chats, filtered, between rows)."""
        if self.flat() or not data.hasFormat(SESSION_MIME):
            return None
        if parent.isValid() and 0 <= parent.row() < self.rowCount():
            project = self.project(parent.row())
            target = project["id"] if project is not None else None
        elif row < 0 and not parent.isValid():
            target = None  # the empty space below the list
        else:
            return None  # between two rows: neither one nor the other
        try:
            drag = json.loads(bytes(data.data(SESSION_MIME).data()))
        except ValueError:
            return None
        ids = drag.get("ids") if isinstance(drag, dict) else None
        if (
            drag.get("history") != str(self._history.path)
            or not isinstance(ids, list)
            or not all(type(i) is int for i in ids)
        ):
            return None
        where = {
            int(session["id"]): session["project_id"]
            for session in (self.session(r) for r in range(self.rowCount()))
            if session is not None
        }
        chats = [i for i in ids if where.get(i, -1) != target]
        return (chats, target) if chats else None


HINT_MARGIN = 6


def _hint(index: _Index) -> str:
    """The dim word at a row's right end: an empty project's, a chat's draft ('': none)."""
    if index.data(SessionListModel.EmptyRole):
        return "no chats yet"
    if index.data(SessionListModel.DraftRole):
        return "draft"
    return ""


def _hint_font(option: QStyleOptionViewItem) -> QFont:
    font = QFont(option.font)
    font.setItalic(True)
    font.setBold(False)
    return font


def _pin_width(option: QStyleOptionViewItem, index: _Index) -> int:
    """The room a pin takes at the row's right end (0: not pinned)."""
    if index.data(Qt.ItemDataRole.DecorationRole) is None:
        return 0
    return option.decorationSize.width() + HINT_MARGIN


def _hint_width(option: QStyleOptionViewItem, index: _Index, hint: str) -> int:
    width = QFontMetrics(_hint_font(option)).horizontalAdvance(hint)
    return width + _pin_width(option, index)


class SearchHitDelegate(QStyledItemDelegate):
    """Draws a search hit as its title and two lines of snippet, the matched words marked.

    Rows of the plain list (no search) are drawn as Qt draws them, with the pin at their
    end, the rule above the chats in no project and the dim "draft" / "no chats yet".
    """

    def _query(self, index: _Index) -> str:
        model = index.model()
        return model.query() if isinstance(model, SessionListModel) else ""

    def initStyleOption(self, option: QStyleOptionViewItem, index: _Index) -> None:
        """A pinned chat's pin goes at the row's right end: on the left it would push the
        title in, like a project's chat."""
        super().initStyleOption(option, index)
        option.decorationPosition = QStyleOptionViewItem.Position.Right
        hint = _hint(index)
        if hint and not self._query(index):
            # The title ends before the hint drawn at the row's right end.
            room = option.rect.width() - _hint_width(option, index, hint) - 2 * HINT_MARGIN
            option.text = option.fontMetrics.elidedText(
                option.text, Qt.TextElideMode.ElideRight, max(room, 0)
            )

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        """Draw the row; a search hit through a document of ours, outside text escaped."""
        query = self._query(index)
        if not query:
            if index.data(SessionListModel.DepthRole):
                # A project's chat sits a step in from its header.
                option = QStyleOptionViewItem(option)
                option.rect.setLeft(option.rect.left() + option.fontMetrics.height())
            super().paint(painter, option, index)
            self._paint_marks(painter, option, index)
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

    def _paint_marks(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        """The rule between the projects and the chats in none; "no chats yet" on an empty
        project's header, "draft" on a chat holding one."""
        palette = option.palette
        painter.save()
        if index.data(SessionListModel.AfterProjectsRole):
            painter.setPen(QPen(palette.color(QPalette.ColorRole.Mid), 1))
            top = option.rect.top()
            painter.drawLine(option.rect.left() + 2, top, option.rect.right() - 2, top)
        hint = _hint(index)
        if hint:
            painter.setFont(_hint_font(option))
            selected = bool(option.state & QStyle.StateFlag.State_Selected)
            ink = (
                QPalette.ColorRole.HighlightedText
                if selected
                else QPalette.ColorRole.PlaceholderText
            )
            painter.setPen(palette.color(ink))
            # Left of a pin, which sits at the row's right end.
            text_rect = option.rect.adjusted(0, 0, -HINT_MARGIN - _pin_width(option, index), 0)
            align = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
            painter.drawText(text_rect, align, hint)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        """A search hit is a title and two snippet lines high; no row is wider than the view."""
        size = super().sizeHint(option, index)
        if self._query(index) and "\n" in str(index.data()):
            # Qt sized the title and one snippet line.
            size.setHeight(size.height() + (SNIPPET_LINES - 1) * option.fontMetrics.lineSpacing())
        # Long titles are elided to the view's width instead of widening the list.
        return QSize(1, size.height())


class SessionView(QListView):
    """The list of chats; a chat dragged onto a project moves into it (`SessionListModel`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDragEnabled(True)
        self.setAcceptDrops(True)
        self.setDropIndicatorShown(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DragDrop)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)

    def dropEvent(self, event: QDropEvent) -> None:
        """Hand every drop to the model: QListView's own, for a drop from itself onto no
        row, would reorder the rows (moveRow) instead of moving the chat out of its project."""
        QAbstractItemView.dropEvent(self, event)
