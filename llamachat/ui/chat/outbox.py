"""What a conversation sends: each request, built with `turn`, and the reply streaming back.

`Outbox(conversation, ...)` builds the next request from the conversation's saved
messages and state (`next_turn`) and starts its reply (`start`, a `reply.ReplyStream`
on the conversation's worker threads). In chat mode the system message is cached,
byte-identical from turn to turn (what lets llama.cpp reuse its prompt cache), until
`forget_system` says what goes into it changed.

A reply History could not take when it ended (a full disk) is kept with its text and
saved again before the next request (`save_unsaved`): the model is never given a
conversation other than the one on screen. A reply a crash left "streaming" is marked
"stopped" when its session opens, or failed with a Retry when nothing of it had come
(`settled_messages`).

Signals, which the conversation passes on as its own: `started` (the reply), the
reply's `search_started`, `skill_loaded` and `stats`; when it ends, `over` first (it is
no longer the current reply), then `messages_reset` (a retry that gave no text: the
earlier reply is shown again) or `versions_changed` (Regenerate added one), then
`ended` (status, error); `notice` says what went wrong (or was saved after all).
Errors: none raised; a reply whose row cannot be saved is not sent, and a notice says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from llamachat import turn
from llamachat.history.store import HistoryError, MessageRow
from llamachat.ui.chat.reply import ReplyStream

if TYPE_CHECKING:
    from llamachat.ui.chat.session import Conversation

log = logging.getLogger(__name__)

# Why a reply that a crash cut off before anything arrived has no text.
CLOSED_EARLY = "llamachat closed before this reply began."


class Outbox(QObject):
    """Builds a conversation's requests and keeps its replies until History has them."""

    started = Signal(object)  # the ReplyStream: attach a view before returning
    search_started = Signal(str)
    skill_loaded = Signal(str)
    stats = Signal(object)
    over = Signal()  # the reply ended: nothing is shown of its end yet
    messages_reset = Signal(object)  # the rows to show instead of what is shown
    versions_changed = Signal(int, list)  # a message shown, the ids of all its versions
    ended = Signal(str, str)  # status, error
    notice = Signal(str, int)  # text, how long to show it in ms (0 keeps it)

    def __init__(
        self,
        conversation: Conversation,
        *,
        preset: Callable[[], str],
        prompt: Callable[[], tuple[str, str]],
        images: Callable[[str], bool],
    ) -> None:
        super().__init__(conversation)
        self._chat = conversation
        self._preset = preset
        self._prompt = prompt
        self._images = images
        self.reply: ReplyStream | None = None
        """The reply streaming now (None: none is)."""
        # Ended replies History could not take yet, kept with their text until it can.
        self._unsaved: list[ReplyStream] = []
        self._system_cache: tuple[turn.Part, ...] | None = None
        # The missing skills the cached system message was built without.
        self._cached_missing: list[str] = []
        self._cached_preset = ""

    # ------------------------------------------------------------------ requests

    def forget_system(self) -> None:
        """What goes into the system message changed: the next request builds it again."""
        self._system_cache = None

    def system_message(self) -> str:
        """The system message the next request starts with (chat mode's, cached)."""
        return turn.join_system(self._system_parts())

    def next_turn(self, model: str, *, before: int | None = None) -> turn.Turn:
        """The next request to `model`, from the saved messages.

        `before` leaves out that message and those after it (a retry's earlier reply).
        """
        chat = self._chat
        session_id = chat.session_id
        stored = chat.history.messages(session_id) if session_id is not None else []
        if before is not None:
            stored = [row for row in stored if row["id"] < before]
        if chat.mode == "oneshot":
            question = next((row for row in stored if row["role"] == "user"), None)
            return turn.oneshot_turn(
                chat.cfg,
                model=model,
                text=(question["content"] if question else "") or "",
                attachments=(question["attachments"] if question else []) or [],
                names=chat.loaded_skills(),
                store=chat.store,
                images=self._images(model),
                n_ctx=chat.context.context_size(),
            )
        return turn.build_turn(
            chat.cfg,
            model=model,
            system=self._system_parts(),
            messages=stored,
            images=self._images(model),
            store=chat.store,
            search_on=chat.search_on,
            preset=self._prompt()[0],
            chat_params=chat.params(),
            n_ctx=chat.context.context_size(),
        )

    def _system_parts(self) -> tuple[turn.Part, ...]:
        # Built once per preset, search toggle and set of loaded skills: the same bytes
        # turn after turn are what lets llama.cpp reuse its prompt cache. A skill that
        # left the disk or came back changes it too (the missing ones are left out).
        # The preset's text is compared too: the meter builds the request early (a new
        # chat, before its window has reset the preset), so a change must not go unseen.
        chat = self._chat
        missing = chat.missing_skills()
        preset = self._preset()
        if (
            self._system_cache is None
            or missing != self._cached_missing
            or preset != self._cached_preset
        ):
            self._cached_missing = missing
            self._cached_preset = preset
            self._system_cache = turn.system_parts(
                preset, search_on=chat.search_on, store=chat.store, names=chat.loaded_skills()
            )
        return self._system_cache

    # ------------------------------------------------------------------ replies

    def start(
        self,
        model: str,
        *,
        replaces: int | None = None,
        keep_replaced: bool = False,
        show: Callable[[], None] = lambda: None,
    ) -> bool:
        """Send the request to `model`, then `show()` what the window must show before the reply.

        The request goes out first and the window builds its views while it travels:
        the reply's events are queued to this thread, so none arrives before its view
        is attached.
        """
        chat = self._chat
        assert chat.session_id is not None
        request = self.next_turn(model, before=replaces)
        try:
            reply = ReplyStream(
                chat.history,
                chat.app.registry,
                session_id=chat.session_id,
                model=model,
                messages=request.messages(),
                search_cfg=request.search_cfg,
                skills_cfg=request.skills_cfg,
                params=dict(request.params),
                replaces=replaces,
                tool_source=chat.app.mcp.tool_source(chat.session_id),
                keep_replaced=keep_replaced,
                parent=chat,
            )
        except HistoryError as exc:
            show()
            self.notice.emit(f"Not sent: the reply could not be saved. {exc}", 0)
            return False
        reply.search_started.connect(self.search_started)
        reply.skill_loaded.connect(self.skill_loaded)
        reply.stats.connect(self.stats)
        reply.save_failed.connect(self._on_save_failed)
        reply.saved.connect(self._on_saved)
        reply.ended.connect(self._on_reply_ended)
        self.reply = reply
        reply.start(chat.threads)
        show()
        self.started.emit(reply)
        return True

    def stop(self) -> bool:
        """Stop the reply now, keeping what arrived ("stopped"); True when one was streaming."""
        if self.reply is None:
            return False
        self.reply.stop()
        return True

    def save_unsaved(self) -> bool:
        """Save the replies History could not take yet; True when none is left behind.

        No request is sent while one is left: the model would be given a conversation
        other than the one on screen.
        """
        for reply in list(self._unsaved):
            reply.save()
        if not self._unsaved:
            return True
        self.notice.emit(
            "Not sent: a reply is not saved yet (is the disk full?). "
            "It is saved as soon as there is room.",
            0,
        )
        return False

    def close(self) -> None:
        """Try once more to save the replies History could not take (the chat is closing)."""
        for reply in list(self._unsaved):
            if not reply.save():
                log.warning(
                    "a reply of session %s could not be saved and is lost", reply.session_id
                )

    def settled_messages(self, session_id: int) -> list[MessageRow]:
        """The session's messages, with replies a crash left "streaming" settled.

        One with text is "stopped" (its text kept, Regenerate offered); one that had
        nothing yet is an "error" with a Retry, not an empty "Stopped" reply.
        """
        history = self._chat.history
        messages = history.messages(session_id)
        for message in messages:
            if message["status"] == "streaming":
                # Only this conversation streams into the session it shows, and it is not
                # streaming now: the row is what a previous run saved before it died.
                began = message["content"] or message["reasoning"] or message["tool_calls"]
                status, error = ("stopped", message["error"]) if began else ("error", CLOSED_EARLY)
                history.update_message(message["id"], status=status, error=error)
                message["status"], message["error"] = status, error
        return messages

    @Slot(str)
    def _on_save_failed(self, error: str) -> None:
        self.notice.emit(f"The reply could not be saved: {error}", 0)

    @Slot()
    def _on_saved(self) -> None:
        reply = self.sender()
        if reply in self._unsaved:
            self._unsaved.remove(reply)
        self.notice.emit("The reply is saved now.", 8000)

    @Slot(str, str)
    def _on_reply_ended(self, status: str, error: str) -> None:
        reply = self.reply
        self.reply = None
        if reply is not None and not reply.is_saved():
            self._unsaved.append(reply)
        self.over.emit()
        history, session_id = self._chat.history, self._chat.session_id
        if reply is not None and reply.kept_earlier and session_id is not None:
            self.messages_reset.emit(history.messages(session_id))
            self.notice.emit(
                f"The new attempt gave no text ({error or status}); the earlier reply is kept.",
                0,
            )
        else:
            if status == "error":
                self.notice.emit(f"The reply failed: {error}", 8000)
            if reply is not None and reply.adds_version and reply.message_id is not None:
                self._announce_versions(reply.message_id)
        self.ended.emit(status, error)

    def _announce_versions(self, message_id: int) -> None:
        """Tell the views how many versions the reply that just ended has (Regenerate adds one)."""
        session_id = self._chat.session_id
        path = self._chat.history.messages(session_id) if session_id is not None else []
        last = path[-1] if path else None
        if last is not None and last["id"] == message_id and last["versions"]:
            self.versions_changed.emit(message_id, last["versions"])
