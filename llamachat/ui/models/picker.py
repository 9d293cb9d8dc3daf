"""The model picker: every model the router and providers offer, with its status.

`ModelPicker(registry)` shows a combo (accessible name "Model") whose items carry
each model's status: loaded ●, loading ◐ (with its progress when the router says),
unloaded ○, sleeping ◑, downloading ⇣ (with progress), failed ⚠ (with the server's
message, the reason its log gives, and a Retry); with RPC workers, a model's tooltip
says whether it fits alone or only with them (`set_fit`). Choosing an unloaded model loads it with a busy
bar beside the combo; Load / Eject act on the current model; the star makes it the
default for new chats (`default_changed`, the window writes the config).

Every HTTP call runs on the task runner (`tasks`), so the window never waits for
the server, and a load the router holds open until the model is in memory does not
hold up the statuses meanwhile. Listings, polls and the router's event stream are
`feed.ModelFeed`'s; they, and the picker's own loads, are merged in
`events.ModelStatuses`; the combo's items are `ModelCombo`'s.

Errors: none raised. Server and network failures (`client.BackendError`) are
shown beside the combo with a Retry.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QProgressBar,
    QToolButton,
    QWidget,
)

from llamachat.router.models import IN_PROGRESS, ModelEvent, ModelInfo
from llamachat.ui import plain
from llamachat.ui.models.events import FailureReasons, IdleUnload, ModelStatuses
from llamachat.ui.models.feed import POLL_MS, ModelFeed, ModelSource
from llamachat.ui.tasks import call_in_background

GLYPHS = {
    "loaded": "●",
    "loading": "◐",
    "unloaded": "○",
    "sleeping": "◑",
    "downloading": "⇣",
    "failed": "⚠",
    "unknown": "",
}
STATUS_WORDS = {
    "loaded": "loaded",
    "loading": "loading…",
    "unloaded": "not loaded",
    "sleeping": "sleeping",
    "downloading": "downloading…",
    "failed": "failed to load",
    "unknown": "",
}


def model_tooltip(
    model_id: str,
    status: str,
    error: str,
    info: ModelInfo | None,
    *,
    default: bool,
    fit: str = "",
) -> str:
    """A model's tooltip in the list: its status, why it failed, where it is from, its fit."""
    lines = [model_id]
    if STATUS_WORDS.get(status):
        lines.append(STATUS_WORDS[status].capitalize())
    if error:
        lines.append(error)
    if fit:
        lines.append(fit)
    if info is not None and info.provider:
        lines.append(f"From provider {info.provider}")
    # What the router lists (`architecture.input_modalities`), known before a load.
    if info is not None and "image" in info.modalities:
        lines.append("Reads images")
    if info is not None and "audio" in info.modalities:
        lines.append("Hears audio")
    if default:
        lines.append("Default for new chats")
    return "\n".join(lines)


def wanted_ids(infos: dict[str, ModelInfo], current: str) -> list[str]:
    """The combo's items: the router's models, the providers', then a chat's unlisted one."""
    ids = [i for i, info in infos.items() if not info.provider]
    ids += [i for i, info in infos.items() if info.provider]
    if current and current not in infos:
        ids.append(current)  # a chat's model the server no longer lists
    return ids


def progress_text(status: str, progress: float | None, model_id: str = "") -> str:
    """ "Loading…", "Downloading… 40%", or with the model's name: "Loading smol… 40%"."""
    verb = "Downloading" if status == "downloading" else "Loading"
    text = f"{verb} {model_id}…" if model_id else f"{verb}…"
    return text + (f" {round(progress * 100)}%" if progress is not None else "")


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


class ModelCombo(QComboBox):
    """The picker's list of models, each labelled with its status glyph, its tooltip the rest."""

    chosen = Signal(str)  # the person picked this model (never emitted by a refill)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Model")
        self.setToolTip("The model that answers")
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self._filling = False
        self.fit: Callable[[ModelInfo], str] | None = None
        """Whether a model fits alone or only with the RPC workers (`WorkerSet.fit`)."""
        self.currentIndexChanged.connect(self._on_index)

    def show_models(self, statuses: ModelStatuses, current: str, default: str) -> None:
        """Make the items match the listed models, keeping `current` selected."""
        wanted = wanted_ids(statuses.infos, current)
        present = [self.itemData(i) for i in range(self.count()) if self.itemData(i)]
        self._filling = True
        try:
            if present != wanted:
                self.clear()
                router_done = False
                for model_id in wanted:
                    info = statuses.infos.get(model_id)
                    if info is not None and info.provider and not router_done:
                        router_done = True
                        if self.count():
                            self.insertSeparator(self.count())
                    self.addItem(_label(model_id, statuses.status(model_id)), model_id)
            self.setCurrentIndex(self.findData(current))
        finally:
            self._filling = False
        self.show_statuses(statuses, default)

    def show_statuses(self, statuses: ModelStatuses, default: str) -> None:
        """Give each item its model's status glyph and tooltip (`default` is the starred one)."""
        for index in range(self.count()):
            model_id = self.itemData(index)
            if not model_id:
                continue
            status = statuses.status(model_id)
            self.setItemText(index, _label(model_id, status))
            info = statuses.infos.get(model_id)
            tooltip = model_tooltip(
                model_id,
                status,
                statuses.error(model_id),
                info,
                default=model_id == default,
                fit=self.fit(info) if self.fit is not None and info is not None else "",
            )
            self.setItemData(index, plain.tooltip(tooltip), Qt.ItemDataRole.ToolTipRole)

    @Slot(int)
    def _on_index(self, index: int) -> None:
        if self._filling or index < 0:
            return
        model_id = self.itemData(index)
        if model_id:
            self.chosen.emit(str(model_id))


