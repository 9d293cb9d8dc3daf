"""The model picker: every model the router and providers offer, with its status.

`ModelPicker(registry)` shows a combo (accessible name "Model") whose items carry
each model's status: loaded ●, loading ◐, unloaded ○, sleeping ◑, failed ⚠ (with
the server's message and a Retry). Choosing an unloaded model loads it with a busy
bar beside the combo; Load / Eject act on the current model; the star makes it the
default for new chats (`default_changed`, the window writes the config).

Every HTTP call runs on the task runner (`tasks`), so the window never waits for
the server, and a load the router holds open until the model is in memory does not
hold up the statuses meanwhile. A listing that arrives after a newer one is dropped.
Polls only list models (`GET /v1/models`), which never starts a load.

Errors: none raised. Server and network failures (`backend.BackendError`) are
shown beside the combo with a Retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from PySide6.QtCore import QObject, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QProgressBar,
    QToolButton,
    QWidget,
)

from .. import backend
from ..models import ModelInfo
from . import plain, tasks

log = logging.getLogger(__name__)

POLL_MS = 3000
LOADING_POLL_MS = 500
# A router may report "unloaded" for a moment after accepting a load; only after
# this long is "unloaded" taken to mean the load stopped.
LOAD_GRACE_S = 5.0

GLYPHS = {
    "loaded": "●",
    "loading": "◐",
    "unloaded": "○",
    "sleeping": "◑",
    "failed": "⚠",
    "unknown": "",
}
STATUS_WORDS = {
    "loaded": "loaded",
    "loading": "loading…",
    "unloaded": "not loaded",
    "sleeping": "sleeping",
    "failed": "failed to load",
    "unknown": "",
}


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

    errors: dict[str, backend.BackendError]

    def models(self) -> list[ModelInfo]:
        """Every model of the router and the providers."""

    def router_models(self) -> RouterModels:
        """Model management for the router."""


def list_models(source: ModelSource) -> tuple[list[ModelInfo], dict[str, str]]:
    """Every model `source` offers, and the error message of each source that failed (blocking)."""
    found = source.models()
    return found, {name: exc.message for name, exc in source.errors.items()}


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
        except backend.BackendError as exc:
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

    tasks.run_in_background(function, on_done, receiver=receiver)


class _ElidedLabel(plain.Label):
    """One line of plain text elided to the room it gets, whole in its tooltip.

    A long status ("Loading <a long model id>…", a router's error) would otherwise
    widen the top bar and squeeze the sessions sidebar and the model list.
    """

    def minimumSizeHint(self) -> QSize:
        """A dozen characters at most: the layout never grows to fit the whole text."""
        hint = super().minimumSizeHint()
        start = self.text() if len(self.text()) <= 12 else self.text()[:11] + "…"
        return QSize(self.fontMetrics().horizontalAdvance(start), hint.height())

    def paintEvent(self, event: QPaintEvent) -> None:
        """Draw the text elided at the right edge (text() stays whole)."""
        painter = QPainter(self)
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(
            self.text(), Qt.TextElideMode.ElideRight, rect.width()
        )
        self.style().drawItemText(
            painter,
            rect,
            int(self.alignment()),
            self.palette(),
            self.isEnabled(),
            shown,
            self.foregroundRole(),
        )


class ModelPicker(QWidget):
    """A model combo with statuses, load/eject, a default star and a Retry for failures."""

    model_changed = Signal(str)
    default_changed = Signal(str)
    models_listed = Signal(list)

    def __init__(
        self,
        registry: ModelSource,
        *,
        current: str = "",
        default_model: str = "",
        poll_ms: int = POLL_MS,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._registry = registry
        self._current = current
        self._default = default_model
        self._infos: dict[str, ModelInfo] = {}
        self._errors: dict[str, str] = {}
        self._problem = ""  # a failed listing or unload, shown with a Retry
        # id -> (poll sequence number when the router accepted the load, or None before;
        # monotonic time of the request or acceptance)
        self._loading: dict[str, tuple[int | None, float]] = {}
        self._poll_seq = 0
        self._polling = False
        self._filling = False
        self._retry: Callable[[], None] | None = None
        self._listed_seq = 0
        self._build()
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self.poll)
        self._poll_ms = poll_ms
        if current:
            self._fill()
        self.refresh()
        self._timer.start()

    def _build(self) -> None:
        self.combo = QComboBox()
        self.combo.setAccessibleName("Model")
        self.combo.setToolTip("The model that answers")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.currentIndexChanged.connect(self._on_chosen)

        self.load_button = QToolButton()
        self.load_button.setText("Load")
        self.load_button.setAccessibleName("Load model")
        self.load_button.setToolTip("Load the model into memory now")
        self.load_button.clicked.connect(lambda: self.load(self._current))

        self.unload_button = QToolButton()
        self.unload_button.setText("⏏")
        self.unload_button.setAccessibleName("Unload model")
        self.unload_button.setToolTip("Eject: unload the model and free its memory")
        self.unload_button.clicked.connect(lambda: self.unload(self._current))

        self.star = QToolButton()
        self.star.setCheckable(True)
        self.star.setAccessibleName("Default model")
        self.star.clicked.connect(self._on_star)

        self.busy = QProgressBar()
        self.busy.setAccessibleName("Model loading")
        self.busy.setRange(0, 0)  # a router reports no percentage: a busy bar, not a lie
        # About as wide as the Load button it replaces while loading: the bar does not jump.
        self.busy.setFixedWidth(self.load_button.sizeHint().width())
        self.busy.setMaximumHeight(12)
        self.busy.setTextVisible(False)

        self.status_label = _ElidedLabel()
        self.status_label.setAccessibleName("Model status")
        self.status_label.setWordWrap(False)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.retry_button = QToolButton()
        self.retry_button.setText("Retry")
        self.retry_button.setAccessibleName("Retry model")
        self.retry_button.clicked.connect(self._on_retry)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (
            self.combo,
            self.load_button,
            self.unload_button,
            self.star,
            self.busy,
            self.status_label,
            self.retry_button,
        ):
            layout.addWidget(widget)
        # The status takes the room left (elided there) and the rest stays empty.
        layout.setStretchFactor(self.status_label, 1)
        self._show_state()

    # ------------------------------------------------------------------ public

    def current_model(self) -> str:
        """The chosen model's id ('' before any is known)."""
        return self._current

    def set_current(self, model_id: str) -> None:
        """Show `model_id` as chosen without loading it or emitting model_changed."""
        self._current = model_id
        self._fill()

    def choose(self, model_id: str) -> None:
        """What picking a model does: make it current, and load it when it is not loaded."""
        changed = model_id != self._current
        self._current = model_id
        self._fill()
        if changed:
            self.model_changed.emit(model_id)
        if self.status(model_id) in ("unloaded", "failed"):
            self.load(model_id)

    def models(self) -> list[ModelInfo]:
        """The models last listed."""
        return list(self._infos.values())

    def modalities(self, model_id: str) -> tuple[str, ...]:
        """What the model reads ("text", "image", ...); ("text",) when unknown."""
        info = self._infos.get(model_id)
        return info.modalities if info is not None else ("text",)

    def status(self, model_id: str) -> str:
        """The status shown for a model: the server's, or "loading" while a load is under way."""
        info = self._infos.get(model_id)
        listed = info.status if info is not None else "unknown"
        if model_id in self._loading and listed not in ("loaded", "failed"):
            return "loading"
        if model_id in self._errors and listed != "loaded":
            return "failed"
        return listed

    def error(self, model_id: str) -> str:
        """Why the model's last load failed ('' when it did not)."""
        if model_id in self._errors:
            return self._errors[model_id]
        info = self._infos.get(model_id)
        return info.error if info is not None and info.status == "failed" else ""

    def default_model(self) -> str:
        """The model starred as the default for new chats."""
        return self._default

    def set_default(self, model_id: str) -> None:
        """Show `model_id` as the starred default (after the settings changed it)."""
        self._default = model_id
        self._update_items()

    def open_popup(self) -> None:
        """Focus the combo and open its list (the switch-model shortcut)."""
        self.combo.setFocus()
        self.combo.showPopup()

    def refresh(self) -> None:
        """List every model of the router and the providers again, in the background."""
        registry = self._registry
        self._polling = True
        self._poll_seq += 1
        seq = self._poll_seq
        call_in_background(
            self,
            lambda: list_models(registry),
            lambda result: self._on_listed(*result, seq=seq, full=True),
            lambda message: self._on_list_failed(message, seq=seq),
        )

    def poll(self) -> None:
        """Ask the router for its models' statuses (a list; never a load), unless one is pending."""
        if self._polling:
            return
        self._polling = True
        self._poll_seq += 1
        seq = self._poll_seq
        registry = self._registry
        call_in_background(
            self,
            lambda: registry.router_models().list(),
            lambda infos: self._on_listed(infos, {}, seq=seq, full=False),
            lambda message: self._on_list_failed(message, seq=seq),
        )

    def load(self, model_id: str) -> None:
        """Ask the router to load a model; its progress shows beside the combo."""
        info = self._infos.get(model_id)
        if not model_id or (info is not None and info.provider):
            return
        self._errors.pop(model_id, None)
        self._loading[model_id] = (None, time.monotonic())
        self._update_items()
        registry = self._registry
        call_in_background(
            self,
            lambda: registry.router_models().load(model_id),
            lambda _: self._on_load_sent(model_id),
            lambda message: self._on_load_failed(model_id, message),
        )

    def unload(self, model_id: str) -> None:
        """Ask the router to unload (eject) a model."""
        info = self._infos.get(model_id)
        if not model_id or (info is not None and info.provider):
            return
        self._loading.pop(model_id, None)
        registry = self._registry
        call_in_background(
            self,
            lambda: registry.router_models().unload(model_id),
            lambda _: self._poll_soon(),
            lambda message: self._fail(f"Could not unload {model_id}: {message}", self._poll_soon),
        )

    def set_registry(self, registry: ModelSource) -> None:
        """Talk to another router or set of providers from now on, and list their models."""
        self._registry = registry
        self._loading.clear()
        self._errors.clear()
        self._problem = ""
        self.refresh()

    def shutdown(self) -> None:
        """Stop polling (call when the window closes); answers still under way are dropped."""
        self._timer.stop()

    # ------------------------------------------------------------------ results

    def _arrived(self, seq: int) -> bool:
        """Whether a listing numbered `seq` is news (none newer arrived); ends polling at the last."""
        if seq == self._poll_seq:
            self._polling = False
        if seq < self._listed_seq:
            return False
        self._listed_seq = seq
        return True

    def _on_listed(
        self, infos: list[ModelInfo], errors: dict[str, str], *, seq: int, full: bool
    ) -> None:
        if not self._arrived(seq):
            return
        self._problem = (
            "Could not list the models of "
            + "; ".join(f"{source}: {message}" for source, message in errors.items())
            if errors
            else ""
        )
        if full:
            self._infos = {info.id: info for info in infos}
        else:
            # A poll lists the router only: the providers' models stay as listed.
            providers = {i: info for i, info in self._infos.items() if info.provider}
            self._infos = {**{info.id: info for info in infos}, **providers}
        for model_id, info in self._infos.items():
            if info.status == "loaded":
                self._errors.pop(model_id, None)
        now = time.monotonic()
        for model_id, (mark, started) in list(self._loading.items()):
            listed = self._infos.get(model_id)
            status = listed.status if listed is not None else "unloaded"
            if status == "loaded":
                del self._loading[model_id]
            elif status == "failed":
                del self._loading[model_id]
                self._errors.setdefault(model_id, listed.error if listed else "")
            elif (
                status == "unloaded"
                and mark is not None
                and seq > mark
                and now - started > LOAD_GRACE_S
            ):
                del self._loading[model_id]
                self._errors[model_id] = "the router stopped loading it"
        if not self._current and self._infos:
            # Prefer the default, then a model already in memory: the first reply starts at once.
            loaded = [i for i, info in self._infos.items() if info.status == "loaded"]
            if self._default in self._infos:
                self._current = self._default
            else:
                self._current = (loaded or list(self._infos))[0]
            self._fill()
            self.model_changed.emit(self._current)
        else:
            self._fill()
        self._adjust_poll()
        self.models_listed.emit(self.models())

    def _on_list_failed(self, message: str, *, seq: int) -> None:
        if not self._arrived(seq):
            return
        self._problem = f"Could not list the models: {message}"
        self._retry = self.refresh
        self._show_state()

    def _on_load_sent(self, model_id: str) -> None:
        if model_id in self._loading:
            # Only a listing asked for after this point must show the load.
            self._loading[model_id] = (self._poll_seq, time.monotonic())
        self._poll_soon()

    def _on_load_failed(self, model_id: str, message: str) -> None:
        self._loading.pop(model_id, None)
        self._errors[model_id] = message
        self._update_items()
        self._poll_soon()

    def _fail(self, message: str, retry: Callable[[], None] | None) -> None:
        self._problem = message
        self._retry = retry
        self._show_state()

    def _poll_soon(self) -> None:
        QTimer.singleShot(0, self, self.poll)

    def _adjust_poll(self) -> None:
        loading = bool(self._loading) or any(
            info.status == "loading" for info in self._infos.values()
        )
        interval = LOADING_POLL_MS if loading else self._poll_ms
        if self._timer.interval() != interval:
            self._timer.setInterval(interval)

    # ------------------------------------------------------------------ display

    def _label(self, model_id: str) -> str:
        glyph = GLYPHS.get(self.status(model_id), "")
        return f"{glyph} {model_id}" if glyph else model_id

    def _tooltip(self, model_id: str) -> str:
        status = self.status(model_id)
        lines = [model_id]
        if STATUS_WORDS.get(status):
            lines.append(STATUS_WORDS[status].capitalize())
        if self.error(model_id):
            lines.append(self.error(model_id))
        info = self._infos.get(model_id)
        if info is not None and info.provider:
            lines.append(f"From provider {info.provider}")
        if info is not None and "image" in info.modalities:
            lines.append("Reads images")
        if model_id == self._default:
            lines.append("Default for new chats")
        return "\n".join(lines)

    def _wanted_ids(self) -> list[str]:
        ids = [i for i, info in self._infos.items() if not info.provider]
        ids += [i for i, info in self._infos.items() if info.provider]
        if self._current and self._current not in self._infos:
            ids.append(self._current)  # a chat's model the server no longer lists
        return ids

    def _fill(self) -> None:
        """Make the combo's items match the listed models, keeping the current one selected."""
        wanted = self._wanted_ids()
        present = [
            self.combo.itemData(i) for i in range(self.combo.count()) if self.combo.itemData(i)
        ]
        self._filling = True
        try:
            if present != wanted:
                self.combo.clear()
                router_done = False
                for model_id in wanted:
                    info = self._infos.get(model_id)
                    if info is not None and info.provider and not router_done:
                        router_done = True
                        if self.combo.count():
                            self.combo.insertSeparator(self.combo.count())
                    self.combo.addItem(self._label(model_id), model_id)
            self.combo.setCurrentIndex(self.combo.findData(self._current))
        finally:
            self._filling = False
        self._update_items()

    def _update_items(self) -> None:
        for index in range(self.combo.count()):
            model_id = self.combo.itemData(index)
            if not model_id:
                continue
            self.combo.setItemText(index, self._label(model_id))
            self.combo.setItemData(
                index, plain.tooltip(self._tooltip(model_id)), Qt.ItemDataRole.ToolTipRole
            )
        self._show_state()

    def _show_state(self) -> None:
        model_id = self._current
        status = self.status(model_id) if model_id else "unknown"
        info = self._infos.get(model_id)
        manageable = (
            bool(model_id) and info is not None and not info.provider and (info.status != "unknown")
        )
        self.load_button.setVisible(manageable and status in ("unloaded", "failed"))
        self.unload_button.setVisible(manageable and status in ("loaded", "sleeping"))
        self.busy.setVisible(status == "loading")
        self.star.setVisible(bool(model_id))
        starred = bool(model_id) and model_id == self._default
        self.star.setChecked(starred)
        self.star.setText("★" if starred else "☆")
        self.star.setToolTip(
            "The default model for new chats (click to clear)"
            if starred
            else "Make this the default model for new chats"
        )
        text, retry = "", None
        if status == "loading":
            # The model's name is beside it, in the list.
            text = "Loading…"
        elif status == "failed":
            text = f"{model_id} failed to load: {self.error(model_id)}"
            retry = self._retry_current
        elif self._problem:
            text = self._problem
            retry = self._retry or self.refresh
        self._retry = retry
        plain.set_text(self.status_label, text)
        whole = f"Loading {model_id}…" if status == "loading" else text
        self.status_label.setToolTip(plain.tooltip(whole))
        self.status_label.setVisible(bool(text))
        self.retry_button.setVisible(retry is not None)
        word = STATUS_WORDS.get(status, "")
        self.combo.setAccessibleDescription(f"{model_id}: {word}" if word else model_id)

    def _retry_current(self) -> None:
        self.load(self._current)

    # ------------------------------------------------------------------ slots

    @Slot(int)
    def _on_chosen(self, index: int) -> None:
        if self._filling or index < 0:
            return
        model_id = self.combo.itemData(index)
        if model_id:
            self.choose(str(model_id))

    @Slot()
    def _on_retry(self) -> None:
        retry, self._retry = self._retry, None
        self._problem = ""
        if retry is not None:
            retry()
        self._show_state()

    @Slot(bool)
    def _on_star(self, checked: bool) -> None:
        self._default = self._current if checked else ""
        self._update_items()
        self.default_changed.emit(self._default)
