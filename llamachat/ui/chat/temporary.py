"""Temporary chats: a conversation whose questions and replies never reach the history file.

A temporary chat is saved exactly as any other (the outbox saves the question, the reply
stream saves the reply as it streams), only into a History of its own in memory
(SQLite ":memory:", the same History class), so every part that reads or writes "the
history" works unchanged. `ConversationApp` is the App as a conversation's helpers see
it: its `history` is the conversation's, the App's or that in-memory one. Keeping the
chat copies it, every version included, into the App's history through the JSON export
and import (`keep`); leaving it drops the memory database with everything in it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, SignalInstance

from llamachat.config import Config
from llamachat.history.store import History
from llamachat.router import providers
from llamachat.router.server import ManagedServer
from llamachat.router.slot_cache import SlotFiles
from llamachat.ui.chat.state import AppState, McpTools, RouterStatus
from llamachat.ui.library.host import LibraryHost
from llamachat.ui.models.in_use import ModelsInUse

MEMORY = ":memory:"


def scratch_history() -> History:
    """A History in memory for one temporary chat: gone when closed."""
    return History(MEMORY)


def keep(scratch: History, session_id: int, history: History) -> int:
    """Copy the chat `session_id` of `scratch` into `history` (every version, its
    parameters, its project and its draft); the id it has there. Raises HistoryError."""
    kept = history.import_json(scratch.export_json(session_id))
    history.set_draft(kept, scratch.draft(session_id))
    return kept


class TemporaryChat(QObject):
    """Whether the conversation is a temporary chat, and its history in memory while it is."""

    # A temporary chat began (True) or ended: the state's writer sets `ChatState.temporary` from it.
    changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.scratch: History | None = None

    def start(self) -> None:
        """From now on the chat is saved in memory only (`keep` copies it out)."""
        self.scratch = scratch_history()
        self.changed.emit(True)

    def discard(self) -> None:
        """End the temporary chat without keeping it."""
        # Dropped, not closed: a reply that was stopped may still save its end into it.
        if self.scratch is not None:
            self.scratch = None
            self.changed.emit(False)


class ConversationApp:
    """The App as a conversation's helpers see it (an `AppState`): the App's own state,
    but the conversation's history (`history()`, which a temporary chat changes)."""

    def __init__(self, app: AppState, history: Callable[[], History]) -> None:
        self._app = app
        self._history = history

    @property
    def config(self) -> Config:
        """The configuration in effect."""
        return self._app.config

    @property
    def history(self) -> History:
        """The conversation's history: the App's, or a temporary chat's in memory."""
        return self._history()

    @property
    def registry(self) -> providers.Registry:
        """The clients of the router and the providers."""
        return self._app.registry

    @property
    def router(self) -> RouterStatus:
        """How the router stands now."""
        return self._app.router

    @property
    def mcp(self) -> McpTools:
        """The MCP servers' tools."""
        return self._app.mcp

    @property
    def libraries(self) -> LibraryHost:
        """The folders attached to chats as libraries."""
        return self._app.libraries

    @property
    def models_in_use(self) -> ModelsInUse:
        """The model each open conversation uses, across the windows."""
        return self._app.models_in_use

    @property
    def config_changed(self) -> SignalInstance:
        """Emitted with the Config now in effect."""
        return self._app.config_changed

    @property
    def router_changed(self) -> SignalInstance:
        """Emitted with the router's state now."""
        return self._app.router_changed

    def managed_server(self) -> ManagedServer | None:
        """The llama-server llamachat started (None when it uses a router already running)."""
        return self._app.managed_server()

    def slot_files(self) -> SlotFiles | None:
        """Where llamachat's own server keeps what it read of this conversation's chat
        (`router.slot_cache`): none for a temporary chat, which nothing writes to disk (its
        ids are its own database's and would name a stored chat's file), nor for a router
        llamachat does not run."""
        server = self._app.managed_server()
        if server is None or self._history() is not self._app.history:
            return None
        return server.slot_files
