"""The sidebar's "Search chats" field: `SessionSearch` hands its query to the list.

Typing runs the search after a short pause (one query per pause, not one per key);
Enter runs it at once. The list (`session_list.SessionListModel`) runs `History.search`
and shows the hits. Raises nothing.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QLineEdit, QWidget

from llamachat.ui.views.session_list import SessionListModel

SEARCH_DELAY_MS = 200


class SessionSearch(QObject):
    """The search field above the chats: its query goes to the list after a pause in typing."""

    def __init__(self, model: SessionListModel, parent: QWidget) -> None:
        super().__init__(parent)
        self._model = model
        self.field = QLineEdit()
        self.field.setAccessibleName("Search sessions")
        self.field.setPlaceholderText("Search chats")
        self.field.setClearButtonEnabled(True)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SEARCH_DELAY_MS)
        # Debounced: one query per pause in typing, not one per key.
        self._timer.timeout.connect(self._run)
        self.field.textChanged.connect(lambda _: self._timer.start())
        self.field.returnPressed.connect(self._run)

    def focus(self) -> None:
        """Put the cursor in the field, its text selected (the Ctrl+K shortcut)."""
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()

    def search(self, query: str) -> None:
        """Show the sessions matching `query` now (typing does this after a pause)."""
        self._timer.stop()
        if self.field.text() != query:
            self.field.blockSignals(True)
            self.field.setText(query)
            self.field.blockSignals(False)
        self._model.set_query(query)

    @Slot()
    def _run(self) -> None:
        self._timer.stop()
        query = self.field.text()
        if query.strip() != self._model.query():
            self._model.set_query(query)
