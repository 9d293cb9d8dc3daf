"""A streaming reply's figures: its usage and timings, with how long the first token took.

`ReplyFigures` keeps what the worker reported last (llama.cpp's `timings`, the final
`usage`), when the request left and when the first token came (`ttft_ms`), whether the
length limit cut the reply (`finish_reason` "length"), and for a Continue the figures
of the parts before, which its tokens and generating time add to (`_added`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping


class ReplyFigures:
    """A reply's usage and timings so far, a Continue's added to the parts before it."""

    def __init__(self, continues: Mapping | None = None) -> None:
        self.usage: dict = {}
        self.timings: dict = {}
        self.cut = False
        # Continue: the reply's figures add to those of the parts before (`now`).
        self._before: tuple[Mapping, Mapping] = ({}, {})
        if continues is not None:
            self._before = (continues.get("usage") or {}, continues.get("timings") or {})
        # When the request left, and how long the first token took (ms; None until it came).
        self._sent = time.monotonic()
        self.ttft_ms: float | None = None

    def sent(self) -> None:
        """The request leaves now: the first token's time counts from here."""
        self._sent = time.monotonic()

    def first_token(self) -> None:
        """A first token came (the time is kept once)."""
        if self.ttft_ms is None:
            self.ttft_ms = (time.monotonic() - self._sent) * 1000

    def now(self) -> tuple[dict, dict]:
        """The reply's usage and timings so far (timings with `ttft_ms`, once known)."""
        usage, timings = _added(self._before, self.usage, self.timings)
        if self.ttft_ms is not None:
            timings["ttft_ms"] = round(self.ttft_ms, 1)
        if self.cut:
            timings["finish_reason"] = "length"
        return usage, timings


def _added(before: tuple[Mapping, Mapping], usage: dict, timings: dict) -> tuple[dict, dict]:
    """A continued reply's figures: its tokens and generating time with those of the parts
    before it (the prompt is this request's, which holds them)."""
    usage, timings = dict(usage), dict(timings)
    earlier_usage, earlier = before
    tokens, ms = earlier.get("predicted_n"), earlier.get("predicted_ms")
    if isinstance(tokens, int) and isinstance(timings.get("predicted_n"), int):
        timings["predicted_n"] += tokens
        if isinstance(ms, (int, float)) and isinstance(timings.get("predicted_ms"), (int, float)):
            timings["predicted_ms"] += ms
            if timings["predicted_ms"] > 0:
                timings["predicted_per_second"] = timings["predicted_n"] / (
                    timings["predicted_ms"] / 1000
                )
    completion = earlier_usage.get("completion_tokens")
    if isinstance(completion, int) and isinstance(usage.get("completion_tokens"), int):
        usage["completion_tokens"] += completion
    return usage, timings
