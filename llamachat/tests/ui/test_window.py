"""The tests of `llamachat.ui.window`."""

from __future__ import annotations

import socket

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QLabel, QPlainTextEdit, QPushButton, QWidget

from llamachat.dev.scripted_router import Model, Reply
from llamachat.tests.support import (
    add_router_models,
    combo_ids,
    offscreen_popup,
    send_and_wait,
    type_message,
    visible_widget_named,
)


class TestWindow:
    """The chat window: sessions, the conversation, the composer, and the chrome around them."""

    def test_window_stop_keeps_partial_reply_as_stopped_and_closes_stream(
        self, chat_window, router, qtbot
    ) -> None:
        """Esc mid-reply ends the reply at once, saves the partial text 'stopped', drops the socket;
        the reply offers one action (Regenerate) and the figures of what it produced."""

        window, history = chat_window()
        router.script(Reply(content=["one ", "two ", "three ", "four"], stall_after=3))
        type_message(qtbot, window, "count")
        qtbot.keyClick(visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "one two ")
        assert visible_widget_named(window, QPushButton, "Stop")

        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
        # Stop is synchronous: the reply is over and saved before the key press returns.
        assert not window.is_streaming()
        reply = history.messages(window.session_id)[-1]
        assert (reply["content"], reply["status"]) == ("one two ", "stopped")
        assert visible_widget_named(window, QPushButton, "Send")
        view = window.messages.last_assistant()
        shown = {b.accessibleName() for b in view.findChildren(QAbstractButton) if b.isVisible()}
        assert "Regenerate" in shown and "Retry" not in shown
        # The figures so far (timings_per_token): what it produced, kept although stopped.
        assert (
            visible_widget_named(view, QLabel, "Reply statistics")
            .text()
            .startswith("50.0 tok/s · 2 tokens")
        )
        # The HTTP response was closed, so the server saw the client leave mid-stall.
        qtbot.waitUntil(lambda: router.disconnects == 1, timeout=5000)
        qtbot.waitUntil(lambda: window.running_workers() == 0, timeout=5000)
        assert history.messages(window.session_id)[-1]["status"] == "stopped"

    def test_window_server_error_shows_its_message_inline(self, chat_window, router, qtbot) -> None:
        """An HTTP error from the server is saved on the reply with the server's own message."""

        window, history = chat_window()
        router.script(Reply(status=500, error={"message": "failed to allocate KV cache"}))
        send_and_wait(qtbot, window, "Hello")
        reply = history.messages(window.session_id)[-1]
        assert reply["status"] == "error"
        assert "failed to allocate KV cache" in reply["error"]

    @offscreen_popup
    def test_window_unknown_slash_word_is_sent_as_text(self, chat_window, router, qtbot) -> None:
        """A `/word` that names no skill is ordinary text."""
        window, _history = chat_window()
        send_and_wait(qtbot, window, "/usr/bin is where it lives")
        assert window.loaded_skills() == []
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == (
            "/usr/bin is where it lives"
        )

    def test_window_multiline_code_message_is_sent_exactly(
        self, chat_window, router, qtbot
    ) -> None:
        """Shift+Enter lines, indentation and a code fence reach the server byte for byte."""
        window, history = chat_window()
        text = "Why does this fail?\n```python\ndef f(x):\n    return  x * 2\n```\n\n  trailing  "
        send_and_wait(qtbot, window, text)
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == text
        assert history.messages(window.session_id)[0]["content"] == text

    def test_window_use_router_switches_to_a_router_that_came_up(
        self, chat_window, router, qtbot
    ) -> None:
        """Started against a dead URL, the window lists and chats once told where the router is."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
        window, history = chat_window(url=dead, listed=False)
        qtbot.waitUntil(lambda: "Cannot reach" in window.model_picker.status_label.text())
        assert window.model_picker.retry_button.isVisible()
        window.app.use_router(router.url)
        qtbot.waitUntil(lambda: [m.id for m in window.models()] == ["test-model"])
        assert window.cfg.router_url == router.url
        send_and_wait(qtbot, window, "hello")
        assert history.messages(window.session_id)[-1]["content"] == "echo: hello"

    def test_chrome_window_layout_holds_for_long_statuses_errors_and_titles(
        self, chat_window, router, qtbot
    ) -> None:
        """A long "Loading …" or error beside the picker is elided (whole in its tooltip) and
        moves neither the sidebar nor the window's minimum; a long status message is whole in
        the status bar's tooltip; a long chat title is elided, with no horizontal scrollbar."""
        from llamachat.ui import plain

        long_id = "an-unusually-long-model-name-for-a-local-model-Q4_K_M-instruct-2025-final"
        add_router_models(router, Model(long_id, "unloaded"))
        router.load_delay = 0.5
        window, history = chat_window()
        window.resize(900, 600)
        picker = window.model_picker
        qtbot.waitUntil(lambda: long_id in combo_ids(picker.combo))
        qtbot.wait(50)
        sizes = window.splitter.sizes()
        picker.combo.setCurrentIndex(picker.combo.findData(long_id))
        assert picker.status_label.text() == "Loading…"
        assert picker.status_label.toolTip() == f"Loading {long_id}…"
        qtbot.wait(50)
        assert window.splitter.sizes() == sizes
        assert picker.status_label.width() >= picker.status_label.minimumSizeHint().width()

        error = f"{long_id} failed to load: the server explains at length"
        plain.set_text(picker.status_label, error)
        qtbot.wait(50)
        floor = window.minimumSizeHint().width()
        plain.set_text(picker.status_label, error * 5)
        qtbot.wait(50)
        assert window.splitter.sizes() == sizes
        assert window.minimumSizeHint().width() == floor
        qtbot.waitUntil(lambda: picker.status(long_id) == "loaded", timeout=10_000)

        error = "The router said: " + "a very long explanation of what went wrong " * 5
        window.show_status(error, timeout=0)
        assert window.statusBar().toolTip() == error

        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "word " * 60)
        window.sidebar.refresh()
        view = window.sidebar.list_view
        qtbot.wait(50)
        assert view.horizontalScrollBar().maximum() == 0
        rect = view.visualRect(window.sidebar.model.index(window.sidebar.model.row_of(session)))
        assert rect.width() <= view.viewport().width()

    def test_chrome_window_accessible_names_all_present(self, chat_window, qtbot) -> None:
        """Every piece of the chrome has the accessible name screen readers and tests use."""

        window, _history = chat_window(search_url="http://127.0.0.1:9")
        for name in (
            "Model",
            "Prompt preset",
            "Sessions",
            "Search sessions",
            "New chat",
            "Context meter",
            "Skills",
            "Settings",
            "Web search",
            "Message",
            "Send",
        ):
            shown = [w for w in window.findChildren(QWidget) if w.accessibleName() == name]
            assert [w for w in shown if w.isVisible()], f"no visible widget named {name!r}"

    @offscreen_popup
    def test_chrome_window_gets_the_focus_back_when_a_dialog_closes(
        self, chat_window, qtbot
    ) -> None:

        window, _history = chat_window()
        to_composer = (window.show_shortcuts, window.open_mcp_panel)
        for open_dialog in (*to_composer, window.open_settings, window.preset_picker.edit_presets):
            window.activateWindow()
            qtbot.waitUntil(window.isActiveWindow)
            window.sidebar.search_field.setFocus()
            dialog = open_dialog()
            dialog.activateWindow()
            qtbot.waitUntil(dialog.isActiveWindow)
            dialog.reject()
            qtbot.waitUntil(window.isActiveWindow)
            if open_dialog in to_composer:
                qtbot.waitUntil(window.composer.editor.hasFocus)
