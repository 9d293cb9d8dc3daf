"""What a compacted chat shows of its compaction: the summary block and the trim marker.

`SummaryView` is a compaction's summary in the conversation (a `MessageView` of role
"system"): a heading "Summary of 38 earlier messages", its text folded until "Show" is
clicked, an Edit that turns it into an editor (Save emits `summary_edited`), and, like
any first message, ‹ › to go back to the original chat, which is the other version.
`TrimMarker` is the line above the composer while the requests leave the oldest
messages out ("12 earlier messages not sent"). `CompactingView`, above the composer while
a summary is written, shows how far it is: the model reading the chat (a
`figures.ReadingProgress`, as a reply shows it), then the summary as it is written.

Errors: none; the summary is the model's text, shown as Markdown like a reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.compact import summarized, summary_title
from llamachat.ui import plain
from llamachat.ui.views.document import DocumentWriter
from llamachat.ui.views.figures import ReadingProgress
from llamachat.ui.views.markdown import LIGHT, Palette, StreamingMarkdown
from llamachat.ui.views.message import MessageView

# The editor's height in lines of text.
EDITOR_LINES = 12


class SummaryView(MessageView):
    """A compaction's summary: a folded block with its heading, to show, edit and switch."""

    summary_edited = Signal(object, str)  # the summary's id, its new text

    def __init__(
        self, message: Mapping[str, Any], *, palette: Palette = LIGHT, parent: QWidget | None = None
    ) -> None:
        super().__init__(message, palette=palette, parent=parent)
        self._text = str(message.get("content") or "")
        self.setAccessibleName("Summary of earlier messages")
        head = QHBoxLayout()
        head.setContentsMargins(0, 0, 0, 0)
        self.title = plain.Label(summary_title(summarized(message)), self)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.toggle = QToolButton(self)
        self.toggle.setAutoRaise(True)
        self.toggle.clicked.connect(lambda: self.set_expanded(not self.is_expanded()))
        self.edit_button = QToolButton(self)
        self.edit_button.setText("Edit")
        self.edit_button.setAccessibleName("Edit summary")
        self.edit_button.setAutoRaise(True)
        self.edit_button.clicked.connect(self.start_editing)
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(self.toggle)
        head.addWidget(self.edit_button)
        layout = self._layout
        layout.insertLayout(0, head)
        self.editor = QPlainTextEdit(self)
        self.editor.setAccessibleName("Summary text")
        self.editor.setFixedHeight(self.editor.fontMetrics().lineSpacing() * EDITOR_LINES)
        self.save_button = QPushButton("Save summary", self)
        self.cancel_button = QPushButton("Cancel", self)
        self.save_button.clicked.connect(self._save)
        self.cancel_button.clicked.connect(self.stop_editing)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)
        layout.insertWidget(2, self.editor)
        layout.insertLayout(3, buttons)
        self._editing_widgets: tuple[QWidget, ...] = (
            self.editor,
            self.save_button,
            self.cancel_button,
        )
        for widget in self._editing_widgets:
            widget.hide()
        self.set_expanded(False)

    def is_expanded(self) -> bool:
        """True while the summary's text shows."""
        return not self._body.isHidden()

    def set_expanded(self, expanded: bool) -> None:
        """Show the summary's text, or fold it under its heading."""
        self._body.setVisible(expanded)
        self.toggle.setText("Hide" if expanded else "Show")
        self.toggle.setAccessibleName("Hide summary" if expanded else "Show summary")
        self.updateGeometry()

    def start_editing(self) -> None:
        """Turn the summary into an editor of its text."""
        self.set_expanded(False)
        self.editor.setPlainText(self._text)
        for widget in self._editing_widgets:
            widget.show()
        self.toggle.hide()
        self.edit_button.hide()
        self.updateGeometry()
        self.editor.setFocus()

    def stop_editing(self) -> None:
        """Leave the editor, the summary as it was saved."""
        for widget in self._editing_widgets:
            widget.hide()
        self.toggle.show()
        self.edit_button.show()
        self.updateGeometry()

    def content(self) -> str:
        """The summary's text, as last saved."""
        return self._text

    def _save(self) -> None:
        text = self.editor.toPlainText()
        if not text.strip():
            return
        self._text = text
        # Rendered afresh: the document and its writer start over with the new text.
        self._body.document().clear()
        self._writer = DocumentWriter(self._body.document())
        self._markdown = StreamingMarkdown(palette=self._palette)
        self._markdown.append(text)
        self._write(self._markdown.finish(), final=True)
        self.stop_editing()
        self.summary_edited.emit(self.message_id, text)


class TrimMarker(plain.Label):
    """ "N earlier messages not sent": above the composer while the requests leave them out."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", parent)
        self.setAccessibleName("Messages not sent")
        self.setWordWrap(True)
        self.hide()

    def set_count(self, count: int) -> None:
        """Say how many of the oldest messages are left out (0: hidden)."""
        self.setText(
            f"{count:,} earlier message{'' if count == 1 else 's'} not sent: the context is "
            "full (context_overflow is “trim”). They stay in the chat."
        )
        self.setVisible(count > 0)


class CompactingView(QFrame):
    """A summary being written: what is done, the model reading the chat, then its text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Compacting")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = plain.Label("", self)
        self.title.setWordWrap(True)
        self.reading = ReadingProgress(self)
        self.text = QPlainTextEdit(self)
        self.text.setAccessibleName("Summary being written")
        self.text.setReadOnly(True)
        self.text.setMaximumHeight(self.fontMetrics().lineSpacing() * 8 + 12)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.title)
        layout.addWidget(self.reading)
        layout.addWidget(self.text)
        self._progress: dict | None = None
        self._speed: float | None = None
        self.hide()

    def start(self, speed: float | None = None) -> None:
        """A summary is being written: shown, from nothing yet; `speed`: how fast the model
        read its last prompt (the bar's estimate between reports)."""
        self._progress, self._speed = None, speed
        self.reading.hide()
        self.text.clear()
        self.text.hide()
        self.show()

    def set_title(self, text: str) -> None:
        """What the compaction is doing ("Compacting: summarizing 38 earlier messages…")."""
        self.title.setText(text)

    def show_written(self, progress: object, text: str) -> None:
        """The prompt progress of the request now out (None: none yet) and its text so far."""
        if isinstance(progress, dict) and progress != self._progress:
            if self._progress is None or progress.get("total") != self._progress.get("total"):
                self.reading.setParent(None)  # another request (piece): a bar of its own
                self.reading.deleteLater()
                self.reading = ReadingProgress(self, speed=self._speed)
                cast(QVBoxLayout, self.layout()).insertWidget(1, self.reading)
            self._progress = progress
            self.reading.show_progress(progress)
        self.reading.setVisible(self._progress is not None and not text)
        if text != self.text.toPlainText():
            self.text.setPlainText(text)
            self.text.verticalScrollBar().setValue(self.text.verticalScrollBar().maximum())
        self.text.setVisible(bool(text))
