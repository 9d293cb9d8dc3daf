"""What the server says of the model a conversation counts for: its context size, the
size it was trained for, and whether its template takes tools.

`ModelLimits(builder)` belongs to one `context_watch.ContextWatch`. The size is asked for
when a model is picked (`set_model`), again as soon as it is loaded (`model_event`,
`models_listed`, a reply's first figures: `figured`, a reply's end: `ask_unknown`) and
after another router (`router_changed`), since a model not loaded may not say. What
`/props` says of tools goes to the builder (`TurnBuilder.set_takes_tools`): a model whose
template cannot take tools is sent none, and `tools_changed` says the request changed.

Threads: asking runs on `tasks.run_in_background`; the answer comes back on the GUI
thread, where every other method runs.

Errors: none raised; a server that does not say leaves the size unknown (None).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal, Slot

from llamachat.router.models import ModelEvent, ModelInfo, Models
from llamachat.ui import tasks
from llamachat.ui.chat.builder import TurnBuilder

log = logging.getLogger(__name__)


class ModelLimits(QObject):
    """The context size of the model counted for, and whether it takes tools, as its server says."""

    known = Signal()  # the size (and what the server says of tools) came
    tools_changed = Signal()  # the tools the model is offered changed: the request did
    loaded = Signal()  # the model counted for was loaded: what waited for it may be counted

    def __init__(self, builder: TurnBuilder, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._builder = builder
        self.model = ""
        """The model counted for ('' for none)."""
        self.n_ctx: int | None = None
        """Its context size, or None while the server has not said."""
        self.trained: int | None = None
        """The context it was trained for (its largest sensible size), when listed."""
        # The models loaded at the last listing (routers without events).
        self._listed_loaded: set[str] = set()
        # Whether this reply's first figures already asked for the context size.
        self._asked_live = False

    def set_model(self, model: str) -> None:
        """Count for `model` from now on: its size is unknown until its server says."""
        self.model = model
        self.n_ctx = self.trained = None
        self.ask()

    def router_changed(self) -> None:
        """Another router: the model's size is asked for again."""
        self.n_ctx = self.trained = None
        self.ask()

    def ask(self) -> None:
        """Ask the server for the model's size and tools, in the background."""
        model = self.model
        if not model:
            return
        client, name = self._builder.client_for(model)

        def ask() -> tuple[tuple[int | None, int | None], bool | None]:
            models = Models(client)
            return models.context_limits(name), models.takes_tools(name)

        tasks.run_in_background(ask, lambda future: self._on_size(model, future), receiver=self)

    def ask_unknown(self) -> None:
        """Ask again for what the server has not said (a model that loaded since can)."""
        if self.n_ctx is None or not self._builder.tools_known(self.model):
            self.ask()

    def _on_size(self, model: str, future) -> None:
        if model != self.model:
            return
        try:
            (self.n_ctx, self.trained), takes = future.result()
        except Exception as exc:  # noqa: BLE001 - no size: the meter says so
            log.info("no context size for %s: %s", model, exc)
            return
        if takes is not None and self._builder.set_takes_tools(model, takes):
            self.tools_changed.emit()
        self.known.emit()

    def model_event(self, event: ModelEvent) -> None:
        """A router's model event: the model just loaded tells its size at once."""
        if event.kind == "status" and event.status == "loaded":
            self._loaded(event.model)

    def models_listed(self, infos: list[ModelInfo]) -> None:
        """A listing (routers without events): a loaded model whose size is unknown tells it."""
        loaded = {info.id for info in infos if info.status == "loaded"}
        # A listing comes every few seconds: only a load since the last one counts again.
        for model in loaded - self._listed_loaded:
            self._loaded(model)
        self._listed_loaded = loaded

    def _loaded(self, model: str) -> None:
        names = (self.model, self._builder.client_for(self.model)[1]) if self.model else ()
        if model not in names:
            return
        self.ask_unknown()
        self.loaded.emit()

    def reply_started(self) -> None:
        """A reply streams: its first figures may answer for a size unknown till now."""
        self._asked_live = False

    @Slot()
    def figured(self) -> None:
        """The reply's first figures prove its model loaded: a size unknown till now answers."""
        if self.n_ctx is None and not self._asked_live:
            self._asked_live = True
            self.ask()
