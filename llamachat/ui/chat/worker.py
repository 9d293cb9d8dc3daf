"""Background work for the window: a streaming reply in a QThread (one-off calls: `tasks`).

Workers only emit signals; the GUI thread owns every widget and the SQLite
connection. A worker reports a failure through its `failed(message, exception)`
signal and always ends with `finished()`, whatever happened; exceptions never
cross the thread boundary any other way.
"""

from __future__ import annotations

import gc
import itertools
import logging
import math
import operator
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import cast

from PySide6.QtCore import (
    QCoreApplication,
    QDeadlineTimer,
    QObject,
    Qt,
    QThread,
    QTimer,
    Signal,
    Slot,
)

from llamachat import turn
from llamachat.router import client as backend
from llamachat.router import rpc_workers
from llamachat.router.models import IN_PROGRESS, Models
from llamachat.tools.base import Tool
from llamachat.turn import Turn

ToolSource = Callable[[threading.Event], tuple[Sequence[Tool], int]]
"""Called in the worker thread before the first round: the send's MCP tools and their rounds."""

log = logging.getLogger(__name__)

# A streaming reply's events reach the window at most this often (~30 Hz): a burst of
# tokens costs one render.
FRAME_INTERVAL_MS = 33
# The longest rest between two drains, however slow the last one was.
MAX_REST_MS = 500
# Once the reply's text has begun, the worker reads the socket no more often than the
# model takes to send about this many tokens, at its rate so far...
READ_BATCH_TOKENS = 6
# ...and waits at most this long before a read. At a reading pace (10-30 tokens/s) a
# render then shows a few words, about three times a second, instead of each token: a
# render costs the same whatever it shows, and so does each wake-up of either thread
# (at 20 tokens/s this halved the CPU a token costs). At 200 tokens/s and more the wait
# is shorter than a frame and changes nothing a person sees.
MAX_READ_WAIT_MS = 300

# How often the GUI thread runs the garbage collection Python would have run by itself.
GC_INTERVAL_MS = 100

_collector: QTimer | None = None


def collect_garbage_on_gui_thread() -> None:
    """From now on, run Python's cycle collector only on the GUI thread, from a timer.

    Left automatic, a collection runs in whichever thread happens to allocate, and a Qt
    object in a garbage cycle is then destroyed in a worker thread: Qt cannot stop its
    timers there ("Timers cannot be stopped from another thread") and crashes when they
    fire. What startup built (everything up to the event loop's first turn) lives as long
    as the app and is frozen out of collections: a full pass over it stalled a streaming
    reply for ~30 ms. Needs the QApplication; calling it again does nothing.
    """
    global _collector
    if _collector is not None:
        return
    app = QCoreApplication.instance()
    if app is None:
        raise RuntimeError("collect_garbage_on_gui_thread needs a QApplication")
    gc.disable()
    _collector = QTimer(app)
    _collector.setInterval(GC_INTERVAL_MS)
    _collector.timeout.connect(_collect_due_generation)
    _collector.start()
    QTimer.singleShot(0, gc.freeze)


def _collect_due_generation() -> None:
    # CPython's own rule: collect the oldest generation whose count passed its threshold.
    counts, thresholds = gc.get_count(), gc.get_threshold()
    for generation in (2, 1, 0):
        if counts[generation] > thresholds[generation]:
            gc.collect(generation)
            return


# Threads that outlived WorkerThreads.wait_all(): kept referenced until the process ends.
_stragglers: list[tuple[QThread, tuple[QObject, QObject]]] = []


