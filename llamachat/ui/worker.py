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
_stragglers: list[tuple[QThread, QObject]] = []


class StreamWorker(QObject):
    """Consumes `backend.Client.stream_chat` in a worker thread and re-emits its events."""

    reasoning = Signal(str)
    content = Signal(str)
    search_started = Signal(str)
    search_finished = Signal(object)
    skill_loaded = Signal(str)
    stats = Signal(object)
    failed = Signal(str, object)
    finished = Signal()

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

    def cancel(self) -> None:
        """Ask the stream to stop; safe from any thread, returns at once."""
        self._cancel.set()

    @Slot()
    def run(self) -> None:
        """Stream the reply, emitting one signal per event; runs in the worker thread."""
        emit = {
            "reasoning": self.reasoning.emit,
            "content": self.content.emit,
            "search_start": self.search_started.emit,
            "search_done": self.search_finished.emit,
            "skill_loaded": self.skill_loaded.emit,
            "stats": self.stats.emit,
        }
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
                    handler = emit.get(kind)
                    if handler is None:
                        log.debug("ignoring stream event %r", kind)
                        continue
                    handler(value)
            finally:
                # Closing the generator closes the HTTP response, so the server stops generating.
                stream.close()
        except backend.BackendError as exc:
            if not self._cancel.is_set():
                self.failed.emit(exc.message or str(exc), exc)
        except Exception as exc:
            log.exception("streaming a reply from %s failed", self._model)
            if not self._cancel.is_set():
                self.failed.emit(f"{type(exc).__name__}: {exc}", exc)
        finally:
            self.finished.emit()


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
        self._running: dict[QThread, QObject] = {}

    def start(self, worker: QObject) -> QThread:
        """Move `worker` (with a `run` slot and a `finished` signal) to a new thread and run it."""
        thread = QThread()
        worker.moveToThread(thread)
        thread.started.connect(worker.run)
        # Direct: a queued quit would wait on the GUI thread, which may be blocked in wait_all().
        worker.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.finished.connect(self._on_thread_finished)
        self._running[thread] = worker
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
