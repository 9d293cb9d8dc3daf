"""The context meter: how much of the model's context window the chat fills.

`ContextMeter(registry)` (accessible name "Context meter") shows the tokens of the
model's context in use. Following a conversation's `ContextWatch` (`follow`), it shows
the next request as it stands, counted part by part (system prompt, each skill, earlier
messages, the message being written, each attachment, tools, the chat template), live
while a reply streams, with the breakdown, the reply reserve and how much of it the
server already holds (`follow_cache`: the cache warm-up's figures) in its tooltip; amber
when the request and the reserve near the context size, red over it.
On its own it shows the tokens the last reply used of the model's context size. The size comes from the server's
`/props` with `autoload=false` (`models.Models.context_size`), fetched in the
background, so asking never loads a model. The usage comes from each reply's
stats event. With the draft in the composer it warns, in colour and in words,
when the next message would not fit.

Errors: none raised; a context size the server cannot give leaves the meter
counting tokens without a limit, and the tooltip says so.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import Slot
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QWidget

from llamachat import context
from llamachat.router import client as backend
from llamachat.router.models import Models
from llamachat.tokens import estimate_tokens
from llamachat.ui import plain
from llamachat.ui.tasks import call_in_background

if TYPE_CHECKING:
    from llamachat.ui.chat.context_watch import ContextWatch
    from llamachat.ui.chat.warmup import Warmer

# Qt's QWIDGETSIZE_MAX, which PySide6 does not export: no maximum size.
_NO_MAXIMUM = (1 << 24) - 1

log = logging.getLogger(__name__)

WARNING_COLOR = QColor("#c0392b")
NEAR_COLOR = QColor("#d68910")
# The share of the context past which the meter turns amber.
NEAR_SHARE = 0.8


class ClientSource(Protocol):
    """What the meter needs from `providers.Registry`."""

    def client_for(self, model_id: str) -> tuple[backend.Client, str]:
        """The client serving a model and the name that server knows it by."""


def used_tokens(stats: dict) -> int | None:
    """Tokens in the context after a reply, from a stats event's usage or timings."""
    usage = stats.get("usage") or {}
    total = usage.get("total_tokens") if isinstance(usage, dict) else None
    if isinstance(total, int) and total > 0:
        return total
    timings = stats.get("timings") or {}
    if not isinstance(timings, dict):
        return None
    # llama.cpp's prompt_n counts only the tokens it had to process; cache_n are the rest.
    parts = [timings.get(key) for key in ("cache_n", "prompt_n", "predicted_n")]
    counted = [part for part in parts if isinstance(part, int)]
    return sum(counted) if counted else None