class StreamWorker(QObject):
    """Consumes `backend.Client.stream_chat` in a worker thread and re-emits its events.

    The worker object itself stays on the GUI thread (WorkerThreads runs its `run` in
    a thread of its own), so its signals reach GUI slots and plain callables there.
    Between the two threads there is one pending list, as in Textual's MarkdownStream:
    the worker thread appends every event to it, and wakes the GUI thread when it is
    about to wait for the network again (text and figures: all that one read brought goes
    in one wake-up) or at once (a tool, a search, an error), unless a wake-up is already
    on its way. The GUI thread takes the whole list at most about every
    FRAME_INTERVAL_MS, joins adjacent text of one kind and emits the public signals,
    whose receivers render at once. A burst of tokens so costs one render, however fast
    the server sends, and a slow stream is read a few tokens at a time (READ_BATCH_TOKENS).
    A drain that overran is followed by a rest of half its length, so a growing open
    block is rendered ever more rarely and a reply's total cost stays linear.
    `finished` alone is emitted from the worker thread (its thread must be able to quit
    while the GUI thread waits); a last drain queued before it delivers every event first.
    """

    reasoning = Signal(str)
    content = Signal(str)
    search_started = Signal(str)
    search_finished = Signal(object)
    skill_loaded = Signal(str)
    remembered = Signal(str)  # the fact the model's remember call hands the window to save
    progress = Signal(object)
    timings = Signal(object)
    tool_finished = Signal(object)
    cut = Signal(str)  # the finish reason of a reply the length limit cut ("length")
    position = Signal(object)  # where the reply stands in the server's stream (`Position`)
    # True while the model thinks and its thinking can be ended (`end_thinking`).
    thinking = Signal(bool)
    stats = Signal(object)
    failed = Signal(str, object)
    finished = Signal()

    _wake = Signal()
    _last = Signal()

    def __init__(
        self,
        client: backend.Client,
        model: str,
        request: Turn,
        *,
        tool_source: ToolSource | None = None,
        ask_tools: bool = False,
        conversation: str | None = None,
        resumes: backend.Position | None = None,
    ) -> None:
        super().__init__()
        # The request offers tools to a model whose server has not said yet whether its
        # template takes them: asked before it is sent (`_takes_tools`).
        self._ask = ask_tools
        self._client = client
        # llama.cpp keeps the reply's stream under `conversation`; `resumes`: read on the
        # stream an earlier run left, from where it stood, instead of sending the request.
        self._conversation = conversation
        self._resumes = resumes
        self._leave = threading.Event()
        # The server's id of the completion streaming now (its control endpoint's key), and
        # whether its thinking shows (only llama.cpp's router takes `reasoning_end`).
        self._completion = ""
        self._thinking: bool | None = False
        self._tool_source = tool_source
        self._model = model
        self.request = request
        """The request sent, as built (its send's MCP tools joined in the worker thread)."""
        self._cancel = threading.Event()
        self._sent = _Stamped()
        self._lock = threading.Lock()
        self._pending: list[backend.StreamEvent] = []
        # True from the wake-up the worker posts until the drain that takes the list.
        self._due = False
        self._next_drain = 0.0
        # The worker thread's own: text events so far, when the first came, the last read.
        self._texts = 0
        self._texts_read = 0  # as many as there were at the last read
        self._first_text_at = 0.0
        self._read_at = 0.0
        self._wake.connect(self._on_wake, Qt.ConnectionType.QueuedConnection)
        self._last.connect(self._drain, Qt.ConnectionType.QueuedConnection)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._drain)

    def cancel(self) -> None:
        """Ask the stream to stop; safe from any thread, returns at once."""
        self._cancel.set()

    def end_thinking(self) -> bool:
        """Ask the server to end the reply's thinking now (on a thread of its own); False
        when the reply has no completion to ask about yet."""
        completion = self._completion
        if not completion:
            return False
        self._set_thinking(None)
        threading.Thread(
            target=backend.end_thinking,
            args=(self._client, completion, self._model),
            daemon=True,
            name="llamachat-end-thinking",
        ).start()
        return True

    def _set_thinking(self, thinking: bool | None) -> None:
        """Say whether the model thinks (None: no more, the answer has begun or was asked for)."""
        if self._thinking is None:
            return
        was, self._thinking = self._thinking, thinking
        if bool(thinking) != was:
            self.thinking.emit(bool(thinking))

    def leave(self) -> None:
        """Stop reading, and let the server finish the reply on its own (safe from any thread)."""
        self._leave.set()
        self._cancel.set()

    def wait_sent(self, timeout_s: float) -> bool:
        """Wait until the request is on the wire, at most `timeout_s`; True when it is."""
        return self._sent.wait(timeout_s)

    def sent_at(self) -> float | None:
        """When the request was on the wire (`time.monotonic()`; None: not yet)."""
        return self._sent.at

    def _post(self, kind: str, value: object) -> None:
        if kind in _TEXT_KINDS:
            if not self._texts:
                self._first_text_at = time.monotonic()
            self._texts += 1
        with self._lock:
            self._pending.append((kind, value))
            # Text and figures wait for the read that brought them to be done with.
            wake = not self._due and kind not in _TEXT_KINDS and kind not in _LATEST_KINDS
            self._due = self._due or wake
        if wake:
            self._wake.emit()

    def _before_read(self) -> None:
        """In the worker thread, before each read of the reply: hand over, then pace."""
        with self._lock:
            wake = not self._due and bool(self._pending)
            self._due = self._due or wake
        if wake:
            self._wake.emit()
        if self._texts == self._texts_read:
            # Nothing to pace: no text yet (the first is read, and shown, the moment it
            # comes), or a read that brought none (a long line, a tool call's arguments).
            return
        self._texts_read = self._texts
        now = time.monotonic()
        batch = (now - self._first_text_at) / self._texts * READ_BATCH_TOKENS
        wait = min(MAX_READ_WAIT_MS / 1000, batch) - (now - self._read_at)
        if wait > 0:
            self._cancel.wait(wait)
        self._read_at = time.monotonic()

    @Slot()
    def _on_wake(self) -> None:
        wait_ms = (self._next_drain - time.perf_counter()) * 1000
        if wait_ms <= 0:
            self._drain()  # shown at once, without a timer's turn
        else:
            self._timer.start(math.ceil(wait_ms))

    @Slot()
    def _drain(self) -> None:
        self._timer.stop()
        with self._lock:
            events, self._pending = self._pending, []
            self._due = False
        started = time.perf_counter()
        for kind, value in _joined(events):
            if kind in _TEXT_KINDS and self._conversation is not None:
                self._set_thinking(True if kind == "reasoning" else None)
            if kind == "failed":
                self.failed.emit(*cast(tuple[str, object], value))  # run() posts (message, error)
            else:
                getattr(self, _SIGNALS[kind]).emit(value)
        ended = time.perf_counter()
        took_ms = (ended - started) * 1000
        rest_ms = min(MAX_REST_MS, max(FRAME_INTERVAL_MS - took_ms, took_ms / 2))
        self._next_drain = ended + rest_ms / 1000

    def _takes_tools(self) -> bool:
        """Whether the model's template takes tools, which its server says (`/props`) only
        once it is loaded: a model not loaded yet is loaded first (the request would load
        it anyway). A template that takes none leaves the tools out of the prompt (SmolLM2
        then answers from nothing), so such a model must get its library's passages
        instead. True when the server cannot say."""
        models = Models(self._client)
        try:
            takes = models.takes_tools(self._model)
            if takes is None and models.is_router():
                info = models.get(self._model)
                if info is not None and info.status in ("unloaded", *IN_PROGRESS):
                    if info.status == "unloaded":
                        models.load(self._model)
                    models.wait_until_loaded(self._model, timeout=600, cancel=self._cancel)
                    takes = models.takes_tools(self._model)
        except backend.BackendError as exc:
            log.info("cannot ask whether %s takes tools: %s", self._model, exc)
            return True
        return takes is not False

    @Slot()
    def run(self) -> None:
        """Stream the reply, posting each event for the GUI thread; runs in the worker thread."""
        try:
            # Here, off the GUI thread: MCP servers may still be starting. The send's MCP
            # tools (bound to its consent and its Stop) join the request (`Turn.joined`).
            stream: Generator[backend.StreamEvent, None, None]
            if self._resumes is not None:
                self._sent.set()
                stream = backend.resume_chat(
                    self._client,
                    self._resumes,
                    model=self._model,
                    cancel=self._cancel,
                    before_read=self._before_read,
                    leave=self._leave,
                )
            else:
                extra, rounds = self._tool_source(self._cancel) if self._tool_source else ((), 0)
                self.request = self.request.joined(extra, rounds)
                if self._ask and self.request.offer and not self._takes_tools():
                    self.request = turn.without_tools(self.request)
                # A library the first message brought is read meanwhile: its passages wait for it.
                self.request = turn.read_libraries(self.request, self._cancel)
                if self.request.found is not None:
                    self._post("search_done", self.request.found)
                stream = self._client.stream_chat(
                    self.request,
                    model=self._model,
                    cancel=self._cancel,
                    sent=self._sent,
                    before_read=self._before_read,
                    conversation=self._conversation,
                    leave=self._leave,
                )
            try:
                for kind, value in stream:
                    if self._cancel.is_set():
                        break
                    if kind == "completion":
                        self._completion = str(value)
                        continue
                    if kind not in _SIGNALS:
                        log.debug("ignoring stream event %r", kind)
                        continue
                    self._post(kind, value)
            finally:
                # Closing the generator closes the HTTP response, so the server stops generating.
                stream.close()
        except backend.BackendError as exc:
            if not self._cancel.is_set():
                # Named when a worker of llamachat's own server was lost meanwhile.
                message = rpc_workers.explain(self._client.base_url, exc.message or str(exc))
                self._post("failed", (message, exc))
        except Exception as exc:
            log.exception("streaming a reply from %s failed", self._model)
            if not self._cancel.is_set():
                self._post("failed", (f"{type(exc).__name__}: {exc}", exc))
        finally:
            # Queued before `finished`: what is still pending reaches the GUI thread first.
            self._last.emit()
            self.finished.emit()


