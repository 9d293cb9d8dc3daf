"""The conversation: a scrolling column of messages, built to stay fast at 100,000 tokens.

Each message is one `MessageView` whose text lives in its own QTextDocument, so
work on one message never touches the others. A streamed reply arrives in bursts (the
stream worker hands over what piled up at most about 30 times a second) and each burst
is rendered at once: a render inserts the HTML of newly finished markdown blocks once
and replaces only the open tail of the document (see `markdown.StreamingMarkdown`), so
its cost follows the block being written, not the reply or the history.

Long histories open fast: `ConversationView.load_messages` builds the last
screenful first and adds older messages a page at a time when the user scrolls
near the top, keeping what is on screen in place.

A message with other versions (replies regenerated, edits of a question) shows
`‹ 2/3 ›`; Alt+Left and Alt+Right switch versions while the focus is in the message.
The view only asks (`version_requested` with the id to show, `fork_requested`): the
conversation controller switches the path and hands back the rows to show.

Errors: this module raises no exceptions of its own; a failure here is a bug.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import QEvent, QMimeData, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QFont,
    QGuiApplication,
    QPainter,
    QPalette,
    QShortcut,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.ui import plain, shortcuts
from llamachat.ui.views.figures import ReadingProgress, figures
from llamachat.ui.views.markdown import (
    BREAK,
    COPY_SCHEME,
    DARK,
    LIGHT,
    Palette,
    StreamingMarkdown,
    Update,
    break_text_runs,
)
from llamachat.ui.views.tool_call import ToolCallView

log = logging.getLogger(__name__)

# A code block's link confirms a copy for a moment; both texts are as long, so the
# document's positions stay where the streaming writer expects them.
COPY_LINK = "Copy code"
COPIED_LINK = "✓ Copied!"
COPIED_MS = 1500
INITIAL_MIN_MESSAGES = 6
INITIAL_MIN_CHARS = 6000
PAGE_SIZE = 20
NEAR_TOP_PX = 400
SIDE_MARGIN = 16
TOP_MARGIN = 12
BOTTOM_MARGIN = 12
SPACING = 10
PAGE_DELAY_MS = 30
SHOWN_ROLES = ("user", "assistant")

# Seeds a fragment so Qt keeps its first block's format: insertHtml merges the
# first block of a fragment into the block at the cursor and drops its format.
_SEED = "<p>\u200b</p>"


def _is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def _blend(a: QColor, b: QColor, amount: float) -> QColor:
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


def open_link(url: QUrl) -> bool:
    """Open a link from model text in the browser, but only http and https ones."""
    if url.scheme() in ("http", "https"):
        return QDesktopServices.openUrl(url)
    log.info("ignored link with scheme %r", url.scheme())
    return False


# How many lines of room a streaming text view keeps below its text (_Body.set_growing).
GROW_STEP_LINES = 8


class _Body(QTextBrowser):
    """A read-only rich-text view whose height follows its document (no inner scrolling)."""

    def __init__(self, parent: QWidget, *, accessible_name: str, on_card: bool = False) -> None:
        super().__init__(parent)
        self.setAccessibleName(accessible_name)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setUndoRedoEnabled(False)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self._growing = False
        if on_card:
            # The tinted card of the user's messages shows through.
            self.viewport().setAutoFillBackground(False)
            self.setStyleSheet("QTextBrowser { background: transparent; }")
        # Otherwise the viewport fills itself with the conversation's own Base colour: an
        # opaque view, so a streamed token repaints this view alone, not the card and the
        # column beneath it as well.
        self.follow_font(parent.font())
        doc = self.document()
        doc.setUndoRedoEnabled(False)
        doc.setDocumentMargin(2)
        doc.documentLayout().documentSizeChanged.connect(self._on_size_changed)
        self.setFixedHeight(self._height_for(doc.size().height()))

    def follow_font(self, font: QFont) -> None:
        """Take `font` (the message's): with a style sheet, a widget no longer inherits it."""
        font = QFont(font)
        # Laying out text was most of a streamed reply's cost, and shaping most of that.
        # Qt still shapes the scripts that need it; Latin text only loses kerning.
        font.setStyleStrategy(QFont.StyleStrategy.PreferNoShaping)
        self.setFont(font)

    def set_growing(self, growing: bool) -> None:
        """While `growing` (text streaming in), keep room for a few more lines below it.

        A view that grows by each new line moves everything under it and scrolls the
        conversation a line at a time, repainting all of it; with room it grows in
        steps of GROW_STEP_LINES, and a new line in the room repaints only itself.
        """
        if growing != self._growing:
            self._growing = growing
            self._on_size_changed(self.document().size())

    def _height_for(self, document_height: float) -> int:
        height = max(1, math.ceil(document_height))
        if self._growing:
            step = GROW_STEP_LINES * self.fontMetrics().lineSpacing()
            height = math.ceil(height / step) * step
        return height

    def _on_size_changed(self, size) -> None:
        height = self._height_for(size.height())
        if height != self.height():
            self.setFixedHeight(height)

    def wheelEvent(self, event) -> None:
        """Let the conversation scroll: this view never scrolls by itself."""
        event.ignore()

    def createMimeDataFromSelection(self) -> QMimeData:
        """Copy the selection without the breaks put into long runs (they are for layout)."""
        selected = super().createMimeDataFromSelection()
        mime = QMimeData()
        mime.setText(selected.text().replace(BREAK, ""))
        if selected.hasHtml():
            mime.setHtml(selected.html().replace(BREAK, ""))
        return mime

    def sizeHint(self) -> QSize:
        """As tall as the document."""
        return QSize(super().sizeHint().width(), self.height())


_RULE = QTextFormat.Property.BlockTrailingHorizontalRulerWidth


class _DocumentWriter:
    """Keeps a document as finished blocks followed by an open tail that alone is replaced."""

    def __init__(self, document: QTextDocument) -> None:
        self._document = document
        self._tail_start = 0
        self._closed = False
        # The HTML the open tail shows, while the document holds exactly it (None after
        # a plain append): a token that does not change it (a space, a fence's first
        # backtick) costs no insert, layout or paint.
        self._tail_html: str | None = None

    def write(self, update: Update, *, final: bool = False) -> bool:
        """Insert newly finished blocks once after the previous ones; replace the tail.

        With `final` nothing is left open, so no empty block is kept after the text.
        An update's plain `append` goes at the end of the last line of text (an open code
        block's is in its frame, before the empty block after it), in the format of the
        text before it. Returns False when there was nothing to change.
        """
        if update.append is not None:
            # Words added to the last paragraph or line of code: no HTML to parse, and Qt
            # lays out that block alone again.
            if not update.append:
                return False
            self._tail_html = None
            block = self._document.lastBlock()
            if block.length() == 1 and block.previous().isValid():
                block = block.previous()
            cursor = QTextCursor(block)
            # In an edit block the cursor does not lay the block out to find its x, before
            # and after the insert: Qt lays it out once, at the end.
            cursor.beginEditBlock()
            cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
            cursor.insertText(update.append)
            cursor.endEditBlock()
            return True
        if not update.finished and not final and update.tail == self._tail_html:
            return False
        cursor = QTextCursor(self._document)
        cursor.setPosition(self._tail_start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        if not (cursor.hasSelection() or update.finished or update.tail):
            return False
        self._tail_html = update.tail
        cursor.beginEditBlock()
        cursor.removeSelectedText()
        if self._closed:
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            self._closed = False
        elif cursor.atBlockStart():
            # The emptied block keeps the old tail's format (a heading, a list item).
            cursor.setBlockFormat(QTextBlockFormat())
            cursor.setCharFormat(QTextCharFormat())
        if update.finished:
            self._insert(cursor, update.finished)
            if final:
                self._closed = True
            elif (
                cursor.block().length() > 1
                or cursor.currentTable() is not None
                # An empty block of its own kind (a rule): the tail must not reset it.
                or cursor.blockFormat().hasProperty(_RULE)
            ):
                cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            self._tail_start = cursor.position()
        if update.tail:
            self._insert(cursor, update.tail)
        cursor.endEditBlock()
        return True

    def _insert(self, cursor: QTextCursor, fragment: str) -> None:
        if fragment.startswith("<table"):
            # A table starts in a frame of its own, so no format is lost.
            cursor.insertHtml(fragment)
            return
        start = cursor.position()
        cursor.insertHtml(_SEED + fragment)
        seed = QTextCursor(self._document)
        seed.setPosition(start)
        seed.setPosition(start + 2, QTextCursor.MoveMode.KeepAnchor)
        seed.removeSelectedText()


def _mute(body: QTextBrowser, palette: Palette) -> None:
    """Give `body` the palette's muted colour for its text (the reasoning)."""
    # Only Text is set: every other role still follows the theme.
    muted = QPalette()
    muted.setColor(QPalette.ColorRole.Text, QColor(palette.muted))
    body.setPalette(muted)


class MessageView(QFrame):
    """One message: its text, reasoning, searches, status, stats and actions."""

    retry_requested = Signal(object)
    regenerate_requested = Signal(object)
    edit_requested = Signal(object)
    version_requested = Signal(object)  # the id of the version of this message to show
    fork_requested = Signal(object)  # "New chat from here" on this message
    rendered = Signal()
    relaid_out = Signal(object)

    def __init__(
        self, message: Mapping[str, Any], *, palette: Palette = LIGHT, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.message_id: int | None = message.get("id")
        self.role: str = message.get("role", "assistant")
        self._palette = palette
        self._markdown = StreamingMarkdown(palette=palette)
        self._reasoning_parts: list[str] = []
        self._reasoning_run = 0  # the unbroken run the reasoning shown ends with
        self._streaming = False
        self._thinking_started: float | None = None
        self._thinking_seconds: float | None = None
        self._regenerate_allowed = False
        self._answer_started = False
        self._final_status = ""
        # When a reply began streaming: a stopped one shows how long it ran.
        self._began = time.monotonic() if message.get("status") == "streaming" else None
        self.render_count = 0

        mine = self.role == "user"
        self.setAccessibleName("Message from you" if mine else "Reply")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 8)
        layout.setSpacing(4)

        self._reasoning_button: QToolButton | None = None
        self._reasoning_body: _Body | None = None
        self._searches: QVBoxLayout | None = None
        self._reading: ReadingProgress | None = None
        self._layout = layout

        self._body = _Body(
            self, accessible_name="Message text" if mine else "Reply text", on_card=mine
        )
        self._body.anchorClicked.connect(self._on_anchor)
        self._writer = _DocumentWriter(self._body.document())
        layout.addWidget(self._body)

        attachments = [str(a.get("name") or "") for a in message.get("attachments") or ()]
        if any(attachments):
            note = plain.Label("Attached: " + ", ".join(a for a in attachments if a), self)
            note.setAccessibleName("Attachments")
            note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            layout.addWidget(note)

        status_row = QHBoxLayout()
        status_row.setContentsMargins(0, 0, 0, 0)
        self._status = plain.Label("", self)
        self._status.setAccessibleName("Status")
        self._status.setWordWrap(True)
        self._status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._status.hide()
        self._retry = self._action(
            "Retry", "Retry", lambda: self.retry_requested.emit(self.message_id)
        )
        self._retry.hide()
        status_row.addWidget(self._status, 1)
        status_row.addWidget(self._retry)
        layout.addLayout(status_row)
        # The text carries a database error: shown as it is, never read as markup.
        self._unsaved = plain.Label("", self)
        self._unsaved.setAccessibleName("Not saved")
        self._unsaved.setWordWrap(True)
        self._unsaved.setStyleSheet("color: #d1242f;")
        self._unsaved.hide()
        layout.addWidget(self._unsaved)

        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.setSpacing(2)
        self._stats = plain.Label("", self)
        self._stats.setAccessibleName("Reply statistics")
        self._stats.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self._stats.hide()
        footer.addWidget(self._stats)
        footer.addStretch(1)
        if mine:
            self._edit = self._action(
                "Edit", "Edit message", lambda: self.edit_requested.emit(self.message_id)
            )
            footer.addWidget(self._edit)
        else:
            self._copy = self._action("Copy", "Copy reply", self._on_copy_reply)
            self._regenerate = self._action(
                "Regenerate", "Regenerate", lambda: self.regenerate_requested.emit(self.message_id)
            )
            self._regenerate.hide()
            footer.addWidget(self._copy)
            footer.addWidget(self._regenerate)
        layout.addLayout(footer)
        self._footer = footer
        # Built when first needed: most messages have one version and no fork button.
        self._version_switch = _VersionSwitch(self, footer)
        self._more = _MoreActions(self, footer)
        self.set_versions(message.get("versions") or [])

        if message.get("reasoning"):
            self._add_reasoning_text(message["reasoning"])
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and "result" in call:
                self.add_tool_call(call)
        status = message.get("status", "complete")
        content = message.get("content") or ""
        if status == "streaming":
            self._streaming = True
            if content:
                self.append_content(content)
        else:
            if content:
                self._answer_started = True
                self._markdown.append(content)
                self._write(self._markdown.finish(), final=True)
            if self._reasoning_button is not None:
                self._set_reasoning_expanded(False)
            self.set_status(status, message.get("error") or "")
            if message.get("usage") or message.get("timings"):
                self.set_stats(message.get("usage") or {}, message.get("timings") or {})

    # ------------------------------------------------------------ public API

    def append_content(self, text: str) -> None:
        """Add streamed reply text and render it now (the caller batches: one call per frame)."""
        if not text:
            return
        if self._thinking_started is not None and self._thinking_seconds is None:
            self._thinking_seconds = time.monotonic() - self._thinking_started
        self._streaming = True
        self._body.set_growing(True)
        first = not self._answer_started
        self._answer_started = True
        self._markdown.append(text)
        self._write(self._markdown.flush())
        if first and self._reasoning_button is not None:
            # The answer has started: the thinking is done, fold it away.
            self._set_reasoning_expanded(False)

    def append_reasoning(self, text: str) -> None:
        """Add streamed reasoning to the panel shown apart (expanded while thinking)."""
        if not text:
            return
        if self._thinking_started is None:
            self._thinking_started = time.monotonic()
        self._streaming = True
        self._add_reasoning_text(text)

    def _add_activity(self, widget: QWidget) -> None:
        """Show `widget` in the layout above the text (searches and tool calls)."""
        if self._searches is None:
            self._searches = QVBoxLayout()
            self._searches.setSpacing(2)
            self._layout.insertLayout(self._layout.indexOf(self._body), self._searches)
        self._searches.addWidget(widget)
        # Now, not at the event loop's next turn (what a layout does for a child added to
        # a shown widget): a click on it right away must reach it.
        widget.show()

    def add_tool_call(self, call: dict) -> ToolCallView:
        """Show an MCP tool call inline, collapsed (`reply.stored_call`'s shape)."""
        view = ToolCallView(call, self)
        self._add_activity(view)
        return view

    def tool_calls(self) -> list[ToolCallView]:
        """The tool calls shown, in order."""
        return self.findChildren(ToolCallView)

    def add_search(
        self, query: str, results: list[dict], error: str = "", *, title: str = "Searched"
    ) -> None:
        """Show a tool call inline: a web search's query and its results as links, or its
        error; another tool's call (`title`, e.g. "Read skill file") and short result."""
        lines = [f"<b>{plain.markup(title)}:</b> {plain.markup(query)}"]
        if error:
            lines.append(f'<span style="color:#d1242f">{plain.markup(error)}</span>')
        for number, result in enumerate(results, 1):
            url = str(result.get("url", ""))
            name = str(result.get("title") or url)
            lines.append(f'{number}. <a href="{plain.markup(url)}">{plain.markup(name)}</a>')
        label = QLabel("<br>".join(lines), self)
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setWordWrap(True)
        label.setAccessibleName("Search results" if title == "Searched" else title)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        label.setOpenExternalLinks(False)
        label.linkActivated.connect(lambda link: open_link(QUrl(link)))
        label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self._add_activity(label)

    def set_stats(self, usage: dict, timings: dict) -> None:
        """Show the reply's figures: "38.2 tok/s · 412 tokens · 1.2 s · 1,024 prompt, 900 cached"
        (the prompt's, the speeds and the time to the first token in the tooltip)."""
        text, tip = figures(usage or {}, timings or {})
        self._stats.setText(text)
        self._stats.setToolTip(plain.tooltip(tip) if tip else "")
        self._stats.setVisible(bool(text))

    def set_progress(self, progress: dict | None) -> None:
        """Show llama.cpp's prompt progress under the reply (None: the reading is over)."""
        if progress is None:
            if self._reading is not None:
                self._reading.hide()
            return
        if self._reading is None:
            self._reading = ReadingProgress(self)
            # Just above the status row: where the answer will start.
            self._layout.insertWidget(self._layout.indexOf(self._body) + 1, self._reading)
        self._reading.show_progress(progress)
        self._reading.setVisible(not self._answer_started)

    def set_status(self, status: str, error: str = "") -> None:
        """Mark the reply: "stopped" (partial reply kept) or "error" (message in red + Retry)."""
        if status in ("stopped", "error"):
            self._write(self._markdown.finish(), final=True)
            self._set_ended()
        if status == "stopped":
            self._status.setText("Stopped")
            self._status.setStyleSheet("")
            self._status.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            if not self._stats.text():
                # The server sends its figures at the end, which a stopped reply never reaches.
                self._stats.setText(self._stopped_figures())
                self._stats.setVisible(bool(self._stats.text()))
        elif status == "error":
            plain.set_text(self._status, error or "The reply failed.")
            self._status.setStyleSheet("color: #d1242f;")
        self._final_status = status
        self._status.setVisible(status in ("stopped", "error"))
        # One way to ask again: Retry beside an error, Regenerate under any other reply.
        self._retry.setVisible(status == "error" and self.role == "assistant")
        self._update_actions()

    def _stopped_figures(self) -> str:
        """What a stopped reply produced: its words, and how long it ran when known."""
        words = len(self.content().split())
        parts = [f"{words:,} word{'' if words == 1 else 's'}"] if words else []
        if self._began is not None:
            parts.append(f"{time.monotonic() - self._began:.1f} s")
        return " · ".join(parts)

    def set_unsaved(self, error: str) -> None:
        """Mark the reply as not saved because of `error` ('' once it is saved)."""
        self._unsaved.setText(
            f"Not saved yet: {error} It is kept here and saved once there is room." if error else ""
        )
        self._unsaved.setVisible(bool(error))

    def unsaved_text(self) -> str:
        """What the "not saved" mark says ('' when the reply is saved)."""
        return self._unsaved.text() if self._unsaved.isVisibleTo(self) else ""

    def finish(self) -> None:
        """Render the open tail as finished, highlight any unclosed code block, end streaming."""
        self._write(self._markdown.finish(), final=True)
        self._set_ended()
        self._update_actions()

    def _set_ended(self) -> None:
        self._streaming = False
        self._body.set_growing(False)
        if self._reasoning_body is not None:
            self._reasoning_body.set_growing(False)

    def content(self) -> str:
        """The reply text received so far."""
        return self._markdown.text()

    def reasoning(self) -> str:
        """The reasoning text received so far."""
        return "".join(self._reasoning_parts)

    def set_message_id(self, message_id: int) -> None:
        """Attach the database id (signals carry it)."""
        self.message_id = message_id

    def code(self, index: int) -> str:
        """The raw code of code block `index`, as its "Copy code" link copies it."""
        return self._markdown.code(index)

    def copy_code(self, index: int) -> None:
        """Put code block `index` on the clipboard."""
        QGuiApplication.clipboard().setText(self.code(index))

    def is_streaming(self) -> bool:
        """True between the first streamed text and finish()/a final status."""
        return self._streaming

    def reasoning_expanded(self) -> bool | None:
        """Whether the reasoning panel is open; None when there is no reasoning."""
        if self._reasoning_body is None:
            return None
        return not self._reasoning_body.isHidden()

    def set_reasoning_expanded(self, expanded: bool) -> None:
        """Open or close the reasoning panel (what the panel's toggle does)."""
        if self._reasoning_button is not None:
            self._set_reasoning_expanded(expanded)

    def text_document(self) -> QTextDocument:
        """The rendered reply document (for copying as rich text and for tests)."""
        return self._body.document()

    def palette_name(self) -> str:
        """The markdown palette the text is rendered in ("light" or "dark")."""
        return self._palette.name

    def set_palette(self, palette: Palette) -> None:
        """Render the text again in `palette` (the theme changed); a streaming reply goes on."""
        if palette == self._palette:
            return
        self._palette = palette
        if self._reasoning_body is not None:
            _mute(self._reasoning_body, palette)
        text = self._markdown.text()
        self._markdown = StreamingMarkdown(palette=palette)
        self._markdown.append(text)
        self._body.document().clear()
        self._writer = _DocumentWriter(self._body.document())
        # Finished text renders as finished; a reply still streaming keeps an open tail.
        if self._streaming:
            self._write(self._markdown.flush())
        else:
            self._write(self._markdown.finish(), final=True)

    def set_versions(self, versions: Sequence[int]) -> None:
        """Show `‹ n/N ›` for a message with other versions (`versions`: every version's id)."""
        self._version_switch.show(versions)

    def version_text(self) -> str:
        """ "2/3" for the second of three versions; "" for a message with one version."""
        return self._version_switch.text()

    def set_fork_allowed(self, allowed: bool) -> None:
        """Offer "New chat from here" (in the chat window; a quick answer has no chat to fork)."""
        self._more.set_allowed(allowed)

    def more_actions(self) -> list[str]:
        """The texts of the "More actions" menu ([] when it is not offered)."""
        return self._more.texts()

    def trigger_more(self, text: str) -> None:
        """Run the "More actions" entry reading `text` (as a click on it would)."""
        self._more.trigger(text)

    def set_regenerate_allowed(self, allowed: bool) -> None:
        """Offer "Regenerate" (the conversation allows it on its last reply only)."""
        self._regenerate_allowed = allowed
        self._update_actions()

    # ------------------------------------------------------------ internals

    def _action(self, text: str, name: str, slot) -> QToolButton:
        button = QToolButton(self)
        button.setText(text)
        button.setAccessibleName(name)
        button.setToolTip(plain.tooltip(name))
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        return button

    def _update_actions(self) -> None:
        if self.role == "assistant":
            # Nothing to copy in a reply that ended before any text came.
            self._copy.setVisible(self._streaming or self._answer_started)
            self._regenerate.setVisible(
                self._regenerate_allowed and not self._streaming and self._final_status != "error"
            )

    def _ensure_reasoning(self) -> None:
        if self._reasoning_button is not None:
            return
        button = QToolButton(self)
        button.setAccessibleName("Show reasoning")
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        body = _Body(self, accessible_name="Reasoning")
        button.clicked.connect(lambda: self._set_reasoning_expanded(body.isHidden()))
        _mute(body, self._palette)
        frame = body.document().rootFrame().frameFormat()
        frame.setLeftMargin(12)
        body.document().rootFrame().setFrameFormat(frame)
        self._layout.insertWidget(0, button, 0, Qt.AlignmentFlag.AlignLeft)
        self._layout.insertWidget(1, body)
        self._reasoning_button = button
        self._reasoning_body = body
        self._set_reasoning_expanded(True)

    def _set_reasoning_expanded(self, expanded: bool) -> None:
        assert self._reasoning_button is not None and self._reasoning_body is not None
        self._reasoning_button.setArrowType(
            Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow
        )
        self._reasoning_body.setVisible(expanded)
        self._update_reasoning_title()

    def _update_reasoning_title(self) -> None:
        assert self._reasoning_button is not None
        if self._thinking_seconds is not None:
            self._reasoning_button.setText(f"Thought for {max(1, round(self._thinking_seconds))} s")
        elif self._streaming and not self._answer_started:
            self._reasoning_button.setText("Thinking…")
        else:
            self._reasoning_button.setText("Reasoning")

    def _add_reasoning_text(self, text: str) -> None:
        self._ensure_reasoning()
        assert self._reasoning_body is not None
        self._reasoning_parts.append(text)
        self._reasoning_body.set_growing(self._streaming)
        text, self._reasoning_run = break_text_runs(text, self._reasoning_run)
        cursor = QTextCursor(self._reasoning_body.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)

    def _write(self, update: Update, *, final: bool = False) -> None:
        if self._writer.write(update, final=final):
            self.render_count += 1
            self.rendered.emit()

    def _on_anchor(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            try:
                self.copy_code(int(url.path()))
            except ValueError:
                log.warning("bad copy link %r", url.toString())
                return
            href = url.toString()
            self._set_link_text(href, COPY_LINK, COPIED_LINK)
            QTimer.singleShot(
                COPIED_MS, self, lambda: self._set_link_text(href, COPIED_LINK, COPY_LINK)
            )
            return
        open_link(url)

    def _set_link_text(self, href: str, old: str, new: str) -> None:
        """Replace the text of the link to `href` reading `old` (a "Copy code" link)."""
        document = self._body.document()
        cursor = document.find(old)
        while not cursor.isNull():
            if cursor.charFormat().anchorHref() == href:
                # Same length: the document writer keeps positions in the text.
                cursor.insertText(new, cursor.charFormat())
                return
            cursor = document.find(old, cursor)

    def _on_copy_reply(self) -> None:
        QGuiApplication.clipboard().setText(self.content())

    def changeEvent(self, event: QEvent) -> None:
        """Pass a new font (the conversation's font size) on to the text views."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and hasattr(self, "_body"):
            for body in (self._body, self._reasoning_body):
                if body is not None:
                    body.follow_font(self.font())

    def event(self, event: QEvent) -> bool:
        """After the view's own layout settles, tell the conversation its height may differ."""
        handled = super().event(event)
        if event.type() == QEvent.Type.LayoutRequest:
            self.relaid_out.emit(self)
        return handled

    def paintEvent(self, event) -> None:
        """Draw the card: a tinted rounded bubble for the user's messages."""
        if self.role == "user":
            palette = self.palette()
            painter = QPainter(self)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(
                _blend(
                    palette.color(QPalette.ColorRole.Base),
                    palette.color(QPalette.ColorRole.Highlight),
                    0.16 if _is_dark(palette) else 0.10,
                )
            )
            painter.drawRoundedRect(self.rect().adjusted(0, 0, -1, -1), 12, 12)
            painter.end()
        super().paintEvent(event)


class _VersionSwitch:
    """`‹ n/N ›` in a message's footer, to show another version of it; built when first needed."""

    def __init__(self, view: MessageView, footer: QHBoxLayout) -> None:
        self._view = view
        self._footer = footer
        self._versions: list[int] = []
        self._label: QLabel | None = None
        self._buttons: tuple[QToolButton, QToolButton] | None = None

    def show(self, versions: Sequence[int]) -> None:
        """Show the place of the view's message among `versions` (hidden with one version)."""
        view = self._view
        self._versions = list(versions)
        if view.message_id not in self._versions or len(self._versions) < 2:
            if self._label is not None:
                self._label.hide()
                for button in self._buttons or ():
                    button.hide()
            return
        if self._label is None:
            older = view._action("‹", "Previous version", lambda: self._step(-1))
            newer = view._action("›", "Next version", lambda: self._step(1))
            self._label = plain.Label("", view)
            self._label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            self._buttons = (older, newer)
            for at, widget in enumerate((older, self._label, newer)):
                self._footer.insertWidget(at, widget)
            for action, step in (("previous_version", -1), ("next_version", 1)):
                for sequence in shortcuts.BY_ACTION[action].sequences():
                    shortcut = QShortcut(sequence, view)
                    shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
                    shortcut.activated.connect(lambda step=step: self._step(step))
        place = self._versions.index(view.message_id) + 1
        total = len(self._versions)
        self._label.setText(f"{place}/{total}")
        self._label.setAccessibleName(f"Version {place} of {total}")
        assert self._buttons is not None
        older, newer = self._buttons
        older.setEnabled(place > 1)
        newer.setEnabled(place < total)
        for widget in (older, self._label, newer):
            widget.show()

    def text(self) -> str:
        """ "2/3" for the second of three versions; "" for a message with one version."""
        label = self._label
        return label.text() if label is not None and not label.isHidden() else ""

    def _step(self, step: int) -> None:
        view = self._view
        if view.message_id not in self._versions or view.is_streaming():
            return
        at = self._versions.index(view.message_id) + step
        if 0 <= at < len(self._versions):
            view.version_requested.emit(self._versions[at])


class _MoreActions:
    """The "⋯" button in a message's footer and its menu; built when first offered."""

    def __init__(self, view: MessageView, footer: QHBoxLayout) -> None:
        self._view = view
        self._footer = footer
        self._button: QToolButton | None = None
        self._menu: QMenu | None = None

    def set_allowed(self, allowed: bool) -> None:
        """Offer the menu, or hide it."""
        view = self._view
        if allowed and self._button is None:
            self._button = view._action("⋯", "More actions", self._show)
            self._menu = QMenu(self._button)
            fork = self._menu.addAction("New chat from here")
            fork.triggered.connect(lambda: view.fork_requested.emit(view.message_id))
            self._footer.addWidget(self._button)
        if self._button is not None:
            self._button.setVisible(allowed)

    def texts(self) -> list[str]:
        """The menu's entries ([] when it is not offered)."""
        if self._button is None or self._menu is None or self._button.isHidden():
            return []
        return [action.text() for action in self._menu.actions()]

    def trigger(self, text: str) -> None:
        """Run the entry reading `text`."""
        for action in self._menu.actions() if self._menu is not None else ():
            if action.text() == text:
                action.trigger()

    def _show(self) -> None:
        # A menu of the button's own would draw an arrow beside the "⋯".
        if self._button is not None and self._menu is not None:
            self._menu.popup(self._button.mapToGlobal(self._button.rect().bottomLeft()))


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


class ConversationView(QScrollArea):
    """The conversation: messages in a column, lazy for long histories, following the stream."""

    retry_requested = Signal(object)
    regenerate_requested = Signal(object)
    edit_requested = Signal(object)
    version_requested = Signal(object)
    fork_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None, *, forks: bool = False) -> None:
        super().__init__(parent)
        self._forks = forks
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
        self._adjusting = False
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
        self._set_scroll(self.verticalScrollBar().maximum())

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
        return DARK if _is_dark(self.palette()) else LIGHT

    def _build(self, message: Mapping[str, Any]) -> MessageView:
        view = MessageView(message, palette=self._palette(), parent=self._column)
        view.retry_requested.connect(self.retry_requested)
        view.regenerate_requested.connect(self.regenerate_requested)
        view.edit_requested.connect(self.edit_requested)
        view.version_requested.connect(self.version_requested)
        view.fork_requested.connect(self.fork_requested)
        if self._forks:
            view.set_fork_allowed(True)
        return view

    def set_versions(self, message_id: int, versions: list[int]) -> None:
        """A shown message has these versions now (a reply was regenerated)."""
        for view in self._views:
            if view.message_id == message_id:
                view.set_versions(versions)

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

    def _on_height_changed(self, view: MessageView, moved: int) -> None:
        bar = self.verticalScrollBar()
        if self._follow:
            self._set_scroll(bar.maximum())
        elif view.geometry().bottom() - moved < bar.value():
            # A message above the screen changed height: keep what is on screen in place.
            self._set_scroll(bar.value() + moved)

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self._set_scroll(maximum)
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
