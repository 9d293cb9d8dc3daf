"""The single running llamachat: a local socket per user, and the instance that owns the windows.

The first `llamachat` listens on a QLocalServer whose name is a full path in the
user's runtime folder (`$XDG_RUNTIME_DIR/llamachat-<uid>-<config>.socket`, created
with user-only access). A later invocation connects, hands over its arguments,
working folder and piped stdin as one JSON message, waits for the "ok", and exits.
The name includes a digest of the configuration file, so `llamachat --config other.toml`
runs its own instance instead of being answered with the wrong configuration.

A crashed instance leaves its socket file behind: nothing accepts on it, so the
connect fails, and the next instance removes it and listens in its place.

Wire format, both ways over the socket: the client sends a 4-byte big-endian length
and that many bytes of UTF-8 JSON `{"version": 1, "argv": [...], "cwd": "...",
"stdin": "..."}`; the server answers `ok` (or `bad` for a message it cannot read).

Errors: `InstanceError(Exception)`, a running instance that takes the connection but
not the message (hung), or a socket that can be neither used nor replaced.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import struct
import tempfile
from pathlib import Path

from PySide6.QtCore import QDeadlineTimer, QEvent, QObject, QStandardPaths, QTimer, Signal, Slot
from PySide6.QtNetwork import QAbstractSocket, QLocalServer, QLocalSocket

from llamachat.config import Config
from llamachat.history.store import History
from llamachat.ui.app import App
from llamachat.ui.desktop.hotkey import QuickAskShortcut
from llamachat.ui.quick import QuickWindow
from llamachat.ui.tray import Tray
from llamachat.ui.views.unsaved import confirm_quit
from llamachat.ui.window import ChatWindow

log = logging.getLogger(__name__)

PROTOCOL = 1
HANDOVER_TIMEOUT_MS = 5000
ANSWER_POLL_MS = 50
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# sockaddr_un holds 108 bytes on Linux (104 on macOS); a longer runtime path moves the
# socket to the temp folder, still named for this user.
MAX_SOCKET_PATH = 100
_HEADER = struct.Struct(">I")


class InstanceError(Exception):
    """The running instance cannot be reached or replaced; str() says why, for the user."""


def _user() -> str:
    getuid = getattr(os, "getuid", None)
    return str(getuid()) if getuid is not None else getpass.getuser()


def _runtime_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_dir():
        return Path(runtime)
    located = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.RuntimeLocation)
    return Path(located) if located else Path(tempfile.gettempdir())


def socket_name(config_path: Path | None) -> str:
    """The full path of the instance socket for this user and configuration file."""
    runtime = _runtime_dir()
    key = str(Path(config_path).resolve()) if config_path is not None else ""
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    path = runtime / f"llamachat-{_user()}-{digest}.socket"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        digest = hashlib.sha256(f"{runtime}\0{key}".encode()).hexdigest()[:10]
        path = Path(tempfile.gettempdir()) / f"llamachat-{_user()}-{digest}.socket"
    return str(path)


def payload(argv: list[str], cwd: str, stdin: str = "") -> dict:
    """The message a later invocation hands over."""
    return {"version": PROTOCOL, "argv": list(argv), "cwd": cwd, "stdin": stdin}


def hand_over(name: str, message: dict, *, timeout_ms: int = HANDOVER_TIMEOUT_MS) -> bool:
    """Give `message` to the instance listening at `name`; False when none listens.

    Raises InstanceError when an instance accepts the connection but does not take
    the message in `timeout_ms` (it is hung, or the message was refused).
    """
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(timeout_ms):
        log.debug("no instance at %s: %s", name, sock.errorString())
        return False
    deadline = QDeadlineTimer(timeout_ms)
    data = json.dumps(message).encode("utf-8")
    sock.write(_HEADER.pack(len(data)) + data)
    while sock.bytesToWrite() > 0:
        if not sock.waitForBytesWritten(max(1, deadline.remainingTime())):
            raise InstanceError(f"The running llamachat ({name}) does not take the request.")
    answer = b""
    while len(answer) < 2 and not deadline.hasExpired():
        # Short waits: PySide holds the GIL while it blocks, and an instance running in
        # this same interpreter (tests) needs it to answer.
        sock.waitForReadyRead(min(ANSWER_POLL_MS, max(1, deadline.remainingTime())))
        answer += bytes(sock.readAll().data())
        if sock.state() == QLocalSocket.LocalSocketState.UnconnectedState:
            break
    sock.abort()
    if not answer:
        raise InstanceError(f"The running llamachat ({name}) does not answer.")
    if answer[:2] != b"ok":
        raise InstanceError(f"The running llamachat ({name}) refused the request.")
    return True


def _answers(name: str) -> bool:
    probe = QLocalSocket()
    probe.connectToServer(name)
    alive = probe.waitForConnected(1000)
    probe.abort()
    return alive


class InstanceServer(QObject):
    """Listens for later invocations and emits what each one hands over."""

    received = Signal(object)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._on_new_connection)
        self._buffers: dict[QLocalSocket, bytearray] = {}

    def listen(self) -> bool:
        """Become the running instance; False when another instance already is.

        A socket file nobody accepts on is left by a crashed instance: it is
        removed and replaced.
        """
        if self._server.listen(self.name):
            return True
        if self._server.serverError() != QAbstractSocket.SocketError.AddressInUseError:
            raise InstanceError(f"Cannot listen on {self.name}: {self._server.errorString()}")
        if _answers(self.name):
            return False
        log.info("removing the stale instance socket %s", self.name)
        QLocalServer.removeServer(self.name)
        if self._server.listen(self.name):
            return True
        raise InstanceError(f"Cannot listen on {self.name}: {self._server.errorString()}")

    def is_listening(self) -> bool:
        """Whether this process is the running instance."""
        return self._server.isListening()

    def close(self) -> None:
        """Stop listening and remove the socket file."""
        self._server.close()

    @Slot()
    def _on_new_connection(self) -> None:
        while self._server.hasPendingConnections():
            sock = self._server.nextPendingConnection()
            self._buffers[sock] = bytearray()
            sock.readyRead.connect(lambda s=sock: self._on_ready_read(s))
            sock.disconnected.connect(lambda s=sock: self._forget(s))

    def _forget(self, sock: QLocalSocket) -> None:
        self._buffers.pop(sock, None)
        sock.deleteLater()

    def _on_ready_read(self, sock: QLocalSocket) -> None:
        buffer = self._buffers.get(sock)
        if buffer is None:
            return
        buffer += bytes(sock.readAll().data())
        if len(buffer) < _HEADER.size:
            return
        (size,) = _HEADER.unpack_from(buffer)
        if size > MAX_MESSAGE_BYTES:
            self._reply(sock, b"bad")
            return
        if len(buffer) < _HEADER.size + size:
            return
        raw = bytes(buffer[_HEADER.size : _HEADER.size + size])
        del self._buffers[sock]
        try:
            message = json.loads(raw.decode("utf-8"))
        except ValueError as exc:
            message = str(exc)
        if not isinstance(message, dict) or not isinstance(message.get("argv"), list):
            log.warning("ignored a malformed hand-over: %.200r", message)
            self._reply(sock, b"bad")
            return
        self._reply(sock, b"ok")
        self.received.emit(message)

    def _reply(self, sock: QLocalSocket, answer: bytes) -> None:
        self._buffers.pop(sock, None)
        sock.write(answer)
        sock.flush()
        sock.disconnectFromServer()


class RunningInstance(QObject):
    """The running llamachat: its chat window, quick window and tray icon.

    Closing the chat window keeps the instance in the tray when there is one;
    without a tray the instance ends (`finished`) once none of its windows shows.
    The configuration and how the router stands belong to the `App`: every window,
    the ones built later included, is built from it and follows it.
    """

    finished = Signal()

    def __init__(self, app: App, *, tray: bool = True) -> None:
        super().__init__()
        self.app = app
        self._chat: ChatWindow | None = None
        self._quick: QuickWindow | None = None
        self._ended = False
        self._shut = False
        self.tray = Tray(self) if tray else None
        if self.tray is not None:
            self.tray.quick_requested.connect(lambda: self.ask(""))
            self.tray.open_requested.connect(self.show_chat)
            self.tray.quit_requested.connect(self.quit)
        # The desktop-wide key for quick ask, with the tray (tests without one skip D-Bus).
        self.shortcut = QuickAskShortcut(parent=self) if tray else None
        if self.shortcut is not None:
            self.shortcut.activated.connect(lambda: self.ask(""))
            self.shortcut.changed.connect(app.set_shortcut_note)
            app.config_changed.connect(self._apply_shortcut)
            self._apply_shortcut(app.config)

    @property
    def history(self) -> History:
        """The chat history: the App's."""
        return self.app.history

    def has_tray(self) -> bool:
        """Whether a tray icon keeps the instance reachable with no window open."""
        return self.tray is not None and self.tray.available()

    def chat_window(self) -> ChatWindow | None:
        """The chat window, if one is open."""
        return self._chat

    def quick_window(self) -> QuickWindow:
        """The quick window (built on first use, then kept)."""
        if self._quick is None:
            self._quick = QuickWindow(self.app)
            self._quick.continue_requested.connect(self._on_continue)
            self._quick.installEventFilter(self)
        return self._quick

    def show_chat(self) -> ChatWindow:
        """Show and raise the chat window, building a new one if it was closed."""
        if self._chat is None:
            self._chat = ChatWindow(self.app)
            self._chat.installEventFilter(self)
            self._chat.quit_requested.connect(self.quit)
        if self._chat.isMinimized():
            self._chat.showNormal()
        self._chat.show()
        self._chat.raise_()
        self._chat.activateWindow()
        return self._chat

    def ask(
        self, text: str, *, send: bool = False, model: str = "", voice: bool = False
    ) -> QuickWindow:
        """Show the quick window near the pointer with `text` in it, sent at once if `send`.

        A `model` is used by the quick window from then on; `voice` starts it in voice mode.
        """
        quick = self.quick_window()
        if model:
            quick.set_model(model)
        quick.present()
        if text:
            quick.composer.set_text(text)
            if send:
                quick.send()
        if voice:
            quick.voice_mode.start()
        return quick

    def quit(self) -> None:
        """Close every window (saving streaming replies) and end the instance.

        A reply History could not save is tried once more; if it still cannot be, the
        user is asked first (Save as…, Quit anyway, Cancel: nothing happens then).
        """
        windows = [window for window in (self._chat, self._quick) if window is not None]
        parent = self._chat if self._chat is not None and self._chat.isVisible() else None
        if not confirm_quit(parent, [window.chat for window in windows], self.app):
            return
        self.shutdown()
        self._end()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self.finished.emit()

    def shutdown(self) -> None:
        """Close the windows, letting their worker threads end (once; later calls do nothing)."""
        if self._shut:
            return
        self._shut = True
        if self._quick is not None:
            self._quick.removeEventFilter(self)
            self._quick.close()
        if self._chat is not None:
            self._chat.removeEventFilter(self)
            self._chat.close()
        if self.tray is not None:
            self.tray.hide()
        if self.shortcut is not None:
            self.shortcut.release()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Notice a window closing or hiding: drop a closed chat window, maybe end."""
        if event.type() in (QEvent.Type.Close, QEvent.Type.Hide):
            QTimer.singleShot(0, self._after_window_left)
        return False

    @Slot()
    def _after_window_left(self) -> None:
        chat = self._chat
        if chat is not None and not chat.isVisible():
            # ChatWindow.closeEvent closed its clients: a closed window is not reused.
            chat.removeEventFilter(self)
            chat.deleteLater()
            self._chat = None
        quick_shown = self._quick is not None and self._quick.isVisible()
        if self._chat is None and not quick_shown and not self.has_tray():
            self._end()

    @Slot(object)
    def _apply_shortcut(self, cfg: Config) -> None:
        if self.shortcut is not None and not self._shut:
            self.shortcut.apply(cfg.quick_ask_shortcut)

    @Slot(object, str)
    def _on_continue(self, session_id: object, draft: str) -> None:
        chat = self.show_chat()
        if isinstance(session_id, int):
            chat.open_session(session_id)
        if draft.strip():
            chat.composer.set_text(draft)
            chat.send()
