"""A bar for a problem the user must act on: shown whole, until dismissed or replaced.

The status bar suits what goes by ("Copied the last reply."); a message there is cut
at the window's width and replaced by the next one, so an error the user has to act
on ("fake.gguf is not a GGUF model file") could be gone before it was read. This bar
wraps the whole text, lets it be selected and copied, and stays until its ✕ or the
next problem. Raises nothing.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QToolButton, QWidget

from llamachat.ui import plain

log = logging.getLogger(__name__)

# How long a passing status-bar line stays (ms); a problem goes to a NoticeBar instead.
STATUS_MS = 8000


class NoticeBar(QFrame):
    """One problem, wrapped in full as plain text, with a ✕ to dismiss it; hidden when none."""

    dismissed = Signal()

    def __init__(self, *, name: str = "Problem", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("noticeBar")
        self.setAccessibleName(name)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # Palette roles, so a theme switch recolours it with everything else.
        self.setStyleSheet(
            "QFrame#noticeBar { background: palette(alternate-base);"
            " border: 1px solid #d1242f; border-radius: 4px; }"
        )
        self.label = plain.Label("", self)
        self.label.setAccessibleName(f"{name} text")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton(self)
        self.close_button.setText("✕")
        self.close_button.setAccessibleName("Dismiss")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 4, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_text(self, text: str) -> None:
        """Show `text` (outside text welcome: it is shown as plain text), replacing any other."""
        self.label.setText(text)
        self.show()

    def text(self) -> str:
        """The problem shown ('' when the bar is hidden)."""
        return self.label.text() if not self.isHidden() else ""

    @Slot()
    def dismiss(self) -> None:
        """Hide the bar (its ✕)."""
        if self.isHidden():
            return
        self.hide()
        self.label.clear()
        self.dismissed.emit()
