"""Whether a comparison's request fits each model's context, counted with each model's tokenizer.

`CompareFit(builder, context_size)` is the Compare chooser's meter. `measure(text, models)`
builds the requests a comparison would send (as `comparison.Comparer` builds them, one
per model, with `text` as their question) and measures it against each model: its tokens counted by
that model's server (`context.Tokenizer`, one per model: models count the same text
differently) and that model's context size (`Models.context_limits`, which knows a
model the router has not loaded from its listed `--ctx-size`). `measured` then gives
a `Fit` per model, in the order asked.

Counting never loads a model (the tokenizer asks with `autoload=false`): a model not
loaded is estimated, and its `Fit` says so (`exact`). What the servers say on the way, each
model's context size and whether its template takes tools, goes to the builder: the
comparison then builds each model's request as a send to it would (the skills catalog and
the libraries' passages within its context; no tools to a model that takes none, without
asking again before its request leaves).

Threads: the request is built on the GUI thread (History), counted on
`tasks.run_in_background`. Errors: none raised; what a server cannot say is estimated,
or unknown (`n_ctx` None: the fit cannot be told).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from PySide6.QtCore import QObject, Signal

from llamachat import context, turn
from llamachat.router.models import Models
from llamachat.ui import tasks
from llamachat.ui.chat.builder import TurnBuilder

log = logging.getLogger(__name__)

# Each count's requests wait no longer than this: the chooser is waiting.
COUNT_TIMEOUT_S = 5.0


@dataclasses.dataclass(frozen=True)
class Fit:
    """A comparison's request measured for one model: its tokens, the model's context and
    the reply's reserve in it (`n_ctx` None: not known)."""

    model: str
    tokens: int
    n_ctx: int | None
    reserve: int
    exact: bool
    takes_tools: bool | None = None
    """Whether its template takes tools, when its server said (it says once loaded)."""

    def fits(self) -> bool:
        """Whether the request and the reply's reserve fit (True when the size is unknown)."""
        return self.n_ctx is None or self.tokens + self.reserve <= self.n_ctx

    def text(self) -> str:
        """ "alpha: 1,234 of 4,096 tokens", or what does not fit, for the chooser."""
        about = "" if self.exact else "~"
        if self.n_ctx is None:
            return f"{self.model}: {about}{self.tokens:,} tokens (its context size is unknown)"
        if self.fits():
            return f"{self.model}: {about}{self.tokens:,} of {self.n_ctx:,} tokens"
        return (
            f"{self.model}: does not fit: {about}{self.tokens:,} tokens plus "
            f"{self.reserve:,} for the reply, its context holds {self.n_ctx:,}"
        )


class CompareFit(QObject):
    """Measures a comparison's request for each model picked, off the GUI thread."""

    measured = Signal(object)  # list[Fit], in the order of the models asked

    def __init__(
        self,
        builder: TurnBuilder,
        context_size: Callable[[], int | None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._builder = builder
        self._context_size = context_size
        # One per model, kept: what it counted once is not asked for again.
        self._tokenizers: dict[str, context.Tokenizer] = {}
        self._generation = 0

    def measure(self, text: str, models: Sequence[str]) -> None:
        """Measure the request with question `text` for each of `models` (in the
        background; `measured` follows, for the last call only)."""
        self._generation += 1
        generation = self._generation
        if not models:
            self.measured.emit([])
            return
        builder = self._builder
        # As `Comparer` builds them: each the request a send to that model makes.
        requests = builder.next_turns(
            models, sizes=builder.context_sizes(models, self._context_size())
        )
        jobs = []
        for model, request in zip(models, requests, strict=True):
            client, name = builder.client_for(model)
            tokenizer = self._tokenizers.get(model)
            if tokenizer is None:
                tokenizer = self._tokenizers[model] = context.Tokenizer(client, name)
            # The question's own parts (a library's passages are found when it is sent).
            question = turn.user_parts(
                text, [], images=builder.images(model), audio=builder.hears(model)
            )
            # The chat's model's tools are its meter's to learn (`ModelLimits`); a
            # provider's server never says.
            ask = model != builder.state.model and name == model and not builder.tools_known(model)
            jobs.append(
                (
                    model,
                    Models(client),
                    name,
                    tokenizer,
                    dataclasses.replace(request, question=question),
                    ask,
                )
            )
        configured = builder.config().reply_reserve

        def count() -> list[Fit]:
            fits = []
            for model, models_api, name, tokenizer, asked, ask in jobs:
                n_ctx, _trained = models_api.context_limits(name)
                takes = models_api.takes_tools(name) if ask else None
                measured = context.measure(asked, tokenizer, exact=True, timeout=COUNT_TIMEOUT_S)
                reserve = context.reserve_for(n_ctx, configured) if n_ctx else configured
                fits.append(Fit(model, measured.total, n_ctx, reserve, measured.exact, takes))
            return fits

        tasks.run_in_background(
            count, lambda future: self._on_counted(generation, future), receiver=self
        )

    def _on_counted(self, generation: int, future: Future) -> None:
        if generation != self._generation:
            return  # asked again since
        try:
            fits = future.result()
        except Exception as exc:  # noqa: BLE001 - no count: the chooser shows none
            log.info("the comparison's request was not measured: %s", exc)
            return
        builder = self._builder
        for fit in fits:
            if fit.n_ctx is not None and fit.model != builder.state.model:
                builder.set_context_size(fit.model, fit.n_ctx)
            if fit.takes_tools is not None and not builder.tools_known(fit.model):
                builder.set_takes_tools(fit.model, fit.takes_tools)
        self.measured.emit(fits)
