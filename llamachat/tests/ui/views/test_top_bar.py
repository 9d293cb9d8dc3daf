"""The tests of `llamachat.ui.views.top_bar`."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QToolButton

from llamachat.dev.scripted_router import Model
from llamachat.tests.support import add_router_models, offscreen_popup


class TestTopBar:
    """The chat window's top bar: the model and prompt pickers, Web search, Skills, Settings."""

    @offscreen_popup
    def test_chrome_window_top_bar_at_the_least_size_keeps_the_model_name_and_buttons_whole(
        self, router, chat_window, qtbot
    ) -> None:

        name = "SmolLM2-360M-Instruct-Q8_0"
        add_router_models(router, Model(name, "loaded"))
        window, _history = chat_window(default_model=name)
        qtbot.waitUntil(lambda: window.model_picker.combo.currentData() == name, timeout=5000)
        bar = window.top_bar
        window.resize(1180, 800)
        qtbot.waitUntil(lambda: not bar.is_wrapped() and not bar.is_folded())
        window.resize(window.minimumSize())
        qtbot.waitUntil(lambda: window.width() == window.minimumWidth())
        combo = window.model_picker.combo
        qtbot.waitUntil(lambda: bar.is_wrapped() or bar.is_folded())
        # The layout follows the wrap or fold at its next pass.
        qtbot.waitUntil(lambda: combo.width() >= combo.sizeHint().width())
        assert combo.width() >= combo.fontMetrics().horizontalAdvance(name)
        inside = bar.rect()
        for button in bar.findChildren(QToolButton):
            if button.isVisible():
                assert button.width() >= button.sizeHint().width(), button.text()
                assert inside.contains(QRect(button.mapTo(bar, QPoint(0, 0)), button.size()))
        # Folded or not, every command is there: as a button, or in the "»" menu.
        if bar.is_folded():
            menu = bar.more_button.menu()
            shown = [a.text().partition("\t")[0] for a in menu.actions()]  # after it: the keys
            assert shown == ["Web search", "Skills…", "Settings…"]
        else:
            assert bar.settings_button.isVisible() and bar.skills_button.isVisible()
        window.resize(1000, 700)
        qtbot.waitUntil(lambda: not bar.is_wrapped())
