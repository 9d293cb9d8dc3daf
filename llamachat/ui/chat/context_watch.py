"""The next request's size for one conversation, counted off the GUI thread and kept current.

`ContextWatch(builder, is_streaming=...)` is told by its conversation what changed (the
earlier parts: `base_changed`, a reply: `reply_started` / `reply_ended`, the router:
`router_changed`) and follows the composer (`set_draft`): it measures the request the
next send would make, the very `turn.Turn` its `builder.TurnBuilder` builds for sending
(`context.measure`), part by part, and emits `changed` whenever what the meter shows
moved. While a reply streams the total is the reply's own figures (`LiveFigure`): the
prompt llama.cpp reports plus the tokens so far.

A keystroke costs no request and no pass over the history: the earlier parts are
measured once per change of them (in the background, with the server's tokenizer) and
kept; the draft is estimated at once and counted exactly after a pause in typing
(`draft_count.DraftCount`).

`check(text, attachments)` is the test before a send, `check_turn(request)` before a
retry: the `Overflow` that says what does not fit (with each way out), or None. A part
of the system message not counted yet (a skill the message itself just loaded) is
counted by the server then, on the GUI thread (one `/tokenize`): a check never passes
on an estimate of it. Nor does it refuse on one: a request whose estimate does not fit
is `Uncounted`, for the server to count (`send_check`) before the check is made again.

A model's load counts what waited for it (`model_event`, `models_listed`): counting
never loads a model, and the retries after a change may be spent while it was unloaded.

The model's size is asked for when it is picked and again as soon as it is loaded
(`model_event`, `models_listed`), with what `/props` says of tools: a model whose
template cannot take tools is sent none (`TurnBuilder.set_takes_tools`). That is
`model_limits.ModelLimits`, which also says when the model counted for loaded.

Threads: counting runs on `tasks.run_in_background`; results come back on the GUI thread,
where every other method runs.

Errors: none raised; a server that cannot count leaves estimates (`breakdown().exact`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance, Slot

from llamachat import context, turn
from llamachat.context import Overflow
from llamachat.router.models import ModelEvent, ModelInfo
from llamachat.ui import tasks
from llamachat.ui.chat.builder import TurnBuilder
from llamachat.ui.chat.draft_count import DraftCount
from llamachat.ui.chat.model_limits import ModelLimits
from llamachat.ui.chat.reply import ReplyStream

log = logging.getLogger(__name__)

# How long after another chat is shown (or another model picked) its request is measured:
# after the first paint, which the counting's background requests would slow down.
SHOWN_MS = 200
# What the server did not count (a model still loading, a busy server) is counted again
# this long after, at most RETRIES times after each change.
RETRY_MS = 2000
# How often the meter follows a streaming reply's figure: with the reply's next figures
# once this long has passed, so the meter repaints in the same pass as the reply's text...
LIVE_MS = 250
# ...or by a timer this long after figures it skipped, when no more came.
LIVE_LATE_MS = 1000
RETRIES = 3

# How long Send waits for the server to count a part it has not counted (a skill the
# message itself loads) before it goes on with the estimate.
SEND_COUNT_S = 3.0


@dataclasses.dataclass(frozen=True)
class Uncounted:
    """A request whose estimate does not fit and which the server has not all counted:
    counted first (`send_check.SendCheck`), then checked again."""

    request: turn.Turn


class ContextWatch(QObject):
    """Keeps the next request's breakdown for a conversation and its model's context size."""

    changed = Signal()
    tools_changed = Signal()  # the model's server said its template takes other tools

    def __init__(
        self,
        builder: TurnBuilder,
        *,
        is_streaming: Callable[[], bool],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._state = builder.state
        self._is_streaming = is_streaming
        self._tokenizers: dict[tuple[int, str], context.Tokenizer] = {}
        # The model counted for and what its server says of it (its size, tools).
        self._limits = limits = ModelLimits(builder, self)
        limits.known.connect(self.changed)
        limits.tools_changed.connect(lambda: self.base_changed())
        limits.tools_changed.connect(self.tools_changed)
        limits.loaded.connect(self._on_model_loaded)
        # The parts of the next request but the question, and the question's (the draft).
        self._base = context.Breakdown()
        self._base_turn: turn.Turn | None = None
        self._draft = draft = DraftCount(
            builder,
            limits,
            tokenizer=self.tokenizer,
            may_retry=self._may_retry,
            retry_ms=RETRY_MS,
            parent=self,
        )
        draft.changed.connect(self.changed)
        # While a reply streams, the tokens it holds in the context.
        self._live = LiveFigure(self)
        self._live.changed.connect(self.changed)
        self._live.figured.connect(limits.figured)
        # The last request let through, to calibrate estimates with the usage it comes back with.
        self._sent: context.Breakdown | None = None
        self._generation = 0
        self._closed = False
        # Counts tried again since the last change, for what the server did not count.
        self._retries = 0
        # The earlier parts are measured again on the next turn of the event loop, once for
        # a burst of changes, and never on the way of a request leaving.
        self._refresh_due = QTimer(self)
        self._refresh_due.setSingleShot(True)
        self._refresh_due.setInterval(0)
        self._refresh_due.timeout.connect(self.refresh)

    # ------------------------------------------------------------------ reading

    def model(self) -> str:
        """The model the counts are for."""
        return self._limits.model

    def context_size(self) -> int | None:
        """The model's context size, or None while the server has not said."""
        return self._limits.n_ctx

    def trained_size(self) -> int | None:
        """The context the model was trained for (its largest sensible size), when listed."""
        return self._limits.trained

    def reserve(self) -> int:
        """The tokens kept free for the reply."""
        if self._limits.n_ctx is None:
            return self._builder.config().reply_reserve
        return context.reserve_for(self._limits.n_ctx, self._builder.config().reply_reserve)

    def breakdown(self) -> context.Breakdown:
        """The next request part by part: the earlier parts, then the draft, then the template."""
        return self._compose(self._draft.question)

    def _compose(self, question: context.Breakdown) -> context.Breakdown:
        template = self._base.get("template")
        if question.parts and self._base_turn is not None and not self._base_turn.question:
            template += self.tokenizer().message_tokens()
        parts = [p for p in self._base.parts if p[0] != "template"]
        parts.extend(question.parts)
        parts.append(("template", template))
        return context.Breakdown(tuple(parts), self._base.exact and question.exact)

    def request(self) -> turn.Turn | None:
        """The request the counts are of, the draft as its question (None: no model yet)."""
        base, (text, attachments) = self._base_turn, self._draft.draft
        if base is None or not (text or attachments):
            return base
        return dataclasses.replace(base, question=self._draft.parts())

    def live(self) -> int | None:
        """While a reply streams: the tokens in the context so far (prompt + reply)."""
        return self._live.tokens

    def check(
        self, text: str, attachments: list[dict], *, counted: bool = False
    ) -> Overflow | Uncounted | None:
        """Whether sending `text` now would overflow the context: the Overflow, or None.

        From the counts known, on the GUI thread; the skills the message just loaded are
        in it. Nothing is rebuilt unless the earlier parts changed. An estimate never
        refuses: `Uncounted` asks for a count first, after which (`counted`) what the
        server still could not count goes, and the server's own answer decides.
        """
        if self._state.model != self._limits.model:
            self.set_model(self._state.model)
        if self._limits.n_ctx is None or not self._limits.model:
            return None
        if self._refresh_due.isActive():
            self._refresh_due.stop()
            self.refresh()
        tokenizer = self.tokenizer()
        if self._base_turn is not None and (
            self._count_system(self._base_turn) or not self._base.exact
        ):
            # Counted since (by count_first, a load): taken from the cache, no request.
            self._base = context.measure(self._base_turn, tokenizer)
        # A model that cannot call tools gets the passages found for the message too.
        parts = self._builder.question_parts(
            self._limits.model, text, attachments, self._limits.n_ctx
        )
        question = context.measure_parts(parts, tokenizer)
        verdict = self._verdict(self._compose(question))
        if verdict is None or verdict.breakdown.exact or not tokenizer.can_count:
            return verdict
        if counted or self._base_turn is None:
            return None
        request = dataclasses.replace(self._base_turn, question=parts)
        # A loaded model counts what is left in a few milliseconds (the draft typed
        # faster than its count): here and now, rather than hold the message.
        if context.measure(request, tokenizer, exact=True, timeout=SEND_COUNT_S).exact:
            self._base = context.measure(self._base_turn, tokenizer)
            return self._verdict(self._compose(context.measure_parts(parts, tokenizer)))
        return Uncounted(request)

    def check_turn(
        self, request: turn.Turn, *, counted: bool = False
    ) -> Overflow | Uncounted | None:
        """Whether `request` (a retry's, built whole) would overflow the context: the
        Overflow, or None (also when its model is not the one counted for); `Uncounted`
        as `check` says."""
        if self._state.model != self._limits.model:
            self.set_model(self._state.model)
        if self._limits.n_ctx is None or request.model != self._limits.model:
            return None
        self._count_system(request)
        tokenizer = self.tokenizer()
        verdict = self._verdict(context.measure(request, tokenizer))
        if verdict is None or verdict.breakdown.exact or not tokenizer.can_count:
            return verdict
        if counted:
            return None
        measured = context.measure(request, tokenizer, exact=True, timeout=SEND_COUNT_S)
        return self._verdict(measured) if measured.exact else Uncounted(request)

    def _verdict(self, breakdown: context.Breakdown) -> Overflow | None:
        assert self._limits.n_ctx is not None
        reserve = self.reserve()
        if context.fits(breakdown, self._limits.n_ctx, reserve):
            self._sent = breakdown
            return None
        return Overflow(
            self._limits.model, breakdown, self._limits.n_ctx, reserve, self._limits.trained
        )

    def _count_system(self, request: turn.Turn) -> bool:
        """Count the system message's parts the server has not counted yet (a skill the
        message loaded: an estimate let an 8,062-token skill through an 8,192 context);
        True when any was. Sends requests on this thread (the GUI's, at Send), one per new
        part: a /tokenize answers in milliseconds, and a server that does not answer within
        SEND_COUNT_S leaves the estimate rather than freeze the window."""
        tokenizer = self.tokenizer()
        new = [part.text for part in request.system if tokenizer.cached(part.text) is None]
        for text in new:
            tokenizer.count(text, timeout=SEND_COUNT_S)
        return bool(new)

    def takes_tools(self) -> bool:
        """Whether the model is offered tools (False: its server says its template takes none)."""
        return self._builder.takes_tools(self._limits.model)

    def tools_known(self) -> bool:
        """Whether the model's server has said if it takes tools (once it is loaded)."""
        return self._builder.tools_known(self._limits.model)

    # ------------------------------------------------------------------ what changes

    def set_model(self, model: str) -> None:
        """Count for `model` from now on; its context size is asked for in the background."""
        if model == self._limits.model:
            return
        self._limits.set_model(model)
        self._retries = 0
        self._refresh_due.start(SHOWN_MS)

    def set_draft(self, text: str, attachments: list[dict] | tuple[dict, ...] = ()) -> None:
        """The composer's text and attachments: estimated now, counted after a pause."""
        if self._draft.set(text, attachments):
            self._retries = 0
            self.changed.emit()

    def close(self) -> None:
        """Measure nothing more (the conversation is closing, its History with it)."""
        self._closed = True
        self._refresh_due.stop()
        self._draft.stop()

    def refresh(self) -> None:
        """Measure the earlier parts again (after they changed), counting in the background."""
        if self._closed or self._is_streaming():
            return  # the reply's own figures are shown; its end measures again
        self._generation += 1
        generation = self._generation
        if not self._limits.model:
            self._base, self._base_turn = context.Breakdown(), None
            self.changed.emit()
            return
        try:
            request = self._builder.draft_turn(self._limits.model, self._limits.n_ctx)
        except Exception:
            log.exception("cannot build the next request to measure it")
            return
        # The last user message of a chat not answered yet is the question: kept in "base".
        self._base_turn = request
        tokenizer = self.tokenizer()
        self._base = context.measure(request, tokenizer)
        self._draft.measure()
        self.changed.emit()
        tasks.run_in_background(
            lambda: context.measure(request, tokenizer, exact=True),
            lambda future: self._on_counted(generation, future),
            receiver=self,
        )

    # ------------------------------------------------------------------ internals

    def quick_tokens(self, text: str) -> int:
        """What `text` costs the selected model: its count if the server counted it, else an
        estimate calibrated on what it did count. Never sends a request."""
        return self.tokenizer().quick(text)

    def tokenizer(self) -> context.Tokenizer:
        """The counts of the model counted for (its server's tokenizer, or estimates)."""
        client, name = self._builder.client_for(self._limits.model)
        key = (id(client), name)
        tokenizer = self._tokenizers.get(key)
        if tokenizer is None:
            tokenizer = self._tokenizers[key] = context.Tokenizer(client, name)
        return tokenizer

    def refresh_size(self) -> None:
        """Ask the server for the model's context size again (it was raised)."""
        self._limits.ask()

    def model_event(self, event: ModelEvent) -> None:
        """A router's model event: the model just loaded tells its size at once."""
        self._limits.model_event(event)

    def models_listed(self, infos: list[ModelInfo]) -> None:
        """A listing (routers without events): a loaded model whose size is unknown tells it."""
        self._limits.models_listed(infos)

    @Slot()
    def _on_model_loaded(self) -> None:
        if not self.breakdown().exact and self.tokenizer().can_count:
            # What a model not loaded could not count waited for it: counted now (the
            # retries after a change may all have been spent while it loaded).
            self.base_changed()
            self._draft.count_later()

    def _on_counted(self, generation: int, future) -> None:
        if generation != self._generation:
            return  # the parts changed again meanwhile
        try:
            self._base = future.result()
        except Exception:
            log.exception("counting the next request failed")
            return
        if not self._base.exact and self._may_retry():
            self._refresh_due.start(RETRY_MS)
        self.changed.emit()

    def _may_retry(self) -> bool:
        """Whether to count again what the server did not count (a busy or loading model)."""
        if not self.tokenizer().can_count or self._retries >= RETRIES:
            return False
        self._retries += 1
        return True

    def follow(self, *, shown: Sequence[SignalInstance], changed: Sequence[SignalInstance]) -> None:
        """Measure again after each of `changed`, and a moment after each of `shown` (another
        chat or the tools on screen: measured after its first paint)."""
        for signal in shown:
            signal.connect(lambda *_args: self.base_changed(SHOWN_MS))
        for signal in changed:
            signal.connect(lambda *_args: self.base_changed())

    def base_changed(self, delay_ms: int = 0) -> None:
        """The earlier parts changed (another chat shown: `SHOWN_MS`): measured again."""
        self._retries = 0
        if self._state.model and self._state.model != self._limits.model:
            self.set_model(self._state.model)
        elif not self._refresh_due.isActive() or delay_ms < self._refresh_due.remainingTime():
            self._refresh_due.start(delay_ms)

    @Slot(object)
    def reply_started(self, reply: ReplyStream) -> None:
        """A reply streams: its own figures are shown until it ends."""
        self._limits.reply_started()
        self._live.follow(reply)
        reply.stats.connect(self._on_stats)
        # The message just sent left the composer: the earlier parts now hold it.
        self._draft.clear()
        self._refresh_due.start()

    @Slot(object)
    def _on_stats(self, stats: object) -> None:
        """A server without a tokenizer still says what the prompt was: learn its ratio."""
        usage = stats.get("usage") if isinstance(stats, dict) else None
        prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        sent, tokenizer = self._sent, self.tokenizer()
        if not isinstance(prompt, int) or sent is None or tokenizer.can_count:
            return
        template = sent.get("template")
        estimated = sent.total - template
        if estimated > 0 and prompt > template:
            chars = round(estimated / tokenizer.tokens_per_char)
            tokenizer.learn(chars, prompt - template)

    @Slot(str, str)
    def reply_ended(self, _status: str = "", _error: str = "") -> None:
        """The reply ended: the earlier parts now hold it."""
        self._live.end()
        # A reply proves the model is loaded: its size, tokenizer and tools answer now.
        self._limits.ask_unknown()
        self._refresh_due.start()

    @Slot(object)
    def router_changed(self, _state: object = None) -> None:
        """Another router: its tokenizers and the model's size are asked for again."""
        self._tokenizers.clear()
        self._limits.router_changed()
        self._refresh_due.start()


