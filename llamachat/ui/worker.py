"""Background work for the window: a streaming reply and one-off calls, each in a QThread.

Workers only emit signals; the GUI thread owns every widget and the SQLite
connection. A worker reports a failure through its `failed(message, exception)`
signal and always ends with `finished()`, whatever happened; exceptions never
cross the thread boundary any other way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QDeadlineTimer, QObject, Qt, QThread, Signal, Slot

from .. import backend

log = logging.getLogger(__name__)

# Threads that outlived WorkerThreads.wait_all(): kept referenced until the process ends.
_stragglers: list[tuple[QThread, tuple[QObject, QObject]]] = []


class StreamWorker(QObject):
    """Consumes `backend.Client.stream_chat` in a worker thread and re-emits its events.

    The worker object itself stays on the GUI thread (WorkerThreads runs its `run` in
    a thread of its own), so its signals reach GUI slots and plain callables there.
    Events cross to the GUI thread in bursts, not one queued signal per token: the
    worker appends to a locked list and posts a single wake-up while the list is
    non-empty; the GUI thread drains it, joining adjacent text of one kind, and emits
    the public signals there. At full speed a router sends tokens faster than the GUI
    thread can take one event each, and a queued signal per token cost more than the
    rendering it fed. `finished` alone is emitted from the worker thread (its thread
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
    ) -> None:
        super().__init__()
        self._client = client
        self._model = model
        self._messages = messages
        self._search_cfg = search_cfg
        self._skills_cfg = skills_cfg
        self._params = params
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._pending: list[tuple[str, tuple]] = []
        self._wake.connect(self._drain, Qt.ConnectionType.QueuedConnection)

    def cancel(self) -> None:
        """Ask the stream to stop; safe from any thread, returns at once."""
        self._cancel.set()

    def _post(self, kind: str, *args: object) -> None:
        with self._lock:
            wake = not self._pending
            self._pending.append((kind, args))
        if wake:
            self._wake.emit()

    @Slot()
    def _drain(self) -> None:
        for kind, args in self._take_pending():
            getattr(self, _SIGNALS[kind]).emit(*args)

    def _take_pending(self) -> list[tuple[str, tuple]]:
        with self._lock:
            pending, self._pending = self._pending, []
        merged: list[tuple[str, tuple]] = []
        for kind, args in pending:
            if kind in _TEXT_KINDS and merged and merged[-1][0] == kind:
                merged[-1] = (kind, (merged[-1][1][0] + args[0],))
            else:
                merged.append((kind, args))
        return merged

    @Slot()
    def run(self) -> None:
        """Stream the reply, posting each event for the GUI thread; runs in the worker thread."""
        try:
            stream = self._client.stream_chat(
                self._model,
                self._messages,
                search_cfg=self._search_cfg,
                skills_cfg=self._skills_cfg,
                cancel=self._cancel,
                params=self._params,
            )
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
                self._post("failed", exc.message or str(exc), exc)
        except Exception as exc:
            log.exception("streaming a reply from %s failed", self._model)
            if not self._cancel.is_set():
                self._post("failed", f"{type(exc).__name__}: {exc}", exc)
        finally:
            self.finished.emit()


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
_TEXT_KINDS = frozenset({"reasoning", "content"})


class CallWorker(QObject):
    """Runs one blocking function in a worker thread and emits its result."""

    done = Signal(object)
    failed = Signal(str, object)
    finished = Signal()

    def __init__(self, function: Callable[[], Any]) -> None:
        super().__init__()
        self._function = function

    @Slot()
    def run(self) -> None:
        """Call the function; runs in the worker thread."""
        try:
            result = self._function()
        except backend.BackendError as exc:
            self.failed.emit(exc.message or str(exc), exc)
        except Exception as exc:
            log.exception("background call failed")
            self.failed.emit(f"{type(exc).__name__}: {exc}", exc)
        else:
            self.done.emit(result)
        finally:
            self.finished.emit()


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
