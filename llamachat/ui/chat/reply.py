"""One streaming reply: its worker and its History row, saved as it streams.

`ReplyStream` adds the assistant row (status "streaming") and `start` runs a
`StreamWorker` into it; a window shows it by attaching a `MessageView` (`attach`),
and without one the reply is still streamed and saved. While text arrives the row
is rewritten at most once a second, so a crash loses at most a second of it; the
final save marks it "complete", "stopped" or "error", and `ended` says so.

A reply that cannot be saved (a full disk) keeps its whole text in memory, marks
its view "not saved", and tries again every second until a save goes through
(`saved`); `is_saved` tells whether History holds what the view shows.

A retry (`replaces`, the id of the reply it answers again) leaves the earlier reply
in History until the new one has answer text (reasoning alone is not enough): only
then is the new row added beside it, as another version of the reply
(`keep_replaced`, Regenerate of a complete reply or a stopped one with text) or in
its place (a failed reply, or one stopped before any text: it and what followed it
are deleted). An attempt that ends with no answer text keeps the
earlier reply as the one shown (`kept_earlier`).

A new reply answers the active path's last message, or the message `answers` names: a
comparison's replies all answer one question, as versions of one reply.

A reply the length limit cut (max tokens, or a full context) says so in its figures
(`finish_reason` "length" in its timings), and Continue goes on with it (`continues`,
its row): the request ends with the reply as its last assistant message, which
llama.cpp goes on from (a prefill), and what comes is added to the reply's own text
and row. llama.cpp streams the prefilled text back before the new text; that echo is
dropped. The reply's text, what it starts from and its place in the server's
stream are its `reply_text.ReplyText`; its figures, its `reply_figures.ReplyFigures`.

A reply from llama.cpp streams under a conversation id of its own: the server keeps
its stream, and the row's place in it (`History.reply_streams`: the bytes read and
the text they brought) is saved after each save of its text. A dropped connection is
picked up by the client; a reply a crash left "streaming" is picked up at the next
start (`resumes`: its row, cut to the text its saved place covers, reads on from
there, so nothing is lost and nothing comes twice). `leave` lets the server finish a
reply the window no longer reads (quitting with "Let it finish").

A new reply's row is added as soon as its request is on the wire (`start`), not
before: the disk is not on the way to the server. Errors: a row that cannot be added
then is tried again at each save; a save that fails is reported through
`save_failed` and retried, the text kept in memory meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from llamachat.history.store import History, HistoryError
from llamachat.router import client as backend
from llamachat.router import providers
from llamachat.turn import Turn
from llamachat.ui.chat.reply_figures import ReplyFigures
from llamachat.ui.chat.reply_text import ReplyText
from llamachat.ui.chat.worker import StreamWorker, ToolSource, WorkerThreads

if TYPE_CHECKING:
    # Only a window attaches a view: the reply itself loads no widget module.
    from llamachat.ui.views.message import MessageView

log = logging.getLogger(__name__)

SAVE_INTERVAL_MS = 1000
# How long `start` waits for the request to be on the wire before the window goes on
# building its views: the worker thread needs the GIL to send, and view building holds it.
SEND_WAIT_MS = 10


class ReplyStream(QObject):
    """An assistant reply streaming into its History row (and a view, when attached)."""

    search_started = Signal(str)
    skill_loaded = Signal(str)
    remembered = Signal(object)  # the model's remember call: text, session_id, message_id
    progress = Signal(object)  # llama.cpp's prompt_progress: total, cache, processed, time_ms
    timings = Signal(object)  # the figures so far (prompt_n, cache_n, predicted_n...)
    # object, not dict: PySide converts a dict signal through QVariantMap, which may drop it.
    stats = Signal(object)
    save_failed = Signal(str)
    saved = Signal()
    text_added = Signal(str)  # the answer's next piece, as shown (voice mode reads it aloud)
    ended = Signal(str, str)

    def __init__(
        self,
        history: History,
        registry: providers.Registry,
        *,
        session_id: int,
        model: str,
        request: Turn,
        replaces: int | None = None,
        tool_source: ToolSource | None = None,
        keep_replaced: bool = False,
        continues: Mapping | None = None,
        ask_tools: bool = False,
        resumes: Mapping | None = None,
        answers: int | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.history = history
        self.session_id = session_id
        self.model = model
        # Added once the request is out (start), or for a retry once it has text, so the
        # earlier reply stays till then.
        self.message_id: int | None = None
        self.view: MessageView | None = None
        self.kept_earlier = False
        self._replaces = replaces
        self._keep_replaced = keep_replaced
        # Regenerate: a reply that ends with text is one more version of the one it retried.
        self.adds_version = replaces is not None and keep_replaced
        # A retry's row answers what the replaced reply answered; a new reply's, the question.
        self._parent_id: int | None | Literal["active"] = (
            next(
                (m["parent_id"] for m in history.messages(session_id) if m["id"] == replaces), None
            )
            if replaces is not None
            else "active"
            if answers is None
            else answers
        )
        client, wire_model = registry.client_for(model)
        self._conversation, position = _stream_of(client is registry.router(), resumes)
        self._worker = StreamWorker(
            client,
            wire_model,
            request,
            tool_source=tool_source,
            conversation=self._conversation,
            resumes=position,
            ask_tools=ask_tools,
        )
        # Each event of the worker's to its `_on_<event>` slot.
        for event in _WORKER_EVENTS:
            getattr(self._worker, event).connect(getattr(self, f"_on_{event}"))
        # While the model thinks (a llama.cpp reply): "Stop thinking" may end it.
        self.thinking = self._worker.thinking
        # The reply's text (a Continue's or a resumed reply's goes on from what it had).
        self._text = ReplyText(continues, resumes)
        # Its usage and timings (a Continue's add to those of the parts before).
        self._figures = ReplyFigures(continues)
        # Continue: the reply goes on in its own row, after what it has.
        self.resumed = resumes is not None
        if continues is not None:
            self.message_id = continues["id"]
        self._reading = False
        self._loading = False  # the router loads the model, before the reading
        self._load_progress: float | None = None
        self._error = ""
        self._status = "streaming"
        self._dirty = False
        # The last save error while History lags behind the text; '' once it holds it all.
        self._unsaved = ""
        # Set when the reply ends: a stopped worker may still deliver events, which are dropped.
        self._ended = False
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self._on_save_due)

    def row(self) -> dict:
        """The reply as a History row, to build its view from (or to save elsewhere)."""
        return {
            "id": self.message_id,
            "session_id": self.session_id,
            "role": "assistant",
            "content": self._text.answer(),
            "reasoning": self._text.reasoning_text(),
            "tool_calls": list(self._text.tool_calls),
            "model": self.model,
            "status": self._status,
            "error": self._error if self._ended else "",
        }

    def attach(self, view: MessageView) -> None:
        """Show the reply in `view` from now on (a window's; the reply works without one)."""
        self.view = view
        # The view may go first (another chat opened) while an unsaved reply waits for room.
        view.destroyed.connect(self._on_view_destroyed)
        if self._loading:
            view.set_loading(self.model, self._load_progress)

    def start(self, threads: WorkerThreads, *, wait_ms: int = SEND_WAIT_MS) -> None:
        """Run the worker on a thread of `threads` and start the once-a-second save.

        Returns once the request is on the wire, or after `wait_ms` (a connection
        still being made, a server far away).
        """
        self.send(threads)
        self._worker.wait_sent(wait_ms / 1000)
        self.add_row()

    def send(self, threads: WorkerThreads) -> None:
        """Run the worker on a thread of `threads` (the request goes out) and start the
        once-a-second save; `add_row` then adds the reply's row (`start` does both)."""
        self._figures.sent()
        threads.start(self._worker)
        self._save_timer.start()

    def add_row(self) -> None:
        """Add a new reply's row, while the server reads the request rather than before."""
        if self._replaces is None and self.message_id is None:
            try:
                self._add_row()
            except HistoryError as exc:
                # Tried again with each save; the view says so once text is at stake.
                log.warning("reply row not added: %s", exc)

    def request(self) -> Turn:
        """The request as it went out (an MCP server that came up meanwhile adds its tools)."""
        return self._worker.request

    def request_sent(self, wait_s: float = 0.0) -> bool:
        """True once the reply's request has been written to the server (waiting `wait_s`)."""
        return self._worker.wait_sent(wait_s)

    def sent_at(self) -> float | None:
        """When the request was written to the server's socket (`time.monotonic()`; None: not yet)."""
        return self._worker.sent_at()

    def stop(self) -> None:
        """Stop the reply now, keeping what arrived (saved as "stopped")."""
        if self._ended:
            return
        # The worker may be blocked in a socket read; it is cancelled and left to unwind on
        # its own thread while the window moves on, so Stop never waits on the network.
        self._worker.cancel()
        self._end("stopped")

    def is_saved(self) -> bool:
        """True when History holds everything the reply shows (always, unless saves failed)."""
        return not self._unsaved and not (self._ended and self._dirty)

    def save(self) -> bool:
        """Try now to save what History lacks; True when it holds the whole reply."""
        if self._dirty or self._unsaved:
            self._write()
        return self.is_saved()

    def figures(self) -> tuple[dict, dict]:
        """The reply's usage and timings so far (timings with `ttft_ms`, once known)."""
        return self._figures.now()

    def model_loading(self, progress: float | None) -> None:
        """The router loads this reply's model (`progress` 0-1 when it says): shown until
        the prompt is read."""
        if self._figures.ttft_ms is None and not self._reading and not self._ended:
            self._loading, self._load_progress = True, progress
            if self.view is not None:
                self.view.set_loading(self.model, progress)

    def _first_token(self) -> None:
        self._figures.first_token()
        if self._reading or self._loading:
            self._reading = self._loading = False
            if self.view is not None:
                self.view.set_progress(None)

    @Slot(object)
    def _on_progress(self, progress: object) -> None:
        if not self._ended and isinstance(progress, dict):
            self._reading, self._loading = True, False
            if self.view is not None:
                self.view.set_progress(progress)
            self.progress.emit(progress)

    @Slot(object)
    def _on_timings(self, timings: object) -> None:
        if not self._ended and isinstance(timings, dict):
            self._figures.timings = dict(timings)
            self.timings.emit(self._figures.timings)

    def end_thinking(self) -> None:
        """Ask the server to end the model's thinking now: it answers at once."""
        if not self._ended:
            self._worker.end_thinking()

    def can_leave(self) -> bool:
        """Whether the server would finish the reply without the window (`leave`)."""
        return self._conversation is not None and not self._ended

    def leave(self) -> None:
        """Stop showing and saving the reply, and let the server finish it: the next start
        picks it up, whole (the row stays "streaming", its place saved)."""
        if self._ended:
            return
        if self._dirty:
            self._write()
        self._ended = True
        self._save_timer.stop()
        self._worker.leave()

    @Slot(object)
    def _on_position(self, position: object) -> None:
        if not self._ended and isinstance(position, dict):
            self._text.moved(position)
            self._dirty = True

    @Slot(str)
    def _on_content(self, text: str) -> None:
        if not self._ended:
            text = self._text.take_content(text)
            if self._figures.ttft_ms is None or self._reading:
                self._first_token()
            if not text:
                return
            self._dirty = True
            if self.view is not None:
                self.view.append_content(text)
            self.text_added.emit(text)

    @Slot(str)
    def _on_reasoning(self, text: str) -> None:
        if not self._ended:
            self._text.take_reasoning(text)
            if self._figures.ttft_ms is None or self._reading:
                self._first_token()
            self._dirty = True
            if self.view is not None:
                self.view.append_reasoning(text)

    @Slot(str)
    def _on_search_started(self, query: str) -> None:
        if not self._ended:
            self.search_started.emit(query)

    @Slot(object)
    def _on_search_finished(self, result: object) -> None:
        if not self._ended and isinstance(result, dict) and self.view is not None:
            self.view.add_search(
                str(result.get("query", "")),
                list(result.get("results") or []),
                str(result.get("error") or ""),
                title=str(result.get("title") or "Searched"),
            )

    @Slot(str)
    def _on_skill_loaded(self, name: str) -> None:
        if not self._ended:
            self.skill_loaded.emit(name)

    @Slot(str)
    def _on_remembered(self, text: str) -> None:
        if not self._ended:
            source = {"session_id": self.session_id, "message_id": self.message_id}
            self.remembered.emit({"text": text, **source})

    @Slot(object)
    def _on_tool_finished(self, record: object) -> None:
        if not self._ended and isinstance(record, dict):
            calls = self._text.tool_calls
            calls.append(stored_call(record, len(calls)))
            self._dirty = True
            if self.view is not None:
                self.view.add_tool_call(calls[-1])

    @Slot(object)
    def _on_stats(self, stats: object) -> None:
        if not self._ended and isinstance(stats, dict):
            self._figures.usage = dict(stats.get("usage") or {})
            self._figures.timings = dict(stats.get("timings") or {})
            if self.view is not None:
                self.view.set_stats(*self.figures())
            self.stats.emit(stats)

    @Slot(str)
    def _on_cut(self, _reason: str) -> None:
        if not self._ended:
            self._figures.cut = True

    @Slot(str, object)
    def _on_failed(self, message: str, error: object) -> None:
        if not self._ended:
            self._error = message or "The reply failed."

    @Slot()
    def _on_finished(self) -> None:
        if not self._ended:
            if self._error and self.resumed and self._text.has_text():
                # A reply picked up again whose rest could not be read keeps what it has.
                self._end("stopped")
            else:
                self._end("error" if self._error else "complete")

    @Slot()
    def _on_save_due(self) -> None:
        if self._dirty or self._unsaved:
            self._write()
        if self._ended and self.is_saved():
            self._save_timer.stop()
            self.deleteLater()

    @Slot()
    def _on_view_destroyed(self) -> None:
        self.view = None

    def _write(self) -> None:
        """Save the reply as it is now; on failure keep it in memory and say so once."""
        _write_row(self)

    def _retry_without_text(self) -> bool:
        """A retry with no answer text yet: it has no row, and must not add one.

        A new reply whose row could not be added at the start is not one: each save
        tries to add it again, text or not, so its outcome is kept.
        """
        return self.message_id is None and self._replaces is not None and not self._text.content

    def _add_row(self) -> int:
        self.message_id = message_id = self.history.add_message(
            self.session_id,
            "assistant",
            "",
            model=self.model,
            status="streaming",
            parent=self._parent_id,
        )
        if self.view is not None:
            self.view.set_message_id(message_id)
        return message_id

    def _end(self, status: str) -> None:
        self._ended = True
        self._status = status
        if self._retry_without_text():
            # The earlier reply stays as it was, and this attempt has nothing History
            # should take.
            self.kept_earlier = True
            self._dirty = False
        else:
            self._dirty = True
            self._write()
        if self.view is not None:
            self.view.finish()
            self.view.set_progress(None)
            if self._figures.timings or self._figures.usage:
                # Stopped or failed: the figures so far, which no stats event will bring.
                self.view.set_stats(*self.figures())
            self.view.set_status(status, self._error)
        self.ended.emit(status, self._error)
        if self.is_saved():
            self._save_timer.stop()
            # The window lets go of a reply once it ended; the worker may outlive it.
            self.deleteLater()
        else:
            # Kept, with its text, until a save goes through (the timer retries each second).
            self._save_timer.start()


def _stream_of(
    on_router: bool, resumes: Mapping | None
) -> tuple[str | None, backend.Position | None]:
    """A reply's conversation id, and the place to read on from (`resumes`: its saved one)."""
    if resumes:
        position = backend.Position(str(resumes["conversation"]), int(resumes["offset"]))
        return position.conversation, position
    # Only llama.cpp's router keeps a reply's stream; a provider is asked as before.
    return (backend.new_conversation() if on_router else None), None


def _write_row(self: ReplyStream) -> None:
    """Save `self` as it is now; on failure keep it in memory and say so once (its `_write`)."""
    if self._retry_without_text():
        return  # the earlier reply stays as it is
    # Cleared first: text arriving during a failed save must not be marked saved.
    self._dirty = False
    final = self._ended
    usage, timings = self.figures()
    try:
        message_id = self.message_id
        if message_id is None:
            if self._replaces is not None and not self._keep_replaced:
                # The new attempt has text: the failed one (and what followed) gives way.
                self.history.delete_branch(self._replaces)
            message_id = self._add_row()
            self._replaces = None
        self.history.update_message(
            message_id,
            content=self._text.answer(),
            reasoning=self._text.reasoning_text(),
            tool_calls=self._text.tool_calls or None,
            # None leaves a field as it is: the outcome is saved once the reply ended.
            status=self._status if final else None,
            error=self._error if final else None,
            usage=usage if final else None,
            timings=timings if final else None,
        )
        place = self._text.place.at
        if place is not None and not final:
            # After the text: a crash between the two leaves an older place, which
            # covers less of the saved text, never more.
            self.history.reply_streams.save(message_id, place)
    except HistoryError as exc:
        self._dirty = True
        if not self._unsaved:
            log.warning("reply %s not saved: %s", self.message_id, exc)
            if self.view is not None:
                self.view.set_unsaved(str(exc))
            self.save_failed.emit(str(exc))
        self._unsaved = str(exc)
        return
    if self._unsaved:
        self._unsaved = ""
        if self.view is not None:
            self.view.set_unsaved("")
        self.saved.emit()


# The worker's events a reply takes, each by its `_on_<event>` slot.
_WORKER_EVENTS = (
    "content",
    "reasoning",
    "search_started",
    "search_finished",
    "skill_loaded",
    "remembered",
    "tool_finished",
    "stats",
    "cut",
    "position",
    "progress",
    "timings",
    "failed",
    "finished",
)


def stored_call(record: dict, index: int) -> dict:
    """An MCP call's `mcp_done` record as History keeps it in a message's tool_calls.

    The OpenAI shape (id, type, function) that exports read, plus what the view shows.
    """
    return {
        "id": f"mcp_{index}",
        "type": "function",
        "function": {"name": record.get("name", ""), "arguments": record.get("arguments", "")},
        "server": record.get("server", ""),
        "result": record.get("result", ""),
        "status": record.get("status", ""),
        "images": record.get("images") or [],
    }
