"""The chat window's Web search toggle: offer the model web search, or not.

`SearchToggle` is one checkable action (in the Chat menu) and the tool button
showing it (in the top bar), shown only while a search URL is configured. Turning
it on or off tells the conversation (`controller.Conversation.set_search_on`, which
offers the web_search tool and the system message's date note) and says so through
`status`; settings saved in any window (`follow`) set it again when they change the
search URL or search_enabled. The window calls `offer` once the button is laid out.
A model whose chat template cannot take tools cannot search: for it the toggle is
greyed out and says why (the choice is kept for the next model that can).
Raises nothing.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QToolButton

from llamachat.config import Config
from llamachat.context import NO_TOOLS
from llamachat.ui.app import App
from llamachat.ui.chat.conversation import Conversation

log = logging.getLogger(__name__)

ON_TIP = "Let the model search the web (SearXNG at search_url)"
OFF_TIP = (
    f"Web search is off for this model: {NO_TOOLS}, so it cannot search. "
    "Pick a model that can call tools to search the web."
)


class SearchToggle(QObject):
    """The Web search action and button, kept in step with the settings and the conversation."""

    # A status-bar line: "Web search on." or "Web search off."
    status = Signal(str)

    def __init__(self, app: App, chat: Conversation, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._app = app
        self._chat = chat
        cfg = app.config
        # What the toggle was built from, to see what a config_changed changes.
        self._built_from = (cfg.search_url, cfg.search_enabled)
        self.action = QAction("Web search", self)
        self.action.setCheckable(True)
        self.action.setChecked(chat.search_on)
        self.action.setToolTip(ON_TIP)
        self.action.toggled.connect(self.set_on)
        self.button = QToolButton()
        self.button.setDefaultAction(self.action)
        self.button.setAccessibleName("Web search")
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        # Fusion's dark palette barely shades a checked button: on must be plain to see.
        # Not while disabled (a model that cannot search): greyed out as any button.
        self.button.setStyleSheet(
            "QToolButton:checked:enabled { background-color: palette(highlight);"
            " color: palette(highlighted-text); border: 1px solid palette(highlight);"
            " border-radius: 3px; padding: 2px 5px; }"
        )
        self._takes_tools = True
        chat.context.changed.connect(self._on_watch_changed)

    def is_on(self) -> bool:
        """Whether the model is offered the web_search tool."""
        return self._chat.search_on

    @Slot(bool)
    def set_on(self, enabled: bool) -> None:
        """Offer web search to the model or not (never without a search URL)."""
        enabled = enabled and bool(self._app.config.search_url)
        if self.action.isChecked() != enabled:
            self.action.setChecked(enabled)
        if enabled == self._chat.search_on:
            return
        self._chat.set_search_on(enabled)
        self.status.emit("Web search on." if enabled else "Web search off.")

    @Slot()
    def _on_watch_changed(self) -> None:
        # The meter changes often; only a model that can or cannot call tools matters.
        takes = self._chat.context.takes_tools()
        if takes == self._takes_tools:
            return
        self._takes_tools = takes
        self.action.setEnabled(takes)
        self.action.setToolTip(ON_TIP if takes else OFF_TIP)
        if not takes and self._chat.search_on:
            self.status.emit(f"Web search is off for {self._chat.model}: {NO_TOOLS}.")

    def follow(self, cfg: Config) -> None:
        """Follow saved settings: a new search URL or search_enabled sets the toggle again."""
        built_from = (cfg.search_url, cfg.search_enabled)
        if built_from != self._built_from:
            self._built_from = built_from
            self.offer()
            self.set_on(cfg.search_enabled)

    def offer(self) -> None:
        """Show the toggle only while a search URL is configured."""
        offered = bool(self._app.config.search_url)
        self.button.setVisible(offered)
        self.action.setVisible(offered)
