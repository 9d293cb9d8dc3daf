"""The model feed: keeps the picker's listing current without the window waiting.

`ModelFeed(registry, ...)` lists every model of the router and the providers on the
task runner (`refresh`), polls the router's own list (`GET /v1/models`, which never
starts a load; `poll`) and follows the router's event stream (`events.ModelWatch`).
Polls run often on a router without the stream and seldom, as a safety net, on one
with it; faster while a model loads (`adjust`). A listing that arrives after a newer
one is dropped. What arrives is handed to the callables it was given; it keeps no
statuses itself (those are `events.ModelStatuses`, the picker's).

Errors: none raised. Failed listings reach `on_failed` with their message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, QTimer

from llamachat.router import client
from llamachat.router.models import ModelEvent, ModelInfo
from llamachat.ui.models.events import ModelWatch
from llamachat.ui.tasks import call_in_background

log = logging.getLogger(__name__)

POLL_MS = 3000
LOADING_POLL_MS = 500
# With the event stream open, a poll only catches what an event might have missed.
WATCHED_POLL_FACTOR = 5


class RouterModels(Protocol):
    """What the picker needs from `models.Models` (results of load and unload unused)."""

    def list(self) -> list[ModelInfo]:
        """The router's models."""

    def load(self, model: str) -> object:
        """Ask the router to load `model`."""

    def unload(self, model: str) -> object:
        """Ask the router to unload `model`."""


class ModelSource(Protocol):
    """What the picker needs from `providers.Registry`."""

    errors: dict[str, client.BackendError]

    def models(self) -> list[ModelInfo]:
        """Every model of the router and the providers."""

    def router_models(self) -> RouterModels:
        """Model management for the router."""


def list_models(source: ModelSource) -> tuple[list[ModelInfo], dict[str, str]]:
    """Every model `source` offers, and the error message of each source that failed (blocking)."""
    found = source.models()
    return found, {name: exc.message for name, exc in source.errors.items()}


Listed = Callable[[list[ModelInfo], dict[str, str], int, bool], None]
"""`on_listed(infos, errors by source, seq, full)`: a listing that is news (full: every source)."""


class ModelFeed(QObject):
    """Keeps the model listing current: background listings, polls and the router's event stream."""

    def __init__(
        self,
        registry: ModelSource,
        *,
        busy: Callable[[], bool],
        on_listed: Listed,
        on_failed: Callable[[str], None],
        on_event: Callable[[ModelEvent], None],
        poll_ms: int = POLL_MS,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.registry = registry
        """The router and providers listed (and loaded from by the picker)."""
        self._busy = busy  # whether a model is loading or downloading: poll faster
        self._on_listed = on_listed
        self._on_failed = on_failed
        self._on_event = on_event
        self.seq = 0
        """The number of the last listing asked for."""
        self._polling = False
        self._listed_seq = 0
        self.watch: ModelWatch | None = None
        """The router's event stream, when it has one."""
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self.poll)
        self._poll_ms = poll_ms

    def start(self) -> None:
        """List now, open the event stream and start polling."""
        self.refresh()
        self._start_watch()
        self._timer.start()

    def refresh(self) -> None:
        """List every model of the router and the providers again, in the background."""
        registry = self.registry
        self._polling = True
        self.seq += 1
        seq = self.seq
        call_in_background(
            self,
            lambda: list_models(registry),
            lambda result: self._listed(*result, seq=seq, full=True),
            lambda message: self._list_failed(message, seq=seq),
        )

    def poll(self) -> None:
        """Ask the router for its models' statuses (a list; never a load), unless one is pending."""
        if self._polling:
            return
        self._polling = True
        self.seq += 1
        seq = self.seq
        registry = self.registry
        call_in_background(
            self,
            lambda: registry.router_models().list(),
            lambda infos: self._listed(infos, {}, seq=seq, full=False),
            lambda message: self._list_failed(message, seq=seq),
        )

    def poll_soon(self) -> None:
        """Poll once control returns to the event loop."""
        QTimer.singleShot(0, self, self.poll)

    def set_registry(self, registry: ModelSource) -> None:
        """Follow another router or set of providers from now on, and list their models."""
        self.registry = registry
        self.refresh()
        self._start_watch()

    def stop(self) -> None:
        """Stop polling and the event stream."""
        self._timer.stop()
        if self.watch is not None:
            self.watch.stop()

    def watching(self) -> bool:
        """Whether the router's event stream is open (statuses arrive as they change)."""
        return self.watch is not None and self.watch.live

    def adjust(self) -> None:
        """Poll often while a model loads or no stream is open, seldom otherwise."""
        loading = self._busy()
        if self.watching():
            interval = self._poll_ms * (1 if loading else WATCHED_POLL_FACTOR)
        else:
            interval = LOADING_POLL_MS if loading else self._poll_ms
        if self._timer.interval() != interval:
            self._timer.setInterval(interval)

    def _start_watch(self) -> None:
        if self.watch is not None:
            self.watch.stop()
            self.watch.deleteLater()
        try:
            models = self.registry.router_models()
        except client.BackendError as exc:
            log.info("no model events: %s", exc.message)
            self.watch = None
            return
        self.watch = ModelWatch(models, self)
        self.watch.arrived.connect(self._on_event)
        self.watch.live_changed.connect(lambda _live: self.adjust())
        self.watch.start()

    def _arrived(self, seq: int) -> bool:
        """Whether a listing numbered `seq` is news (none newer arrived); ends polling at the last."""
        if seq == self.seq:
            self._polling = False
        if seq < self._listed_seq:
            return False
        self._listed_seq = seq
        return True

    def _listed(
        self, infos: list[ModelInfo], errors: dict[str, str], *, seq: int, full: bool
    ) -> None:
        if self._arrived(seq):
            self._on_listed(infos, errors, seq, full)

    def _list_failed(self, message: str, *, seq: int) -> None:
        if self._arrived(seq):
            self._on_failed(message)
