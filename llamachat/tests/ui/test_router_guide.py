"""The tests of `llamachat.ui.router_guide`."""

from __future__ import annotations

import re
import threading

import pytest

import llamachat
from llamachat.config import Config
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.router.server import ManagedServer
from llamachat.tests.support import offscreen_dialogs
from llamachat.ui.router_guide import ServerLogDialog


class TestRouterGuide:
    """The chat window's side of the router: getting it ready, its models folder, its log."""

    @offscreen_dialogs
    def test_chrome_window_server_log_and_events_of_a_managed_server(
        self, chat_window, qtbot, tmp_path
    ) -> None:
        """A managed server's log tail opens from File > Server log…; its events, sent from
        another thread, reach the status bar."""

        window, _history = chat_window()
        assert not window.router_guide.server_log_action.isVisible()
        server = ManagedServer(
            Config(), port=1, log_path=tmp_path / "server.log", lock_path=tmp_path / "server.lock"
        )
        server.log_file.write(b"main: loading model\nmain: server is listening on 127.0.0.1\n")
        try:
            window.app.use_router(window.cfg.router_url, server=server)
            assert window.router_guide.server_log_action.isVisible()
            window.router_guide.server_log_action.trigger()
            [dialog] = [w for w in window.findChildren(ServerLogDialog) if w.isVisible()]
            assert "server is listening" in dialog.text.toPlainText()
            server.log_file.write(b"slot 0: prompt done\n")
            dialog.refresh()
            assert dialog.text.toPlainText().endswith("slot 0: prompt done\n")
            dialog.close()
            sender = threading.Thread(
                target=window.app.post_server_event,
                args=("restarted", "restarted after it stopped"),
            )
            sender.start()
            sender.join()
            qtbot.waitUntil(
                lambda: "restarted after it stopped" in window.statusBar().currentMessage()
            )
        finally:
            server.log_file.close()

    def test_router_about_names_both_versions(self, chat_window, qtbot) -> None:
        window, _history = chat_window()
        window.router_guide.show_about()
        qtbot.waitUntil(lambda: window.router_guide.about_box is not None, timeout=5000)
        text = window.router_guide.about_box.text()
        assert f"llamachat {llamachat.__version__}" in text
        assert "Server build: b0-scripted" in text
        window.router_guide.about_box.close()

    @pytest.mark.real_router
    def test_real_router_reports_its_version(self, qtbot, real_router) -> None:
        client = Client(real_router.url)
        try:
            built = Models(client).server_version()
        finally:
            client.close()
        assert re.fullmatch(r"b\d+-[0-9a-f]+", built), built
        version = real_router.server.version
        assert version.startswith("version: ") and built.split("-")[1] in version
        dialog = ServerLogDialog(real_router.server)
        qtbot.addWidget(dialog)
        assert version in dialog.path_label.text()
