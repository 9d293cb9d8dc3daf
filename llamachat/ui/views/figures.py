"""A reply's figures: the line under it, its tooltip, and the bar shown while the prompt is read.

The figures are the server's `usage` and `timings` as History keeps them, plus `ttft_ms`,
the time to the first token llamachat measured itself (a model load included).
`figures(usage, timings)` gives the compact line ("38.2 tok/s · 412 tokens · 1.2 s ·
1,024 prompt, 900 cached") and the tooltip with the rest; `ReadingProgress` shows the
router's load of the model first ("Loading smol… 40%"), then llama.cpp's prompt progress ("Reading 3,120 of 9,004 tokens (5,884 from cache)"), the
time it has taken and an estimate of the time left, moving the bar between reports.

Errors: none; missing figures are left out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from PySide6.QtCore import QEvent, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QWidget

from llamachat.ui import plain, theme

# How often the bar moves by the estimate while the server reads.
TICK_MS = 250


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def figures(usage: dict, timings: dict, *, prompt: bool = True) -> tuple[str, str]:
    """The compact line and the tooltip of a reply's figures ('' each when there are none);
    `prompt=False` leaves the prompt's tokens out of the line (said apart: `prompt_cost`)."""
    tokens = _number(timings.get("predicted_n")) or _number(usage.get("completion_tokens"))
    ms = _number(timings.get("predicted_ms"))
    rate = _number(timings.get("predicted_per_second"))
    if not rate and tokens and ms:
        rate = tokens / (ms / 1000)
    read = _number(timings.get("prompt_n"))
    cached = _number(timings.get("cache_n"))
    details = usage.get("prompt_tokens_details")
    if cached is None and isinstance(details, dict):
        cached = _number(details.get("cached_tokens"))
    prompt_tokens = (
        (read or 0) + (cached or 0) if read is not None else _number(usage.get("prompt_tokens"))
    )
    prefill = _number(timings.get("prompt_per_second"))
    prompt_ms = _number(timings.get("prompt_ms"))
    ttft = _number(timings.get("ttft_ms"))

    line: list[str] = []
    if rate:
        line.append(f"{rate:.1f} tok/s")
    if tokens:
        line.append(f"{int(tokens)} tokens")
    if ms:
        line.append(f"{ms / 1000:.1f} s")
    if prompt_tokens and prompt:
        line.append(
            f"{int(prompt_tokens):,} prompt" + (f", {int(cached):,} cached" if cached else "")
        )

    tip: list[str] = []
    if prompt_tokens:
        tip.append(
            f"Prompt: {int(prompt_tokens):,} tokens"
            + (f", {int(cached):,} reused from the cache" if cached is not None else "")
        )
    if read is not None and prompt_ms:
        speed = f" at {prefill:,.0f} tok/s" if prefill and read else ""
        tip.append(f"Read: {int(read):,} tokens in {prompt_ms / 1000:.2f} s{speed}")
    if tokens:
        tip.append(
            f"Reply: {int(tokens):,} tokens"
            + (f" at {rate:.1f} tok/s" if rate else "")
            + (f" in {ms / 1000:.1f} s" if ms else "")
        )
    if ttft is not None:
        tip.append(f"Time to first token: {ttft / 1000:.2f} s")
    return " · ".join(line), "\n".join(tip)


def prompt_cost(usage: dict, timings: dict) -> str:
    """What reading the prompt cost: "Prompt 1,024 tokens: 124 read in 0.35 s, 900 cached"
    (a provider that gives no timings: its tokens only; '' when nothing says)."""
    read = _number(timings.get("prompt_n"))
    cached = _number(timings.get("cache_n"))
    details = usage.get("prompt_tokens_details")
    if cached is None and isinstance(details, dict):
        cached = _number(details.get("cached_tokens"))
    total = (read or 0) + (cached or 0) if read is not None else _number(usage.get("prompt_tokens"))
    if not total:
        return ""
    parts = []
    prompt_ms = _number(timings.get("prompt_ms"))
    if read is not None:
        parts.append(f"{int(read):,} read" + (f" in {prompt_ms / 1000:.2f} s" if prompt_ms else ""))
    if cached is not None:
        parts.append(f"{int(cached):,} cached")
    return f"Prompt {int(total):,} tokens" + (": " + ", ".join(parts) if parts else "")


def progress_text(progress: dict) -> str:
    """ "Reading 3,120 of 9,004 tokens (5,884 from cache)" for a prompt_progress chunk."""
    total = int(_number(progress.get("total")) or 0)
    cache = int(_number(progress.get("cache")) or 0)
    processed = int(_number(progress.get("processed")) or 0)
    text = f"Reading {processed:,} of {total:,} tokens"
    return text + (f" ({cache:,} from cache)" if cache else "")


def stopped_figures(content: str, began: float | None) -> str:
    """What a stopped reply produced: its words, and how long it ran when known."""
    words = len(content.split())
    parts = [f"{words:,} word{'' if words == 1 else 's'}"] if words else []
    if began is not None:
        parts.append(f"{time.monotonic() - began:.1f} s")
    return " · ".join(parts)


def duration(seconds: float) -> str:
    """ "12 s", "2 min 05 s"."""
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


def reading_speed(timings: Mapping[str, Any]) -> float | None:
    """The prompt tokens a second a reply's timings measured (None when they do not say)."""
    read = _number(timings.get("prompt_n"))
    speed = _number(timings.get("prompt_per_second"))
    return speed if read and speed else None


