"""The chat window's keyboard shortcuts: one table, installed and listed from the same data.

`SHORTCUTS` maps each action to its keys; `install(window, handlers)` creates the
QShortcuts for the actions the window handles, and `ShortcutsDialog` (Help >
Shortcuts) lists the same table, so the help can never disagree with the keys. The
dialog is as big as the table, so every row shows without scrolling.

Errors: `install` raises `KeyError` for a handler whose action is not in the table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shortcut:
    """An action of the chat window and the keys that trigger it."""

    action: str
    keys: tuple[str, ...]
    description: str

    def sequences(self) -> list[QKeySequence]:
        """The keys as QKeySequences."""
        return [QKeySequence(key) for key in self.keys]

    def shown(self) -> str:
        """The keys as the platform writes them (⌘ on macOS), "or"-separated."""
        return " or ".join(
            seq.toString(QKeySequence.SequenceFormat.NativeText) for seq in self.sequences()
        )


SHORTCUTS: tuple[Shortcut, ...] = (
    # The message box's own keys (`composer.MessageEdit`): listed, never installed.
    Shortcut("send", ("Enter",), "Send the message"),
    Shortcut("new_line", ("Shift+Enter",), "Start a new line in the message"),
    Shortcut("skill_list", ("/",), "List the skills (at the start of a word in the message)"),
    # Held, not pressed (`voice.dictation_input.DictationInput`): listed, never installed.
    Shortcut("hold_to_talk", ("F9",), "Hold down to dictate into the message box"),
    Shortcut("new_chat", ("Ctrl+N",), "Start a new chat"),
    Shortcut(
        "new_temporary_chat", ("Ctrl+Shift+N",), "Start a temporary chat (kept only if you say so)"
    ),
    Shortcut("search_sessions", ("Ctrl+K", "Ctrl+F"), "Search past chats"),
    Shortcut("stop", ("Esc",), "Stop the reply being written"),
    Shortcut("focus_composer", ("Ctrl+L",), "Go to the message box"),
    Shortcut("copy_last_reply", ("Ctrl+Shift+C",), "Copy the last reply"),
    Shortcut("switch_model", ("Ctrl+M",), "Choose another model"),
    Shortcut("settings", ("Ctrl+,",), "Open the settings"),
    Shortcut("shortcuts", ("F1",), "Show these shortcuts"),
    Shortcut("quit", ("Ctrl+Q",), "Quit llamachat (closing the window keeps it in the tray)"),
    # These two act on the message that has the focus (`conversation.MessageView`).
    Shortcut("previous_version", ("Alt+Left",), "Show the previous version of a message"),
    Shortcut("next_version", ("Alt+Right",), "Show the next version of a message"),
)
"""Every shortcut of the chat window, in the order the help lists them."""

BY_ACTION = {shortcut.action: shortcut for shortcut in SHORTCUTS}


def install(window: QWidget, handlers: dict[str, Callable[[], object]]) -> list[QShortcut]:
    """Create window-wide QShortcuts for the given actions; returns them (kept by the window)."""
    created = []
    for action, handler in handlers.items():
        for sequence in BY_ACTION[action].sequences():
            shortcut = QShortcut(sequence, window)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(handler)
            created.append(shortcut)
    return created


class ShortcutsDialog(QDialog):
    """Help > Shortcuts: the table of keys and what they do."""

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.setAccessibleName("Keyboard shortcuts")
        self.table = QTableWidget(len(SHORTCUTS), 2)
        self.table.setAccessibleName("Shortcuts")
        self.table.setHorizontalHeaderLabels(["Keys", "Action"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for row, shortcut in enumerate(SHORTCUTS):
            self.table.setItem(row, 0, QTableWidgetItem(shortcut.shown()))
            self.table.setItem(row, 1, QTableWidgetItem(shortcut.description))
        self.table.resizeColumnsToContents()
        self.table.resizeRowsToContents()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self._fit_table()

    def _fit_table(self) -> None:
        """Make the table as big as its rows and columns (within the screen), not scrolled."""
        table = self.table
        frame = 2 * table.frameWidth()
        width = frame + sum(table.columnWidth(c) for c in range(table.columnCount()))
        height = (
            frame
            + table.horizontalHeader().sizeHint().height()
            + sum(table.rowHeight(r) for r in range(table.rowCount()))
        )
        screen = self.screen().availableGeometry()
        # A huge font on a small screen still gets a dialog that fits, scrolled then.
        table.setMinimumSize(
            min(width, screen.width() * 9 // 10), min(height, screen.height() * 3 // 4)
        )
        self.adjustSize()

    def rows(self) -> list[tuple[str, str]]:
        """The (keys, action) rows as shown."""
        return [(self._text(row, 0), self._text(row, 1)) for row in range(self.table.rowCount())]

    def _text(self, row: int, column: int) -> str:
        item = self.table.item(row, column)  # every cell gets an item in __init__
        return item.text() if item is not None else ""
