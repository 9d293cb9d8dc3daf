"""Background work for the window: a streaming reply in a QThread (one-off calls: `tasks`).

Workers only emit signals; the GUI thread owns every widget and the SQLite
connection. A worker reports a failure through its `failed(message, exception)`
signal and always ends with `finished()`, whatever happened; exceptions never
cross the thread boundary any other way.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections import deque
from collections.abc import Iterator

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

from .. import backend, stream_process

log = logging.getLogger(__name__)

# At most one drain of stream events per this many ms while a reply streams fast.
DRAIN_INTERVAL_MS = 10

# The helper processes replies are read in, shared by every window of the app.
HELPERS = stream_process.Helpers()

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
    Events cross to the GUI thread in bursts, not one queued signal per token: the
    worker appends to a queue and posts a wake-up only when the GUI thread has drained
    it and DRAIN_INTERVAL_MS have passed since; the GUI thread drains the queue, joining
    adjacent text of one kind, and emits the public signals there. At full speed a
    router sends tokens faster than the GUI thread can take one event each, and a
    queued signal per token cost more than the rendering it fed. `finished` alone is emitted from the worker thread (its thread
    must be able to quit while the GUI thread waits); being queued after the last
    wake-up, it still reaches GUI slots after every other event.
    """

    reasoning = Signal(str)
    content = Signal(str)
    search_started = Signal(str)
    search_finished = Signal(object)
    skill_loaded = Signal(str)
    stats = Signal(object)
    failed = Signal(str, object)
    finished = Signal()

    _wake = Signal()

    def __init__(
        self,
        client: backend.Client,
        model: str,
        messages: list[dict],
        *,
        search_cfg: backend.SearchConfig | None = None,
        skills_cfg: backend.SkillsConfig | None = None,
        params: dict | None = None,
        helpers: stream_process.Helpers | None = None,
    ) -> None:
        super().__init__()
        self._helpers = helpers
        self._helper: stream_process.Helper | None = None
        self._client = client
        self._model = model
        self._messages = messages
        self._search_cfg = search_cfg
        self._skills_cfg = skills_cfg
        self._params = params
        self._cancel = threading.Event()
        # deque.append and popleft are atomic: the worker posts an event without a lock.
        self._pending: deque[tuple[str, tuple]] = deque()
        self._woken = False
        self._wake.connect(self._drain, Qt.ConnectionType.QueuedConnection)
        self._cooldown = QTimer(self)
        self._cooldown.setSingleShot(True)
        self._cooldown.setInterval(DRAIN_INTERVAL_MS)
        self._cooldown.timeout.connect(self._on_cooldown)

    def cancel(self) -> None:
        """Ask the stream to stop; safe from any thread, returns at once."""
        self._cancel.set()
        helper = self._helper
        if helper is not None:
            helper.kill()

    def _post(self, kind: str, value: object) -> None:
        # Appended before the flag is read: either this call posts a wake-up, or the
        # cooldown that clears the flag has not looked at the queue yet and drains it.
        self._pending.append((kind, value))
        if not self._woken:
            self._woken = True
            self._wake.emit()

    @Slot()
    def _drain(self) -> None:
        # The flag stays set until the cooldown ends: events arriving meanwhile wait for it
        # instead of waking the GUI thread, which would first wait for the GIL each time.
        self._cooldown.start()
        for kind, value in self._take_pending():
            if kind == "failed":
                self.failed.emit(*value)
            else:
                getattr(self, _SIGNALS[kind]).emit(value)

    @Slot()
    def _on_cooldown(self) -> None:
        self._woken = False
        if self._pending:
            self._woken = True
            self._drain()

    def _take_pending(self) -> list[backend.StreamEvent]:
        pending = self._pending
        return stream_process.merge_text([pending.popleft() for _ in range(len(pending))])

    def _events(self) -> Iterator[backend.StreamEvent]:
        """The reply's events, read by a helper process, or on this thread if none starts."""
        if self._helpers is not None:
            try:
                helper = self._helpers.take()
            except OSError as exc:
                log.warning("reading the reply in this process: no helper process (%s)", exc)
            else:
                self._helper = helper
                if self._cancel.is_set():
                    helper.kill()
                return helper.stream(
                    stream_process.Request.of(
                        self._client,
                        self._model,
                        self._messages,
                        params=self._params,
                        search_cfg=self._search_cfg,
                        skills_cfg=self._skills_cfg,
                    )
                )
        return self._client.stream_chat(
            self._model,
            self._messages,
            search_cfg=self._search_cfg,
            skills_cfg=self._skills_cfg,
            cancel=self._cancel,
            params=self._params,
        )

    @Slot()
    def run(self) -> None:
        """Stream the reply, posting each event for the GUI thread; runs in the worker thread."""
        try:
            stream = self._events()
            try:
                for kind, value in stream:
                    if self._cancel.is_set():
                        break
                    if kind not in _SIGNALS:
                        log.debug("ignoring stream event %r", kind)
                        continue
                    self._post(kind, value)
            finally:
                # Closing the generator closes the HTTP response, so the server stops generating.
                stream.close()
        except backend.BackendError as exc:
            if not self._cancel.is_set():
                self._post("failed", (exc.message or str(exc), exc))
        except Exception as exc:
            log.exception("streaming a reply from %s failed", self._model)
            if not self._cancel.is_set():
                self._post("failed", (f"{type(exc).__name__}: {exc}", exc))
        finally:
            # Whatever waits for a cooldown reaches the GUI thread before `finished` does.
            self._wake.emit()
            self.finished.emit()
            if self._helpers is not None:
                # Started now, off the reply's clock, the next reply's helper is ready long
                # before it is needed.
                self._helpers.prepare()


# Stream event kinds and the StreamWorker signal each becomes.
_SIGNALS = {
    "reasoning": "reasoning",
    "content": "content",
    "search_start": "search_started",
    "search_done": "search_finished",
    "skill_loaded": "skill_loaded",
    "stats": "stats",
    "failed": "failed",
}


class WorkerThreads(QObject):
    """Starts workers in their own QThreads and keeps both alive until the thread ends.

    A QThread destroyed while running aborts the process, and a stopped stream
    may still be unwinding a socket read after the window has moved on, so the
    pair is only released once the thread reports it has finished.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._running: dict[QThread, tuple[QObject, QObject]] = {}

    def start(self, worker: QObject) -> QThread:
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

    def __init__(self, worker: QObject) -> None:
        super().__init__()
        self._worker = worker

    @Slot()
    def run(self) -> None:
        self._worker.run()
