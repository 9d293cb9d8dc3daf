"""The tests of `llamachat.ui.first_run`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QDesktopServices

from llamachat.__main__ import find_router
from llamachat.dev.scripted_router import ScriptedRouter
from llamachat.history.store import History
from llamachat.router.server import free_port
from llamachat.tests.support import (
    SMOL_FILE,
    SMOL_ID,
    call_from_thread,
    dead_url,
    firstrun_config,
    firstrun_offscreen,
    getting_started_button,
    getting_started_buttons,
    make_app,
    real_assets,
    smol_models_folder,
    unstarted_server,
)
from llamachat.ui.instance import RunningInstance
from llamachat.ui.router_guide import ServerLogDialog


class TestFirstRun:
    """The chat window's getting-started panel: no router yet, none to be had, or no models."""

    def test_firstrun_window_waits_for_the_router_then_lists_its_models(
        self, firstrun, router, qtbot
    ) -> None:
        """While the router is looked for or started the panel and status bar say so and the
        picker waits instead of reporting the URL unreachable; use_router ends it."""
        window = firstrun(router_url=dead_url())
        window.app.router_pending("Looking for the llama.cpp router at http://127.0.0.1:8080…")

        panel = window.first_run_panel
        assert panel.state() == "pending" and panel.isVisible() and panel.busy.isVisible()
        assert "Looking for the llama.cpp router" in panel.text.text()
        assert "Looking for the llama.cpp router" in window.statusBar().currentMessage()
        assert not window.model_picker.isEnabled()
        qtbot.waitUntil(lambda: "not ready yet" in window.model_picker.status_label.text())
        assert "Cannot reach" not in window.model_picker.status_label.text()

        command = "/opt/bin/llama-server --host 127.0.0.1 --port 8123 --models-dir /m"
        call_from_thread(window.app.post_server_event, "starting", command)
        qtbot.waitUntil(
            lambda: window.statusBar().currentMessage() == "Starting llama-server on port 8123…"
        )
        assert panel.state() == "pending" and "port 8123" in panel.text.text()

        window.app.use_router(router.url)
        assert panel.state() == "hidden" and not panel.isVisible()
        assert window.model_picker.isEnabled()
        qtbot.waitUntil(lambda: [m.id for m in window.models()] == ["test-model"])
        assert window.first_run_panel.state() == "hidden"

    def test_firstrun_listing_from_before_the_wait_does_not_end_it(self, firstrun, qtbot) -> None:
        """A model list asked for before the router search began (an empty router at the
        configured URL) neither replaces the waiting panel nor its status line."""

        with ScriptedRouter(models=[]) as empty:
            window = firstrun(router_url=empty.url)
            window.app.router_pending(f"Looking for the llama.cpp router at {empty.url}…")
            # The picker's calls run in order: its stand-in's answer comes after the earlier one.
            qtbot.waitUntil(lambda: "not ready yet" in window.model_picker.status_label.text())
            qtbot.waitUntil(lambda: any(r.path.endswith("/models") for r in empty.requests))
            assert window.first_run_panel.state() == "pending"
            assert (
                window.statusBar().currentMessage().startswith("Looking for the llama.cpp router")
            )

            window.app.use_router(empty.url)
            qtbot.waitUntil(lambda: window.first_run_panel.state() == "empty")

    def test_firstrun_empty_router_says_where_models_go_and_opens_the_folder(
        self, firstrun, qtbot, tmp_path
    ) -> None:
        """A local router with no models shows the getting-started panel; for llamachat's own
        server it names the models folder, and Open models folder creates and opens it."""

        class Opened(QObject):
            def __init__(self) -> None:
                super().__init__()
                self.urls: list[QUrl] = []

            @Slot(QUrl)
            def open(self, url: QUrl) -> None:
                self.urls.append(url)

        with ScriptedRouter(models=[]) as empty:
            window = firstrun(router_url=empty.url)
            panel = window.first_run_panel
            qtbot.waitUntil(lambda: panel.state() == "empty" and panel.isVisible())
            # A router llamachat did not start: it cannot know that router's folder.
            assert "--models-dir" in panel.text.text() and empty.url in panel.text.text()
            assert getting_started_buttons(window) == {
                "Check again",
                "Start llamachat's own server",
            }
            assert not window.router_guide.add_model_action.isVisible()

            server = unstarted_server(tmp_path)
            models = tmp_path / "models"
            window.app.use_router(window.cfg.router_url, server=server)
            assert panel.state() == "empty"
            assert panel.folder.isVisible() and panel.folder.text() == str(models)
            assert getting_started_buttons(window) == {
                "Add GGUF file",
                "Open models folder",
                "Check again",
            }
            assert window.router_guide.add_model_action.isVisible()
            assert not models.exists()

            opened = Opened()
            QDesktopServices.setUrlHandler("file", opened, "open")
            try:
                qtbot.mouseClick(
                    getting_started_button(window, "Open models folder"), Qt.MouseButton.LeftButton
                )
            finally:
                QDesktopServices.unsetUrlHandler("file")
            assert models.is_dir()
            assert [url.toLocalFile() for url in opened.urls] == [str(models)]

    def test_firstrun_add_file_that_is_not_a_gguf_is_explained_and_not_added(
        self, firstrun, qtbot, tmp_path
    ) -> None:
        """Add GGUF file with a file that is not a GGUF says so on the panel; nothing is put in
        the models folder."""

        notes = tmp_path / "notes.gguf"
        notes.write_text("shopping list\n")
        with ScriptedRouter(models=[]) as empty:
            window = firstrun(router_url=empty.url)
            window.app.use_router(window.cfg.router_url, server=unstarted_server(tmp_path))
            panel = window.first_run_panel
            qtbot.waitUntil(lambda: panel.state() == "empty")

            window.router_guide.add_model_file(notes)

            qtbot.waitUntil(lambda: panel.problem.isVisible())
            assert panel.problem.text() == "notes.gguf is not a GGUF model file."
            # Said once, where it stays; the status bar no longer claims it is still adding.
            assert window.statusBar().currentMessage() == ""
            assert panel.state() == "empty" and not panel.busy.isVisible()
            assert getting_started_button(window, "Add GGUF file").isEnabled()
            assert not (tmp_path / "models" / "notes.gguf").exists()
            assert not [r for r in empty.requests if r.query.get("reload")]

    def test_firstrun_add_file_problem_stays_until_dismissed_when_the_panel_is_away(
        self, firstrun, router, qtbot, tmp_path
    ) -> None:
        """With models listed (no getting-started panel), a file that is not a GGUF is shown
        whole above the chat and stays there through later status messages until its ✕."""

        notes = tmp_path / "notes.gguf"
        notes.write_text("shopping list\n")
        window = firstrun(router_url=router.url)
        window.app.use_router(window.cfg.router_url, server=unstarted_server(tmp_path))
        qtbot.waitUntil(lambda: bool(window.models()))
        assert window.first_run_panel.state() == "hidden"
        bar = window.problem_bar
        assert not bar.isVisible()

        window.router_guide.add_model_file(notes)

        qtbot.waitUntil(bar.isVisible)
        assert bar.text() == "notes.gguf is not a GGUF model file."
        assert bar.label.textFormat() == Qt.TextFormat.PlainText and bar.label.wordWrap()
        window.show_status("Something else happened.", timeout=1)
        window.copy_last_reply()
        qtbot.wait(20)
        assert bar.isVisible() and bar.text() == "notes.gguf is not a GGUF model file."
        qtbot.mouseClick(bar.close_button, Qt.MouseButton.LeftButton)
        assert not bar.isVisible() and bar.text() == ""

    @firstrun_offscreen
    def test_firstrun_server_events_and_server_reach_every_window(
        self, router, qtbot, tmp_path
    ) -> None:
        """Events sent from a supervisor thread reach the chat window's status bar and the quick
        window; a server that gave up is shown on the panel with its log; a chat window built
        later still offers the server's log and says the server gave up."""

        cfg = firstrun_config(
            tmp_path, router_url=router.url, manage_server=False, default_model="test-model"
        )
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        server = unstarted_server(tmp_path, b"main: model loaded\nsrv: all slots idle\n")
        try:
            chat = running.show_chat()
            quick = running.quick_window()
            assert not chat.router_guide.server_log_action.isVisible()
            running.app.use_router(router.url, server=server)
            assert running.app.managed_server() is server
            assert (
                chat.router_guide.server_log_action.isVisible()
                and chat.router_guide.add_model_action.isVisible()
            )

            call_from_thread(
                running.app.post_server_event, "restarting", "restarting llama-server in 1 s"
            )
            qtbot.waitUntil(
                lambda: (
                    chat.statusBar().currentMessage()
                    == "llama-server: restarting llama-server in 1 s"
                )
            )
            assert quick.notice.text() == "llama-server: restarting llama-server in 1 s"
            call_from_thread(
                running.app.post_server_event,
                "exited",
                "llama-server exited with code -9; last output:\nboom",
            )
            qtbot.waitUntil(
                lambda: (
                    chat.statusBar().currentMessage()
                    == "llama-server: llama-server exited with code -9"
                )
            )
            call_from_thread(running.app.post_server_event, "ready", "llama-server is ready")
            qtbot.waitUntil(lambda: quick.notice.text() == "")

            gave_up = "llama-server failed to start 5 times in a row; see /tmp/x.log"
            call_from_thread(running.app.post_server_event, "gave_up", gave_up)
            qtbot.waitUntil(lambda: chat.first_run_panel.state() == "failed")
            assert chat.first_run_panel.text.text() == gave_up
            assert quick.notice.text() == gave_up
            getting_started_button(chat, "Server log").click()
            [dialog] = [w for w in chat.findChildren(ServerLogDialog) if w.isVisible()]
            assert dialog.text.toPlainText().endswith("srv: all slots idle\n")
            dialog.close()

            chat.close()
            qtbot.waitUntil(lambda: running.chat_window() is None)
            later = running.show_chat()
            assert later is not chat
            assert later.router_guide.server_log_action.isVisible()
            assert later.first_run_panel.state() == "failed"
            assert later.first_run_panel.text.text() == gave_up
        finally:
            running.shutdown()
            history.close()

    @firstrun_offscreen
    def test_firstrun_missing_llama_server_is_explained_in_the_window(
        self, qtbot, tmp_path
    ) -> None:
        """No router answers and no llama-server exists: the window says so in full, with how to
        get one, after saying it was looking; the quick window says it too."""

        missing = tmp_path / "bin" / "llama-server"
        url = dead_url()
        # A configured model: the quick window then lists no models of its own, whose failure
        # it would report over this one.
        cfg = firstrun_config(
            tmp_path, router_url=url, llama_server=str(missing), default_model="some-model"
        )
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        try:
            chat = running.show_chat()
            running.app.router_pending(f"Looking for the llama.cpp router at {url}…")
            quick = running.quick_window()
            assert quick.notice.text() == f"Looking for the llama.cpp router at {url}…"
            finder = find_router(running.app)
            panel = chat.first_run_panel
            assert panel.state() == "pending" and url in panel.text.text()

            qtbot.waitUntil(lambda: panel.state() == "failed", timeout=10000)
            assert finder is not None
            text = panel.text.text()
            assert str(missing) in text and "pip install 'llamachat[server]'" in text
            assert panel.isVisible() and panel.title.text() == "No llama.cpp router"
            assert getting_started_buttons(chat) == {"Settings"}
            assert str(missing) in chat.statusBar().currentMessage()
            assert chat.model_picker.isEnabled()
            assert running.app.managed_server() is None
            assert quick.notice.text() == text
        finally:
            running.shutdown()
            history.close()

    @firstrun_offscreen
    @pytest.mark.real_router
    def test_firstrun_managed_server_starts_then_takes_a_gguf_and_lists_it(
        self, qtbot, tmp_path
    ) -> None:
        """End to end with the real llama-server: the window says it is starting it, gets the
        server (log view), shows the empty models folder, and a GGUF added there is listed
        while the panel steps aside."""

        _binary, model = real_assets()
        port = free_port()
        models = tmp_path / "models"
        cfg = firstrun_config(tmp_path, router_url=f"http://127.0.0.1:{port}", models_dir=models)
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        try:
            chat = running.show_chat()
            said: list[str] = []
            chat.statusBar().messageChanged.connect(said.append)
            running.app.router_pending(f"Looking for the llama.cpp router at {cfg.router_url}…")
            finder = find_router(running.app)
            assert chat.first_run_panel.state() == "pending"

            qtbot.waitUntil(lambda: running.app.managed_server() is not None, timeout=60000)
            assert finder is not None
            assert f"Starting llama-server on port {port}…" in said
            assert chat.router_guide.server_log_action.isVisible()
            dialog = chat.router_guide.show_server_log()
            assert dialog is not None and "==== llamachat" in dialog.text.toPlainText()
            assert f"running at http://127.0.0.1:{port}" in dialog.path_label.text()
            dialog.close()

            panel = chat.first_run_panel
            qtbot.waitUntil(lambda: panel.state() == "empty", timeout=10000)
            assert panel.folder.text() == str(models)

            chat.router_guide.add_model_file(model)
            qtbot.waitUntil(lambda: SMOL_ID in [m.id for m in chat.models()], timeout=30000)
            assert panel.state() == "hidden" and not panel.isVisible()
            assert (models / SMOL_FILE).is_symlink()
            assert (models / SMOL_FILE).resolve() == model.resolve()
            assert chat.model_picker.current_model() == SMOL_ID
        finally:
            running.shutdown()
            managed = running.app.managed_server()
            if managed is not None:
                managed.stop()
            history.close()

    @pytest.mark.real_router
    def test_firstrun_empty_router_not_ours_says_whose_and_starts_ours_beside_it(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A router already at router_url that llamachat did not start and that lists no
        models: the panel says whose it is (program and pid), and "Start llamachat's own
        server" starts llamachat's llama-server on a free port, whose models are listed."""
        _binary, model = real_assets()
        with ScriptedRouter(models=[]) as other:
            cfg = firstrun_config(
                tmp_path, router_url=other.url, models_dir=smol_models_folder(tmp_path, model)
            )
            history = History(cfg.history_path)
            running = RunningInstance(make_app(cfg, history), tray=False)
            try:
                chat = running.show_chat()
                running.app.use_router(other.url)
                panel = chat.first_run_panel
                qtbot.waitUntil(lambda: f"(pid {os.getpid()})" in panel.text.text())
                text = panel.text.text()
                assert f"The llama.cpp router at {other.url} lists no models" in text
                assert "it is not llamachat's: python" in text
                assert getting_started_buttons(chat) == {
                    "Check again",
                    "Start llamachat's own server",
                }

                qtbot.mouseClick(
                    getting_started_button(chat, "Start llamachat's own server"),
                    Qt.MouseButton.LeftButton,
                )
                qtbot.waitUntil(lambda: running.app.managed_server() is not None, timeout=60000)
                managed = running.app.managed_server()
                assert managed is not None and managed.url != other.url
                assert running.app.router.url == managed.url
                qtbot.waitUntil(lambda: SMOL_ID in [m.id for m in chat.models()], timeout=30000)
                assert panel.state() == "hidden"
            finally:
                running.shutdown()
                managed = running.app.managed_server()
                if managed is not None:
                    managed.stop()
                history.close()
