"""One conversation's memory: what the person and the model ask it to keep, and what its
requests carried.

`ChatMemory(state, builder, app, outbox, notice, parent, ask_on=...)` saves a memory into
the App's History (never a temporary chat's), on the GUI thread, which owns its SQLite
connection: the person's
(`/remember …`, "Remember this", the Memory panel) and the model's (the `remember`
tool's call, which reaches it from the worker thread as the reply's `remembered`
signal, through the outbox). A memory kept in a project's chat stays in that project. It
marks the memories a request the outbox sends carried as used (`sent`), which never
changes the system message's bytes (`turn.memory_part`), and keeps which ones each chat
was sent (`used_in`). A temporary chat, or one with memory off, reads
and writes none. The chat's switch is `ChatState.memory_on`, which it asks the state's
writer to set (`ask_on`); it is saved with the chat's parameters (`memories.SWITCH_KEY`):
`opened` reads it back, `stored_params` is what is saved.

Signals: `saved` (the MemoryRow just kept, for an Undo), `changed` (what the next request
carries may differ: the system message is built again), `used` (a request carried
memories), `notice` (passed on as the conversation's).
Errors: none raised; a save History refuses becomes a `notice`.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, SignalInstance, Slot

from llamachat.history import memories
from llamachat.history.store import History, HistoryError
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.outbox import Outbox
from llamachat.ui.chat.state import AppState, ChatState

COMMAND = "/remember"


class ChatMemory(QObject):
    """Keeps a conversation's memories and follows which ones its requests carried."""

    saved = Signal(object)  # the MemoryRow just kept
    changed = Signal()
    used = Signal()  # a request carried memories (`used_in`)
    notice = Signal(str, int)

    def __init__(
        self,
        state: ChatState,
        builder: TurnBuilder,
        app: AppState,
        outbox: Outbox,
        notice: SignalInstance,
        parent: QObject | None = None,
        *,
        ask_on: Callable[[bool], None],
    ) -> None:
        super().__init__(parent)
        self._state = state
        # How the chat's memory switch changes: the state's writer sets `ChatState.memory_on`.
        self._ask_on = ask_on
        self._builder = builder
        self._app = app
        # The memories each chat's requests carried since this conversation began, by chat.
        self._used: dict[int | None, list[int]] = {}
        outbox.remembered.connect(self.model_remembered)
        outbox.started.connect(self.sent)
        self.notice.connect(notice)

    def _history(self) -> History:
        # The App's, whatever the conversation's is (a temporary chat's is in memory).
        return self._app.history

    def used_in(self, session_id: int | None) -> list[int]:
        """The memories the requests of chat `session_id` carried (the panel's "sent in this
        chat"), since this conversation began."""
        return list(self._used.get(session_id, ()))

    def writable(self) -> bool:
        """Whether this chat may keep memories now (not a temporary chat, memory not off)."""
        return not self._state.temporary and self._state.memory_on

    def set_on(self, on: bool) -> None:
        """The chat's own memory switch, saved with the chat (a new one is saved with its
        first message, `stored_params`)."""
        state = self._state
        if on == state.memory_on:
            return
        self._ask_on(on)
        if state.session_id is not None and not state.temporary:
            try:
                self._history().set_session_params(state.session_id, self.stored_params())
            except HistoryError as exc:
                self.notice.emit(f"The chat's memory switch could not be saved: {exc}", 8000)
        self.changed.emit()

    def opened(self, saved: dict) -> dict:
        """A chat's saved parameters as it opens: its switch taken out of them (a new
        chat's is on) and set through the state's writer, its request parameters returned."""
        params, on = memories.switch_of(saved)
        self._ask_on(on)
        return params

    def stored_params(self) -> dict:
        """The chat's parameters as saved: its request parameters and its switch."""
        return memories.with_switch(self._state.params, self._state.memory_on)

    def remember(
        self,
        text: str,
        *,
        author: str = "user",
        session_id: int | None = None,
        message_id: int | None = None,
    ) -> int | None:
        """Keep `text` in the chat's scope (its project's, else everywhere's); its id, or
        None when this chat keeps none or History refused (a notice says why)."""
        if not self.writable():
            why = "a temporary chat" if self._state.temporary else "memory is off in this chat"
            self.notice.emit(f"Not remembered: {why}.", 8000)
            return None
        project_id = self._builder.project_id()
        if session_id is None:
            session_id = self._state.session_id
        try:
            memories = self._history().memories
            memory_id = memories.add(
                text,
                project_id=project_id,
                session_id=session_id,
                message_id=message_id,
                author=author,
            )
            row = memories.get(memory_id)
        except HistoryError as exc:
            self.notice.emit(f"Not remembered: {exc}", 0)
            return None
        self.changed.emit()
        if row is not None:
            self.saved.emit(row)
        if not self._builder.config().memory_enabled:
            self.notice.emit(
                "Remembered, but memory is off: no chat is sent it until you turn it on "
                "(Chat > Memory…).",
                8000,
            )
        return memory_id

    def forget(self, memory_id: int) -> bool:
        """Undo a memory; True when it was removed."""
        try:
            self._history().memories.delete(memory_id)
        except HistoryError as exc:
            self.notice.emit(f"The memory could not be removed: {exc}", 0)
            return False
        self.changed.emit()
        return True

    def command(self, fact: str) -> bool:
        """Keep what follows a typed `/remember`; True when it was kept."""
        if not fact.strip():
            self.notice.emit(
                "Type the fact after /remember, e.g. /remember I use metric units.", 8000
            )
            return False
        return self.remember(fact) is not None

    @Slot(object)
    def model_remembered(self, call: object) -> None:
        """The model's remember call (a reply's `remembered`): keep its fact."""
        if not isinstance(call, dict):
            return
        self.remember(
            str(call.get("text") or ""),
            author="model",
            session_id=call.get("session_id"),
            message_id=call.get("message_id"),
        )

    @Slot(object)
    def sent(self, _reply: object) -> None:
        """A request left: mark the memories it carried as used (`builder.memory`)."""
        kept = [memory["id"] for memory in self._builder.memory.kept]
        if not kept:
            return
        used = self._used.setdefault(self._state.session_id, [])
        used.extend(i for i in kept if i not in used)
        try:
            self._history().memories.mark_used(kept)
        except HistoryError as exc:
            # Only the order the budget keeps them in would lag: a passing line.
            self.notice.emit(f"The memories' last use could not be saved: {exc}", 8000)
        self.used.emit()