def _joined(events: list[backend.StreamEvent]) -> Iterator[backend.StreamEvent]:
    """`events` with adjacent text events of one kind joined: a burst becomes one event.

    A progress or timings event is the whole state so far: only the newest of each kind
    in the burst is kept, after the rest, so it never splits a run of text.
    """
    latest: dict[str, backend.StreamEvent] = {}
    if any(kind in _LATEST_KINDS for kind, _value in events):
        for event in events:
            if event[0] in _LATEST_KINDS:
                latest[event[0]] = event
        events = [event for event in events if event[0] not in _LATEST_KINDS]
    for kind, group in itertools.groupby(events, key=operator.itemgetter(0)):
        if kind in _TEXT_KINDS:
            yield kind, "".join(str(value) for _kind, value in group)
        else:
            yield from group
    yield from latest.values()


_TEXT_KINDS = frozenset({"content", "reasoning"})
# A position is where the reply stands after all the text before it: the newest of a
# burst, emitted after the burst's text, covers no more than the text already given.
_LATEST_KINDS = frozenset({"progress", "timings", "resume"})

# Stream event kinds and the StreamWorker signal each becomes.
_SIGNALS = {
    "reasoning": "reasoning",
    "content": "content",
    "search_start": "search_started",
    "search_done": "search_finished",
    # Another tool's call and short result (read_skill_file), shown as a search is.
    "tool_done": "search_finished",
    "skill_loaded": "skill_loaded",
    "remembered": "remembered",
    "progress": "progress",
    "timings": "timings",
    # An MCP tool's call, shown collapsed and saved with the reply.
    "mcp_done": "tool_finished",
    "cut": "cut",
    "resume": "position",
    "stats": "stats",
    "failed": "failed",
}


