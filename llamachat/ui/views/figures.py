"""A reply's figures: the line under it, its tooltip, and the bar shown while the prompt is read.

The figures are the server's `usage` and `timings` as History keeps them, plus `ttft_ms`,
the time to the first token llamachat measured itself (a model load included).
`figures(usage, timings)` gives the compact line ("38.2 tok/s · 412 tokens · 1.2 s ·
1,024 prompt, 900 cached") and the tooltip with the rest; `ReadingProgress` shows
llama.cpp's prompt progress ("Reading 3,120 of 9,004 tokens (5,884 from cache)").

Errors: none; missing figures are left out.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QWidget

from llamachat.ui import plain


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def figures(usage: dict, timings: dict) -> tuple[str, str]:
    """The compact line and the tooltip of a reply's figures ('' each when there are none)."""
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
    prompt = (
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
    if prompt:
        line.append(f"{int(prompt):,} prompt" + (f", {int(cached):,} cached" if cached else ""))

    tip: list[str] = []
    if prompt:
        tip.append(
            f"Prompt: {int(prompt):,} tokens"
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


def progress_text(progress: dict) -> str:
    """ "Reading 3,120 of 9,004 tokens (5,884 from cache)" for a prompt_progress chunk."""
    total = int(_number(progress.get("total")) or 0)
    cache = int(_number(progress.get("cache")) or 0)
    processed = int(_number(progress.get("processed")) or 0)
    text = f"Reading {processed:,} of {total:,} tokens"
    return text + (f" ({cache:,} from cache)" if cache else "")


class ReadingProgress(QWidget):
    """The prompt being read: a bar and the words, until the first token arrives."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Reading the prompt")
        self.bar = QProgressBar(self)
        self.bar.setAccessibleName("Prompt read")
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.bar.setMaximumWidth(220)
        self.label = plain.Label("", self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.bar)
        layout.addWidget(self.label, 1)

    def show_progress(self, progress: dict) -> None:
        """Show one prompt_progress chunk."""
        total = int(_number(progress.get("total")) or 0)
        processed = int(_number(progress.get("processed")) or 0)
        self.bar.setRange(0, max(total, 1))
        self.bar.setValue(min(processed, max(total, 1)))
        self.label.setText(progress_text(progress))
