"""What a conversation's parts share: its own state, and what they need of the App.

`ChatState` is one conversation as it stands (mode, model, session, loaded skills, its
parameters, web search, the skills store, what is trimmed, temporary, edited, memory).
One object writes it: its `ChatWriter`, which its `conversation.Conversation` holds
(`tests/ui/chat/test_state.py` holds that no other module assigns a field). The
conversation changes it through the writer; the helpers it hands the state to
(`builder.TurnBuilder`, `outbox.Outbox`, `context_watch.ContextWatch`, `compaction`,
`skill_loader`, `versions`, `memory`, `sender`) read it and ask for a change through the
writer's methods they are handed (`Outbox`'s `session_made`, `SkillLoader`'s
`ask_loaded` and `ask_store`, `Compaction`'s `ask_trimmed`, `Versions`'s and `Sender`'s
`ask_editing`, `ChatMemory`'s `ask_on`) or a signal the conversation passes on to it
(`TemporaryChat.changed`), so none of them reaches back into the conversation.

`AppState` is the little of `app.App` they use (the App stays the one owner of the
configuration and the router and says when they change); `McpTools`, the little of
`mcp_host.McpHost`. Both are protocols, so nothing here imports the App's module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from llamachat.config import Config
from llamachat.history.store import History
from llamachat.router import providers
from llamachat.router.server import ManagedServer
from llamachat.skills import SkillStore
from llamachat.tools.base import Tool
from llamachat.ui.chat.worker import ToolSource
from llamachat.ui.library.host import LibraryHost
from llamachat.ui.models.in_use import ModelsInUse

# A conversation's modes: a chat with history, or one question and its answer.
CHAT = "chat"
ONESHOT = "oneshot"


@dataclass
class ChatState:
    """One conversation as it stands; written by its `ChatWriter` only (the others ask it)."""

    mode: str
    model: str = ""
    session_id: int | None = None
    loaded: list[str] = field(default_factory=list)
    """The skills in effect, in load order."""
    params: dict = field(default_factory=dict)
    """The request parameters this chat overrides (params.PARAMS names)."""
    search_on: bool = False
    store: SkillStore | None = None
    trimmed: int = 0
    """How many of the oldest messages the requests leave out (`context_overflow = "trim"`)."""
    project_id: int | None = None
    """The project a new chat is saved into (None: none)."""
    temporary: bool = False
    """A temporary chat: its session ids are a memory database's, which nothing else keys by."""
    editing: int | None = None
    """The message being edited: the next send makes a new version of it."""
    memory_on: bool = True
    """The chat's own memory switch (memory also needs `memory_enabled`, and never in a
    temporary chat); saved with the chat's parameters (`memory.ChatMemory.opened`)."""


class ChatWriter(QObject):
    """The one writer of a conversation's `ChatState`: each change the conversation makes
    or a helper asks for, and a signal where a window follows it."""

    editing_changed = Signal(object)  # the message being edited now (None: none)
    temporary_changed = Signal(bool)  # a temporary chat began (True) or ended

    def __init__(self, state: ChatState, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.state = state

    def set_model(self, model: str) -> bool:
        """Make `model` answer the next question; True when it is another one."""
        changed = model != self.state.model
        self.state.model = model
        return changed

    def set_search_on(self, on: bool) -> bool:
        """Offer web search or not; True when that changed."""
        changed = on != self.state.search_on
        self.state.search_on = on
        return changed

    def set_session(self, session_id: int | None) -> None:
        """Make `session_id` the open session (None: a chat not saved yet)."""
        self.state.session_id = session_id

    def set_project(self, project_id: int | None) -> None:
        """Save a new chat into project `project_id` (None: none)."""
        self.state.project_id = project_id

    def set_params(self, params: dict) -> None:
        """Make `params` the request parameters this chat overrides."""
        self.state.params = params

    def set_loaded(self, names: list[str]) -> None:
        """Make `names` the skills in effect, in load order."""
        self.state.loaded = names

    def set_store(self, store: SkillStore | None) -> None:
        """Make `store` the skills of the configured folders (None: skills off)."""
        self.state.store = store

    def set_trimmed(self, count: int) -> None:
        """Leave the `count` oldest messages out of the requests."""
        self.state.trimmed = count

    def set_memory_on(self, on: bool) -> None:
        """Turn the chat's own memory switch on or off."""
        self.state.memory_on = on

    def set_editing(self, message_id: int | None) -> None:
        """Make `message_id` the message being edited (None: none); `editing_changed` says so."""
        if message_id != self.state.editing:
            self.state.editing = message_id
            self.editing_changed.emit(message_id)

    def set_temporary(self, on: bool) -> None:
        """The chat is a temporary one (True) or not; `temporary_changed` says so."""
        self.state.temporary = on
        self.temporary_changed.emit(on)


class McpTools(Protocol):
    """The MCP tools a conversation's requests offer (`McpHost`)."""

    @property
    def changed(self) -> SignalInstance:
        """A server's state or tools changed."""

    def tool_source(self, chat: object) -> ToolSource | None:
        """What a reply's worker calls for its MCP tools, or None with no server."""

    def ready_tools(self, chat: object) -> tuple[Tool, ...]:
        """The MCP tools a request of `chat` offers now, as far as the servers are up."""


class RouterStatus(Protocol):
    """What a conversation reads of the router's state (`ui.app.RouterState`)."""

    @property
    def status(self) -> str:
        """ "configured", "pending" (being looked for or started), "ready" or "failed"."""


class AppState(Protocol):
    """What a conversation needs of the App: its state, and the signals that it changed."""

    @property
    def router(self) -> RouterStatus:
        """How the router stands now."""

    @property
    def config(self) -> Config:
        """The configuration in effect."""

    @property
    def history(self) -> History:
        """The chat history."""

    @property
    def registry(self) -> providers.Registry:
        """The clients of the router and the providers."""

    @property
    def mcp(self) -> McpTools:
        """The MCP servers' tools."""

    @property
    def libraries(self) -> LibraryHost:
        """The folders attached to chats as libraries."""

    @property
    def models_in_use(self) -> ModelsInUse:
        """The model each open conversation uses, across the windows."""

    @property
    def config_changed(self) -> SignalInstance:
        """Emitted with the Config now in effect."""

    @property
    def router_changed(self) -> SignalInstance:
        """Emitted with the router's state now."""

    def managed_server(self) -> ManagedServer | None:
        """The llama-server llamachat started (None when it uses a router already running)."""
