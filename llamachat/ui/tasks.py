"""One background runner for the GUI: blocking calls on worker threads, results on the GUI thread.

Modelled on Anki's `aqt.taskman`: `run_in_background(task, on_done)` calls `task()` on
a thread of a shared pool and then `on_done(future)` on the GUI thread, where
`future.result()` gives the result or raises what the task raised; `run_on_main(closure)`
queues any closure for the GUI thread. Both go through one queued signal.

Threads: closures run on the thread that owns the runner (the GUI thread); a task
must not touch widgets or the History's SQLite connection. Pass `receiver=` the
widget `on_done` belongs to: when it has been deleted by the time the task ends,
`on_done` is dropped instead of calling into a deleted object.

Errors: none of its own. What a task raises reaches `on_done` through its future;
an exception raised by `on_done` (or any closure) goes to `sys.excepthook`, which
the App shows as a bug.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Qt, Signal, Slot

from llamachat.router.client import BackendError

log = logging.getLogger(__name__)

MAX_THREADS = 8


class TaskManager(QObject):
    """Runs blocking calls on a thread pool and hands their futures back on the GUI thread."""

    _closures_pending = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._executor = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="task")
        self._closures: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._running: set[Future] = set()
        # Queued even when emitted on the GUI thread: a closure never runs inside its caller.
        self._closures_pending.connect(
            self._on_closures_pending, Qt.ConnectionType.QueuedConnection
        )

    def run_in_background(
        self,
        task: Callable[[], Any],
        on_done: Callable[[Future], None] | None = None,
        *,
        receiver: QObject | None = None,
        daemon: bool = False,
    ) -> Future:
        """Call `task()` on a worker thread, then `on_done(future)` here unless `receiver` died.

        A `daemon` task gets a daemon thread of its own: quitting does not wait for it
        (the pool's threads are joined at exit).
        """
        # Added under the lock the done-callback takes, so a task that ends at once is
        # not left counted as running.
        with self._lock:
            if daemon:
                future = _start_daemon(task)
            else:
                future = self._executor.submit(task)
                self._running.add(future)

        def finished(done: Future) -> None:
            with self._lock:
                self._running.discard(done)
            if on_done is not None:
                self.run_on_main(lambda: _deliver(on_done, done, receiver))

        future.add_done_callback(finished)
        return future

    def run_on_main(self, closure: Callable[[], None]) -> None:
        """Run `closure` on the GUI thread soon; safe from any thread."""
        with self._lock:
            self._closures.append(closure)
        self._closures_pending.emit()

    def running(self) -> int:
        """How many tasks (daemon ones aside) have not ended yet."""
        with self._lock:
            return len(self._running)

    def wait(self, timeout_s: float = 10.0) -> bool:
        """Block until every running task but daemon ones has ended (for closing); False on timeout."""
        with self._lock:
            running = set(self._running)
        _done, not_done = wait_futures(running, timeout=timeout_s)
        return not not_done

    @Slot()
    def _on_closures_pending(self) -> None:
        with self._lock:
            closures, self._closures = self._closures, []
        for closure in closures:
            try:
                closure()
            except Exception:  # noqa: BLE001 - handed to the excepthook below
                # One failing closure must not drop the others queued with it.
                sys.excepthook(*sys.exc_info())


def _start_daemon(task: Callable[[], Any]) -> Future:
    future: Future = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(task())
        except BaseException as exc:  # noqa: BLE001 - the future carries it to on_done
            future.set_exception(exc)

    threading.Thread(target=run, name="task-daemon", daemon=True).start()
    return future


def _deliver(on_done: Callable[[Future], None], future: Future, receiver: QObject | None) -> None:
    if receiver is not None and not shiboken6.isValid(receiver):
        log.debug("dropped the result of a task whose receiver was deleted")
        return
    on_done(future)


_manager: TaskManager | None = None


def manager() -> TaskManager:
    """The app's one runner (built on first use; needs the QApplication)."""
    global _manager
    if _manager is None or not shiboken6.isValid(_manager):
        app = QCoreApplication.instance()
        if app is None:
            raise RuntimeError("the task runner needs a QApplication")
        _manager = TaskManager(app)
    return _manager


def run_in_background(
    task: Callable[[], Any],
    on_done: Callable[[Future], None] | None = None,
    *,
    receiver: QObject | None = None,
    daemon: bool = False,
) -> Future:
    """`TaskManager.run_in_background` on the app's runner."""
    return manager().run_in_background(task, on_done, receiver=receiver, daemon=daemon)


def run_on_main(closure: Callable[[], None]) -> None:
    """`TaskManager.run_on_main` on the app's runner."""
    manager().run_on_main(closure)


def call_in_background(
    receiver: QObject,
    function: Callable[[], Any],
    done: Callable[[Any], None],
    failed: Callable[[str], None] | None = None,
) -> None:
    """Call `function` on the task runner; then `done(result)` or `failed(message)` here.

    A server or network failure gives its message; any other exception is logged with
    its traceback and given as "Type: text". Nothing is called once `receiver` is deleted.
    """

    def on_done(future: Future) -> None:
        try:
            result = future.result()
        except BackendError as exc:
            message = exc.message or str(exc)
        except Exception as exc:
            log.error("background call failed", exc_info=exc)
            message = f"{type(exc).__name__}: {exc}"
        else:
            done(result)
            return
        if failed is not None:
            failed(message)
        else:
            log.info("background call failed: %s", message)

    run_in_background(function, on_done, receiver=receiver)
