"""The tests of `llamachat.ui.settings`."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QDialog

from llamachat.history.store import History
from llamachat.tests.support import make_app, offscreen_dialogs, send_and_wait, visible_widget_named
from llamachat.ui import ChatWindow
from llamachat.ui.theme import apply_theme


class TestSettings:
    """The Settings dialog: the common keys of config.toml, saved in place."""

    @offscreen_dialogs
    def test_chrome_window_settings_round_trip_keeps_comments_and_applies(
        self, router, qtbot, tmp_path
    ) -> None:
        """Ctrl+, opens Settings; saving keeps the file's comments, switches the theme and shows
        the web search toggle; the star writes the default model into the same file."""

        from llamachat import config

        path = tmp_path / "config.toml"
        path.write_text(
            config.DEFAULT_TEXT.replace(
                'router_url = "http://127.0.0.1:8080"',
                f'router_url = "{router.url}"  # the box under my desk',
            )
            + f'\nhistory_path = "{tmp_path / "history.db"}"\n'
            + f'prompts_dir = "{tmp_path / "prompts"}"\n'
            + "# My own note, at the end.\n",
            encoding="utf-8",
        )
        cfg = config.load(path)
        history = History(cfg.history_path)
        window = ChatWindow(make_app(cfg, history))
        qtbot.addWidget(window)
        window.show()
        try:
            qtbot.waitUntil(lambda: bool(window.models()))
            assert not window.web_search.button.isVisible()
            qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
            dialog = visible_widget_named(window, QDialog, "Settings")
            assert dialog.router_url.text() == router.url
            dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
            dialog.search_url.setText("http://127.0.0.1:9")
            dialog.dictation_sends.setChecked(True)
            assert dialog.voice_model.text() == ""
            dialog.voice_model.setText("~/voices/en_US-joe-medium.onnx")
            assert dialog.save()
            text = path.read_text(encoding="utf-8")
            assert f'router_url = "{router.url}"  # the box under my desk' in text
            assert text.endswith("# My own note, at the end.\n")
            assert 'theme = "dark"' in text and 'search_url = "http://127.0.0.1:9"' in text
            assert window.cfg.theme == "dark" and window.cfg.router_url == router.url
            assert "dictation_sends = true" in text and window.app.config.dictation_sends
            assert 'voice_model = "~/voices/en_US-joe-medium.onnx"' in text
            assert window.app.config.voice_model == Path.home() / "voices/en_US-joe-medium.onnx"
            window_colour = QApplication.palette().color(QPalette.ColorRole.Window).name()
            assert window_colour == "#2b2b2e"
            assert window.web_search.button.isVisible() and window.web_search.is_on()

            picker = window.model_picker
            qtbot.mouseClick(picker.star, Qt.MouseButton.LeftButton)
            assert picker.default_model() == "test-model"
            text = path.read_text(encoding="utf-8")
            assert 'default_model = "test-model"' in text
            assert text.endswith("# My own note, at the end.\n")
            assert config.load(path).default_model == "test-model"
            send_and_wait(qtbot, window, "still talking")
            assert history.messages(window.session_id)[-1]["content"] == "echo: still talking"
        finally:
            window.close()
            history.close()
            apply_theme(QApplication.instance(), "light")

    def test_choose_puts_the_picked_piper_voice_in_the_box(
        self, qtbot, tmp_path, monkeypatch
    ) -> None:
        """Choose… beside Read-aloud voice opens a file dialog on Piper voices and puts the
        file picked in the box, as it is saved (under home as ~/...)."""

        from PySide6.QtWidgets import QFileDialog, QLabel

        from llamachat import config
        from llamachat.ui.settings import SettingsDialog

        path = tmp_path / "config.toml"
        path.write_text(config.DEFAULT_TEXT, encoding="utf-8")
        dialog = SettingsDialog(config.load(path))
        qtbot.addWidget(dialog)
        voice = Path.home() / "voices" / "en_US-joe-medium.onnx"
        asked: list[tuple] = []

        def pick(*args):  # the desktop's file dialog cannot run offscreen
            asked.append(args)
            return str(voice), args[3]

        monkeypatch.setattr(QFileDialog, "getOpenFileName", pick)
        qtbot.mouseClick(dialog.choose_voice, Qt.MouseButton.LeftButton)
        assert asked and asked[0][3] == "Piper voices (*.onnx)"
        # Alt+V reaches the box: its label is its buddy (a row of two widgets has none).
        labels = [w for w in dialog.findChildren(QLabel) if w.buddy() is dialog.voice_model]
        assert [w.text() for w in labels] == ["Read-aloud &voice:"]
        assert dialog.voice_model.text() == "~/voices/en_US-joe-medium.onnx"
        assert dialog.save()
        assert config.load(path).voice_model == voice
