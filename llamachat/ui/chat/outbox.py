"""What a conversation sends: its questions saved, each request sent, the reply streaming back.

`Outbox(builder, app, threads, ...)` saves a typed question (`save_question`: a new
session when needed, or a new version of an edited message), sends the request its
`builder.TurnBuilder` builds (`start`, a `reply.ReplyStream` on the conversation's worker
threads; `send` may hold it until a cache warm-up it shares a prefix with ended), and
keeps the replies. It reads the conversation's `ChatState` through the builder and
never writes it: for a question saved into a new session it calls `session_made(id)`,
and the state's writer makes that session the open one.

A reply History could not take when it ended (a full disk) is kept with its text and
saved again before the next request (`save_unsaved`): the model is never given a
conversation other than the one on screen. A reply a crash left "streaming" is marked
"stopped" when its session opens, or failed with a Retry when nothing of it had come
(`settled_messages`).

Signals, which the conversation passes on as its own: `session_changed` (a question
saved into a new session), `started` (the reply), the reply's `search_started`,
`skill_loaded`, `remembered` and `stats`; when it ends, `over` first (it is no longer the current
reply), then `messages_reset` (a retry that gave no text: the earlier reply is shown
again) or `versions_changed` (Regenerate added one), then `ended` (status, error);
`notice` says what went wrong (or was saved after all).
Errors: none raised; a reply whose row cannot be saved is not sent, and a notice says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from PySide6.QtCore import QObject, Signal, Slot

from llamachat import prompts
from llamachat.history import memories
from llamachat.history.store import HistoryError, MessageRow
from llamachat.turn import Turn
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.chat.state import ONESHOT, AppState, RouterStatus
from llamachat.ui.chat.worker import WorkerThreads

log = logging.getLogger(__name__)

# Why a reply that a crash cut off before anything arrived has no text.
CLOSED_EARLY = "llamachat closed before this reply began."
# `ui.app.PENDING`, spelled out: `ui/chat` loads no widgets, and `ui.app` does.
ROUTER_PENDING = "pending"


class Outbox(QObject):
    """Saves a conversation's questions, sends its requests, keeps its replies till saved."""

    session_changed = Signal(object)  # the new session's id
    started = Signal(object)  # the ReplyStream: attach a view before returning
    search_started = Signal(str)
    skill_loaded = Signal(str)
    remembered = Signal(object)  # the model's remember call (`ReplyStream.remembered`)
    stats = Signal(object)
    over = Signal()  # the reply ended: nothing is shown of its end yet
    messages_reset = Signal(object)  # the rows to show instead of what is shown
    versions_changed = Signal(int, list)  # a message shown, the ids of all its versions
    ended = Signal(str, str)  # status, error
    notice = Signal(str, int)  # text, how long to show it in ms (0 keeps it)

    def __init__(
        self,
        builder: TurnBuilder,
        app: AppState,
        threads: WorkerThreads,
        context_size: Callable[[], int | None],
        send: Callable[[Turn, Callable[[], None]], None] | None = None,
        parent: QObject | None = None,
        *,
        session_made: Callable[[int], None],
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._state = builder.state
        # A question was saved into a new session: the state's writer makes it the open one.
        self._session_made = session_made
        self._app = app
        self._threads = threads
        self._context_size = context_size
        # How a request goes out: `send(request, go)` calls go() at once, or once a cache
        # warm-up sharing its prefix ended (`warmup.Warmer.send_after`).
        self._send = send or (lambda _request, go: go())
        self.reply: ReplyStream | None = None
        """The reply streaming now (None: none is)."""
        # Ended replies History could not take yet, kept with their text until it can.
        self._unsaved: list[ReplyStream] = []
        # The reply a crash left streaming, and its place in the server's stream.
        self._reattach: tuple[MessageRow, dict] | None = None
        self._awaiting_router = False

    # ------------------------------------------------------------------ questions

    def save_question(self, text: str, attachments: list[dict], *, edit_from: int | None) -> dict:
        """Save the user's message (a new session when needed) and return its row.

        `edit_from` (chat mode): the message it is a new version of. Raises HistoryError.
        """
        state, history = self._state, self._app.history
        model = state.model
        if state.mode == ONESHOT or state.session_id is None:
            name, custom = (
                (prompts.DEFAULT_NAME, "") if state.mode == ONESHOT else self._builder.prompt()
            )
            session_id = history.create_session(
                state.mode,
                model,
                prompt_name=name,
                prompt_custom=custom,
                project_id=state.project_id,
            )
            # Made the open one at once: a save below that fails leaves it open, not lost.
            self._session_made(session_id)
            if state.mode != ONESHOT and state.loaded:
                history.set_skills(session_id, state.loaded)
            saved = memories.with_switch(state.params, state.memory_on)
            if state.mode != ONESHOT and saved:
                history.set_session_params(session_id, saved)
            self.session_changed.emit(session_id)
        else:
            session_id = state.session_id
        parent: int | None | Literal["active"] = "active"
        versions: list[int] = []
        if edit_from is not None and state.mode != ONESHOT:
            # The edit is a new version of the message: the old one stays a branch.
            path = history.messages(session_id)
            at = next((n for n, m in enumerate(path) if m["id"] == edit_from), None)
            if at is not None:
                parent = path[at]["parent_id"]
                versions = path[at]["versions"] or [path[at]["id"]]
                self.messages_reset.emit(path[:at])
        message_id = history.add_message(
            session_id, "user", text, attachments=attachments, model=model, parent=parent
        )
        return {
            "id": message_id,
            "session_id": session_id,
            "parent_id": None if parent == "active" else parent,
            "role": "user",
            "content": text,
            "reasoning": "",
            "attachments": attachments,
            "model": model,
            "status": "complete",
            "error": "",
            "versions": [*versions, message_id] if versions else [],
        }

    # ------------------------------------------------------------------ replies

    def start(
        self,
        model: str,
        *,
        replaces: int | None = None,
        keep_replaced: bool = False,
        continues: MessageRow | None = None,
        show: Callable[[], None] = lambda: None,
    ) -> bool:
        """Send the request to `model`, then `show()` what the window must show before the reply.

        `continues`: the last reply's row, which the reply goes on with (`continue_reply`).

        The request goes out first and the window builds its views while it travels:
        the reply's events are queued to this thread, so none arrives before its view
        is attached.
        """
        session_id = self._state.session_id
        assert session_id is not None
        request = self._builder.next_turn(model, before=replaces, n_ctx=self._context_size())
        try:
            reply = ReplyStream(
                self._app.history,
                self._app.registry,
                session_id=session_id,
                model=model,
                request=request,
                replaces=replaces,
                tool_source=self._app.mcp.tool_source(session_id),
                ask_tools=self.asks_tools(model, request),
                keep_replaced=keep_replaced,
                continues=continues,
                parent=self,
            )
        except HistoryError as exc:
            show()
            self.notice.emit(f"Not sent: the reply could not be saved. {exc}", 0)
            return False
        self._connect(reply)
        self._send(request, lambda: self._go(reply))
        show()
        self.started.emit(reply)
        return True

    def _connect(self, reply: ReplyStream) -> None:
        """Make `reply` the one streaming now, its signals this outbox's."""
        reply.search_started.connect(self.search_started)
        reply.skill_loaded.connect(self.skill_loaded)
        reply.remembered.connect(self.remembered)
        reply.stats.connect(self.stats)
        reply.save_failed.connect(self._on_save_failed)
        reply.saved.connect(self._on_saved)
        reply.ended.connect(self._on_reply_ended)
        self.reply = reply

    def asks_tools(self, model: str, request: Turn) -> bool:
        """Whether the reply must ask, before it sends tools, if the model's template
        takes them: llama.cpp's router has not said yet (the model is not loaded). A
        provider (which knows the model by another name) never says."""
        router = self._builder.client_for(model)[1] == model
        return bool(request.offer) and router and not self._builder.tools_known(model)

    def continue_reply(self, model: str, message_id: object) -> bool:
        """Go on with the reply `message_id`, the last of the chat, in that same reply: the
        request is the chat so far, ending with it (what llama.cpp continues)."""
        session_id = self._state.session_id
        path = self._app.history.messages(session_id) if session_id is not None else []
        last = path[-1] if path else None
        if last is None or last["id"] != message_id or last["role"] != "assistant":
            return False
        if self._state.mode == ONESHOT:
            return False  # a one-shot request is its question alone
        return self.start(model, continues=last, show=lambda: self.messages_reset.emit(path[:-1]))

    def _go(self, reply: ReplyStream) -> None:
        if self.reply is reply:  # not stopped while it waited for a warm-up
            reply.start(self._threads)

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

    def unsaved(self) -> list[ReplyStream]:
        """Try once more to save the replies History could not take; those still not saved."""
        for reply in list(self._unsaved):
            reply.save()
        return list(self._unsaved)

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
        nothing yet is an "error" with a Retry, not an empty "Stopped" reply. The last
        one, when the server may still hold its stream (its place was saved), is left
        out instead, for `reattach` to pick up where it stopped.
        """
        history = self._app.history
        messages = history.messages(session_id)
        self._reattach = None
        for message in messages:
            if message["status"] == "streaming":
                # Only this conversation streams into the session it shows, and it is not
                # streaming now: the row is what a previous run saved before it died.
                place = history.reply_streams.get(message["id"])
                if place is not None and message is messages[-1]:
                    self._reattach = (message, place)
                    return messages[:-1]
                began = message["content"] or message["reasoning"] or message["tool_calls"]
                status, error = ("stopped", message["error"]) if began else ("error", CLOSED_EARLY)
                history.update_message(message["id"], status=status, error=error)
                message["status"], message["error"] = status, error
        return messages

    def reattach(self) -> bool:
        """Pick up the reply `settled_messages` left out, reading on from where it stopped;
        True when one was. Its view is asked for with `started`, as a new reply's.

        While the router is still being looked for (at a start: a server a killed llamachat
        left is being adopted, and it may answer at another address than `router_url`), it
        waits for the router found: the reply reads on from the server that holds it.
        """
        if self._reattach is not None and self._app.router.status == ROUTER_PENDING:
            if not self._awaiting_router:
                self._awaiting_router = True
                self._app.router_changed.connect(self._on_router_changed)
            return False
        pending, self._reattach = self._reattach, None
        session_id = self._state.session_id
        if pending is None or self.reply is not None or session_id != pending[0]["session_id"]:
            return False
        row, place = pending
        reply = ReplyStream(
            self._app.history,
            self._app.registry,
            session_id=session_id,
            model=row["model"],
            request=self._builder.next_turn(row["model"], n_ctx=self._context_size()),
            continues=row,
            resumes=place,
            parent=self,
        )
        self._connect(reply)
        reply.start(self._threads)
        self.started.emit(reply)
        return True

    @Slot(object)
    def _on_router_changed(self, state: RouterStatus) -> None:
        if state.status != ROUTER_PENDING and self._awaiting_router:
            self._awaiting_router = False
            self._app.router_changed.disconnect(self._on_router_changed)
            self.reattach()

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
        history, session_id = self._app.history, self._state.session_id
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
        session_id = self._state.session_id
        path = self._app.history.messages(session_id) if session_id is not None else []
        last = path[-1] if path else None
        if last is not None and last["id"] == message_id and last["versions"]:
            self.versions_changed.emit(message_id, last["versions"])
