"""Comparing models: one question's request sent to 2-4 models, each answer a version of one reply.

`Comparer` (a conversation's) saves the question, builds its requests
(`TurnBuilder.next_turns`: what they share, the system message, the history and the
question, read once) and hands them to a `Comparison`, which sends each model the request
a normal send to that model makes (its tools, or its libraries' passages when its template
takes none; images and sounds it reads, named when it cannot; its own parameters) as a
`ReplyStream` of its own, all answering the question. A model whose server has not said
whether it takes tools (the Compare chooser asks each loaded pick: `compare_fit`) asks
before its request leaves, as a normal send does (`Outbox.asks_tools`: its column's worker
loads it when it must, and leaves the tools out for one that takes none). Each
answer is saved as one more version of the same reply, and `choose` makes one of them
the chat's current version (the others stay a click away, ‹ n/N › on the reply).
A blind comparison ("Model A", "Model B"... until then) keeps its pick in History
(`history.picks`), for the table of which model won against which.

What runs at once: the models the router has loaded run side by side; a model it must
load first runs on its own, once those before it have ended, so a load never pushes out
a model another column is answering with (the router's `--models-max` unloads the
least recently used). Such a column says what it waits for (`waiting`).

The requests go out first (`Comparer.started` comes once they are on their way) and a
window builds its columns while they travel, attaching a view to each reply running
(`replies`) and to each one started later (`column_started`), as it does for a normal
turn: a reply's events are queued to the GUI thread, so none comes before its view.
Without a window the comparison runs and saves all the same.
Errors: none raised; a column that fails ends "error" and the others go on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Signal, Slot

from llamachat.history.store import HistoryError, MessageRow
from llamachat.turn import Turn
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.reply import SEND_WAIT_MS, ReplyStream
from llamachat.ui.chat.state import AppState
from llamachat.ui.chat.worker import WorkerThreads

log = logging.getLogger(__name__)

MIN_MODELS = 2
MAX_MODELS = 4

# What `Comparer.ask` did (the conversation's own words for SENT, BUSY, EMPTY, NOT_SENT).
SENT, BUSY, EMPTY, NOT_SENT = "sent", "busy", "empty", "not_sent"

# Model states in which the router must load the model before it answers.
NOT_LOADED = frozenset({"unloaded", "loading", "failed", "sleeping"})


def blind_label(index: int) -> str:
    """The name a column has while the comparison is blind: "Model A", "Model B"..."""
    return f"Model {chr(ord('A') + index)}"


class Comparison(QObject):
    """One question's request streaming from several models at once, or one after another."""

    column_started = Signal(int, object)  # the column, its ReplyStream: attach a view now
    column_waiting = Signal(int, str)  # the column, what it waits for before it is sent
    column_ended = Signal(int, str, str)  # the column, its status, its error
    finished = Signal()  # every column ended
    chosen = Signal(int, object)  # the column the chat goes on with, its path (History rows)

    def __init__(
        self,
        app: AppState,
        threads: WorkerThreads,
        *,
        session_id: int,
        question_id: int,
        requests: Sequence[Turn],
        models: Sequence[str],
        model_status: Callable[[str], str],
        ask_tools: Callable[[str, Turn], bool] = lambda _model, _request: False,
        blind: bool = False,
        project_id: int | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        if not MIN_MODELS <= len(models) <= MAX_MODELS:
            raise ValueError(f"compare {MIN_MODELS} to {MAX_MODELS} models, got {len(models)}")
        if [request.model for request in requests] != list(models):
            raise ValueError("one request per model, in the models' order")
        self._app = app
        self._threads = threads
        self.session_id = session_id
        self.question_id = question_id
        self.requests = list(requests)
        """Each column's request, as a normal send to its model makes it."""
        self.models = list(models)
        self.blind = blind
        """Whether the names are hidden ("Model A", "Model B"...) until a pick."""
        self.project_id = project_id
        self._model_status = model_status
        self._ask_tools = ask_tools
        self.replies: list[ReplyStream | None] = [None] * len(models)
        self.statuses = ["waiting"] * len(models)
        """Each column's state: waiting, streaming, then complete, stopped or error."""
        self.message_ids: list[int | None] = [None] * len(models)
        """Each column's reply row (None until its request went out)."""
        self.waiting = [""] * len(models)
        """What each column waits for before it is sent ('' once sent, or never held)."""
        self.loads = [False] * len(models)
        """Whether each column's model had to be loaded first (it runs alone)."""
        self.answered = [False] * len(models)
        """Whether each column ended with answer text: only those can be picked."""
        self.picked: int | None = None
        # Columns whose model must be loaded first: each runs alone, in order.
        self._queued: list[int] = []

    def label(self, index: int) -> str:
        """The name column `index` shows: its model's, or "Model A"... while blind."""
        return blind_label(index) if self.blind and self.picked is None else self.models[index]

    def start(self) -> None:
        """Send to the loaded models at once; the others wait their turn, one at a time."""
        at_once: list[tuple[int, ReplyStream]] = []
        for index, model in enumerate(self.models):
            if self._model_status(model) in NOT_LOADED:
                self.loads[index] = True
                self._queued.append(index)
            elif (reply := self._build(index)) is not None:
                at_once.append((index, reply))
        # Every request goes out before any reply's row is added: a row is an SQLite write
        # on this thread, holding the GIL the workers need to send.
        for _index, reply in at_once:
            reply.send(self._threads)
        self._next()
        # As a normal send does (`reply.SEND_WAIT_MS`), the window builds its columns only
        # once the requests are out, or that long: building them holds the GIL.
        deadline = time.monotonic() + SEND_WAIT_MS / 1000
        for _index, reply in at_once:
            reply.request_sent(max(0.0, deadline - time.monotonic()))
        for index, reply in at_once:
            self._began(index, reply)

    def running(self) -> bool:
        """True until every column ended (or was stopped before it was sent)."""
        return any(status in ("waiting", "streaming") for status in self.statuses)

    def stop(self, index: int | None = None) -> None:
        """Stop column `index` (None: every column), keeping what arrived ("stopped")."""
        for column in range(len(self.models)) if index is None else (index,):
            reply = self.replies[column]
            if reply is not None:
                reply.stop()
            elif self.statuses[column] == "waiting":
                self._queued.remove(column)
                self._ended(column, "stopped", "")
        self._next()

    def choose(self, index: int) -> list[MessageRow] | None:
        """Go on with column `index`'s answer: the chat's current version from now on (the
        others stop, kept as versions). Its path; None when it has no answer to go on with
        (it is still streaming, or ended with none)."""
        message_id = self.message_ids[index]
        if message_id is None or not self.answered[index]:
            return None
        self.stop()
        try:
            path = self._app.history.select_version(self.session_id, message_id)
        except HistoryError as exc:
            log.warning("version %s not selected: %s", message_id, exc)
            return None
        if self.blind and self.picked is None:
            self._keep_pick(index)
        self.picked = index
        self.chosen.emit(index, path)
        return path

    def _keep_pick(self, index: int) -> None:
        """A blind pick counts in the wins table: over every other model that answered."""
        others = [m for n, m in enumerate(self.models) if n != index and self.answered[n]]
        try:
            self._app.history.picks.add(
                self.models[index], others, project_id=self.project_id, session_id=self.session_id
            )
        except HistoryError as exc:
            log.warning("the pick of %s was not kept: %s", self.models[index], exc)

    def _run(self, index: int) -> None:
        reply = self._build(index)
        if reply is not None:
            reply.start(self._threads, wait_ms=0)
            self._began(index, reply)

    def _build(self, index: int) -> ReplyStream | None:
        """Column `index`'s reply, ready to send (None: it could not be, the column ended)."""
        model, request = self.models[index], self.requests[index]
        history = self._app.history
        try:
            reply = ReplyStream(
                history,
                self._app.registry,
                session_id=self.session_id,
                model=model,
                request=request,
                answers=self.question_id,
                tool_source=self._app.mcp.tool_source(self.session_id),
                ask_tools=self._ask_tools(model, request),
                parent=self,
            )
        except HistoryError as exc:
            self._ended(index, "error", f"Not sent: the reply could not be saved. {exc}")
            return None
        self.replies[index] = reply
        self.statuses[index] = "streaming"
        self.waiting[index] = ""
        reply.ended.connect(lambda status, error: self._on_reply_ended(index, status, error))
        return reply

    def _began(self, index: int, reply: ReplyStream) -> None:
        """Column `index`'s request is out: its row, and a view may attach."""
        reply.add_row()
        self.message_ids[index] = reply.message_id
        self.column_started.emit(index, reply)

    def _next(self) -> None:
        """Send the next column whose model must load, once nothing else runs."""
        busy = [i for i, status in enumerate(self.statuses) if status == "streaming"]
        if not busy and self._queued:
            self._run(self._queued.pop(0))
            busy = [i for i, status in enumerate(self.statuses) if status == "streaming"]
        names = ", ".join(self.label(i) for i in busy)
        for index in self._queued:
            self.waiting[index] = f"Waiting for {names} to finish: then {self.label(index)} loads."
            self.column_waiting.emit(index, self.waiting[index])

    @Slot()
    def _on_reply_ended(self, index: int, status: str, error: str) -> None:
        reply = self.replies[index]
        if reply is not None and reply.message_id is not None:
            self.message_ids[index] = reply.message_id
            self.answered[index] = bool(reply.row()["content"])
        self._ended(index, status, error)
        self._next()

    def _ended(self, index: int, status: str, error: str) -> None:
        self.statuses[index] = status
        self.replies[index] = None
        self.column_ended.emit(index, status, error)
        if not self.running():
            self.finished.emit()


class Comparer(QObject):
    """A conversation's comparisons: the question saved, its request built once, then sent."""

    started = Signal(object)  # the Comparison, its requests on their way: show its columns
    message_added = Signal(object)  # the question just saved (a History row)
    messages_reset = Signal(object)  # the rows to show instead (a column was chosen)
    ended = Signal()  # the comparison ended: every column has its outcome
    notice = Signal(str, int)

    def __init__(
        self,
        builder: TurnBuilder,
        app: AppState,
        threads: WorkerThreads,
        *,
        busy: Callable[[], bool],
        ready: Callable[[], bool],
        save_question: Callable[..., dict],
        ask_editing: Callable[[int | None], None],
        context_size: Callable[[], int | None],
        model_status: Callable[[str], str],
        ask_tools: Callable[[str, Turn], bool],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._app = app
        self._threads = threads
        # Whether the chat streams, compacts or counts already; whether it may send at all
        # (chat mode, every reply saved).
        self._busy = busy
        self._ready = ready
        self._save_question = save_question  # `Outbox.save_question`
        self._ask_editing = ask_editing
        self._context_size = context_size
        self._model_status = model_status
        self._ask_tools = ask_tools
        self.current: Comparison | None = None
        """The comparison shown last (running or ended; None: none yet)."""
        # The replies this conversation's comparisons wrote: Regenerate offers their models
        # again (a reply regenerated with another model is not a comparison).
        self._compared: set[int] = set()

    def running(self) -> bool:
        """True while a comparison's columns still stream or wait."""
        return self.current is not None and self.current.running()

    def ask(self, text: str, models: Sequence[str], *, blind: bool = False) -> str:
        """Ask `models` (2-4, distinct) the question `text`, side by side; SENT, EMPTY,
        BUSY or NOT_SENT (a notice says why, or the chat is not one that can compare)."""
        if self._busy():
            return BUSY
        if not self._ready():
            return NOT_SENT
        return self._ask(text, models, blind=blind)

    def compared_models(self, reply_id: int) -> list[str]:
        """The models a compared reply's versions came from (2-4), for Regenerate to offer
        the same set again; [] for a reply no comparison (since the app started) wrote."""
        try:
            versions = self._app.history.version_models(reply_id)
        except HistoryError:
            return []
        models = list(dict.fromkeys(m for i, m in versions if i in self._compared))
        return models if MIN_MODELS <= len(models) <= MAX_MODELS else []

    def again(self, reply_id: int, models: Sequence[str], *, blind: bool = False) -> str:
        """Compare again for the question reply `reply_id` answers: more versions of it."""
        if self._busy():
            return BUSY
        session_id = self._builder.state.session_id
        if not self._ready() or session_id is None:
            return NOT_SENT
        models = list(dict.fromkeys(m for m in models if m))
        path = self._app.history.messages(session_id)
        at = next((n for n, row in enumerate(path) if row["id"] == reply_id), None)
        if at is None or not at or not MIN_MODELS <= len(models) <= MAX_MODELS:
            return NOT_SENT
        self._ask_editing(None)
        self.messages_reset.emit(path[:at])
        requests = self._builder.next_turns(models, before=reply_id, sizes=self._sizes(models))
        return self._compare(session_id, path[at - 1]["id"], requests, models, blind)

    def _ask(self, text: str, models: Sequence[str], *, blind: bool = False) -> str:
        models = list(dict.fromkeys(m for m in models if m))
        if not text.strip():
            return EMPTY
        if not MIN_MODELS <= len(models) <= MAX_MODELS:
            self.notice.emit(f"Pick {MIN_MODELS} to {MAX_MODELS} models to compare.", 8000)
            return NOT_SENT
        self._ask_editing(None)
        try:
            row = self._save_question(text, [], edit_from=None)
        except HistoryError as exc:
            self.notice.emit(f"Not sent: the message could not be saved. {exc}", 0)
            return NOT_SENT
        requests = self._builder.next_turns(models, sizes=self._sizes(models))
        # The window shows the question once the requests are out: a view built holds the GIL.
        outcome = self._compare(row["session_id"], row["id"], requests, models, blind)
        self.message_added.emit(row)
        return outcome

    def _sizes(self, models: Sequence[str]) -> dict[str, int | None]:
        """Each model's context size, as far as known: what bounds its request's skills
        catalog and libraries' passages, as in a send to it."""
        return self._builder.context_sizes(models, self._context_size())

    def _compare(
        self,
        session_id: int,
        question_id: int,
        requests: Sequence[Turn],
        models: list[str],
        blind: bool,
    ) -> str:
        comparison = Comparison(
            self._app,
            self._threads,
            session_id=session_id,
            question_id=question_id,
            requests=requests,
            models=models,
            model_status=self._model_status,
            ask_tools=self._ask_tools,
            blind=blind,
            project_id=self._builder.project_id(),
            parent=self,
        )
        comparison.chosen.connect(lambda _index, path: self.messages_reset.emit(path))
        comparison.finished.connect(lambda: self._on_finished(comparison))
        self.current = comparison
        comparison.start()
        self.started.emit(comparison)
        return SENT

    def _on_finished(self, comparison: Comparison) -> None:
        self._compared.update(i for i in comparison.message_ids if i is not None)
        # The chat shows the active path: the answer added last, its siblings as versions.
        try:
            self.messages_reset.emit(self._app.history.messages(comparison.session_id))
        except HistoryError as exc:
            log.warning("the compared chat could not be read again: %s", exc)
        self.ended.emit()

    def stop(self) -> bool:
        """Stop every column of the running comparison; True when one ran."""
        if not self.running():
            return False
        assert self.current is not None
        self.current.stop()
        return True
