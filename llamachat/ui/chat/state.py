"""What a conversation's parts share: its own state, and what they need of the App.

`ChatState` is one conversation as it stands (mode, model, session, loaded skills, its
parameters, web search, the skills store, what is trimmed, temporary, edited): the
module that makes it, `conversation` (its `Conversation`), is the only one that writes
it (`tests/ui/chat/test_state.py` holds it so). The helpers it hands it to
(`builder.TurnBuilder`, `outbox.Outbox`, `context_watch.ContextWatch`, `compaction`,
`skill_loader`, `versions`) read it and ask for a change through the callables they are
handed (`Outbox`'s `session_made`, `SkillLoader`'s `ask_loaded` and `ask_store`,
`Compaction`'s `ask_trimmed`, `Versions`'s `ask_editing`) or a signal (`TemporaryChat.changed`),
so none of them reaches back into the conversation, and each change has one writer.

`AppState` is the little of `app.App` they use (the App stays the one owner of the
configuration and the router and says when they change); `McpTools`, the little of
`mcp_host.McpHost`. Both are protocols, so nothing here imports the App's module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from PySide6.QtCore import SignalInstance

from llamachat.config import Config
from llamachat.history.store import History
from llamachat.router import providers
from llamachat.skills import SkillStore
from llamachat.tools.base import Tool
from llamachat.ui.chat.worker import ToolSource
from llamachat.ui.library.host import LibraryHost

# A conversation's modes: a chat with history, or one question and its answer.
CHAT = "chat"
ONESHOT = "oneshot"


@dataclass
class ChatState:
    """One conversation as it stands; written by its Conversation only (the others ask)."""

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
    temporary chat)."""


class McpTools(Protocol):
    """The MCP tools a conversation's requests offer (`McpHost`)."""

    @property
    def changed(self) -> SignalInstance:
        """A server's state or tools changed."""

    def tool_source(self, chat: object) -> ToolSource | None:
        """What a reply's worker calls for its MCP tools, or None with no server."""

    def ready_tools(self, chat: object) -> tuple[Tool, ...]:
        """The MCP tools a request of `chat` offers now, as far as the servers are up."""


class AppState(Protocol):
    """What a conversation needs of the App: its state, and the signals that it changed."""

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
    def config_changed(self) -> SignalInstance:
        """Emitted with the Config now in effect."""

    @property
    def router_changed(self) -> SignalInstance:
        """Emitted with the router's state now."""
