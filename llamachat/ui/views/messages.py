"""The conversation: a scrolling column of messages, built to stay fast at 100,000 tokens.

Each message is one `message.MessageView` whose text lives in its own QTextDocument, so
work on one message never touches the others; `_Column` stacks them without a layout
manager, so a growing reply moves nothing above it.

Long histories open fast: `MessagesView.load_messages` builds the last
screenful first and adds older messages a page at a time when the user scrolls
near the top, keeping what is on screen in place.

Errors: this module raises no exceptions of its own; a failure here is a bug.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QPalette, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QFrame, QScrollArea, QTextEdit, QWidget

from llamachat.ui.views.document import TextView
from llamachat.ui.views.figures import reading_speed
from llamachat.ui.views.markdown import DARK, LIGHT, Palette
from llamachat.ui.views.message import MessageView, is_dark
from llamachat.ui.views.session_list import matches
from llamachat.ui.views.summary import SummaryView

INITIAL_MIN_MESSAGES = 6
INITIAL_MIN_CHARS = 6000
PAGE_SIZE = 20
NEAR_TOP_PX = 400
SIDE_MARGIN = 16
TOP_MARGIN = 12
BOTTOM_MARGIN = 12
SPACING = 10
PAGE_DELAY_MS = 30
SHOWN_ROLES = ("system", "user", "assistant")  # "system": a compacted chat's summary


class _Column(QWidget):
    """Stacks message views without a layout manager, so a growing reply moves nothing else.

    A QVBoxLayout would re-place every message whenever the streaming reply grows;
    here a view's new height moves only the views below it (none while streaming).
    """

    height_changed = Signal(object, int)  # the view, how much its bottom moved

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.views: list[MessageView] = []
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.setAutoFillBackground(True)
        self._minimum_height = 0

    def insert(self, index: int, views: list[MessageView]) -> None:
        """Place `views` at `index` and move the views after them."""
        self.views[index:index] = views
        for view in views:
            view.relaid_out.connect(self._on_relaid_out)
            view.show()
        self.restack(index)

    def remove_all(self) -> None:
        """Drop every view."""
        for view in self.views:
            view.hide()
            view.deleteLater()
        self.views.clear()
        self.restack(0)

    def set_minimum_height(self, height: int) -> None:
        """Be at least as tall as the viewport (the background fills it)."""
        self._minimum_height = height
        self.restack(len(self.views))

    def restack(self, start: int) -> None:
        """Re-place the views from `start` on, and fit the column's height to them."""
        width = max(1, self.width() - 2 * SIDE_MARGIN)
        y = self.views[start - 1].geometry().bottom() + 1 + SPACING if start > 0 else TOP_MARGIN
        for view in self.views[start:]:
            height = view.heightForWidth(width) if view.hasHeightForWidth() else -1
            if height < 0:
                height = view.sizeHint().height()
            view.setGeometry(SIDE_MARGIN, y, width, height)
            y += height + SPACING
        bottom = (y - SPACING if self.views else y) + BOTTOM_MARGIN
        self.resize(self.width(), max(bottom, self._minimum_height))

    def showEvent(self, event) -> None:
        """Place everything once the views can know their sizes."""
        super().showEvent(event)
        self.restack(0)

    def _on_relaid_out(self, view: MessageView) -> None:
        # The streaming reply is the last view: finding it must not walk the history.
        index = len(self.views) - 1
        if index < 0 or self.views[index] is not view:
            try:
                index = self.views.index(view)
            except ValueError:
                return
        old_bottom = view.geometry().bottom()
        self.restack(index)
        moved = view.geometry().bottom() - old_bottom
        if moved:
            self.height_changed.emit(view, moved)