class LiveFigure(QObject):
    """The tokens a streaming reply holds in the context: the prompt llama.cpp reports
    plus the reply so far, for the meter a few times a second."""

    changed = Signal()
    figured = Signal()  # the reply's figures came: its model is loaded

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tokens: int | None = None
        """The figure now (None: no reply streams, or none of its figures came yet)."""
        # The figure moves with every token; the meter shows it at most a few times a
        # second (a repaint per token was most of a token's cost).
        self._shown = 0.0
        self._due = QTimer(self)
        self._due.setSingleShot(True)
        self._due.setInterval(LIVE_LATE_MS)
        self._due.timeout.connect(self._show)

    def follow(self, reply: ReplyStream) -> None:
        """Follow `reply`'s figures from now on."""
        self.tokens = None
        reply.progress.connect(self._on_progress)
        reply.timings.connect(self._on_timings)

    def end(self) -> None:
        """The reply ended: no figure any more."""
        self.tokens = None
        self._due.stop()

    @Slot(object)
    def _on_progress(self, progress: object) -> None:
        if isinstance(progress, dict) and isinstance(progress.get("total"), int):
            self.tokens = progress["total"]
            self.figured.emit()
            self.changed.emit()

    @Slot(object)
    def _on_timings(self, timings: object) -> None:
        if isinstance(timings, dict):
            used = sum(
                value
                for key in ("prompt_n", "cache_n", "predicted_n")
                if isinstance(value := timings.get(key), int)
            )
            if used:
                self.tokens = used
                self.figured.emit()
                if time.monotonic() - self._shown >= LIVE_MS / 1000:
                    self._show()
                elif not self._due.isActive():
                    self._due.start()

    def _show(self) -> None:
        self._due.stop()
        self._shown = time.monotonic()
        self.changed.emit()
