"""The tests of `llamachat.ui.shortcuts`."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QDialog, QLineEdit

from llamachat.tests.support import (
    offscreen_dialogs,
    offscreen_limits,
    send_and_wait,
    visible_widget_named,
)
from llamachat.ui.shortcuts import SHORTCUTS, ShortcutsDialog, install


class TestShortcuts:
    """The chat window's keyboard shortcuts: one table, installed and listed from the same data."""

    @offscreen_dialogs
    def test_chrome_window_shortcuts_copy_reply_focus_and_help(
        self, chat_window, router, qtbot
    ) -> None:
        """Ctrl+Shift+C copies the last reply, Ctrl+L focuses the composer, F1 lists the keys."""

        window, _history = chat_window()
        send_and_wait(qtbot, window, "copy this")
        window.sidebar.focus_search()
        control_shift = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
        qtbot.keyClick(window, Qt.Key.Key_C, control_shift)
        assert QApplication.clipboard().text() == "echo: copy this"
        qtbot.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
        assert window.composer.editor.hasFocus()
        qtbot.keyClick(window, Qt.Key.Key_F1)
        dialog = visible_widget_named(window, QDialog, "Keyboard shortcuts")
        rows = {action: keys for keys, action in dialog.rows()}
        assert (
            rows["Start a new chat"] == "Ctrl+N" and rows["Stop the reply being written"] == "Esc"
        )
        dialog.close()

    @offscreen_limits
    def test_shortcuts_table_is_installed_and_listed_in_the_help(self, qtbot) -> None:

        keys = {s.action: s.keys for s in SHORTCUTS}
        assert keys["new_chat"] == ("Ctrl+N",) and keys["stop"] == ("Esc",)
        assert keys["search_sessions"] == ("Ctrl+K", "Ctrl+F")
        assert keys["copy_last_reply"] == ("Ctrl+Shift+C",) and keys["switch_model"] == ("Ctrl+M",)
        assert keys["focus_composer"] == ("Ctrl+L",) and keys["settings"] == ("Ctrl+,",)
        assert keys["previous_version"] == ("Alt+Left",) and keys["next_version"] == ("Alt+Right",)
        window = QLineEdit()
        qtbot.addWidget(window)
        window.show()
        window.activateWindow()
        qtbot.waitUntil(window.isActiveWindow)
        hits: list[str] = []
        made = install(
            window,
            {
                "search_sessions": lambda: hits.append("search"),
                "settings": lambda: hits.append("settings"),
            },
        )
        assert [s.key() for s in made] == [
            QKeySequence("Ctrl+K"),
            QKeySequence("Ctrl+F"),
            QKeySequence("Ctrl+,"),
        ]
        for key in (Qt.Key.Key_K, Qt.Key.Key_F, Qt.Key.Key_Comma):
            qtbot.keyClick(window, key, Qt.KeyboardModifier.ControlModifier)
        assert hits == ["search", "search", "settings"]
        with pytest.raises(KeyError):
            install(window, {"teleport": lambda: None})
        dialog = ShortcutsDialog()
        qtbot.addWidget(dialog)
        rows = dialog.rows()
        assert len(rows) == len(SHORTCUTS)
        keys_of = {action: keys for keys, action in rows}
        assert keys_of["Search past chats"] == (
            QKeySequence("Ctrl+K").toString(QKeySequence.SequenceFormat.NativeText)
            + " or "
            + QKeySequence("Ctrl+F").toString(QKeySequence.SequenceFormat.NativeText)
        )

    @offscreen_limits
    def test_shortcuts_dialog_shows_every_row_without_scrolling(self, qtbot) -> None:

        dialog = ShortcutsDialog()
        qtbot.addWidget(dialog)
        dialog.show()
        qtbot.waitExposed(dialog)
        table = dialog.table
        assert table.verticalScrollBar().maximum() == 0
        assert table.horizontalScrollBar().maximum() == 0
        viewport = table.viewport().rect()
        for row, (keys, action) in enumerate(dialog.rows()):
            for column, text in enumerate((keys, action)):
                cell = table.visualRect(table.model().index(row, column))
                assert viewport.contains(cell), f"row {text!r} is not all in view"
                assert cell.width() >= table.fontMetrics().horizontalAdvance(text), text
        shown = [keys for keys, _action in dialog.rows()]
        for keys in ("Enter", "Shift+Enter", "/", "Alt+Left", "Alt+Right"):
            native = QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)
            assert native in shown
