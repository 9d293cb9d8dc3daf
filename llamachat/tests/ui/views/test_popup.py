"""The tests of `llamachat.ui.views.popup`."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QPlainTextEdit

from llamachat.tests.support import offscreen_popup, visible_widget_named
from llamachat.ui.views.popup import above


class TestPopup:
    """Where the chat's popups open: above the widget they belong to, kept on the screen."""

    @offscreen_popup
    def test_chrome_window_skill_list_and_parameters_open_upward_on_screen(
        self, chat_window, qtbot
    ) -> None:

        window, _history = chat_window()
        window.resize(720, 560)
        screen = window.screen().availableGeometry()
        editor = visible_widget_named(window, QPlainTextEdit, "Message")
        popup = window.composer.completer.popup()
        qtbot.keyClicks(editor, "/")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        top = editor.mapToGlobal(QPoint(0, 0)).y()
        shown = QRect(popup.mapToGlobal(QPoint(0, 0)), popup.size())
        assert shown.bottom() < top and screen.contains(shown)
        assert shown.left() == editor.mapToGlobal(QPoint(0, 0)).x()
        qtbot.keyClick(editor, Qt.Key.Key_Escape)

        button = window.chat_params.button
        menu = button.menu()
        # Where the tool button puts its menu: under itself.
        menu.popup(button.mapToGlobal(button.rect().bottomLeft()))
        qtbot.waitUntil(menu.isVisible)
        shown = menu.geometry()
        assert shown.bottom() < button.mapToGlobal(QPoint(0, 0)).y()
        assert screen.contains(shown)
        menu.hide()

    def test_chrome_popup_opens_above_its_anchor_within_the_screen(self) -> None:

        screen = QRect(0, 0, 1600, 1000)
        size = QSize(300, 200)
        assert above(QRect(100, 700, 400, 60), size, screen) == QPoint(100, 500)
        # No room above, more below: under the anchor.
        assert above(QRect(100, 50, 400, 60), size, screen) == QPoint(100, 110)
        # Kept inside the screen at its right and bottom edges.
        assert above(QRect(1500, 900, 80, 20), size, screen) == QPoint(1300, 700)
        assert above(QRect(100, 950, 80, 50), QSize(300, 1200), screen) == QPoint(100, 0)
