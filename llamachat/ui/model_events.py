"""The router's model events (`GET /models/sse`), read on a background thread.

`ModelWatch(source)` reads the stream on a daemon task of the runner (`tasks`), so
the GUI thread never waits on it, and emits each `models.ModelEvent` as `arrived` on
the GUI thread. `live` says whether the stream is open: the picker polls `/models`
often while it is not. A router without the stream (404) is not asked again;
another failure (the router restarting) is retried every few seconds. `stop()`
shuts the stream's socket down, so the thread ends at once (on quit, or when the
window talks to another router).

Errors: none raised; a stream that fails only makes `live` false.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, Signal

from .. import backend
from ..models import ModelEvent
from . import tasks

log = logging.getLogger(__name__)

RETRY_S = 3.0


class ModelWatch(QObject):
    """Follows one router's `/models/sse` until stopped; events arrive as `arrived`."""

    arrived = Signal(object)  # a models.ModelEvent
    live_changed = Signal(bool)

    def __init__(self, models: Any, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._models = models
        self._stop = threading.Event()
        self.live = False
        self.supported = True
        """False once the router answered that it has no event stream."""

    def start(self) -> None:
        """Start reading the stream (returns at once)."""
        watch = getattr(self._models, "watch", None)
        if watch is None:
            self.supported = False
            return
        tasks.run_in_background(self._run, daemon=True)

    def stop(self) -> None:
        """Stop reading; the stream's socket is shut down and its thread ends."""
        self._stop.set()

    def _post(self, closure: Any) -> None:
        def deliver() -> None:
            if shiboken6.isValid(self) and not self._stop.is_set():
                closure()

        tasks.run_on_main(deliver)

    def _set_live(self, live: bool) -> None:
        if live != self.live:
            self.live = live
            self.live_changed.emit(live)

    def _run(self) -> None:
        stop = self._stop

        def on_event(event: ModelEvent) -> None:
            def deliver() -> None:
                self._set_live(True)
                self.arrived.emit(event)

            self._post(deliver)

        while not stop.is_set():
            # The stream sends nothing until something changes: it counts as live once open.
            self._post(lambda: self._set_live(True))
            try:
                self._models.watch(on_event, stop)
            except backend.ServerError as exc:
                if exc.status in (404, 405, 501):
                    log.info("the router has no model event stream (%s); polling", exc.status)
                    self._post(self._unsupported)
                    return
                log.info("model event stream failed: %s", exc.message)
            except backend.BackendError as exc:
                log.info("model event stream failed: %s", exc.message)
            self._post(lambda: self._set_live(False))
            stop.wait(RETRY_S)

    def _unsupported(self) -> None:
        self.supported = False
        self._set_live(False)
