"""MCP in the GUI: the host that owns the hub and asks consent, and the MCP panel.

`McpHost(app)` (one per App, `app.mcp`) owns the `mcp_tools.Hub` (made when the first
server is configured), follows Settings (`config_changed`) and re-emits the hub's
state changes on the GUI thread (`changed`). `tool_source(chat)` is what a reply's
worker calls, in its own thread, for the MCP tools of one turn.

Consent: the first call of a tool in a chat asks, in a message box on the GUI
thread: Allow once (this chat), Always allow this tool (saved in
`mcp_allowed_tools`), Deny (the model reads that it was denied). The worker thread
waits on a `threading.Event` the box's answer sets; the GUI never waits, and a
stopped reply withdraws its question (`cancel`).

`McpPanel(host, context_size)` (a dialog, accessible name "MCP servers") lists each
server with its state (failed: the reason and the last lines of its stderr), its
tools with a toggle each (`mcp_disabled_tools`) and their schemas' token cost, and
the total, which warns above TOOL_BUDGET of the model's context. "Import MCP
servers…" adds the servers of an mcp.json to config.toml (`import_mcp_servers`).

Errors: none raised. A config that cannot be saved is said in the panel.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from .. import config, mcp_tools
from ..tools import Tool
from . import plain
from .meter import estimate_tokens

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger(__name__)

# The enabled tools' schemas may take this share of the model's context before the
# panel warns: each schema is sent with every request.
TOOL_BUDGET = 0.10
# How much of a call's arguments the consent box shows.
ARGUMENTS_SHOWN = 2000


def schema_tokens(info: mcp_tools.ToolInfo) -> int:
    """Tokens one tool's schema costs in every request (the one place it is counted)."""
    return estimate_tokens(mcp_tools.schema_text(info)) if info.schema else 0


@dataclass
class _Question:
    """One consent question, from a worker thread to the GUI thread and back."""

    chat: object
    name: str
    arguments: str
    answer: str = mcp_tools.DENY
    done: threading.Event = field(default_factory=threading.Event)


class McpHost(QObject):
    """The App's MCP hub and consent; lives on the GUI thread."""

    changed = Signal()  # a server's state or tools changed
    asked = Signal(str)  # a consent box opened for this tool
    _posted = Signal()
    _asked = Signal(object)
    _withdrawn = Signal(object)

    def __init__(self, app: App) -> None:
        super().__init__(app)
        self._app = app
        self._hub: mcp_tools.Hub | None = None
        self._lock = threading.Lock()
        # The tools allowed once, per chat (a session id): they do not ask again there.
        self._allowed: dict[object, set[str]] = {}
        self.consent_box: QMessageBox | None = None
        self._open: dict[int, tuple[_Question, QMessageBox]] = {}
        self._posted.connect(self.changed, Qt.ConnectionType.QueuedConnection)
        self._asked.connect(self._on_asked, Qt.ConnectionType.QueuedConnection)
        self._withdrawn.connect(self._on_withdrawn, Qt.ConnectionType.QueuedConnection)
        app.config_changed.connect(self._on_config_changed)
        if app.config.mcp_servers:
            self.hub().start()

    def hub(self) -> mcp_tools.Hub:
        """The hub, made on first use."""
        if self._hub is None:
            self._hub = mcp_tools.Hub(self._app.config.mcp_servers, on_change=self._posted.emit)
        return self._hub

    def states(self) -> list[mcp_tools.ServerState]:
        """Every configured server as it stands."""
        return self._hub.states() if self._hub is not None else []

    def tool_source(
        self, chat: object
    ) -> Callable[[threading.Event], tuple[Sequence[Tool], int]] | None:
        """What a reply's worker calls for this turn's MCP tools, or None with no server."""
        cfg = self._app.config
        if not any(server.enabled for server in cfg.mcp_servers):
            return None
        hub = self.hub()

        def source(cancel: threading.Event) -> tuple[Sequence[Tool], int]:
            def consent(name: str, arguments: str) -> str:
                return self.ask(chat, name, arguments, cancel)

            tools = hub.turn_tools(consent=consent, disabled=cfg.mcp_disabled_tools, cancel=cancel)
            return tools, cfg.max_searches

        return source

    def ask(self, chat: object, name: str, arguments: str, cancel: threading.Event) -> str:
        """Consent for one call; blocks the calling (worker) thread, never the GUI's."""
        if name in self._app.config.mcp_allowed_tools:
            return mcp_tools.ALLOW_ALWAYS
        with self._lock:
            if name in self._allowed.get(chat, set()):
                return mcp_tools.ALLOW_ONCE
        question = _Question(chat, name, arguments)
        self._asked.emit(question)
        while not question.done.wait(0.05):
            if cancel.is_set():
                self._withdrawn.emit(question)
                return mcp_tools.DENY
        if question.answer == mcp_tools.ALLOW_ONCE:
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
        answers = {id(once): mcp_tools.ALLOW_ONCE, id(always): mcp_tools.ALLOW_ALWAYS}

        def on_clicked(button: object) -> None:
            self._open.pop(id(question), None)
            question.answer = answers.get(id(button), mcp_tools.DENY)
            if question.answer == mcp_tools.ALLOW_ALWAYS:
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
            self.hub().configure(cfg.mcp_servers)


