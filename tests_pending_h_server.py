"""Tests of branch h-server, waiting for the test split to find their modules."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from PySide6.QtCore import Qt

from llamachat.config import Config
from llamachat.dev.pytest_plugin import (
    SMOL_ID,
    _app,
    _firstrun_button,
    _firstrun_buttons,
    _firstrun_cfg,
    _live_group_members,
    _mcp_allow,
    _mcp_faulty_toml,
    _mcp_window,
    _models_folder,
    _real_assets,
    _wait_for,
)
from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.history.store import History
from llamachat.router import client as backend
from llamachat.router.client import Client
from llamachat.router.server import ManagedServer
from llamachat.ui.instance import RunningInstance


def _request_line(conn: socket.socket) -> str:
    """Read one whole request (its body too); its first line, or '' at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return ""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    while length and len(rest) < int(length[1]):
        rest += conn.recv(65536)
    return head.split(b"\r\n")[0].decode()


class _ClosingServer:
    """An HTTP server on 127.0.0.1 whose connections each answer `answers` requests, then read
    one more whole and close without a byte of answer (as llama-server's router now and then
    does with a kept-alive connection)."""

    def __init__(self, answer: bytes, *, answers: int = 1) -> None:
        self.answer = answer
        self.answers = answers
        self.answered: list[str] = []
        self.unanswered: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                for _ in range(self.answers):
                    self.answered.append(_request_line(conn))
                    conn.sendall(self.answer)
                self.unanswered.append(_request_line(conn))

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()


def _json_answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