class _DefaultStar(QToolButton):
    """The star beside the combo: filled when the chosen model is the default for new chats."""

    def __init__(self) -> None:
        super().__init__()
        self.setCheckable(True)
        self.setAccessibleName("Default model")

    def show_starred(self, starred: bool) -> None:
        """Fill the star or not; its tooltip says what a click does."""
        self.setChecked(starred)
        self.setText("★" if starred else "☆")
        self.setToolTip(
            "The default model for new chats (click to clear)"
            if starred
            else "Make this the default model for new chats"
        )


class _LoadBar(QProgressBar):
    """A load's or download's progress: a percentage when the router reports one."""

    def __init__(self) -> None:
        super().__init__()
        self.setAccessibleName("Model loading")
        self.setRange(0, 0)
        self.setMaximumHeight(12)
        self.setTextVisible(False)

    def show_progress(self, progress: float | None) -> None:
        """Show `progress` (0..1), or a busy bar when none is reported."""
        if progress is None:
            self.setRange(0, 0)  # no percentage reported: a busy bar, not a lie
        else:
            self.setRange(0, 100)
            self.setValue(round(progress * 100))


def _label(model_id: str, status: str) -> str:
    """A model's item text: its status glyph, then its id."""
    glyph = GLYPHS.get(status, "")
    return f"{glyph} {model_id}" if glyph else model_id


