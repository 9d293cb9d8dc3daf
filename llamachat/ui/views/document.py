"""A message's text: the view that shows it and the writer that keeps it up to date.

`TextView` is a read-only rich-text view as tall as its document (the conversation
scrolls, never the message). `DocumentWriter` keeps that document as finished blocks
followed by an open tail: a streamed render inserts newly finished blocks once and
replaces only the tail (see `markdown.StreamingMarkdown`), so its cost follows the
block being written, not the reply.

Errors: this module raises no exceptions of its own; a failure here is a bug.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QMimeData, QSize, Qt, QTimer
from PySide6.QtGui import (
    QFont,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextOption,
)
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QWidget

from llamachat.ui.views.markdown import BREAK, Update

# A code block's link confirms a copy for a moment; both texts are as long, so the
# document's positions stay where the streaming writer expects them.
COPY_LINK = "Copy code"
COPIED_LINK = "✓ Copied!"
COPIED_MS = 1500

# Seeds a fragment so Qt keeps its first block's format: insertHtml merges the
# first block of a fragment into the block at the cursor and drops its format.
_SEED = "<p>\u200b</p>"

# How many lines of room a streaming text view keeps below its text (TextView.set_growing).
GROW_STEP_LINES = 8


class TextView(QTextBrowser):
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

    def show_copied(self, href: str) -> None:
        """Have the "Copy code" link to `href` say it copied, for a moment."""
        self.set_link_text(href, COPY_LINK, COPIED_LINK)
        QTimer.singleShot(COPIED_MS, self, lambda: self.set_link_text(href, COPIED_LINK, COPY_LINK))

    def set_link_text(self, href: str, old: str, new: str) -> None:
        """Replace the text of the link to `href` reading `old` (a "Copy code" link)."""
        document = self.document()
        cursor = document.find(old)
        while not cursor.isNull():
            if cursor.charFormat().anchorHref() == href:
                # Same length: the document writer keeps positions in the text.
                cursor.insertText(new, cursor.charFormat())
                return
            cursor = document.find(old, cursor)

    def sizeHint(self) -> QSize:
        """As tall as the document."""
        return QSize(super().sizeHint().width(), self.height())


_RULE = QTextFormat.Property.BlockTrailingHorizontalRulerWidth


class DocumentWriter:
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