class MessagesView(QScrollArea):
    """The conversation: messages in a column, lazy for long histories, following the stream."""

    retry_requested = Signal(object)
    regenerate_requested = Signal(object)
    continue_requested = Signal(object)
    edit_requested = Signal(object)
    version_requested = Signal(object)
    fork_requested = Signal(object)
    remember_requested = Signal(object, str)  # "Remember this" on a message: its id, its text
    read_aloud_requested = Signal(object, str)  # "Read aloud" on a reply: its id, its text
    stop_reading_requested = Signal()
    read_speed_chosen = Signal(float)
    summary_edited = Signal(object, str)  # a compacted chat's summary saved edited: id, text

    def __init__(self, parent: QWidget | None = None, *, forks: bool = False) -> None:
        super().__init__(parent)
        self._forks = forks
        self._reading: object = None  # the id of the reply read aloud now
        self._read_speed = 1.0
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self._column = _Column(self)
        self._column.height_changed.connect(self._on_height_changed)
        self.setWidget(self._column)
        self._views = self._column.views
        self._unloaded: list[Mapping[str, Any]] = []
        self._follow = True
        # A search hit shown (`show_match`): its view, and how far below its top it is.
        self._anchor: tuple[MessageView, int] | None = None
        self._adjusting = False
        self._editing: int | None = None
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range_changed)
        bar.valueChanged.connect(self._on_scrolled)
        self._page_timer = QTimer(self)
        self._page_timer.setSingleShot(True)
        # Not 0: the newest messages get painted before older pages are built.
        self._page_timer.setInterval(PAGE_DELAY_MS)
        self._page_timer.timeout.connect(self._on_page_due)

    def set_font_size(self, points: int) -> None:
        """Show the messages in `points`-point text (0: the system's size), re-laid out now."""
        font = QFont()
        if points > 0:
            font.setPointSize(points)
        # Only the size is the conversation's own: the family and the rest follow the app.
        self.setFont(font)

    def clear(self) -> None:
        """Remove every message."""
        self._page_timer.stop()
        self._column.remove_all()
        self._unloaded = []
        self._follow = True
        self._anchor = None

    def load_messages(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Show a session's messages: the last screenful now, older ones as the user scrolls up."""
        self.clear()
        shown = [m for m in messages if m.get("role") in SHOWN_ROLES]
        first = len(shown)
        chars = 0
        while (
            first > 0
            and (len(shown) - first < INITIAL_MIN_MESSAGES or chars < INITIAL_MIN_CHARS)
            and len(shown) - first < PAGE_SIZE
        ):
            first -= 1
            message = shown[first]
            chars += len(message.get("content") or "") + len(message.get("reasoning") or "")
        self._unloaded = shown[:first]
        for message in shown[first:]:
            self._add(message)
        self._update_regenerate()
        self.scroll_to_bottom()
        if self._unloaded:
            self._page_timer.start()

    def append_message(self, message: dict) -> MessageView:
        """Add a message at the end (a streaming reply when its status is "streaming")."""
        view = self._add(message)
        if message.get("status") == "streaming":
            view.reading_speed = self.reading_speed(view.model)
        self._update_regenerate()
        if self._follow:
            self.scroll_to_bottom()
        return view

    def views(self) -> list[MessageView]:
        """The message views built so far, oldest first (older unloaded ones are not built yet)."""
        return list(self._views)

    def last_assistant(self) -> MessageView | None:
        """The last reply, or None."""
        for view in reversed(self._views):
            if view.role == "assistant":
                return view
        return None

    def unloaded_count(self) -> int:
        """How many older messages are still waiting to be built."""
        return len(self._unloaded)

    def scroll_to_bottom(self) -> None:
        """Jump to the newest message and follow the stream again."""
        self._follow = True
        self._anchor = None
        self._set_scroll(self.verticalScrollBar().maximum())

    def show_match(self, message_id: int, query: str) -> bool:
        """Scroll to message `message_id` with the words of `query` in it marked (a search
        hit); False when the conversation does not hold it."""
        while not any(view.message_id == message_id for view in self._views):
            if not self.load_older():
                return False
        view = next(view for view in self._views if view.message_id == message_id)
        self._follow = False
        # Kept in view while the message is laid out (a long one grows for a while),
        # until the user scrolls.
        self._anchor = (view, _mark_matches(view, query))
        self._scroll_to_anchor()
        return True

    def load_older(self) -> int:
        """Build the next page of older messages above the others; return how many were added."""
        if not self._unloaded:
            return 0
        page = self._unloaded[-PAGE_SIZE:]
        del self._unloaded[-PAGE_SIZE:]
        value = self.verticalScrollBar().value()
        self._column.insert(0, [self._build(message) for message in page])
        # Everything on screen moved down by the new messages' height: follow it.
        added = self._views[len(page)].y() - TOP_MARGIN
        self._set_scroll(value + added)
        return len(page)

    # ------------------------------------------------------------ internals

    def _palette(self) -> Palette:
        return DARK if is_dark(self.palette()) else LIGHT

    def _build(self, message: Mapping[str, Any]) -> MessageView:
        if message.get("role") == "system":
            summary = SummaryView(message, palette=self._palette(), parent=self._column)
            summary.summary_edited.connect(self.summary_edited)
            view: MessageView = summary
        else:
            view = MessageView(message, palette=self._palette(), parent=self._column)
        view.retry_requested.connect(self.retry_requested)
        view.regenerate_requested.connect(self.regenerate_requested)
        view.continue_requested.connect(self.continue_requested)
        view.edit_requested.connect(self.edit_requested)
        view.version_requested.connect(self.version_requested)
        view.fork_requested.connect(self.fork_requested)
        view.remember_requested.connect(self.remember_requested)
        view.read_aloud_requested.connect(self.read_aloud_requested)
        view.stop_reading_requested.connect(self.stop_reading_requested)
        view.read_speed_chosen.connect(self.read_speed_chosen)
        view.read_aloud.reading = view.message_id is not None and view.message_id == self._reading
        view.read_aloud.speed = self._read_speed
        if self._forks:
            view.set_fork_allowed(True)
        if self._editing is not None and view.message_id == self._editing:
            view.set_editing(True)
        return view

    def set_reading(self, message_id: object) -> None:
        """The reply read aloud now (None: none), for its ⋯ menu's "Stop reading"."""
        self._reading = message_id
        for view in self._views:
            view.read_aloud.reading = message_id is not None and view.message_id == message_id

    def set_read_speed(self, speed: float) -> None:
        """The reading speed the ⋯ menus show checked."""
        self._read_speed = speed
        for view in self._views:
            view.read_aloud.speed = speed

    def set_versions(self, message_id: int, versions: list[int]) -> None:
        """A shown message has these versions now (a reply was regenerated)."""
        for view in self._views:
            if view.message_id == message_id:
                view.set_versions(versions)

    def set_editing(self, message_id: object) -> None:
        """Mark the message being edited (None: no message is)."""
        self._editing = message_id if isinstance(message_id, int) else None
        for view in self._views:
            view.set_editing(self._editing is not None and view.message_id == self._editing)

    def reading_speed(self, model: str) -> float | None:
        """How fast `model` read its last prompt in this chat (None when it is not known)."""
        for view in reversed(self._views):
            if view.measured_speed and view.model == model:
                return view.measured_speed
        for message in reversed(self._unloaded):
            speed = reading_speed(message.get("timings") or {})
            if speed and message.get("model") == model:
                return speed
        return None

    def _add(self, message: Mapping[str, Any]) -> MessageView:
        view = self._build(message)
        self._column.insert(len(self._views), [view])
        return view

    def _update_regenerate(self) -> None:
        last = self.last_assistant()
        for view in self._views:
            if view.role == "assistant":
                view.set_regenerate_allowed(view is last)

    def _set_scroll(self, value: int) -> None:
        self._adjusting = True
        try:
            self.verticalScrollBar().setValue(value)
        finally:
            self._adjusting = False

    def _scroll_to_anchor(self) -> None:
        if self._anchor is not None:
            view, below_top = self._anchor
            # The match a third of the way down, with what leads to it above.
            self._set_scroll(view.y() + below_top - self.viewport().height() // 3)

    def _on_height_changed(self, view: MessageView, moved: int) -> None:
        bar = self.verticalScrollBar()
        if self._follow:
            self._set_scroll(bar.maximum())
        elif self._anchor is not None:
            self._scroll_to_anchor()
        elif view.geometry().bottom() - moved < bar.value():
            # A message above the screen changed height: keep what is on screen in place.
            self._set_scroll(bar.value() + moved)

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self._set_scroll(maximum)
        elif self._anchor is not None:
            self._scroll_to_anchor()
        self._want_older()

    def _want_older(self) -> None:
        if (
            self._unloaded
            and not self._page_timer.isActive()
            and self.verticalScrollBar().value() < NEAR_TOP_PX
        ):
            self._page_timer.start()

    def _on_page_due(self) -> None:
        # Re-checked here: the layout may have filled the screen since the timer started.
        if self.verticalScrollBar().value() < NEAR_TOP_PX:
            self.load_older()

    def _on_scrolled(self, value: int) -> None:
        if self._adjusting:
            return
        self._anchor = None
        self._follow = value >= self.verticalScrollBar().maximum() - 4
        self._want_older()

    def changeEvent(self, event: QEvent) -> None:
        """Render the messages again in the new palette when the theme switches."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            palette = self._palette()
            for view in self._views:
                view.set_palette(palette)

    def viewportEvent(self, event: QEvent) -> bool:
        """Keep the column as wide as the viewport (and at least as tall)."""
        if event.type() == QEvent.Type.Resize:
            size = self.viewport().size()
            if self._column.width() != size.width():
                self._column.resize(size.width(), self._column.height())
                self._column.restack(0)
            self._column.set_minimum_height(size.height())
            if self._follow:
                self._set_scroll(self.verticalScrollBar().maximum())
        return super().viewportEvent(event)


def _mark_matches(view: MessageView, query: str) -> int:
    """Mark the words of `query` in the view's text; how far below its top the first one is."""
    document = view.text_document()
    body = next((b for b in view.findChildren(TextView) if b.document() is document), None)
    if body is None:
        return 0
    mark = QTextCharFormat()
    mark.setBackground(view.palette().color(QPalette.ColorRole.Highlight))
    mark.setForeground(view.palette().color(QPalette.ColorRole.HighlightedText))
    selections = []
    for start, end in matches(document.toPlainText(), query):
        selection = QTextEdit.ExtraSelection()
        selection.cursor = QTextCursor(document)
        selection.cursor.setPosition(start)
        selection.cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        selection.format = mark
        selections.append(selection)
    body.setExtraSelections(selections)
    if not selections:
        return 0
    # In the document, not the body: the body may not be as tall as its document yet.
    in_document = body.cursorRect(selections[0].cursor).top() + body.verticalScrollBar().value()
    return body.mapTo(view, QPoint(0, 0)).y() + in_document
