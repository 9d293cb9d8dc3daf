"""The router's model events (`GET /models/sse`), read on a background thread.

Also here, the picker's helpers around those events: `with_event` and `keep_progress`
(a status update and a listing that has no progress), `FailureReasons` (why a load
failed, read once from the managed server's log) and `IdleUnload` (unloading idle
models on routers that cannot sleep).

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

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from .. import backend
from ..models import ModelEvent, ModelInfo
from . import tasks

if TYPE_CHECKING:
    from .model_picker import ModelPicker

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

        def on_open() -> None:
            # The stream sends nothing until something changes: it is live once accepted.
            self._post(lambda: self._set_live(True))

        while not stop.is_set():
            try:
                self._models.watch(on_event, stop, on_open=on_open)
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


def with_event(info: ModelInfo, event: ModelEvent) -> ModelInfo:
    """`info` after a status event: its status, progress, stage and error."""
    return dataclasses.replace(
        info, status=event.status, progress=event.progress, stage=event.stage, error=event.error
    )


def keep_progress(info: ModelInfo, known: ModelInfo | None) -> ModelInfo:
    """A listed `info` (which has no load progress) with the progress an event gave, if the
    status is still the same."""
    if info.progress is None and known is not None and known.status == info.status:
        return dataclasses.replace(info, progress=known.progress, stage=known.stage)
    return info


class FailureReasons:
    """Why each failed model failed, from `source(model_id)`, read once per failure."""

    def __init__(self, source: Callable[[str], str] | None) -> None:
        self._source = source
        self._found: dict[str, str] = {}

    def get(self, model_id: str) -> str:
        """The reason ('' when none is known); the log is a file and tooltips ask often."""
        if self._source is None:
            return ""
        if model_id not in self._found:
            try:
                self._found[model_id] = self._source(model_id)
            except OSError as exc:
                log.info("could not read why %s failed: %s", model_id, exc)
                self._found[model_id] = ""
        return self._found[model_id]

    def forget(self, model_id: str) -> None:
        """Read the reason again next time (a new load, a new failure)."""
        self._found.pop(model_id, None)

    def clear(self) -> None:
        """Forget every reason (another router)."""
        self._found.clear()


class IdleUnload(QObject):
    """Unloads the picker's loaded router models after `seconds` without activity."""

    def __init__(self, picker: ModelPicker) -> None:
        super().__init__(picker)
        self._picker = picker
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_idle)

    def set_seconds(self, seconds: float) -> None:
        """Unload after `seconds` without activity from now on (0: never)."""
        self._timer.stop()
        self._timer.setInterval(int(seconds * 1000))
        if seconds > 0:
            self._timer.start()

    def seconds(self) -> float:
        """The idle time that unloads (0: never)."""
        return self._timer.interval() / 1000 if self._timer.interval() > 0 else 0.0

    def note_activity(self) -> None:
        """A request went out or ended: the idle time starts again."""
        if self._timer.interval() > 0:
            self._timer.start()

    @Slot()
    def _on_idle(self) -> None:
        loaded = [m.id for m in self._picker.models() if not m.provider and m.status == "loaded"]
        log.info("idle for %g s: unloading %s", self.seconds(), loaded)
        for model_id in loaded:
            self._picker.unload(model_id)