class ModelPicker(QWidget):
    """A model combo with statuses, load/eject, a default star and a Retry for failures."""

    model_changed = Signal(str)
    default_changed = Signal(str)
    models_listed = Signal(list)
    model_event = Signal(object)  # each models.ModelEvent of the router's stream

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
        self._current = current
        self._default = default_model
        self._statuses = ModelStatuses()
        self._problem = ""  # a failed listing or unload, shown with a Retry
        self._retry: Callable[[], None] | None = None
        self.idle = IdleUnload(
            lambda: [m.id for m in self.models() if not m.provider and m.status == "loaded"],
            self.unload,
            self,
        )
        """Unloads the router's models after an idle time, for routers that cannot sleep."""
        self._build()
        self.feed = ModelFeed(
            registry,
            busy=self._statuses.busy,
            on_listed=self._on_listed,
            on_failed=self._on_list_failed,
            on_event=self._on_model_event,
            poll_ms=poll_ms,
            parent=self,
        )
        """Lists, polls and watches the router's event stream; what arrives comes here."""
        if current:
            self._fill()
        self.feed.start()

    def _build(self) -> None:
        self.combo = ModelCombo()
        self.combo.chosen.connect(self.choose)

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

        self.star = _DefaultStar()
        self.star.clicked.connect(self._on_star)

        self.busy = _LoadBar()
        # About as wide as the Load button it replaces while loading: the bar does not jump.
        self.busy.setFixedWidth(self.load_button.sizeHint().width())

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
        return list(self._statuses.infos.values())

    def modalities(self, model_id: str) -> tuple[str, ...]:
        """What the model reads ("text", "image", ...); ("text",) when unknown."""
        info = self._statuses.infos.get(model_id)
        return info.modalities if info is not None else ("text",)

    def status(self, model_id: str) -> str:
        """The status shown for a model: the server's, or "loading" while a load is under way."""
        return self._statuses.status(model_id)

    def error(self, model_id: str) -> str:
        """Why the model's last load failed ('' when it did not), with its log's reason."""
        return self._statuses.error(model_id)

    def progress(self, model_id: str) -> float | None:
        """0..1 of the model's load or download in progress, when the router reports it."""
        return self._statuses.progress(model_id)

    def set_failure_log(self, reason: Callable[[str], str] | None) -> None:
        """Where a failed load's reason is read: `reason(model_id)` (the managed server's log)."""
        self._statuses.reasons = FailureReasons(reason)
        self._update_items()

    def set_fit(self, fit: Callable[[ModelInfo], str] | None) -> None:
        """How a model's tooltip says whether it fits alone or only with the RPC workers."""
        self.combo.fit = fit
        self._update_items()

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
        self.feed.refresh()

    def poll(self) -> None:
        """Ask the router for its models' statuses (a list; never a load), unless one is pending."""
        self.feed.poll()

    def load(self, model_id: str) -> None:
        """Ask the router to load a model; its progress shows beside the combo."""
        info = self._statuses.infos.get(model_id)
        if not model_id or (info is not None and info.provider):
            return
        self._statuses.load_asked(model_id)
        self._update_items()
        registry = self.feed.registry
        call_in_background(
            self,
            lambda: registry.router_models().load(model_id),
            lambda _: self._on_load_sent(model_id),
            lambda message: self._on_load_failed(model_id, message),
        )

    def unload(self, model_id: str) -> None:
        """Ask the router to unload (eject) a model."""
        info = self._statuses.infos.get(model_id)
        if not model_id or (info is not None and info.provider):
            return
        self._statuses.loading.pop(model_id, None)
        registry = self.feed.registry
        call_in_background(
            self,
            lambda: registry.router_models().unload(model_id),
            lambda _: self.feed.poll_soon(),
            lambda message: self._fail(
                f"Could not unload {model_id}: {message}", self.feed.poll_soon
            ),
        )

    def set_registry(self, registry: ModelSource) -> None:
        """Talk to another router or set of providers from now on, and list their models."""
        self._statuses.clear()
        self._problem = ""
        self.feed.set_registry(registry)

    def shutdown(self) -> None:
        """Stop polling and the event stream (call when the window closes)."""
        self.feed.stop()
        self.idle.set_seconds(0)

    def watching(self) -> bool:
        """Whether the router's event stream is open (statuses arrive as they change)."""
        return self.feed.watching()

    # ------------------------------------------------------------------ events

    @Slot(object)
    def _on_model_event(self, event: ModelEvent) -> None:
        applied = self._statuses.apply(event)
        # Said once applied: a listener asking `status()` (the warm-up, at "loaded") hears
        # the news, not the status before it, which left it waiting for the next poll.
        self.model_event.emit(event)
        if not applied:
            self.feed.poll_soon()
            return
        self._update_items()
        self.feed.adjust()

    # ------------------------------------------------------------------ results

    def _on_listed(
        self, infos: list[ModelInfo], errors: dict[str, str], seq: int, full: bool
    ) -> None:
        self._problem = (
            "Could not list the models of "
            + "; ".join(f"{source}: {message}" for source, message in errors.items())
            if errors
            else ""
        )
        self._statuses.listed(infos, seq=seq, full=full)
        listed = self._statuses.infos
        if not self._current and listed:
            # Prefer the default, then a model already in memory: the first reply starts at once.
            loaded = [i for i, info in listed.items() if info.status == "loaded"]
            if self._default in listed:
                self._current = self._default
            else:
                self._current = (loaded or list(listed))[0]
            self._fill()
            self.model_changed.emit(self._current)
        else:
            self._fill()
        self.feed.adjust()
        self.models_listed.emit(self.models())

    def _on_list_failed(self, message: str) -> None:
        self._problem = f"Could not list the models: {message}"
        self._retry = self.refresh
        self._show_state()

    def _on_load_sent(self, model_id: str) -> None:
        self._statuses.load_sent(model_id, self.feed.seq)
        self.feed.poll_soon()

    def _on_load_failed(self, model_id: str, message: str) -> None:
        self._statuses.load_failed(model_id, message)
        self._update_items()
        self.feed.poll_soon()

    def _fail(self, message: str, retry: Callable[[], None] | None) -> None:
        self._problem = message
        self._retry = retry
        self._show_state()

    # ------------------------------------------------------------------ display

    def _fill(self) -> None:
        """Make the combo's items match the listed models, keeping the current one selected."""
        self.combo.show_models(self._statuses, self._current, self._default)
        self._show_state()

    def _update_items(self) -> None:
        self.combo.show_statuses(self._statuses, self._default)
        self._show_state()

    def _show_state(self) -> None:
        model_id = self._current
        status = self.status(model_id) if model_id else "unknown"
        info = self._statuses.infos.get(model_id)
        manageable = (
            bool(model_id) and info is not None and not info.provider and (info.status != "unknown")
        )
        self.load_button.setVisible(manageable and status in ("unloaded", "failed"))
        self.unload_button.setVisible(manageable and status in ("loaded", "sleeping"))
        self.busy.setVisible(status in IN_PROGRESS)
        progress = self.progress(model_id) if model_id else None
        self.busy.show_progress(progress)
        self.star.setVisible(bool(model_id))
        self.star.show_starred(bool(model_id) and model_id == self._default)
        text, retry = "", None
        if status in IN_PROGRESS:
            # The model's name is beside it, in the list; the tooltip names it.
            text = progress_text(status, progress)
        elif status == "failed":
            text = f"{model_id} failed to load: {self.error(model_id)}"
            retry = self._retry_current
        elif self._problem:
            text = self._problem
            retry = self._retry or self.refresh
        self._retry = retry
        # One line beside the combo (a log's reason has several); the tooltip has them all.
        plain.set_text(self.status_label, " ".join(text.split("\n")))
        whole = progress_text(status, progress, model_id) if status in IN_PROGRESS else text
        self.status_label.setToolTip(plain.tooltip(whole))
        self.status_label.setVisible(bool(text))
        self.retry_button.setVisible(retry is not None)
        word = STATUS_WORDS.get(status, "")
        self.combo.setAccessibleDescription(f"{model_id}: {word}" if word else model_id)

    def _retry_current(self) -> None:
        self.load(self._current)

    # ------------------------------------------------------------------ slots

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
