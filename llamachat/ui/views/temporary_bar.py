"""A temporary chat on screen: the bar that says so, with Keep this chat, and the question
asked before one with content is left (a new chat, another chat opened, the window closed).

`TemporaryChats(chat, bar, open_chat=..., new_chat=..., save_draft=...)` follows the conversation (`Conversation.
start_temporary`, in memory only: `chat.temporary`). `ask` is how it asks (a message
box; a test replaces it): "keep", "discard" or "cancel". Raises nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QMessageBox, QPushButton, QWidget

from llamachat.history.store import HistoryError
from llamachat.ui import plain
from llamachat.ui.chat import temporary
from llamachat.ui.chat.conversation import Conversation

KEEP, DISCARD, CANCEL = "keep", "discard", "cancel"
BAR_TEXT = "Temporary chat: nothing of it is saved to your history unless you keep it."


class TemporaryBar(QFrame):
    """The bar above a temporary chat: what it is, and Keep this chat."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Temporary chat")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = plain.Label(BAR_TEXT)
        self.label.setWordWrap(True)
        self.keep_button = QPushButton("Keep this chat")
        self.keep_button.setAccessibleName("Keep this chat")
        row = QHBoxLayout(self)
        row.setContentsMargins(10, 4, 6, 4)
        row.addWidget(self.label, 1)
        row.addWidget(self.keep_button)
        self.hide()


class TemporaryChats(QObject):
    """Starts, keeps and leaves a window's temporary chat, asking before one is lost."""

    kept = Signal(int)  # the id the kept chat has in the history

    def __init__(
        self,
        chat: Conversation,
        bar: TemporaryBar,
        *,
        open_chat: Callable[[int], object],
        new_chat: Callable[[], object],
        save_draft: Callable[[], object],
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._chat = chat
        self._bar = bar
        self._open_chat = open_chat
        self._start_chat = new_chat
        self._save_draft = save_draft
        self._parent = parent
        self.ask: Callable[[bool], str] = self._ask
        """Asked before a temporary chat with content goes (True: no Cancel offered)."""
        chat.temporary_changed.connect(bar.setVisible)
        bar.keep_button.clicked.connect(self.keep)

    def has_content(self) -> bool:
        """Whether a temporary chat is open with something sent in it."""
        return self._chat.scratch is not None and self._chat.session_id is not None

    def may_leave(self, *, closing: bool = False) -> bool:
        """Before the temporary chat is left: ask (when it has content) and keep it if
        wished; False when the user cancelled (never when `closing`)."""
        if not self.has_content():
            return True
        answer = self.ask(closing)
        if answer == KEEP:
            self.keep()
        elif answer == DISCARD:
            self._chat.discard_temporary()
        return answer != CANCEL

    def start(self) -> bool:
        """Start a temporary chat (after asking about one with content); False: cancelled."""
        if not self.may_leave():
            return False
        self._start_chat()
        self._chat.start_temporary()
        return True

    @Slot()
    def keep(self) -> None:
        """Save the temporary chat into the history and show it as an ordinary chat."""
        chat = self._chat
        if chat.scratch is None or chat.session_id is None:
            chat.discard_temporary()  # nothing sent yet: it simply stops being temporary
            return
        chat.stop()
        self._save_draft()  # into the chat's memory, so that keeping carries it
        try:
            kept = temporary.keep(chat.scratch, chat.session_id, chat.app.history)
        except HistoryError as exc:
            chat.notice.emit(f"The temporary chat could not be kept: {exc}", 0)
            return
        chat.discard_temporary()
        self._open_chat(kept)
        self.kept.emit(kept)

    def _ask(self, closing: bool) -> str:
        box = QMessageBox(self._parent)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Temporary chat")
        box.setText("This temporary chat is not saved. Keep it in your history?")
        keep = box.addButton("Keep this chat", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Discard", QMessageBox.ButtonRole.DestructiveRole)
        if not closing:
            box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        clicked = box.clickedButton()
        if clicked is keep:
            return KEEP
        if box.buttonRole(clicked) == QMessageBox.ButtonRole.DestructiveRole:
            return DISCARD
        return DISCARD if closing else CANCEL
