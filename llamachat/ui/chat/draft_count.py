"""The composer's draft as the next request's question, estimated at once and counted after a pause.

`DraftCount(builder, limits, ...)` belongs to one `context_watch.ContextWatch`, which hands
it the composer's text (`set`) and adds its `question` to the earlier parts. A keystroke
costs no request: the draft is estimated with the counts known, and counted exactly by
the server DRAFT_COUNT_MS after the last change. A model that cannot call tools gets
the passages its library has for the message: found then too, off the GUI thread, and
kept for the estimates (`parts`).

Threads: counting runs on `tasks.run_in_background`; its result comes back on the GUI
thread, where every other method runs.

Errors: none raised; a count that fails leaves the estimate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from llamachat import context, turn
from llamachat.ui import tasks
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.model_limits import ModelLimits

log = logging.getLogger(__name__)

# After this pause in typing the draft is counted by the server.
DRAFT_COUNT_MS = 300


class DraftCount(QObject):
    """The draft's parts and their count: estimated at each keystroke, counted after a pause."""

    changed = Signal()  # the draft's count moved

    def __init__(
        self,
        builder: TurnBuilder,
        limits: ModelLimits,
        *,
        tokenizer: Callable[[], context.Tokenizer],
        may_retry: Callable[[], bool],
        retry_ms: int,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._limits = limits
        self._tokenizer = tokenizer
        # Whether to count again what the server did not count, and how long after.
        self._may_retry = may_retry
        self._retry_ms = retry_ms
        self.draft: tuple[str, tuple[dict, ...]] = ("", ())
        """The composer's text and attachments."""
        self.question = context.Breakdown()
        """The draft's parts as counted (or estimated)."""
        # The passages last found for the draft (a model that cannot call tools gets them).
        self._excerpts: turn.Part | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DRAFT_COUNT_MS)
        self._timer.timeout.connect(self._count)

    def set(self, text: str, attachments: list[dict] | tuple[dict, ...] = ()) -> bool:
        """Follow the composer: estimated now, counted after a pause; False when unchanged."""
        draft = (text, tuple(attachments))
        if draft == self.draft:
            return False
        self.draft = draft
        self.measure()
        if text or attachments:
            self._timer.start()
        return True

    def measure(self) -> None:
        """Estimate the draft again with the counts known now (no request)."""
        self.question = context.measure_parts(self.parts(), self._tokenizer())

    def clear(self) -> None:
        """The draft was sent: it left the composer."""
        self.draft = ("", ())
        self.question = context.Breakdown()
        self._excerpts = None

    def count_later(self) -> None:
        """Count the draft after the pause again (what waited for a model's load)."""
        if self.draft != ("", ()):
            self._timer.start()

    def stop(self) -> None:
        """Count nothing more."""
        self._timer.stop()

    def parts(self, *, excerpts: bool = True) -> tuple[turn.Part, ...]:
        """The draft's parts; with `excerpts`, after the passages last found for it."""
        text, attachments = self.draft
        if not text and not attachments:
            return ()
        model = self._limits.model
        parts = turn.user_parts(
            text,
            list(attachments),
            images=self._builder.images(model),
            audio=self._builder.hears(model),
        )
        if excerpts and self._excerpts is not None and not self._builder.takes_tools(model):
            return (self._excerpts, *parts)
        return parts

    @Slot()
    def _count(self) -> None:
        parts = self.parts(excerpts=False)
        draft = self.draft
        tokenizer = self._tokenizer()
        # A model that cannot call tools gets the passages found for the message: found
        # here, off the GUI thread, after a pause in typing, and kept for the estimates.
        takes_tools = self._builder.takes_tools(self._limits.model)
        searched = None if takes_tools else self._builder.library()
        limit = turn.excerpt_chars(self._limits.n_ctx)

        def count() -> tuple[context.Breakdown, turn.Part | None]:
            excerpts = turn.excerpt_part(searched, draft[0], limit=limit)
            part = excerpts[0] if excerpts is not None else None
            found = parts if part is None else (part, *parts)
            return context.measure_parts(found, tokenizer, exact=True), part

        def done(future) -> None:
            if draft == self.draft:
                try:
                    self.question, self._excerpts = future.result()
                except Exception:
                    log.exception("counting the draft failed")
                    return
                if not self.question.exact and self._may_retry():
                    self._timer.start(self._retry_ms)
                self.changed.emit()

        tasks.run_in_background(count, done, receiver=self)