def import_mcp_servers(app: App, path: Path) -> str:
    """Add the servers of the mcp.json at `path` to config.toml; a sentence saying what happened.

    Servers whose names config.toml has already are skipped. Secret values are not
    copied: the sentence names the variables to set instead.
    """
    try:
        tables, notes = config.mcp_json_servers(path, for_import=True)
    except config.ConfigError as exc:
        return f"Not imported: {exc}"
    known = {server.name for server in app.file_config.mcp_servers}
    new = [table for table in tables if table["name"] not in known]
    skipped = [table["name"] for table in tables if table["name"] in known]
    if not new:
        return "Nothing imported: " + (
            f"config.toml has {', '.join(skipped)} already."
            if skipped
            else "the file has no servers."
        )
    target = app.file_config.path or config.default_path()
    try:
        config.append_tables(target, "mcp_servers", new)
        app.save_settings({})
    except config.ConfigError as exc:
        return f"Not imported: {exc}"
    said = f"Imported {', '.join(t['name'] for t in new)} into {target}."
    if skipped:
        said += f" Skipped (already there): {', '.join(skipped)}."
    if notes:
        said += " " + "; ".join(notes) + "."
    return said


def choose_and_import(app: App, parent: QWidget) -> str:
    """Ask for an mcp.json and import it; what happened ('' when the user cancelled)."""
    path, _filter = QFileDialog.getOpenFileName(
        parent, "Import MCP servers", str(Path.home()), "MCP servers (*.json);;All files (*)"
    )
    return import_mcp_servers(app, Path(path)) if path else ""


class McpPanel(QDialog):
    """Each MCP server's state and tools, the tools' toggles and their token budget."""

    COLUMNS = ("Server / tool", "State / tokens", "Details")

    def __init__(
        self,
        app: App,
        *,
        context_size: Callable[[], int | None] = lambda: None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._host: McpHost = app.mcp
        self._context_size = context_size
        self.setWindowTitle("MCP servers")
        self.setAccessibleName("MCP servers")
        self.resize(760, 460)
        layout = QVBoxLayout(self)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setAccessibleName("MCP servers and tools")
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemChanged.connect(self._on_item_changed)
        layout.addWidget(self.tree, 1)
        self.total = plain.Label("", self)
        self.total.setAccessibleName("Tool budget")
        self.total.setWordWrap(True)
        layout.addWidget(self.total)
        self.message = plain.Label("", self)
        self.message.setAccessibleName("MCP message")
        self.message.setWordWrap(True)
        self.message.hide()
        layout.addWidget(self.message)
        row = QHBoxLayout()
        self.import_button = QPushButton("Import MCP servers…", self)
        self.import_button.clicked.connect(self._on_import)
        self.restart_button = QPushButton("Start / restart", self)
        self.restart_button.setToolTip("Start the selected server again now")
        self.restart_button.clicked.connect(self._on_restart)
        row.addWidget(self.import_button)
        row.addWidget(self.restart_button)
        row.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        row.addWidget(buttons)
        layout.addLayout(row)
        self._host.changed.connect(self.refresh)
        app.config_changed.connect(self.refresh)
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Show the servers as they stand now."""
        disabled = set(self._app.config.mcp_disabled_tools)
        self.tree.blockSignals(True)
        self.tree.clear()
        total = 0
        states = self._host.states()
        for state in states:
            item = QTreeWidgetItem([state.name, state.status, state.error])
            item.setData(0, Qt.ItemDataRole.UserRole, ("server", state.name))
            self.tree.addTopLevelItem(item)
            for info in state.tools:
                cost = schema_tokens(info)
                child = QTreeWidgetItem(
                    [
                        info.name,
                        f"{cost:,} tokens" if not info.problem else "not offered",
                        info.problem or info.description.splitlines()[0]
                        if (info.problem or info.description)
                        else "",
                    ]
                )
                child.setData(0, Qt.ItemDataRole.UserRole, ("tool", info.name))
                if not info.problem:
                    on = info.name not in disabled
                    child.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                    total += cost if on else 0
                item.addChild(child)
            for line in state.stderr if state.status == mcp_tools.FAILED else ():
                item.addChild(QTreeWidgetItem(["", "stderr", line]))
            item.setExpanded(True)
        self.tree.blockSignals(False)
        if not states:
            self.total.setText(
                "No MCP servers are configured: add [[mcp_servers]] tables to config.toml "
                "or import an mcp.json."
            )
            return
        n_ctx = self._context_size()
        text = f"Enabled tools cost {total:,} tokens in every request"
        if n_ctx:
            share = total / n_ctx
            text += f", {share:.0%} of the model's {n_ctx:,}-token context"
            if share > TOOL_BUDGET:
                text += (
                    f". That is more than {TOOL_BUDGET:.0%}: switch off tools the model "
                    "does not need, or it has less room for the chat"
                )
        self.total.setText(text + ".")
        self.total.setStyleSheet("color: #d1242f;" if n_ctx and total / n_ctx > TOOL_BUDGET else "")

    def over_budget(self) -> bool:
        """Whether the enabled tools take more than TOOL_BUDGET of the model's context."""
        return "more than" in self.total.text()

    @Slot(QTreeWidgetItem, int)
    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        kind, name = item.data(0, Qt.ItemDataRole.UserRole) or ("", "")
        if kind != "tool":
            return
        disabled = [n for n in self._app.file_config.mcp_disabled_tools if n != name]
        if item.checkState(0) != Qt.CheckState.Checked:
            disabled.append(name)
        try:
            self._app.save_settings({"mcp_disabled_tools": disabled})
        except config.ConfigError as exc:
            self._say(f"Not saved: {exc}")

    @Slot()
    def _on_restart(self) -> None:
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        if item is None:
            self._say("Select a server first.")
            return
        self._host.hub().restart(item.text(0))

    @Slot()
    def _on_import(self) -> None:
        said = choose_and_import(self._app, self)
        if said:
            self._say(said)

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
