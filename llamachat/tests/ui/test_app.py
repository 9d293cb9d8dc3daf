"""The tests of `llamachat.ui.app`."""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QDialog

from llamachat import turn
from llamachat.config import Config
from llamachat.history.store import History, HistoryError
from llamachat.tests.support import app_config_on_disk, make_app, quick_offscreen
from llamachat.ui.app import CONFIGURED, READY
from llamachat.ui.instance import RunningInstance
from llamachat.ui.quick import QuickWindow
from llamachat.ui.theme import apply_theme
from llamachat.ui.views.markdown import DARK, LIGHT


class TestApp:
    """The one owner of llamachat's state while it runs: the configuration and the router."""

    @quick_offscreen
    def test_app_settings_saved_in_a_window_reach_windows_opened_later(
        self, router, qtbot, tmp_path
    ) -> None:
        """Settings saved in the chat window reach a quick window opened afterwards and a chat
        window reopened from the tray: theme, search, default model and max_searches."""

        cfg = app_config_on_disk(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=True)
        try:
            chat = running.show_chat()
            qtbot.waitUntil(lambda: bool(chat.models()))
            assert chat.cfg.theme == "system" and not chat.web_search.button.isVisible()
            dialog = chat.open_settings()
            dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
            dialog.search_url.setText("http://127.0.0.1:9")
            dialog.default_model.setCurrentText("test-model")
            assert dialog.save()
            assert not dialog.isVisible()
            # A key Settings does not show, saved through the same owner.
            running.app.save_settings({"max_searches": 2})
            assert chat.web_search.button.isVisible()

            chat.close()
            qtbot.waitUntil(lambda: running.chat_window() is None)
            running.tray.open_requested.emit()
            reopened = running.chat_window()
            assert reopened is not None and reopened is not chat and reopened.isVisible()
            assert reopened.cfg.theme == "dark" and reopened.cfg.max_searches == 2
            assert reopened.web_search.button.isVisible() and reopened.web_search.is_on()
            assert reopened.current_model() == "test-model"
            assert reopened.model_picker.default_model() == "test-model"

            quick = running.quick_window()
            assert quick.cfg.theme == "dark" and quick.current_model() == "test-model"
            asked = turn.oneshot_turn(quick.cfg, model="test-model", text="hi")
            assert [schema["function"]["name"] for schema in asked.offer] == ["web_search"]
            assert asked.max_rounds == 2 and quick.cfg.search_url == "http://127.0.0.1:9"
            window_colour = QApplication.palette().color(QPalette.ColorRole.Window).name()
            assert window_colour == "#2b2b2e"
            assert not [d for d in reopened.findChildren(QDialog) if d.isVisible()]

            # A model asked for (`ask --model`) outlasts settings that name no other one.
            quick.set_model("asked-for")
            running.app.save_settings({"font_size": 15})
            assert quick.current_model() == "asked-for"
            running.app.save_settings({"default_model": "another"})
            assert quick.current_model() == "another"
        finally:
            running.shutdown()
            running.app.close()
            history.close()
            apply_theme(QApplication.instance(), "light")

    def test_app_settings_keep_the_router_in_use_unless_the_file_names_another(
        self, router, qtbot, tmp_path
    ) -> None:
        """A router found or started elsewhere stays in use when Settings change only the key or
        the providers; a new router_url in the file replaces it. Each change is one new registry."""

        cfg = app_config_on_disk(router, tmp_path)
        with History(cfg.history_path) as history:
            state = make_app(cfg, history)
            try:
                changes: list[tuple[str, str]] = []
                state.router_changed.connect(lambda now: changes.append((now.status, now.url)))
                first = state.registry
                state.use_router("http://127.0.0.1:9")
                assert state.config.router_url == "http://127.0.0.1:9"
                assert state.file_config.router_url == router.url
                started = state.registry
                assert started is not first

                state.save_settings({"router_api_key_env": "MY_KEY"})
                assert state.config.router_url == "http://127.0.0.1:9"
                assert state.config.router_api_key_env == "MY_KEY"
                assert state.registry is not started

                state.save_settings({"router_url": "http://127.0.0.1:10"})
                assert state.config.router_url == "http://127.0.0.1:10"
                assert changes == [
                    (READY, "http://127.0.0.1:9"),
                    (CONFIGURED, "http://127.0.0.1:9"),
                    (CONFIGURED, "http://127.0.0.1:10"),
                ]
            finally:
                state.close()

    def test_app_theme_switch_restyles_the_open_sidebar_and_conversation(
        self, chat_window, qtbot
    ) -> None:
        """Switching the theme while a chat is open restyles the sidebar (which has a style
        sheet of its own) and re-renders the conversation's messages in the new palette."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "show me code")
        history.add_message(session, "assistant", "Here:\n\n```python\nx = 1\n```\n\nand `y`.")
        window.sidebar.refresh()
        assert window.open_session(session)
        reply = window.messages.last_assistant()

        def sidebar_pixel() -> str:
            view = window.sidebar.list_view.viewport()
            image = view.grab().toImage()
            return image.pixelColor(image.width() - 2, image.height() - 2).name()

        try:
            assert reply.palette_name() == "light" and sidebar_pixel() == "#ffffff"
            assert LIGHT.code_background in reply.text_document().toHtml()
            window.app.save_settings({"theme": "dark"})
            qtbot.waitUntil(lambda: reply.palette_name() == "dark")
            base = window.sidebar.list_view.palette().color(QPalette.ColorRole.Base).name()
            assert base == "#1f1f22" and sidebar_pixel() == "#1f1f22"
            html = reply.text_document().toHtml()
            assert DARK.code_background in html and LIGHT.code_background not in html
            assert "x = 1" in reply.text_document().toPlainText()
            assert reply.content() == "Here:\n\n```python\nx = 1\n```\n\nand `y`."

            window.app.save_settings({"theme": "light"})
            qtbot.waitUntil(lambda: reply.palette_name() == "light")
            assert sidebar_pixel() == "#ffffff"
            assert LIGHT.code_background in reply.text_document().toHtml()

            height = reply.height()
            window.app.save_settings({"font_size": 24})
            qtbot.waitUntil(lambda: reply.text_document().defaultFont().pointSize() == 24)
            qtbot.waitUntil(lambda: reply.height() > height)
        finally:
            apply_theme(QApplication.instance(), "light")

    def test_app_built_before_any_window_applies_the_theme(self, qtbot, tmp_path) -> None:
        """A cold `llamachat ask` builds the App before its quick window: theme = "dark" holds."""

        cfg = Config(
            theme="dark",
            router_url="http://127.0.0.1:9",
            default_model="m",
            history_path=tmp_path / "h.db",
            prompts_dir=tmp_path / "p",
        )
        with History(cfg.history_path) as history:
            state = make_app(cfg, history)
            quick = QuickWindow(state)
            qtbot.addWidget(quick)
            try:
                base = quick.palette().color(QPalette.ColorRole.Window).name()
                assert base == "#2b2b2e"
            finally:
                quick.close()
                state.close()
                apply_theme(QApplication.instance(), "light")

    @quick_offscreen
    def test_excepthook_logs_a_bug_and_shows_it_once_a_fault_as_a_message(
        self, qtbot, tmp_path, caplog
    ) -> None:
        """A bug is logged with its traceback and shown once in a plain-text dialog; the same bug
        again is logged, not shown; an environment fault is a message without a traceback."""

        def bug() -> None:
            raise KeyError("<b>not bold</b>")

        cfg = Config(
            router_url="http://127.0.0.1:9",
            history_path=tmp_path / "h.db",
            prompts_dir=tmp_path / "p",
        )
        before = sys.excepthook
        with History(cfg.history_path) as history:
            state = make_app(cfg, history)
            hook = state.install_excepthook()
            try:
                assert sys.excepthook == hook.handle
                for _ in range(2):
                    try:
                        bug()
                    except KeyError:
                        sys.excepthook(*sys.exc_info())
                [shown] = hook.dialogs
                assert shown.isVisible() and shown.textFormat() == Qt.TextFormat.PlainText
                assert "<b>not bold</b>" in shown.text()
                assert "in bug" in shown.detailedText() and "KeyError" in shown.detailedText()
                bugs = [r for r in caplog.records if r.name == "llamachat.ui.app" and r.exc_info]
                assert len(bugs) == 2 and bugs[0].exc_info[0] is KeyError

                try:
                    raise HistoryError("the disk is full")
                except HistoryError:
                    sys.excepthook(*sys.exc_info())
                assert len(hook.dialogs) == 2
                message = hook.dialogs[-1]
                assert message.text() == "the disk is full" and not message.detailedText()
            finally:
                for dialog in hook.dialogs:
                    dialog.close()
                state.close()
        assert sys.excepthook == before