class _Stamped(threading.Event):
    """An event that keeps when it was set: the client sets it once the request is written
    to the socket, so a reply knows when it went out on the client's side."""

    at: float | None = None

    def set(self) -> None:
        """Set the event, keeping the time of the first set."""
        if self.at is None:
            self.at = time.monotonic()
        super().set()


class WorkerThreads(QObject):
    """Starts workers in their own QThreads and keeps both alive until the thread ends.

    A QThread destroyed while running aborts the process, and a stopped stream
    may still be unwinding a socket read after the window has moved on, so the
    pair is only released once the thread reports it has finished.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._running: dict[QThread, tuple[QObject, QObject]] = {}

    def start(self, worker: StreamWorker) -> QThread:
        """Run `worker.run()` (which ends by emitting `finished`) in a new thread.

        The worker stays on this thread, so what it emits from `run` is queued to the
        GUI thread's receivers, callables included; only a small invoker moves.
        """
        thread = QThread()
        invoker = _Invoker(worker)
        invoker.moveToThread(thread)
        thread.started.connect(invoker.run)
        # Direct: a queued quit would wait on the GUI thread, which may be blocked in wait_all().
        worker.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.finished.connect(self._on_thread_finished)
        self._running[thread] = (worker, invoker)
        thread.start()
        return thread

    def running(self) -> int:
        """How many worker threads have not finished yet."""
        return len(self._running)

    def wait_all(self, timeout_ms: int = 5000) -> bool:
        """Block until every thread has ended, at most `timeout_ms` in all; False on timeout.

        Cancel streaming workers first. A thread still running afterwards is parked
        for good rather than destroyed, since destroying it would abort the process.
        """
        deadline = QDeadlineTimer(timeout_ms)
        for thread in list(self._running):
            thread.wait(deadline)
        ended = True
        for thread in list(self._running):
            if thread.isFinished():
                self._release(thread)
            else:
                ended = False
                _stragglers.append((thread, self._running.pop(thread)))
        return ended

    @Slot()
    def _on_thread_finished(self) -> None:
        thread = self.sender()
        if isinstance(thread, QThread):
            self._release(thread)

    def _release(self, thread: QThread) -> None:
        # `finished` is emitted just before the thread really ends; wait it out so the
        # QThread is never destroyed while running. The worker goes with it.
        thread.wait()
        self._running.pop(thread, None)


class _Invoker(QObject):
    """Moved to a worker thread to call a GUI-thread worker's blocking `run` there."""

    def __init__(self, worker: StreamWorker) -> None:
        super().__init__()
        self._worker = worker

    @Slot()
    def run(self) -> None:
        self._worker.run()
