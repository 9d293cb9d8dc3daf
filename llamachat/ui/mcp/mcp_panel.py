"""MCP in the GUI: the host that owns the hub and asks consent, and the MCP panel.

`McpHost(app)` (one per App, `app.mcp`) owns the `mcp_tools.Hub` (made when the first
server is configured), follows Settings (`config_changed`) and re-emits the hub's
state changes on the GUI thread (`changed`). `tool_source(chat)` is what a reply's
worker calls, in its own thread, for the MCP tools of one turn; while it waits for
servers still starting, the chat window's status bar says so with Skip, and a server
that did not start is not waited for again in that chat until it is restarted.

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

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llamachat import config
from llamachat.context import NO_TOOLS
from llamachat.tools import mcp
from llamachat.ui import plain

if TYPE_CHECKING:
    from llamachat.ui.app import App
from llamachat.ui.mcp.mcp_host import TOOL_BUDGET, McpHost, schema_tokens

log = logging.getLogger(__name__)


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
        takes_tools: Callable[[], bool] = lambda: True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._host: McpHost = app.mcp
        self._context_size = context_size
        # False: the chat's model is sent no tools at all.
        self._takes_tools = takes_tools
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
        # Queued: a toggle saves the config from inside the tree's itemChanged, and
        # rebuilding the tree there would delete the item Qt is still emitting for.
        app.config_changed.connect(self.refresh, Qt.ConnectionType.QueuedConnection)
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
            # A tool's description is the server's text: its secrets are masked (the
            # state's error and stderr lines are already).
            mask = self._host.hub().mask
            item = QTreeWidgetItem([state.name, state.status, state.error])
            item.setData(0, Qt.ItemDataRole.UserRole, ("server", state.name))
            self.tree.addTopLevelItem(item)
            for info in state.tools:
                cost = schema_tokens(info)
                child = QTreeWidgetItem(
                    [
                        info.name,
                        f"{cost:,} tokens" if not info.problem else "not offered",
                        info.problem or mask(info.description.splitlines()[0])
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
            for line in state.stderr if state.status == mcp.FAILED else ():
                item.addChild(QTreeWidgetItem(["", "stderr", line]))
            item.setExpanded(True)
        self.tree.blockSignals(False)
        if not states:
            self.total.setText(
                "No MCP servers are configured: add [[mcp_servers]] tables to config.toml "
                "or import an mcp.json."
            )
            return
        if not self._takes_tools():
            self.total.setText(f"None of these tools is sent to the chat's model: {NO_TOOLS}.")
            self.total.setStyleSheet("")
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
        self._host.restart(item.text(0))

    @Slot()
    def _on_import(self) -> None:
        said = choose_and_import(self._app, self)
        if said:
            self._say(said)

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))
