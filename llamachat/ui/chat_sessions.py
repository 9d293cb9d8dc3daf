"""The chat a chat window shows: starting, opening and forking one, and what follows it.

`ChatSessions(chat, view=..., drafts=..., ...)` starts a new chat (in a project: with its
defaults), opens a stored one (its prompt, messages, model, context use and title follow),
forks one at a message, and reopens at the window's start the chat shown last (a stored
chat's `opened_at`; the new chat when it was last). The window hands it the parts it
drives and connects their signals; it holds no widget of its own.

Errors: none raised; History's errors are said through `problem` or logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, Slot

from llamachat.history.store import HistoryError, MessageRow
from llamachat.ui.chat.composer_drafts import Drafts
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.models.choice import ModelChoice
from llamachat.ui.views.messages import MessagesView
from llamachat.ui.views.meter import ContextMeter
from llamachat.ui.views.notice import STATUS_MS
from llamachat.ui.views.presets import PresetPicker
from llamachat.ui.views.sidebar import SessionSidebar

log = logging.getLogger(__name__)


class ChatSessions(QObject):
    """The chat a window shows: starting, opening and forking one, and what follows the open
    one (its prompt preset, its messages, its model, its context use and its title)."""

    status = Signal(str, int)  # text, how long to show it in ms (0 keeps it)
    problem = Signal(str)
    title_changed = Signal(str)  # the open chat's title ("New chat" before it has one)

    def __init__(
        self,
        chat: Conversation,
        *,
        view: MessagesView,
        drafts: Drafts,
        presets: PresetPicker,
        meter: ContextMeter,
        choice: ModelChoice,
        sidebar: SessionSidebar,
        stop: Callable[[], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._chat = chat
        self._view = view
        self._drafts = drafts
        self._presets = presets
        self._meter = meter
        self._choice = choice
        self._sidebar = sidebar
        # The window's Stop, which says so in the status bar.
        self._stop = stop
        self.may_leave: Callable[[], bool] = lambda: True
        """Asked before the open chat is left (a temporary chat's question)."""
        self._marked: int | None = None  # the chat last remembered as opened
        presets.preset_changed.connect(self._on_preset_changed)
        sidebar.session_activated.connect(self.open)
        sidebar.match_requested.connect(self.show_match)
        sidebar.new_chat_in_project.connect(self.new)
        sidebar.session_deleted.connect(self._on_session_deleted)
        sidebar.session_renamed.connect(self._on_session_renamed)
        # The new chat's title (or the chat's new place at the top) shows at once.
        chat.message_added.connect(self._on_message_added)
        chat.reply_ended.connect(lambda _status, _error: sidebar.refresh())

    def new(self, project_id: int | None = None, *, carry: bool = False) -> None:
        """Start an empty chat: no messages, no loaded skills; created on the first send.
        In a project, it starts with the project's prompt, model, skills and parameters.

        The composer shows the new chat's draft, or with `carry` keeps what it holds.
        """
        if not self.may_leave():
            return
        if self._chat.is_streaming():
            self._stop()
        self._drafts.leave(carry=carry)
        project = self._chat.history.projects.get(project_id) if project_id else None
        self._chat.new_session(project)
        self._drafts.show(None, carry=carry)
        # A custom prompt belongs to the chat it was written for; the preset carries over.
        self._presets.set_session_prompt(
            (project and project["prompt_name"]) or self._presets.current_name()
        )
        if project and project["model"]:
            self._choice.apply(project["model"])
        self._view.clear()
        self._meter.set_used(0)
        self._show_title()
        self._mark_opened()

    def open(self, session_id: int) -> bool:
        """Show a stored chat with its model and loaded skills; False when it does not exist
        (or the user chose to stay in a temporary chat)."""
        if not self.may_leave():
            return False
        if self._chat.is_streaming():
            self._stop()
        self._drafts.leave()
        opened = self._chat.open_session(session_id)
        if opened is None:
            self.status.emit(f"Chat {session_id} no longer exists.", STATUS_MS)
            return False
        self._drafts.show(session_id)
        self._mark_opened()
        session, messages = opened
        self._presets.set_session_prompt(
            session.get("prompt_name") or "", session.get("prompt_custom") or ""
        )
        if missing := self._chat.missing_skills():
            self.status.emit(
                f"Skills of this chat no longer found: {', '.join(missing)}. "
                "The model does not get them; click a chip to remove it.",
                0,
            )
        self._view.load_messages(messages)
        if session.get("model") and (note := self._choice.apply_opened(session["model"])):
            self.status.emit(note, STATUS_MS)
        self._show_usage(messages)
        self._show_title()
        return True

    def reopen(self) -> None:
        """Show the chat opened last (the window's start), else a new chat."""
        try:
            last = self._chat.history.last_opened()
        except HistoryError as exc:
            log.warning("the chat opened last could not be read: %s", exc)
            last = None
        if last is None or not self.open(last):
            self.new()

    def show_match(self, message_id: int, query: str) -> None:
        """Show the open chat's message `message_id` (a search hit), on the branch that holds
        it, scrolled to with `query`'s words marked."""
        session_id = self._chat.session_id
        if session_id is None:
            return
        on_path = any(m["id"] == message_id for m in self._chat.history.messages(session_id))
        # Another branch: its path is shown (and chosen, as ‹ › would).
        if on_path or self._chat.show_version(message_id):
            self._view.show_match(message_id, query)

    def fork(self, message_id: object) -> bool:
        """Open a new chat holding this chat up to `message_id` ("New chat from here")."""
        new_id = self._chat.fork(message_id)
        if new_id is None or not self.open(new_id):
            return False
        self._sidebar.refresh()
        self.status.emit("A new chat from here: the earlier chat is unchanged.", STATUS_MS)
        return True

    def _show_title(self) -> None:
        session_id = self._chat.session_id
        session = self._chat.history.get_session(session_id) if session_id else None
        self.title_changed.emit((session["title"] if session else "") or "New chat")

    def _show_usage(self, messages: list[MessageRow]) -> None:
        """Put the context use of a chat's last reply on the meter."""
        self._meter.set_used(0)
        for message in reversed(messages):
            if message["role"] == "assistant" and (message.get("usage") or message.get("timings")):
                self._meter.update_from_stats(
                    {"usage": message.get("usage") or {}, "timings": message.get("timings") or {}}
                )
                return

    def _mark_opened(self) -> None:
        """Remember the chat shown (maybe the new chat) as the one to open at the next start."""
        session_id = self._chat.session_id
        if self._chat.scratch is not None or session_id == self._marked:
            return
        self._marked = session_id
        try:
            self._chat.history.mark_opened(session_id)
        except HistoryError as exc:
            log.warning("which chat was opened last could not be saved: %s", exc)

    @Slot(object)
    def _on_message_added(self, _message: dict) -> None:
        self._mark_opened()  # a new chat's first message made its session
        self._sidebar.refresh()
        self._show_title()

    @Slot(str, str)
    def _on_preset_changed(self, name: str, custom: str) -> None:
        session_id = self._chat.session_id
        if session_id is not None:
            try:
                self._chat.history.set_prompt(session_id, name, custom)
            except HistoryError as exc:
                self.problem.emit(f"The chat's prompt could not be saved: {exc}")

    @Slot(int)
    def _on_session_deleted(self, session_id: int) -> None:
        if session_id == self._chat.session_id and self._chat.scratch is None:
            self.new()

    @Slot(int, str)
    def _on_session_renamed(self, session_id: int, _title: str) -> None:
        if session_id == self._chat.session_id:
            self._show_title()
