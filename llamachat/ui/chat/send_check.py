"""The check before a message (or a retry) leaves: it fits, it waits for a count, or it is refused.

`SendCheck(watch, compaction, ...)` belongs to one `session.Conversation`. `question`
checks a typed message with `context_watch.ContextWatch.check`, `request` a retry's or a
Continue's whole request with `check_turn`. An estimate never refuses: a request whose
estimate does not fit and which the server has not all counted (`Uncounted`: a model
not loaded yet counts nothing) is held (`COUNTING`) while the server counts it in the
background, loading its model as sending it would, then checked again; what it still
cannot count goes, and the server's own answer decides. A message that does not fit
goes to the chat's overflow policy (`compaction.Compaction.overflowed`); the skills it
loaded itself (`/name`) are unloaded with the refusal, as they were before it.

Threads: counting runs on `tasks.run_in_background`; the rest on the GUI thread.

Errors: none raised; a count that fails leaves estimates, and the message goes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject

from llamachat import context, turn
from llamachat.ui import tasks
from llamachat.ui.chat.compaction import COMPACTING, REFUSED, SEND, Compaction
from llamachat.ui.chat.context_watch import ContextWatch, Uncounted

log = logging.getLogger(__name__)

# What `question` did with a message (besides compaction's outcomes).
COUNTING = "counting"  # held while the server counts what was only estimated, then sent
GO = "go"  # it fits (or could not be counted even now): send it
# Why a message held is checked again.
COUNTED = "counted"  # the server counted it (what it could not count goes)
COMPACTED = "compacted"  # the chat was compacted for it
# How long counting at Send waits for the model to load (a large one takes a while).
LOAD_COUNT_S = 300.0


class SendCheck(QObject):
    """Checks a message or a request against the context before it leaves."""

    def __init__(
        self,
        watch: ContextWatch,
        compaction: Compaction,
        *,
        notice: Callable[[str, int], None],
        unload: Callable[[str], object],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._watch = watch
        self._compaction = compaction
        self._notice = notice
        self._unload = unload
        self.counting = False
        """True while the server counts a message held at Send."""

    def question(
        self,
        text: str,
        attachments: list[dict],
        *,
        loaded: Sequence[str],
        edit_from: int | None,
        held: str,
        again: Callable[[], object],
    ) -> str:
        """Check a typed message: GO, COUNTING (`again` is called once counted), SEND
        (room was made), COMPACTING or REFUSED. `loaded`: the skills the message itself
        loaded, unloaded again when it is refused; `held`: why it is checked again
        (COUNTED, COMPACTED, or "" the first time)."""
        overflow = self._watch.check(text, attachments, counted=held == COUNTED)
        if overflow is None:
            return GO
        if isinstance(overflow, Uncounted):
            self._count_first(overflow, again)
            return COUNTING
        overflow = dataclasses.replace(overflow, loads=tuple(loaded), compacted=held == COMPACTED)
        outcome = self._compaction.overflowed(overflow, text, attachments, edit_from=edit_from)
        if outcome == REFUSED:
            for name in loaded:
                self._unload(name)  # as before the message, which is still in the box
        return outcome

    def request(self, request: turn.Turn, *, counted: bool, again: Callable[[], object]) -> bool:
        """Whether a retry's or Continue's `request` may go now; when not, `too_big` said
        why, or it is being counted and `again` is called once it is."""
        overflow = self._watch.check_turn(request, counted=counted)
        if isinstance(overflow, Uncounted):
            self._count_first(overflow, again)
            return False
        if overflow is not None:
            self._compaction.too_big.emit(overflow)
        return overflow is None

    def _count_first(self, pending: Uncounted, then: Callable[[], object]) -> None:
        """Have the server count `pending` (loading its model first when it must), then go on."""
        self.counting = True
        watch = self._watch
        tokenizer = watch.tokenizer()
        request = pending.request
        self._notice(f"Counting the message with {request.model}'s tokenizer…", 8000)

        def work() -> bool:
            measured = context.measure(request, tokenizer, exact=True)
            if not measured.exact and tokenizer.load(timeout=LOAD_COUNT_S):
                measured = context.measure(request, tokenizer, exact=True)
            return measured.exact

        def counted(future) -> None:
            self.counting = False
            try:
                future.result()
            except Exception:
                log.exception("counting a message before sending it failed")
            watch.base_changed()  # the meter shows what was counted
            then()

        tasks.run_in_background(work, counted, receiver=self)


__all__ = ["COMPACTED", "COMPACTING", "COUNTED", "COUNTING", "GO", "REFUSED", "SEND", "SendCheck"]
