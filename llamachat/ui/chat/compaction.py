"""A conversation's side of a full context: its policy, compacting into a branch, trimming.

`Compaction(builder, app, context, ...)` belongs to one `conversation.Conversation`. When a message
does not fit (`overflowed`) it follows the chat's `context_overflow` policy (the chat's
own, kept with its parameters, else the config's): "ask" hands the `Overflow` to the
over-context panel (`too_big`), "refuse" only says so, "trim" leaves the oldest
messages out of the requests (`ChatState.trimmed`, which it asks the state's writer to set:
`ask_trimmed`; shown by `trimmed`), "compact" compacts, then the question is sent (`send`).

`compact(focus)` (Chat > Compact chat, `/compact focus`, the panel's "Compact and send")
has the model (`compact_model`, else the chat's) summarize all but the last
`compact_keep` exchanges on a worker thread, in pieces when they do not fit its context
(`llamachat.compact`), saying how far it is (`progress`); `stop` ends it and changes
nothing. The summary then starts a new branch of the chat, followed by copies of the
kept messages (`History.add_branch`): the original path stays the other version of the
first message, in search and exports as before. `edit_summary` saves a summary edited.

Threads: the summary is written on a worker thread (`tasks.run_in_background`), which
touches no widget and no History; the rest runs on the GUI thread.

Errors: none raised; a failure is a `notice`, and a question that waited goes back
(`returned`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from llamachat import compact, turn
from llamachat.compact import Split
from llamachat.context import MESSAGE_TOKENS, Overflow, Tokenizer
from llamachat.history.store import HistoryError, NewMessage
from llamachat.router import client as backend
from llamachat.router.models import Models
from llamachat.ui import tasks
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.context_watch import ContextWatch
from llamachat.ui.chat.state import ONESHOT, AppState

# What `overflowed` did with a message that does not fit (session.TOO_BIG is REFUSED).
SEND = "send"  # room was made (trimmed): send it now
COMPACTING = "compacting"  # held until the chat is compacted, then sent
REFUSED = "too_big"  # not sent: the panel (or a notice) says why
# How often the progress line follows the summary as it streams.
PROGRESS_MS = 250
# The context assumed for a compact_model whose size the server does not say.
FALLBACK_CTX = 4096


class Compaction(QObject):
    """Follows a conversation's overflow policy; compacts it into a new branch."""

    started = Signal()
    progress = Signal(str)  # how far the summary is, as a status line ('' once it ended)
    # While a summary is written: llama.cpp's prompt progress of the request now out
    # (None before its first report) and the summary's text so far.
    written = Signal(object, str)
    ended = Signal(str, str)  # "complete", "stopped" or "error"; the error
    messages_reset = Signal(object)  # the compacted path, to show instead
    send = Signal(str, object)  # the question that waited (text, attachments): send it now
    returned = Signal(object)  # the question that waited, not sent: put it back to edit
    too_big = Signal(object)  # an Overflow for the panel
    trimmed = Signal(int)  # how many of the oldest messages the requests leave out now
    notice = Signal(str, int)  # text, how long to show it in ms (0 keeps it)

    def __init__(
        self,
        builder: TurnBuilder,
        app: AppState,
        context: ContextWatch,
        *,
        is_streaming: Callable[[], bool],
        ask_trimmed: Callable[[int], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._is_streaming = is_streaming
        # How the count of messages left out changes: the state's writer sets `ChatState.trimmed`.
        self._ask_trimmed = ask_trimmed
        self._builder = builder
        self._state = builder.state
        self._app = app
        self._context = context
        self._cancel: threading.Event | None = None
        # The question that waits for the summary (None: none does), for the draft.
        self._question: dict | None = None
        # What the worker has done so far, read by the progress timer (under the lock).
        self._lock = threading.Lock()
        self._done = {"piece": 0, "pieces": 0, "chars": 0}
        # The request now out: its prompt progress and the text it has written.
        self._reading: dict | None = None
        self._text: list[str] = []
        self._count = 0
        self._timer = QTimer(self)
        self._timer.setInterval(PROGRESS_MS)
        self._timer.timeout.connect(self._show_progress)

    # ------------------------------------------------------------------ the policy

    def policy(self) -> str:
        """What a message that does not fit makes happen: the chat's choice, else the config's."""
        chosen = self._state.params.get(compact.CHAT_KEY)
        return chosen if chosen in compact.POLICIES else self._app.config.context_overflow

    def running(self) -> bool:
        """True while a summary is being written."""
        return self._cancel is not None

    def waiting(self) -> str:
        """The text of the question sent once the summary is written ('' for none): it is
        still the chat's draft, until its send has begun."""
        return self._question["content"] if self._cancel and self._question else ""

    def overflowed(
        self, overflow: Overflow, text: str, attachments: list[dict], *, edit_from: int | None
    ) -> str:
        """A message does not fit: follow the policy; SEND, COMPACTING or REFUSED."""
        policy = self.policy()
        if self._state.mode != ONESHOT and policy == compact.TRIM and self._trim(overflow):
            return SEND
        if self._state.mode != ONESHOT and policy == compact.COMPACT:
            question = {"content": text, "attachments": attachments}
            if not self.compactable(edit_from):
                policy = compact.ASK  # nothing (more) to compact: the panel says what helps
            elif self.compact(question=question, edit_from=edit_from):
                return COMPACTING
        if policy == compact.ASK:
            self.too_big.emit(overflow)
        elif self._state.mode == ONESHOT and policy != compact.REFUSE:
            self.notice.emit(
                f"{overflow.message()} A quick question has no earlier messages to "
                f"{policy}: shorten it, or ask it in a chat window.",
                0,
            )
        else:
            self.notice.emit(f"{overflow.message()} (context_overflow is “{policy}”.)", 0)
        return REFUSED

    def reset(self) -> None:
        """Another chat: its requests leave nothing out."""
        if self._state.trimmed:
            self._ask_trimmed(0)
            self.trimmed.emit(0)

    def follow_policy(self) -> None:
        """The policy may have changed: messages "trim" left out are sent again under another."""
        if self._state.trimmed and self.policy() != compact.TRIM:
            self.reset()
            self._context.base_changed()

    def _trim(self, overflow: Overflow) -> bool:
        state = self._state
        if state.session_id is None:
            return False
        rows = self._app.history.messages(state.session_id)[state.trimmed :]
        count = compact.trim_count(rows, overflow.excess, self._cost)
        if not count:
            return False
        self._ask_trimmed(state.trimmed + count)
        self._context.base_changed()
        self.trimmed.emit(state.trimmed)
        return True

    def _cost(self, row: Mapping[str, Any]) -> int:
        """What a stored message costs the request (its wire text, the template's share)."""
        if compact.is_summary(row):
            return self._context.quick_tokens(turn.summary_text(row.get("content") or ""))
        wire = turn.replay([row], images=False)
        return sum(self._context.quick_tokens(str(m["content"])) + MESSAGE_TOKENS for m in wire)

    # ------------------------------------------------------------------ compacting

    def compact(
        self,
        focus: str = "",
        *,
        question: dict | None = None,
        edit_from: int | None = None,
    ) -> bool:
        """Summarize the chat's earlier messages into a new branch, then send `question`
        (text and attachments) there; False when there is nothing to compact."""
        state = self._state
        if self.running():
            self.notice.emit("The chat is being compacted already.", 8000)
            return False
        if self._is_streaming():
            self.notice.emit("Wait for the reply to finish, or stop it, to compact the chat.", 8000)
            return False
        if state.mode == ONESHOT or state.session_id is None or not state.model:
            self.notice.emit("Nothing to compact: the chat has no earlier messages.", 8000)
            return False
        keep = self._app.config.compact_keep
        cut = self._split(edit_from)
        if not cut.earlier:
            self.notice.emit(
                f"Nothing to compact: the chat has no more than its last {keep} exchanges.",
                8000,
            )
            return False
        model = self._app.config.compact_model or state.model
        client, wire = self._builder.client_for(model)
        n_ctx = self._context.context_size() if model == state.model else None
        cancel = self._cancel = threading.Event()
        with self._lock:
            self._done = {"piece": 0, "pieces": 0, "chars": 0}
            self._reading, self._text = None, []
        self._count = cut.count()
        entries = compact.transcript(cut.earlier)

        def on_piece(n: int, total: int) -> None:
            with self._lock:
                self._done["piece"], self._done["pieces"] = n, total
                self._reading, self._text = None, []

        def on_text(text: str) -> None:
            with self._lock:
                self._done["chars"] += len(text)
                self._text.append(text)

        def on_progress(progress: dict) -> None:
            with self._lock:
                self._reading = progress

        def work() -> str:
            size = n_ctx or Models(client).context_limits(wire)[0] or FALLBACK_CTX
            tokenizer = Tokenizer(client, wire)
            notes = [compact.PIECE_NOTE.format(n=1, total=1)]
            budget = compact.Budget.for_context(
                size, tokenizer.quick(compact.instructions(focus, notes=notes))
            )
            ask = compact.ask_model(
                client,
                wire,
                router=wire == model,
                cancel=cancel,
                on_text=on_text,
                on_progress=on_progress,
            )
            # Counted by the server's tokenizer where it can (one short request a message),
            # so that pieces are as large as the context allows.
            return compact.summarize(
                entries,
                ask,
                budget=budget,
                cost=lambda text: tokenizer.count(text)[0],
                focus=focus,
                on_piece=on_piece,
            )

        session_id = state.session_id
        self._question = question
        tasks.run_in_background(
            work,
            lambda future: self._on_summary(future, session_id, cut, model, question),
            receiver=self,
        )
        self.started.emit()
        self._timer.start()
        self._show_progress()
        return True

    def compactable(self, edit_from: int | None = None) -> int:
        """How many earlier messages compacting would summarize (0: it cannot help)."""
        state = self._state
        if state.mode == ONESHOT or state.session_id is None or not state.model:
            return 0
        return len(self._split(edit_from).earlier)

    def _split(self, edit_from: int | None) -> Split:
        session_id = self._state.session_id
        rows = self._app.history.messages(session_id) if session_id is not None else []
        if edit_from is not None:
            # An edited message: the path before it, which the new version would follow.
            rows = [row for row in rows if row["id"] < edit_from]
        return compact.split(rows, self._app.config.compact_keep)

    def stop(self) -> bool:
        """Stop the summary being written (nothing changes); True when one was."""
        if self._cancel is None:
            return False
        self._cancel.set()
        return True

    @Slot()
    def _show_progress(self) -> None:
        with self._lock:
            piece, pieces, chars = self._done["piece"], self._done["pieces"], self._done["chars"]
            reading, text = self._reading, "".join(self._text)
        where = f", part {piece} of {pieces}" if pieces > 1 else ""
        written = f", {chars:,} characters written" if chars else ""
        self.progress.emit(
            f"Compacting: summarizing {self._count} earlier messages{where}{written}… "
            "(Stop ends it)"
        )
        self.written.emit(reading, text)

    def _on_summary(
        self,
        future: Future,
        session_id: int,
        cut: Split,
        model: str,
        question: dict | None,
    ) -> None:
        self._cancel = None
        self._question = None
        self._timer.stop()
        self.progress.emit("")
        try:
            summary = future.result()
        except compact.Stopped:
            return self._failed("stopped", "Compacting stopped: the chat is as it was.", question)
        except (compact.CompactError, backend.BackendError) as exc:
            reason = getattr(exc, "message", None) or str(exc)
            return self._failed("error", f"The chat could not be compacted: {reason}", question)
        history = self._app.history
        now = time.time()
        branch: list[NewMessage] = [
            _new_message("system", summary, model, usage={"summary_of": cut.count()}, at=now)
        ]
        branch.extend(_copy(row) for row in cut.kept)
        if too_long := self._too_long(branch):
            return self._failed("error", f"The chat could not be compacted: {too_long}", question)
        try:
            history.add_branch(session_id, branch)
        except HistoryError as exc:
            return self._failed("error", f"The compacted chat could not be saved: {exc}", question)
        if self._state.session_id != session_id:
            return self._failed("error", "", question)
        self._ask_trimmed(0)
        self.trimmed.emit(0)
        self.messages_reset.emit(history.messages(session_id))
        self._context.base_changed()
        self.notice.emit(
            f"{compact.summary_title(cut.count())} written; the original chat is the other "
            "version of the first message (‹ ›).",
            8000,
        )
        self.ended.emit("complete", "")
        if question is not None:
            self.send.emit(question["content"], question["attachments"])

    def _too_long(self, branch: list[NewMessage]) -> str:
        """Why the compacted branch would not fit the chat's context either ('' if it fits)."""
        size = self._context.context_size()
        if size is None:
            return ""
        # A compact_model with a larger context, or a server that ignores max_tokens,
        # can write a summary as long as the chat it stands for.
        room = size - self._context.reserve()
        used = sum(self._cost(message) for message in branch)
        if used <= room:
            return ""
        return (
            f"the summary and the kept messages take about {used:,} tokens, more than the "
            f"{room:,} the model's context leaves for them; the chat is as it was"
        )

    def _failed(self, status: str, text: str, question: dict | None) -> None:
        if text:
            self.notice.emit(text, 0 if status == "error" else 8000)
        self.ended.emit(status, text)
        if question is not None:
            self.returned.emit(question)

    # ------------------------------------------------------------------ editing

    def edit_summary(self, message_id: object, text: str) -> bool:
        """Save a summary the user edited; the next request sends it."""
        if not isinstance(message_id, int) or not text.strip():
            return False
        try:
            self._app.history.update_message(message_id, content=text)
        except HistoryError as exc:
            self.notice.emit(f"The summary could not be saved: {exc}", 0)
            return False
        self._context.base_changed()
        return True


def _new_message(
    role: str, content: str, model: str, *, usage: dict | None = None, at: float
) -> NewMessage:
    return {
        "role": role,
        "content": content,
        "reasoning": "",
        "tool_calls": [],
        "attachments": [],
        "model": model,
        "status": "complete",
        "error": "",
        "usage": usage or {},
        "timings": {},
        "created_at": at,
    }


def _copy(row: Mapping[str, Any]) -> NewMessage:
    """A kept message's stored fields, for its copy in the compacted branch."""
    return {
        "role": row["role"],
        "content": row["content"],
        "reasoning": row["reasoning"],
        "tool_calls": list(row["tool_calls"]),
        "attachments": list(row["attachments"]),
        "model": row["model"],
        "status": row["status"],
        "error": row["error"],
        "usage": dict(row["usage"]),
        "timings": dict(row["timings"]),
        "created_at": row["created_at"],
    }
