"""MCP in the running app: the host that owns the MCP hub, offers its tools, and asks consent."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Signal, SignalInstance, Slot
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QWidget,
)

from llamachat import config
from llamachat.config import Config
from llamachat.tokens import estimate_tokens
from llamachat.tools import mcp
from llamachat.tools.base import Tool
from llamachat.ui import plain

log = logging.getLogger(__name__)

# The enabled tools' schemas may take this share of the model's context before the
# panel warns: each schema is sent with every request.
TOOL_BUDGET = 0.10


# How much of a call's arguments the consent box shows.
ARGUMENTS_SHOWN = 2000


def schema_tokens(info: mcp.ToolInfo) -> int:
    """Tokens one tool's schema costs in every request (the one place it is counted)."""
    return estimate_tokens(mcp.schema_text(info)) if info.schema else 0


class Settings(Protocol):
    """What the host needs of the App: the configuration, its signal, and its writer."""

    @property
    def config(self) -> Config:
        """The configuration in effect."""

    @property
    def file_config(self) -> Config:
        """What config.toml says."""

    @property
    def config_changed(self) -> SignalInstance:
        """Emitted with the Config now in effect."""

    def save_settings(self, values: dict[str, object]) -> Config:
        """Write `values` to config.toml and apply them."""


@dataclass
class _Question:
    """One consent question, from a worker thread to the GUI thread and back."""

    chat: object
    name: str
    arguments: str
    answer: str = mcp.DENY
    done: threading.Event = field(default_factory=threading.Event)