class TestClientResend:
    """`llamachat.router.client`: a request that met a connection the server closed."""

    def test_backend_request_meeting_a_closed_kept_alive_connection_is_sent_again(self) -> None:
        """A server that closes a kept-alive connection without answering the request that met
        it (as llama-server does): the request, a POST too, goes out again on a fresh
        connection; one closed unanswered on a fresh connection is an error, not resent."""
        server = _ClosingServer(_json_answer(b'{"ok": true}'))
        client = Client(server.url, api_key="")
        try:
            for method in ("GET", "POST"):
                for path in ("/a", "/b"):
                    assert client.request_json(method, path, root=True, json={}) == {"ok": True}
        finally:
            client.close()
        # Each request after the first met the connection the one before left, and went out
        # again on a fresh one.
        assert server.answered == [
            "GET /a HTTP/1.1",
            "GET /b HTTP/1.1",
            "POST /a HTTP/1.1",
            "POST /b HTTP/1.1",
        ]
        assert server.unanswered[:3] == ["GET /b HTTP/1.1", "POST /a HTTP/1.1", "POST /b HTTP/1.1"]
        server.close()

        never = _ClosingServer(b"", answers=0)
        client = Client(never.url, api_key="")
        try:
            with pytest.raises(backend.StreamError, match="RemoteProtocolError"):
                client.request_json("POST", "/c", root=True, json={})
        finally:
            client.close()
            never.close()
        assert never.unanswered == ["POST /c HTTP/1.1"], "a fresh connection's failure is final"

    def test_backend_chat_meeting_a_closed_kept_alive_connection_is_sent_again(self) -> None:
        """A chat request that goes out on a kept-alive connection the server closes without a
        byte of answer is sent once more, and its reply streams."""
        chunk = b'data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}\n\n'
        body = chunk + b"data: [DONE]\n\n"
        server = _ClosingServer(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        client = Client(server.url, api_key="")
        try:
            for _ in range(2):
                events = list(client.stream_chat("m", [{"role": "user", "content": "hello"}]))
                assert ("content", "Hi") in events
        finally:
            client.close()
            server.close()
        assert server.answered == ["POST /v1/chat/completions HTTP/1.1"] * 2
        assert server.unanswered[0] == "POST /v1/chat/completions HTTP/1.1"


class TestClientResendNotAfterCancel:
    """`llamachat.router.client`: a cancel is not a closed connection."""

    def test_backend_cancel_on_a_reused_connection_is_not_sent_again(self) -> None:
        """A cancel while the router loads the model, on a kept-alive connection: the shut
        socket is not taken for one the server closed, and nothing goes out again."""
        with ScriptedRouter([Model("huge")], load_delay=60) as r:
            client = Client(r.url)
            assert client.request_json("GET", "/models")
            cancel = threading.Event()
            outcome: list[object] = []

            def chat() -> None:
                outcome.append(list(client.stream_chat("huge", [], cancel=cancel)))

            thread = threading.Thread(target=chat, daemon=True)
            thread.start()
            _wait_for(lambda: r.status("huge") == "loading", 10, "the load to begin")
            cancel.set()
            thread.join(5)
            assert outcome == [[]], "the chat was sent again after the cancel"
            assert len(r.chat_requests()) <= 1
            client.close()


class TestManagedServerStop:
    """`llamachat.router.server`: the log of a restarted llamachat, and stopping the server."""

    @pytest.mark.real_router
    def test_server_stops_at_once_with_a_reply_in_flight(self, tmp_path: Path, caplog) -> None:
        """llama-server lets a first SIGTERM wait for the requests in flight (a reply being
        written); stop() ends it within a second or two all the same, with no process left
        and no "ignored SIGTERM"."""
        _binary, model = _real_assets()
        cfg = Config(models_dir=_models_folder(tmp_path, model), server_args=("-t", "1"))
        server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
        server.start()
        outcome: list[object] = []
        try:
            assert server.wait_ready(60), server.log_file.tail()
            client = Client(server.url)

            def long_reply() -> None:
                try:
                    for kind, _piece in client.stream_chat(
                        SMOL_ID,
                        [{"role": "user", "content": "Write a very long story."}],
                        params={"max_tokens": 4000, "ignore_eos": True},
                    ):
                        if kind == "content" and not outcome:
                            outcome.append("streaming")
                except backend.BackendError as exc:
                    outcome.append(exc)

            thread = threading.Thread(target=long_reply, daemon=True)
            thread.start()
            _wait_for(lambda: outcome, 60, "the reply to begin")
            pid = server.pid
            assert pid is not None
            caplog.set_level(logging.WARNING, logger="llamachat.router.server")
            started = time.monotonic()
        finally:
            server.stop()
        took = time.monotonic() - started
        thread.join(10)
        client.close()
        assert took < 3.0, f"stop() took {took:.1f} s"
        assert "ignored SIGTERM" not in caplog.text
        _wait_for(lambda: not _live_group_members(pid), 5, "the model server to end too")

    @pytest.mark.real_router
    def test_server_log_keeps_the_previous_runs_output(self, tmp_path: Path) -> None:
        """A second start appends to the log (the first run's output stays); only size rolls
        it over."""
        _binary, model = _real_assets()
        cfg = Config(models_dir=_models_folder(tmp_path, model))
        for _run in range(2):
            server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
            server.start()
            try:
                assert server.wait_ready(60), server.log_file.tail()
                assert httpx.get(f"{server.url}/health").status_code == 200
            finally:
                server.stop()
        text = (tmp_path / "log").read_text()
        assert text.count("==== llamachat ") == 2
        assert text.count("listening on http://127.0.0.1") == 2
        assert not (tmp_path / "log.1").exists()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _spawned(log_path: Path) -> list[int]:
    """The pids a faulty MCP server said it spawned ("spawned PID PID" in its log)."""

    def found() -> list[int]:
        text = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
        lines = [line for line in text.splitlines() if line.startswith("spawned ")]
        return [int(pid) for pid in lines[-1].split()[1:]] if lines else []

    return _wait_for(found, 30, "the server to say what it spawned")


class TestMcpFaults:
    """`llamachat.tools.mcp` and `mcp_stdio`: servers that misbehave."""

    def test_mcp_server_writing_non_utf8_on_stdout_fails_saying_why(self, mcp_hub) -> None:
        """A server whose stdout is not UTF-8 is failed at once with the bytes it wrote, in its
        state (the panel's) and its log; a turn does not wait start_wait for it."""
        hub, _cfg = mcp_hub(_mcp_faulty_toml("latin1"), start_wait=20)
        started = time.monotonic()
        assert hub.turn_tools(consent=_mcp_allow) == []
        assert time.monotonic() - started < 10
        [state] = hub.states()
        assert state.status == "failed"
        assert "not UTF-8 on its stdout" in state.error and "d\\xe9marr\\xe9" in state.error
        logged = state.log_path.read_text(encoding="utf-8")
        assert "not UTF-8 on its stdout (b'Serveur d\\xe9marr\\xe9" in logged

    def test_mcp_panel_says_a_non_utf8_server_failed_and_why(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The MCP panel shows the server as failed with the reason, not "starting"."""
        window, _history = _mcp_window(chat_window, router, tmp_path, _mcp_faulty_toml("latin1"))
        panel = window.open_mcp_panel()
        item = panel.tree.topLevelItem(0)
        panel.tree.setCurrentItem(item)
        panel.restart_button.click()
        qtbot.waitUntil(lambda: panel.tree.topLevelItem(0).text(1) == "failed", timeout=20000)
        assert "not UTF-8 on its stdout" in panel.tree.topLevelItem(0).text(2)
        panel.close()

    def test_mcp_server_setsid_children_end_on_close_and_on_sigkill_of_llamachat(
        self, mcp_hub, tmp_path: Path
    ) -> None:
        """What a server starts in a session of its own (`setsid`, out of its process group;
        orphaned or its child) ends when the hub closes, and when llamachat is SIGKILLed."""
        hub, _cfg = mcp_hub(_mcp_faulty_toml("setsid"))
        assert hub.turn_tools(consent=_mcp_allow)
        pids = _spawned(hub.states()[0].log_path)
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
        hub.close()
        _wait_for(lambda: not any(_alive(pid) for pid in pids), 15, "the children to end on close")

        script = tmp_path / "host.py"
        script.write_text(
            "import sys, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import McpServerConfig\n"
            "from llamachat.tools import mcp as mcp_tools\n"
            "hub = mcp_tools.Hub([McpServerConfig('setsid', command=sys.executable,"
            " args=['-m', 'llamachat.dev.mcp_faulty', 'setsid'])], log_dir=Path(sys.argv[1]))\n"
            "assert hub.turn_tools(consent=lambda n, a: 'once')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
            encoding="utf-8",
        )
        host = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "host-logs")],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert host.stdout is not None and host.stdout.readline().strip() == "ready"
            pids = _spawned(tmp_path / "host-logs" / "mcp-setsid.log")
            assert all(_alive(pid) for pid in pids)
            host.kill()
            host.wait(10)
            _wait_for(lambda: not any(_alive(pid) for pid in pids), 15, "the children to end")
        finally:
            host.kill()
            host.wait(10)
            if host.stdout is not None:
                host.stdout.close()


class TestFirstRunOwnServer:
    """`llamachat.ui.first_run`, `router_guide` and `router.port_owner`: a router not ours."""

    @pytest.mark.real_router
    def test_firstrun_empty_router_not_ours_says_whose_and_starts_ours_beside_it(
        self, qtbot, tmp_path: Path
    ) -> None:
        """A router already at router_url that llamachat did not start and that lists no
        models: the panel says whose it is (program and pid), and "Start llamachat's own
        server" starts llamachat's llama-server on a free port, whose models are listed."""
        _binary, model = _real_assets()
        with ScriptedRouter(models=[]) as other:
            cfg = _firstrun_cfg(
                tmp_path, router_url=other.url, models_dir=_models_folder(tmp_path, model)
            )
            history = History(cfg.history_path)
            running = RunningInstance(_app(cfg, history), tray=False)
            try:
                chat = running.show_chat()
                running.app.use_router(other.url)
                panel = chat.first_run_panel
                qtbot.waitUntil(lambda: f"(pid {os.getpid()})" in panel.text.text())
                text = panel.text.text()
                assert f"The llama.cpp router at {other.url} lists no models" in text
                assert "it is not llamachat's: python" in text
                assert _firstrun_buttons(chat) == {"Check again", "Start llamachat's own server"}

                qtbot.mouseClick(
                    _firstrun_button(chat, "Start llamachat's own server"),
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


class TestPortalShortcutLifetime:
    """`llamachat.ui.desktop.portal`: the listening thread outlives a release."""

    def test_portal_released_while_its_call_waits_is_deleted_only_after_its_thread(
        self, qtbot, session_bus, monkeypatch
    ) -> None:
        """A portal that takes the call and does not answer keeps the thread waiting past
        release(): the shortcut object is deleted only once that thread has ended, and its
        last emits reach a live object (deleted under them, it crashed the event loop)."""
        import shiboken6
        from jeepney import message_bus
        from jeepney.io.blocking import open_dbus_connection

        from llamachat.ui.desktop import portal as portal_module
        from llamachat.ui.desktop.hotkey import QuickAskShortcut

        monkeypatch.setattr(portal_module, "CALL_TIMEOUT", 3.0)
        failures: list[BaseException | None] = []
        monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
        mute = open_dbus_connection(bus=session_bus)
        try:
            mute.send_and_get_reply(
                message_bus.RequestName(portal_module.PORTAL.bus_name), timeout=5
            )
            shortcut = QuickAskShortcut(bus=session_bus)
            shortcut.apply("Ctrl+Alt+J")
            portal = shortcut._portal
            assert portal is not None
            thread = portal._thread
            shortcut.release()
            assert thread.is_alive(), "the call should still be waiting"
            del shortcut
            qtbot.wait(10)  # deferred deletions run
            assert shiboken6.isValid(portal)
            qtbot.waitUntil(lambda: not thread.is_alive(), timeout=10000)
            qtbot.waitUntil(lambda: not shiboken6.isValid(portal), timeout=5000)
        finally:
            mute.close()
        assert failures == []


class TestPortOwner:
    """`llamachat.router.port_owner`: whose a local router is."""

    def test_port_owner_names_the_program_listening_and_nothing_for_a_free_port(self) -> None:
        """A port this process listens on is named with its program, pid and command line;
        a port nothing listens on, and a remote URL, give ''."""
        from llamachat.router.port_owner import listener, router_owner
        from llamachat.router.server import free_port

        with socket.create_server(("127.0.0.1", 0)) as held:
            port = held.getsockname()[1]
            found = listener(port)
            assert found is not None and (found.uid, found.pid) == (os.getuid(), os.getpid())
            said = router_owner(f"http://127.0.0.1:{port}")
            assert (
                said.startswith("it is not llamachat's: python") and f"(pid {os.getpid()})" in said
            )
            assert "pytest" in said, "the command line is quoted"
        assert router_owner(f"http://127.0.0.1:{free_port()}") == ""
        assert router_owner("https://example.com:8080") == ""
