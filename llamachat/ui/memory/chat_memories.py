"""The chat window's memories: "Remembered: …" with Undo, "Remember this", the Memory panel.

`ChatMemories(app, chat, messages, status_bar, parent=window)` shows each memory kept in
the chat (by the person or by the model's remember call) in the status bar with an Undo
button, opens the Memory panel (one at a time) and, for "Remember this" on a message,
opens it with the message's text in its new-memory line to be cut down to a fact.
Raises nothing.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QStatusBar, QWidget

from llamachat.config import ConfigError
from llamachat.ui import plain
from llamachat.ui.app import App
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.memory.memory_panel import MemoryPanel
from llamachat.ui.views.messages import MessagesView

# How long "Remembered: …" and its Undo stay in the status bar (ms).
UNDO_MS = 15_000


class ChatMemories(QObject):
    """One chat window's memory on screen."""

    status = Signal(str)  # a line for the window's status bar

    def __init__(
        self,
        app: App,
        chat: Conversation,
        messages: MessagesView,
        status_bar: QStatusBar,
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._chat = chat
        self._window = parent
        self._panel: MemoryPanel | None = None
        self._undo_id: int | None = None
        self.bar = QWidget()
        self.bar.setAccessibleName("Remembered")
        self.label = plain.Label("")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setAccessibleName("Undo remember")
        self.undo_button.clicked.connect(self.undo)
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label)
        row.addWidget(self.undo_button)
        status_bar.addPermanentWidget(self.bar)
        self.bar.hide()
        self._hide_timer = QTimer(self)
        self._hide_timer.setSingleShot(True)
        self._hide_timer.timeout.connect(self.bar.hide)
        chat.memory.saved.connect(self._on_saved)
        messages.remember_requested.connect(self._on_remember_requested)

    def open_panel(self, prefill: str = "") -> MemoryPanel:
        """Open the Memory panel (or raise the open one), `prefill` in its new-memory line."""
        panel = self._panel
        if panel is None:
            panel = MemoryPanel(
                self._app.history,
                self._chat,
                enabled=lambda: self._app.config.memory_enabled,
                parent=self._window,
            )
            panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            panel.turn_on_requested.connect(self._turn_on)
            panel.destroyed.connect(self._on_panel_closed)
            self._app.config_changed.connect(panel.update_view)
            self._panel = panel
            panel.show()
        else:
            panel.update_view()
            panel.raise_()
            panel.activateWindow()
        if prefill:
            panel.prefill(prefill)
        return panel

    @Slot()
    def undo(self) -> None:
        """Forget the memory just kept."""
        if self._undo_id is not None and self._chat.memory.forget(self._undo_id):
            self.status.emit("Forgotten.")
        self._undo_id = None
        self.bar.hide()

    @Slot(object)
    def _on_saved(self, row: object) -> None:
        if not isinstance(row, dict):
            return
        self._undo_id = row["id"]
        self.label.setText(f"Remembered: {row['text']}")
        self.bar.show()
        self._hide_timer.start(UNDO_MS)

    @Slot(object, str)
    def _on_remember_requested(self, _message_id: object, text: str) -> None:
        self.open_panel(prefill=text)

    @Slot()
    def _turn_on(self) -> None:
        try:
            self._app.save_settings({"memory_enabled": True})
        except ConfigError as exc:
            self.status.emit(f"Memory could not be turned on: {exc}")

    @Slot()
    def _on_panel_closed(self) -> None:
        self._panel = None