class McpHost(QObject):
    """The App's MCP hub and consent; lives on the GUI thread."""

    changed = Signal()  # a server's state or tools changed
    asked = Signal(str)  # a consent box opened for this tool
    _posted = Signal()
    _asked = Signal(object)
    _withdrawn = Signal(object)
    _wait_started = Signal(object, object, object)  # chat, server names, its Skip event
    _wait_ended = Signal(object)  # the Skip event

    def __init__(self, app: Settings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._app = app
        self._hub: mcp.Hub | None = None
        self._lock = threading.Lock()
        # The tools allowed once, per chat (a session id): they do not ask again there.
        self._allowed: dict[object, set[str]] = {}
        self.consent_box: QMessageBox | None = None
        self._open: dict[int, tuple[_Question, QMessageBox]] = {}
        # Per chat, the servers that did not start while a send waited (they failed, hung
        # or were skipped): that chat does not wait for them again until they are restarted.
        self._no_wait: dict[object, set[str]] = {}
        # "Waiting for MCP server X" with Skip, in the chat window's status bar, per wait.
        self.wait_notice: QWidget | None = None
        self._notices: dict[int, QWidget] = {}
        self._wait_started.connect(self._on_wait_started, Qt.ConnectionType.QueuedConnection)
        self._wait_ended.connect(self._on_wait_ended, Qt.ConnectionType.QueuedConnection)
        self._posted.connect(self.changed, Qt.ConnectionType.QueuedConnection)
        self._asked.connect(self._on_asked, Qt.ConnectionType.QueuedConnection)
        self._withdrawn.connect(self._on_withdrawn, Qt.ConnectionType.QueuedConnection)
        app.config_changed.connect(self._on_config_changed)
        if app.config.mcp_servers:
            self.hub().start()

    def hub(self) -> mcp.Hub:
        """The hub, made on first use."""
        if self._hub is None:
            cfg = self._app.config
            self._hub = mcp.Hub(
                cfg.mcp_servers, on_change=self._posted.emit, secrets=mcp.config_secrets(cfg)
            )
        return self._hub

    def states(self) -> list[mcp.ServerState]:
        """Every configured server as it stands."""
        return self._hub.states() if self._hub is not None else []

    def ready_tools(self, chat: object) -> tuple[Tool, ...]:
        """The MCP tools a request of `chat` offers now, as far as the servers are up.

        A reply's send gets its own in their place, bound to its Stop (`tool_source`,
        `Turn.joined`); these are what the meter counts and a warm-up offers.
        """
        cfg = self._app.config
        servers = {server.name: server for server in cfg.mcp_servers if server.enabled}
        hub = self._hub
        if not servers or hub is None:
            return ()
        never = threading.Event()

        def consent(name: str, arguments: str) -> str:
            return self.ask(chat, name, arguments, never)

        return tuple(
            mcp.McpTool(hub, info, servers[state.name].timeout, consent)
            for state in hub.states()
            if state.name in servers and state.status == mcp.READY
            for info in state.tools
            if info.schema and not info.problem and info.name not in cfg.mcp_disabled_tools
        )

    def tool_source(
        self, chat: object
    ) -> Callable[[threading.Event], tuple[Sequence[Tool], int]] | None:
        """What a reply's worker calls for its send's MCP tools (those of every server, the
        ones still starting waited for a while), or None with no server."""
        cfg = self._app.config
        if not any(server.enabled for server in cfg.mcp_servers):
            return None
        hub = self.hub()

        def source(cancel: threading.Event) -> tuple[Sequence[Tool], int]:
            def consent(name: str, arguments: str) -> str:
                return self.ask(chat, name, arguments, cancel)

            skip = threading.Event()
            waited: list[str] = []

            def on_wait(names: list[str]) -> None:
                waited.extend(names)
                self._wait_started.emit(chat, names, skip)

            with self._lock:
                no_wait = set(self._no_wait.get(chat, ()))
            try:
                tools = hub.turn_tools(
                    consent=consent,
                    disabled=cfg.mcp_disabled_tools,
                    cancel=cancel,
                    skip=skip,
                    no_wait=no_wait,
                    on_wait=on_wait,
                )
            finally:
                if waited:
                    self._wait_ended.emit(skip)
            ready = {state.name for state in hub.states() if state.status == mcp.READY}
            with self._lock:
                self._no_wait.setdefault(chat, set()).update(set(waited) - ready)
            return tools, cfg.max_searches

        return source

    def restart(self, name: str) -> None:
        """Start server `name` again now (the panel's): every chat waits for it again."""
        with self._lock:
            for names in self._no_wait.values():
                names.discard(name)
        self.hub().restart(name)

    def ask(self, chat: object, name: str, arguments: str, cancel: threading.Event) -> str:
        """Consent for one call; blocks the calling (worker) thread, never the GUI's."""
        if name in self._app.config.mcp_allowed_tools:
            return mcp.ALLOW_ALWAYS
        with self._lock:
            if name in self._allowed.get(chat, set()):
                return mcp.ALLOW_ONCE
        question = _Question(chat, name, arguments)
        self._asked.emit(question)
        while not question.done.wait(0.05):
            if cancel.is_set():
                self._withdrawn.emit(question)
                return mcp.DENY
        if question.answer == mcp.ALLOW_ONCE:
            with self._lock:
                self._allowed.setdefault(chat, set()).add(name)
        return question.answer

    def close(self) -> None:
        """Deny what is still asked and stop every server."""
        for question, box in list(self._open.values()):
            question.done.set()
            box.close()
        self._open.clear()
        self.consent_box = None
        for notice in self._notices.values():
            notice.deleteLater()
        self._notices.clear()
        self.wait_notice = None
        if self._hub is not None:
            self._hub.on_change = None
            self._hub.close()
            self._hub = None

    @Slot(object)
    def _on_asked(self, question: _Question) -> None:
        try:
            shown = json.dumps(json.loads(question.arguments or "{}"), indent=2, ensure_ascii=False)
        except ValueError:
            shown = question.arguments
        if len(shown) > ARGUMENTS_SHOWN:
            shown = shown[:ARGUMENTS_SHOWN] + "…"
        box = QMessageBox(QApplication.activeWindow())
        box.setWindowTitle("Allow this tool?")
        box.setAccessibleName("Allow this tool?")
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setIcon(QMessageBox.Icon.Question)
        box.setText(f"The model wants to run the MCP tool {question.name}, with:\n\n{shown}")
        box.setInformativeText(
            "Allow once: it runs, and may run again in this chat without asking. "
            "Deny: the model is told it may not."
        )
        once = box.addButton("Allow once", QMessageBox.ButtonRole.AcceptRole)
        always = box.addButton("Always allow this tool", QMessageBox.ButtonRole.YesRole)
        deny = box.addButton("Deny", QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(deny)
        box.setEscapeButton(deny)
        answers = {id(once): mcp.ALLOW_ONCE, id(always): mcp.ALLOW_ALWAYS}

        def on_clicked(button: object) -> None:
            self._open.pop(id(question), None)
            question.answer = answers.get(id(button), mcp.DENY)
            if question.answer == mcp.ALLOW_ALWAYS:
                self._always(question.name)
            question.done.set()
            if self.consent_box is box:
                self.consent_box = None

        def on_destroyed() -> None:
            # Its window closed first: the call is denied, the worker thread goes on.
            if self._open.pop(id(question), None) is not None:
                question.done.set()
            if self.consent_box is box:
                self.consent_box = None

        box.buttonClicked.connect(on_clicked)
        box.destroyed.connect(on_destroyed)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setWindowModality(Qt.WindowModality.NonModal)
        self._open[id(question)] = (question, box)
        self.consent_box = box
        box.show()
        self.asked.emit(question.name)

    @Slot(object, object, object)
    def _on_wait_started(self, chat: object, names: list[str], skip: threading.Event) -> None:
        window = next(
            (
                widget
                for widget in QApplication.topLevelWidgets()
                if isinstance(widget, QMainWindow) and getattr(widget, "session_id", None) == chat
            ),
            QApplication.activeWindow(),
        )
        if not isinstance(window, QMainWindow):
            return
        notice = QWidget(window)
        notice.setAccessibleName("Waiting for MCP servers")
        row = QHBoxLayout(notice)
        row.setContentsMargins(0, 0, 0, 0)
        server = "server" if len(names) == 1 else "servers"
        row.addWidget(plain.Label(f"Waiting for MCP {server} {', '.join(names)}…", notice))
        button = QPushButton("Skip", notice)
        button.setToolTip("Send now without their tools")

        def on_skip() -> None:
            skip.set()
            self._on_wait_ended(skip)

        button.clicked.connect(on_skip)
        row.addWidget(button)
        window.statusBar().addPermanentWidget(notice)
        self._notices[id(skip)] = notice
        self.wait_notice = notice

    @Slot(object)
    def _on_wait_ended(self, skip: threading.Event) -> None:
        notice = self._notices.pop(id(skip), None)
        if notice is None:
            return
        notice.hide()
        notice.deleteLater()
        if self.wait_notice is notice:
            self.wait_notice = None

    @Slot(object)
    def _on_withdrawn(self, question: _Question) -> None:
        entry = self._open.pop(id(question), None)
        if entry is not None:
            entry[1].close()
            if self.consent_box is entry[1]:
                self.consent_box = None

    def _always(self, name: str) -> None:
        allowed = list(self._app.file_config.mcp_allowed_tools)
        if name in allowed:
            return
        try:
            self._app.save_settings({"mcp_allowed_tools": [*allowed, name]})
        except config.ConfigError as exc:
            log.warning("could not save that %s is always allowed: %s", name, exc)

    @Slot(object)
    def _on_config_changed(self, cfg: config.Config) -> None:
        if self._hub is not None or cfg.mcp_servers:
            self.hub().secrets = mcp.config_secrets(cfg)
            self.hub().configure(cfg.mcp_servers)