class ContextMeter(QWidget):
    """Tokens used of the current model's context, with a warning before it overflows."""

    def __init__(
        self,
        registry: ClientSource,
        *,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._registry = registry
        self._model = ""
        self._n_ctx: int | None = None
        self._used = 0
        self._draft = 0
        self._watch: ContextWatch | None = None
        self._warmer: Warmer | None = None
        self._live_shown = False
        self.state = "ok"  # "ok", "near" or "over": what the colour says
        self.setAccessibleName("Context meter")
        self.bar = QProgressBar()
        self.bar.setAccessibleName("Context used")
        self.bar.setMaximumWidth(140)
        self.bar.setMaximumHeight(14)
        self.bar.setTextVisible(False)
        self.label = plain.Label()
        self.label.setAccessibleName("Context")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.label)
        self._show()

    # ------------------------------------------------------------------ public

    def model(self) -> str:
        """The model whose context is shown."""
        return self._model

    def context_size(self) -> int | None:
        """The model's context size in tokens, or None when the server did not say."""
        return self._n_ctx

    def used(self) -> int:
        """Tokens the chat used at its last reply."""
        return self._used

    def follow(self, watch: ContextWatch) -> None:
        """Show the next request of `watch`'s conversation from now on (and its context size)."""
        self._watch = watch
        watch.changed.connect(self._on_watch_changed)
        self._on_watch_changed()

    def follow_cache(self, warmer: Warmer) -> None:
        """Say in the tooltip how much of the next request the server holds (`warmer`'s figures)."""
        self._warmer = warmer
        warmer.changed.connect(self._on_watch_changed)
        if self._watch is not None:
            self._on_watch_changed()

    def set_model(self, model_id: str) -> None:
        """Show `model_id`'s context; its size is asked for in the background."""
        if self._watch is not None:
            self._model = model_id
            self._watch.set_model(model_id)
            return
        if model_id == self._model:
            return
        self._model = model_id
        self._n_ctx = None
        self._show()
        if model_id:
            self.refresh_size()

    def set_registry(self, registry: ClientSource) -> None:
        """Ask another set of servers for context sizes from now on."""
        self._registry = registry
        if self._watch is not None:
            return  # the watch follows the App's router itself
        self._n_ctx = None
        self._show()
        if self._model:
            self.refresh_size()

    def refresh_size(self) -> None:
        """Ask the server for the current model's context size again (never loads it)."""
        model_id, registry = self._model, self._registry

        def ask() -> int | None:
            client, name = registry.client_for(model_id)
            return Models(client).context_size(name)

        call_in_background(
            self,
            ask,
            lambda n_ctx: self._on_size(model_id, n_ctx),
            lambda message: log.info("no context size for %s: %s", model_id, message),
        )

    def set_used(self, tokens: int) -> None:
        """Set the tokens in the context (a chat opened from history, or 0 for a new chat)."""
        if self._watch is not None:
            return  # the watch measures the chat it shows
        self._used = max(0, int(tokens))
        self._show()

    def update_from_stats(self, stats: dict) -> None:
        """Take the usage from a reply's stats event (usage, timings, model)."""
        if self._watch is not None:
            return  # the watch follows the reply itself
        used = used_tokens(stats)
        if used is not None:
            self.set_used(used)
        # The size is known once a model is loaded; a reply proves it is.
        if self._n_ctx is None and self._model:
            self.refresh_size()

    def set_draft(self, text: str) -> None:
        """The composer's text, to warn before it would overflow the context."""
        if self._watch is not None:
            return  # the window gives the watch the draft with its attachments
        self._draft = estimate_tokens(text)
        self._show()

    def will_overflow(self) -> bool:
        """Whether the context plus the draft is estimated to exceed the model's context."""
        if self._watch is not None:
            return self.state == "over"
        return self._n_ctx is not None and self._used + self._draft > self._n_ctx

    def warning(self) -> str:
        """The overflow warning shown to the user ('' when none)."""
        if not self.will_overflow():
            return ""
        return (
            f"The next message may not fit: {self._model}'s context holds "
            f"{self._n_ctx:,} tokens. Start a new chat or shorten the message."
        )

    # ------------------------------------------------------------------ display

    @Slot()
    def _on_watch_changed(self) -> None:
        watch = self._watch
        assert watch is not None
        live = watch.live()
        if live is not None and self._live_shown and watch.context_size() == self._n_ctx:
            # While a reply streams only the figure moves, once a frame: the cheap path.
            self._used = live
            if self._n_ctx:
                self.bar.setValue(min(live, self._n_ctx))
                self.label.setText(f"{live:,} / {self._n_ctx:,}")
            else:
                self.label.setText(f"{live:,} tokens")
            return
        self._live_shown = live is not None
        self._model = watch.model()
        self._n_ctx = watch.context_size()
        self._hold_label_size(live is not None)
        breakdown = watch.breakdown()
        self._used = live if live is not None else breakdown.total
        reserve = watch.reserve()
        n_ctx, used, model = self._n_ctx, self._used, self._model or "no model"
        about = "" if breakdown.exact or live is not None else "~"
        if n_ctx:
            self.bar.setRange(0, n_ctx)
            self.bar.setValue(min(used, n_ctx))
            self.label.setText(f"{about}{used:,} / {n_ctx:,}")
        else:
            self.bar.setRange(0, 1)
            self.bar.setValue(0)
            self.label.setText(f"{about}{used:,} tokens")
        needed = used + (reserve if live is None else 0)
        self.state = (
            "over"
            if n_ctx and needed > n_ctx
            else "near"
            if n_ctx and needed > n_ctx * NEAR_SHARE
            else "ok"
        )
        lines = [_summary(model, used, n_ctx, live is not None)]
        if live is None:
            lines += [
                f"  {context.label(name)}: {tokens:,}" for name, tokens in breakdown.parts if tokens
            ]
            if not watch.takes_tools():
                lines.append(f"  tools: none sent ({context.NO_TOOLS})")
            lines.append(f"  reply reserve: {reserve:,}")
            held = self._warmer.in_cache() if self._warmer is not None else None
            if held is not None:
                lines.append(f"in cache: {min(held, used):,} of {used:,} tokens")
            if not breakdown.exact:
                lines.append("(~ estimated: the server has not counted every part yet)")
        if self.state == "over":
            lines.insert(0, "The next message does not fit: it will not be sent.")
        elif self.state == "near":
            lines.insert(0, "The context is nearly full.")
        color = {"over": WARNING_COLOR, "near": NEAR_COLOR}.get(self.state)
        palette = QPalette()
        if color is not None:
            palette.setColor(QPalette.ColorRole.Highlight, color)
            self.label.setStyleSheet(f"color: {color.name()}")
        else:
            self.label.setStyleSheet("")
        self.bar.setPalette(palette)
        tip = "\n".join(lines)
        self.setToolTip(plain.tooltip(tip))
        self.setAccessibleDescription(tip)

    def _hold_label_size(self, hold: bool) -> None:
        """While a reply streams, keep the label as wide as its widest live figure.

        A label whose size may change asks the whole window to lay out again at each new
        text, which repaints the status bar and the window under it: four times a second.
        """
        if not hold:
            self.label.setMinimumSize(0, 0)
            self.label.setMaximumSize(_NO_MAXIMUM, _NO_MAXIMUM)
            return
        widest = f"{self._n_ctx:,} / {self._n_ctx:,}" if self._n_ctx else "9,999,999 tokens"
        hint = self.label.sizeHint()
        width = max(hint.width(), self.label.fontMetrics().horizontalAdvance(widest) + 2)
        self.label.setFixedSize(width, hint.height())

    def _on_size(self, model_id: str, n_ctx: object) -> None:
        if model_id != self._model:
            return  # the answer for a model the user has moved away from
        self._n_ctx = n_ctx if isinstance(n_ctx, int) else None
        self._show()

    def _show(self) -> None:
        n_ctx, used, model = self._n_ctx, self._used, self._model or "no model"
        if n_ctx:
            self.bar.setRange(0, n_ctx)
            self.bar.setValue(min(used, n_ctx))
            self.label.setText(f"{used:,} / {n_ctx:,}")
            tip = f"Context of {model}: {used:,} of {n_ctx:,} tokens used"
        else:
            self.bar.setRange(0, 1)
            self.bar.setValue(0)
            self.label.setText(f"{used:,} tokens")
            tip = f"Context of {model}: {used:,} tokens used; its size is not known yet"
        if self._draft:
            tip += f"\nThe message being written is about {self._draft:,} tokens"
        warning = self.warning()
        # Only the roles set here are the bar's own: the rest follows the theme.
        palette = QPalette()
        if warning:
            palette.setColor(QPalette.ColorRole.Highlight, WARNING_COLOR)
            self.label.setStyleSheet(f"color: {WARNING_COLOR.name()}")
            self.label.setText(self.label.text() + " ⚠ next message may not fit")
            tip = warning + "\n" + tip
        else:
            self.label.setStyleSheet("")
        self.bar.setPalette(palette)
        self.setToolTip(plain.tooltip(tip))
        self.setAccessibleDescription(tip)


def _summary(model: str, used: int, n_ctx: int | None, live: bool) -> str:
    what = "in use while the reply streams" if live else "for the next message"
    if n_ctx:
        return f"Context of {model}: {used:,} of {n_ctx:,} tokens {what}"
    return f"Context of {model}: {used:,} tokens {what}; its size is not known yet"