class ReadingProgress(QWidget):
    """The prompt being read: a bar, the server's count and the time, until the first token.

    llama.cpp reports once per batch, which can take half a minute on a long prompt.
    Between reports a timer moves the bar by an estimate: the reading speed this
    reading measured so far, or before its first batch `speed` (what earlier replies
    measured). The estimate never passes where the next report can plausibly be (one
    batch on, short of the end) and the bar never goes back; the words say only what
    the server reported.
    """

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        speed: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(parent)
        self.setAccessibleName("Reading the prompt")
        self._speed_before = speed
        self._clock = clock
        self._started: float | None = None
        # While the router loads the model, before the first report: since when.
        self._loading_since: float | None = None
        self._reported_at = 0.0
        # total, cache, processed, time_ms of the last report; the largest step between two.
        self._report = (0, 0, 0, 0.0)
        self._batch = 0
        self.bar = QProgressBar(self)
        self.bar.setAccessibleName("Prompt read")
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.bar.setMaximumWidth(220)
        self.label = plain.Label("", self)
        self.timing = plain.Label("", self)
        self.timing.setAccessibleName("Reading time")
        self.timing.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.label)
        layout.addWidget(self.timing, 1)
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self.refresh)
        self._follow_palette()

    def show_loading(self, model: str, progress: float | None) -> None:
        """The router loads `model` before it reads the prompt: "Loading smol… 40%" with
        its load progress (0-1; None: a busy bar), until the first prompt report."""
        if self._started is not None:
            return  # reading already
        if self._loading_since is None:
            self._loading_since = self._clock()
            self._timer.start()
        if progress is None:
            self.bar.setRange(0, 0)
            self.label.setText(f"Loading {model}…")
        else:
            self.bar.setRange(0, 100)
            self.bar.setValue(round(min(max(progress, 0.0), 1.0) * 100))
            self.label.setText(f"Loading {model}… {progress:.0%}")
        self.refresh()

    def show_progress(self, progress: dict) -> None:
        """Show one prompt_progress chunk."""
        now = self._clock()
        if self._started is None and self._loading_since is not None:
            self.bar.reset()  # the load's bar: the reading's starts at its own 0
        total = int(_number(progress.get("total")) or 0)
        cache = int(_number(progress.get("cache")) or 0)
        processed = min(int(_number(progress.get("processed")) or 0), total)
        time_ms = _number(progress.get("time_ms")) or 0.0
        if self._started is None:
            # The server says how long it has been reading; the first report comes late.
            self._started = now - time_ms / 1000
        else:
            self._batch = max(self._batch, processed - self._report[2])
        self._report = (total, cache, processed, time_ms)
        self._reported_at = now
        self.bar.setRange(0, max(total, 1))
        self.label.setText(progress_text(progress))
        if processed < total:
            self._timer.start()
        else:
            self._timer.stop()
        self.refresh()

    def speed(self) -> float | None:
        """Prompt tokens a second: this reading's once it read a batch, else earlier replies'."""
        _total, cache, processed, time_ms = self._report
        if processed > cache and time_ms > 0:
            return (processed - cache) / (time_ms / 1000)
        return self._speed_before

    def estimate(self) -> int:
        """How many tokens the server has likely read by now."""
        total, _cache, processed, _time_ms = self._report
        speed = self.speed()
        if processed >= total or not speed:
            return processed
        since = self._clock() - self._reported_at
        guess = processed + speed * since
        if not self._batch:
            # No step seen: the server may report only the first and the last batch (a
            # prompt shorter than its report interval). Past nine tenths of the time
            # estimated the bar slows down, nearing 95% without reaching it: a wrong
            # speed (a model that loads, a busier machine) never fills it at 0 read.
            left = total - processed
            late = since - 0.9 * left / speed
            if late > 0:
                guess = processed + left * (0.95 - 0.05 * math.exp(-late * speed / left))
        # Not past the next report (one batch on, once a step was seen), nor the end.
        ceiling = min(processed + self._batch if self._batch else total, total - 1)
        return max(processed, int(min(guess, ceiling)))

    def left(self) -> float | None:
        """The seconds of reading still expected, None when the estimate ran out."""
        total, _cache, processed, _time_ms = self._report
        speed = self.speed()
        if not speed:
            return None
        if self._batch:
            return (total - self.bar.value()) / speed
        left = (total - processed) / speed - (self._clock() - self._reported_at)
        return left if left > 0 else None

    def refresh(self) -> None:
        """Move the bar to the estimate (never back) and show the time (the timer calls it)."""
        if self._started is None and self._loading_since is not None:
            self.timing.setText(duration(self._clock() - self._loading_since))
            return
        self.bar.setValue(max(self.bar.value(), self.estimate()))
        text = duration(self.elapsed())
        left = self.left()
        if self._timer.isActive() and left is not None:
            text += f" · about {duration(left)} left"
        self.timing.setText(text)

    def elapsed(self) -> float:
        """Seconds since the server began reading."""
        return 0.0 if self._started is None else self._clock() - self._started

    def stop(self) -> None:
        """The reading is over (the answer began, or Stop): the estimate stops."""
        self._timer.stop()
        self.refresh()

    def read_all(self) -> bool:
        """True once the server reported the whole prompt read."""
        total, _cache, processed, _time_ms = self._report
        return processed >= total

    def stopped_text(self) -> str:
        """What a reading stopped half-way had done, as the server last reported it."""
        total, _cache, processed, _time_ms = self._report
        return f"{processed:,} of {total:,} prompt tokens read · {duration(self.elapsed())}"

    def changeEvent(self, event: QEvent) -> None:
        """Follow a theme switch (the empty bar's colour)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._follow_palette()

    def _follow_palette(self) -> None:
        palette = QPalette(self.bar.palette())
        palette.setColor(QPalette.ColorRole.Base, theme.progress_groove(self.palette()))
        self.bar.setPalette(palette)
