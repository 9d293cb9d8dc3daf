"""The tests of `llamachat.ui.instance`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QPlainTextEdit

from llamachat.__main__ import _act
from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History
from llamachat.tests.support import (
    answered_oneshot,
    instance_config,
    make_app,
    oneshot_sessions,
    quick_offscreen,
    quick_widget_named,
    run_llamachat,
    start_instance,
    stop_process,
    subprocess_config_file,
    wait_for,
)
from llamachat.ui import instance
from llamachat.ui.instance import RunningInstance, payload, socket_name


def _hand_over_from_another_process(name: str, message: dict) -> subprocess.Popen:
    """Start a process that hands `message` over and prints what hand_over() gave."""

    script = (
        "import json, sys\n"
        "from llamachat.ui import instance\n"
        "try:\n"
        "    print(instance.hand_over(sys.argv[1], json.loads(sys.argv[2])))\n"
        "except instance.InstanceError as exc:\n"
        "    print(exc)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script, name, json.dumps(message)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )


class TestInstance:
    """One llamachat per user: its local socket, command lines handed over, signals."""

    def test_instance_socket_is_per_user_in_the_runtime_folder(self, tmp_path) -> None:
        """The socket path is in $XDG_RUNTIME_DIR, names the uid, and differs per config file."""

        name = socket_name(tmp_path / "a.toml")
        assert (
            Path(name).parent == Path(os.environ["XDG_RUNTIME_DIR"])
            or len(os.fsencode(Path(os.environ["XDG_RUNTIME_DIR"]) / Path(name).name)) > 100
        )
        assert f"llamachat-{os.getuid()}-" in Path(name).name
        assert name == socket_name(tmp_path / "a.toml") != socket_name(tmp_path / "b.toml")

    def test_instance_server_receives_a_hand_over_and_refuses_garbage(
        self, qtbot, tmp_path
    ) -> None:
        """hand_over() delivers argv, cwd and stdin; a malformed message is refused, not acted on.

        The hand-over runs in a second process, as a later `llamachat` does: a QLocalSocket
        driven from a Python thread of this process crashed the suite once (exit 139)."""

        name = instance.socket_name(tmp_path / "c.toml")
        assert instance.hand_over(name, instance.payload([], "/")) is False
        server = instance.InstanceServer(name)
        assert server.listen() and server.is_listening()
        message = instance.payload(["ask", "hi"], "/some/where", "piped\n")
        try:
            with qtbot.waitSignal(server.received, timeout=10000) as got:
                delivered = _hand_over_from_another_process(name, message)
            qtbot.waitUntil(lambda: delivered.poll() is not None, timeout=10000)
            assert got.args[0] == message
            assert delivered.communicate()[0].strip() == "True"

            refused = _hand_over_from_another_process(name, {"not": "argv"})
            qtbot.waitUntil(lambda: refused.poll() is not None, timeout=10000)
            assert "refused" in refused.communicate()[0]
        finally:
            server.close()

    def test_instance_socket_qt_cannot_listen_on_is_an_error(self, qtbot, tmp_path) -> None:
        """A socket Qt cannot create gives InstanceError naming it (llamachat then runs
        without the hand-over), not an AttributeError from the error check."""

        server = instance.InstanceServer(str(tmp_path / "no such folder" / "llamachat.sock"))
        with pytest.raises(instance.InstanceError, match="Cannot listen on .*no such folder"):
            server.listen()
        assert not server.is_listening()

    def test_instance_that_takes_the_connection_but_never_answers_is_an_error(
        self, tmp_path
    ) -> None:
        """A hung instance (accepts, never answers) gives InstanceError instead of a hang."""

        name = instance.socket_name(tmp_path / "hung.toml")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hung:
            hung.bind(name)
            hung.listen(1)
            with pytest.raises(instance.InstanceError, match="does not answer"):
                instance.hand_over(name, instance.payload(["ask"], "/"), timeout_ms=300)
        Path(name).unlink()

    @quick_offscreen
    def test_instance_acts_on_handed_over_command_lines(self, router, qtbot, tmp_path) -> None:
        """Plain `llamachat` raises the chat window; `ask "q"` asks in the quick window, stdin
        appended; `ask` with only stdin puts it in the input without asking."""

        cfg = instance_config(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        try:
            _act(running, payload([], "/"))
            assert running.chat_window() is not None and running.chat_window().isVisible()
            _act(running, payload(["ask", "two", "words"], "/", "piped\n"))
            quick = running.quick_window()
            assert quick.isVisible()
            qtbot.waitUntil(
                lambda: (
                    answered_oneshot(tmp_path / "history.db", "two words\n\n```\npiped\n```")
                    is not None
                )
            )
            _act(running, payload(["ask"], "/", "only stdin"))
            assert quick_widget_named(quick, QPlainTextEdit, "Message").toPlainText() == (
                "```\nonly stdin\n```"
            )
            assert len(oneshot_sessions(tmp_path / "history.db")) == 1
        finally:
            running.shutdown()
            history.close()

    def test_instance_second_llamachat_hands_ask_over_and_exits_at_once(
        self, router, tmp_path
    ) -> None:
        """`llamachat ask "q"` hands over to the running one (exit 0), which asks and saves it."""

        config = subprocess_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        first = start_instance(config, socket_name(config), tmp_path / "first.log")
        try:
            router.script(Reply(content=["Paris."]))
            second = run_llamachat(config, "ask", "capital", "of", "France", timeout=30)
            assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
            _session, messages = wait_for(
                lambda: answered_oneshot(tmp_path / "history.db", "capital of France"),
                30,
                "the answer",
            )
            assert messages[1]["content"] == "Paris."
            third = run_llamachat(config, "ask", "review this", stdin="line one\n", timeout=30)
            assert third.returncode == 0, third.stderr
            wait_for(
                lambda: answered_oneshot(
                    tmp_path / "history.db", "review this\n\n```\nline one\n```"
                ),
                30,
                "the piped ask",
            )
            plain = run_llamachat(config, timeout=30)
            assert plain.returncode == 0 and first.poll() is None
        finally:
            stop_process(first)

    def test_instance_sigterm_ends_the_instance_cleanly_and_frees_its_socket(
        self, router, tmp_path
    ) -> None:
        """SIGTERM (a desktop logout) quits like the tray's Quit: exit 0, socket file removed."""
        import signal

        config = subprocess_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        name = socket_name(config)
        first = start_instance(config, name, tmp_path / "first.log")
        try:
            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=30) == 0, (tmp_path / "first.log").read_text()
            assert not Path(name).exists()
        finally:
            stop_process(first)

    def test_instance_stale_socket_of_a_killed_instance_is_recovered(
        self, router, tmp_path
    ) -> None:
        """A killed instance leaves its socket; the next one replaces it and takes hand-overs."""

        config = subprocess_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        name = socket_name(config)
        stop_process(start_instance(config, name, tmp_path / "crashed.log"))
        assert Path(name).exists(), "a killed instance leaves its socket file"
        first = start_instance(config, name, tmp_path / "first.log")
        try:
            second = run_llamachat(config, "ask", "are you there", timeout=30)
            assert (second.returncode, second.stderr) == (0, "")
            wait_for(
                lambda: answered_oneshot(tmp_path / "history.db", "are you there"), 30, "the answer"
            )
        finally:
            stop_process(first)

    @quick_offscreen
    def test_instance_background_opens_no_window_and_new_chat_opens_an_empty_chat(
        self, router, qtbot, tmp_path
    ) -> None:
        """`--background` (the autostart entry) shows no window; `--new-chat` (the menu entry's
        "New chat") shows the chat window on a new, empty chat."""

        cfg = instance_config(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        try:
            _act(running, payload(["--background"], "/"))
            assert running.chat_window() is None and not running.quick_window().isVisible()
            old = history.create_session("chat", title="Old")
            running.show_chat().open_session(old)
            assert running.chat_window().session_id == old
            _act(running, payload(["--new-chat"], "/"))
            chat = running.chat_window()
            assert chat.isVisible() and chat.session_id is None
        finally:
            running.shutdown()
            history.close()
