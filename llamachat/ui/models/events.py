"""The router's model events (`GET /models/sse`), read on a background thread.

Also here, the picker's helpers around those events: `with_event` and `keep_progress`
(a status update and a listing that has no progress), `FailureReasons` (why a load
failed, read once from the managed server's log), `ModelStatuses` (what the picker
knows of each model, from listings, events and its own loads) and `IdleUnload`
(unloading idle models on routers that cannot sleep, told which are loaded and how
to unload one).

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
import time
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from llamachat.router import client
from llamachat.router.models import IN_PROGRESS, ModelEvent, ModelInfo
from llamachat.ui import tasks

log = logging.getLogger(__name__)

RETRY_S = 3.0
# A router may report "unloaded" for a moment after accepting a load; only after
# this long is "unloaded" taken to mean the load stopped.
LOAD_GRACE_S = 5.0


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
            except client.ServerError as exc:
                if exc.status in (404, 405, 501):
                    log.info("the router has no model event stream (%s); polling", exc.status)
                    self._post(self._unsupported)
                    return
                log.info("model event stream failed: %s", exc.message)
            except client.BackendError as exc:
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
    """Why each failed model failed, from `source(model_id)`, read until the log has it."""

    def __init__(self, source: Callable[[str], str] | None) -> None:
        self._source = source
        self._found: dict[str, str] = {}

    def get(self, model_id: str) -> str:
        """The reason ('' when none is known); the log is a file and tooltips ask often."""
        if self._source is None:
            return ""
        if model_id in self._found:
            return self._found[model_id]
        try:
            reason = self._source(model_id)
        except OSError as exc:
            log.info("could not read why %s failed: %s", model_id, exc)
            return ""
        # Kept once found only: the router may report the failure before its log has the
        # child's last lines, and a busy machine widens that gap.
        if reason:
            self._found[model_id] = reason
        return reason

    def forget(self, model_id: str) -> None:
        """Read the reason again next time (a new load, a new failure)."""
        self._found.pop(model_id, None)

    def clear(self) -> None:
        """Forget every reason (another router)."""
        self._found.clear()


class ModelStatuses:
    """What the picker knows of each model: the last listing, the events since, the loads it
    asked for and the failures, merged into the status each model shows."""

    def __init__(self) -> None:
        self.infos: dict[str, ModelInfo] = {}
        self.errors: dict[str, str] = {}
        # id -> (poll sequence number when the router accepted the load, or None before;
        # monotonic time of the request or acceptance)
        self.loading: dict[str, tuple[int | None, float]] = {}
        # Why a model failed, from the managed server's log (see ModelPicker.set_failure_log).
        self.reasons = FailureReasons(None)

    def status(self, model_id: str) -> str:
        """The status shown for a model: the server's, or "loading" while a load is under way."""
        info = self.infos.get(model_id)
        listed = info.status if info is not None else "unknown"
        if model_id in self.loading and listed not in ("loaded", "failed", "downloading"):
            return "loading"
        if model_id in self.errors and listed != "loaded":
            return "failed"
        return listed

    def error(self, model_id: str) -> str:
        """Why the model's last load failed ('' when it did not), with its log's reason."""
        info = self.infos.get(model_id)
        if model_id in self.errors:
            error = self.errors[model_id]
        elif info is not None and info.status == "failed":
            error = info.error
        else:
            return ""
        reason = self.reasons.get(model_id)
        return f"{error}:\n{reason}" if reason else error

    def progress(self, model_id: str) -> float | None:
        """0..1 of the model's load or download in progress, when the router reports it."""
        info = self.infos.get(model_id)
        return info.progress if info is not None and info.status in IN_PROGRESS else None

    def busy(self) -> bool:
        """Whether any model is loading or downloading (the picker polls more often then)."""
        return bool(self.loading) or any(info.status in IN_PROGRESS for info in self.infos.values())

    def clear(self) -> None:
        """Forget the loads, failures and reasons (another router); the listing stays."""
        self.loading.clear()
        self.errors.clear()
        self.reasons.clear()

    def load_asked(self, model_id: str) -> None:
        """A load of `model_id` is being asked for: it shows "loading" from now on."""
        self.errors.pop(model_id, None)
        self.reasons.forget(model_id)
        self.loading[model_id] = (None, time.monotonic())

    def load_sent(self, model_id: str, seq: int) -> None:
        """The router accepted the load: only a listing numbered after `seq` must show it."""
        if model_id in self.loading:
            self.loading[model_id] = (seq, time.monotonic())

    def load_failed(self, model_id: str, message: str) -> None:
        """The load request itself failed with `message`."""
        self.loading.pop(model_id, None)
        self.errors[model_id] = message

    def listed(self, infos: list[ModelInfo], *, seq: int, full: bool) -> None:
        """Take a listing numbered `seq`: every model's (`full`) or the router's only (a poll)."""
        # A listing has no load progress: an event's is kept while the status is the same.
        infos = [keep_progress(info, self.infos.get(info.id)) for info in infos]
        if full:
            self.infos = {info.id: info for info in infos}
        else:
            # A poll lists the router only: the providers' models stay as listed.
            providers = {i: info for i, info in self.infos.items() if info.provider}
            self.infos = {**{info.id: info for info in infos}, **providers}
        for model_id, info in self.infos.items():
            if info.status == "loaded":
                self.errors.pop(model_id, None)
        now = time.monotonic()
        for model_id, (mark, started) in list(self.loading.items()):
            listed = self.infos.get(model_id)
            status = listed.status if listed is not None else "unloaded"
            if status == "loaded":
                del self.loading[model_id]
            elif status == "failed":
                del self.loading[model_id]
                self.errors.setdefault(model_id, listed.error if listed else "")
            elif (
                status == "unloaded"
                and mark is not None
                and seq > mark
                and now - started > LOAD_GRACE_S
            ):
                del self.loading[model_id]
                self.errors[model_id] = "the router stopped loading it"

    def apply(self, event: ModelEvent) -> bool:
        """Take a status event; False when only a new listing can tell what it changed."""
        if event.kind in ("reload", "removed", "download_finished"):
            return False
        if event.kind == "download_failed":
            self.errors[event.model] = event.error
            return False
        info = self.infos.get(event.model)
        if info is None:
            return False  # a model the last listing did not have yet
        self.infos[event.model] = with_event(info, event)
        if event.status == "loaded":
            self.loading.pop(event.model, None)
            self.errors.pop(event.model, None)
        elif event.status == "failed":
            self.loading.pop(event.model, None)
            self.reasons.forget(event.model)
            # The load request's own answer, when it came first, says more.
            self.errors.setdefault(event.model, event.error)
        return True


class IdleUnload(QObject):
    """Unloads the loaded router models after `seconds` without activity.

    `loaded()` names the router models in memory now; `unload(model_id)` asks for one to go.
    """

    def __init__(
        self,
        loaded: Callable[[], list[str]],
        unload: Callable[[str], object],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._loaded = loaded
        self._unload = unload
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
        loaded = self._loaded()
        log.info("idle for %g s: unloading %s", self.seconds(), loaded)
        for model_id in loaded:
            self._unload(model_id)
