"""Opening and switching a conversation's chat: a new one, a stored one, none; its parameters.

`SessionSwitch` is what `Conversation.new_session`, `open_session`, `leave_session`
and `set_params` do: it stops the reply, ends a temporary chat, asks the conversation's
`state.ChatWriter` to point the state at the chat now shown (its session, project,
skills and parameters) and says so (`changed`, the conversation's `session_changed`).
It is handed what it needs (the writer, the state to read, callables of the other
helpers), never the conversation itself. The window's side of switching (the chat
list, which chat a window shows) is `ui.chat_sessions`.

Errors: none raised; an opened session that is gone is None (`open`).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer

from llamachat.history.store import History, MessageRow, ProjectRow, SessionRow
from llamachat.ui.chat.state import ChatState, ChatWriter


class SessionSwitch:
    """Points a conversation at a new, a stored or no chat, and keeps its parameters."""

    def __init__(
        self,
        state: ChatState,
        write: ChatWriter,
        *,
        history: Callable[[], History],
        stop: Callable[[], object],
        discard_temporary: Callable[[], None],
        set_loaded: Callable[..., None],
        opened_params: Callable[[dict], dict],
        stored_params: Callable[[], dict],
        settled_messages: Callable[[int], list[MessageRow]],
        reattach: Callable[[], object],
        follow_policy: Callable[[], None],
        changed: Callable[[int | None], None],
    ) -> None:
        self._state = state
        self._write = write
        self._history = history
        self._stop = stop
        self._discard_temporary = discard_temporary
        # The skill loader's, the memory's and the outbox's parts a switch asks for.
        self._set_loaded = set_loaded
        self._opened_params = opened_params
        self._stored_params = stored_params
        self._settled_messages = settled_messages
        self._reattach = reattach
        self._follow_policy = follow_policy
        self._changed = changed

    def new(self, project: ProjectRow | None = None) -> None:
        """Start an empty conversation, saved on the first send: no messages, and no skills
        or parameters but those of its `project` (the window applies its prompt and model)."""
        self._stop()
        self._discard_temporary()
        self._write.set_session(None)
        self._write.set_project(project["id"] if project else None)
        self._write.set_editing(None)
        store = self._state.store
        skills = [n for n in project["skills"] if store and store.load(n)] if project else []
        self._set_loaded(skills, persist=False)
        self._write.set_params(self._opened_params(dict(project["params"]) if project else {}))
        self._changed(None)

    def open(self, session_id: int) -> tuple[SessionRow, list[MessageRow]] | None:
        """Open a stored session with its skills; its row and messages, None when it is gone."""
        session = self._history().get_session(session_id)
        if session is None:
            return None
        self._stop()
        self._discard_temporary()
        self._write.set_session(session_id)
        self._write.set_editing(None)
        # A skill gone from disk stays listed (as missing) until the user removes it.
        self._set_loaded(list(session.get("skills") or []), persist=False)
        # Asked again: the temporary chat just discarded may have been the one asked above.
        self._write.set_params(self._opened_params(self._history().session_params(session_id)))
        messages = self._settled_messages(session_id)
        self._changed(session_id)
        # Once the window shows the messages: a reply left streaming goes on below them.
        QTimer.singleShot(0, self._reattach)
        return session, messages

    def leave(self) -> None:
        """Let go of the session without touching it (one-shot: it went on to the chat)."""
        self._stop()
        self._write.set_session(None)
        self._set_loaded([], persist=False)
        self._write.set_params({})

    def set_params(self, values: dict) -> None:
        """Override request parameters for this chat from the next request on (saved with it)."""
        self._write.set_params({k: v for k, v in values.items() if v is not None})
        if self._state.session_id is not None:
            self._history().set_session_params(self._state.session_id, self._stored_params())
        self._follow_policy()
