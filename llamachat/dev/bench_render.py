"""Rendering benchmarks for the conversation view; prints figures, never a verdict.

Run ``python -m llamachat.dev.bench_render`` (offscreen by default). Three figures:

- stream: a long reply streamed into a real, shown `MessagesView` in bursts of
  `BURST_TOKENS` tokens (what the stream worker hands over per frame at ~1,000
  tokens/s), at full speed, next to the time merely concatenating the tokens takes;
- flatness: the per-token cost of a streamed reply after 100,000 tokens of
  history (every page built) over the same cost in an empty conversation, with
  one render per fixed number of tokens so both runs do the same work;
- open: time from `load_messages` of a 5,000-message session to its first paint.

`run_stream`, `run_flatness` and `run_open` return dicts so other benchmarks
(``llamachat.bench``) can reuse them. Errors: none of its own; a failure is a bug.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from llamachat.ui.views.message import MessageView
from llamachat.ui.views.messages import MessagesView

WIDTH, HEIGHT = 900, 700
FLATNESS_TOKENS_PER_RENDER = 12
BURST_TOKENS = 33

_WORDS = [
    "the",
    "model",
    "reads",
    "each",
    "token",
    "and",
    "the",
    "view",
    "renders",
    "finished",
    "blocks",
    "once",
    "while",
    "only",
    "the",
    "open",
    "tail",
    "is",
    "parsed",
    "again",
    "so",
    "a",
    "long",
    "reply",
    "stays",
    "smooth",
    "even",
    "when",
    "history",
    "is",
    "large",
    "cache",
    "prompt",
    "router",
    "server",
    "latency",
    "throughput",
    "memory",
    "layout",
    "document",
    "cursor",
]
_CODE = [
    "def tokens(stream):",
    "    for event in stream:",
    "        if event.kind == 'content':",
    "            yield event.text",
    "",
    "    return None",
    "total = sum(len(t) for t in tokens(events))",
    "print(f'{total} characters')",
]


def sample_tokens(n_tokens: int, *, seed: int = 1) -> list[str]:
    """Realistic streamed tokens: paragraphs, lists, headings and code fences, ~4 chars each."""
    rng = random.Random(seed)
    out: list[str] = []

    def words(count: int) -> None:
        for i in range(count):
            word = rng.choice(_WORDS)
            out.append(word if i == 0 else " " + word)
            if rng.random() < 0.08:
                out.append(rng.choice([",", ".", " `code`", " **bold**"]))

    while len(out) < n_tokens:
        kind = rng.random()
        if kind < 0.45:
            words(rng.randint(30, 90))
            out.append(".\n\n")
        elif kind < 0.7:
            for number in range(1, rng.randint(3, 7)):
                out.append(f"{number}. " if rng.random() < 0.5 else "- ")
                words(rng.randint(5, 15))
                out.append("\n")
            out.append("\n")
        elif kind < 0.8:
            out.append("## ")
            words(rng.randint(2, 5))
            out.append("\n\n")
        else:
            out.append("```python\n")
            for line in rng.sample(_CODE, k=len(_CODE)):
                out.extend(part + " " for part in line.split(" ")[:-1])
                out.append(line.split(" ")[-1] + "\n")
            out.append("```\n\n")
    return out[:n_tokens]


def _app() -> QApplication:
    app = QApplication.instance()
    return app if isinstance(app, QApplication) else QApplication(sys.argv[:1])


def _view() -> MessagesView:
    view = MessagesView()
    view.resize(WIDTH, HEIGHT)
    view.show()
    _settle()
    return view


def _settle() -> None:
    app = _app()
    for _ in range(3):
        app.processEvents()


def run_stream(n_tokens: int = 20_000) -> dict:
    """Stream `n_tokens` into a real view at full speed, a burst per render; time it."""
    app = _app()
    tokens = sample_tokens(n_tokens)
    started = time.perf_counter()
    text = ""
    for token in tokens:
        text += token
    concat_s = time.perf_counter() - started

    view = _view()
    reply = view.append_message({"role": "assistant", "status": "streaming"})
    _settle()
    started = time.perf_counter()
    for start in range(0, len(tokens), BURST_TOKENS):
        # One burst per event-loop turn, as the stream worker delivers them.
        reply.append_content("".join(tokens[start : start + BURST_TOKENS]))
        app.processEvents()
    reply.finish()
    app.processEvents()
    render_s = time.perf_counter() - started
    if reply.content() != text:
        raise RuntimeError("the view lost streamed text")
    result = {
        "tokens": n_tokens,
        "render_s": render_s,
        "concat_s": concat_s,
        "ratio": render_s / concat_s if concat_s else float("inf"),
        "renders": reply.render_count,
        "per_token_us": render_s / n_tokens * 1e6,
    }
    view.close()
    view.deleteLater()
    _settle()
    return result


def _history(total_tokens: int, *, per_message: int = 400) -> list[dict]:
    tokens = sample_tokens(total_tokens, seed=7)
    messages = []
    for number, start in enumerate(range(0, total_tokens, per_message)):
        role = "user" if number % 2 == 0 else "assistant"
        messages.append(
            {
                "id": number + 1,
                "role": role,
                "content": "".join(tokens[start : start + per_message]),
                "status": "complete",
                "usage": {"completion_tokens": per_message} if role == "assistant" else {},
                "timings": {"predicted_per_second": 40.0, "predicted_ms": 10_000.0},
            }
        )
    return messages


def _stream_cost(view: MessagesView, tokens: list[str]) -> float:
    app = _app()
    reply = view.append_message({"role": "assistant", "status": "streaming"})
    _settle()
    started = time.perf_counter()
    for start in range(0, len(tokens), FLATNESS_TOKENS_PER_RENDER):
        reply.append_content("".join(tokens[start : start + FLATNESS_TOKENS_PER_RENDER]))
        app.processEvents()
        app.processEvents()
    reply.finish()
    app.processEvents()
    elapsed = time.perf_counter() - started
    return elapsed / len(tokens)


def run_flatness(n_tokens: int = 4_000, *, history_tokens: int = 100_000, repeats: int = 3) -> dict:
    """Per-token streaming cost after `history_tokens` of history over the cost at the start."""
    _app()
    tokens = sample_tokens(n_tokens, seed=3)
    empty = _view()
    loaded = _view()
    history = _history(history_tokens)
    loaded.load_messages(history)
    while loaded.load_older():
        _settle()
    _settle()
    loaded.scroll_to_bottom()
    _settle()
    built = len(loaded.views())
    start_costs, after_costs = [], []
    for _ in range(repeats):
        # Interleaved and best-of: a busy machine slows both sides alike.
        empty.clear()
        _settle()
        start_costs.append(_stream_cost(empty, tokens))
        after_costs.append(_stream_cost(loaded, tokens))
    start, after = min(start_costs), min(after_costs)
    result = {
        "tokens": n_tokens,
        "history_tokens": history_tokens,
        "history_messages": built,
        "start_us": start * 1e6,
        "after_us": after * 1e6,
        "ratio": after / start,
    }
    for view in (empty, loaded):
        view.close()
        view.deleteLater()
    _settle()
    return result


class _FirstPaint(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.at: float | None = None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Note the time of the first paint."""
        if event.type() == QEvent.Type.Paint and self.at is None:
            self.at = time.perf_counter()
        return False


def run_open(n_messages: int = 5_000) -> dict:
    """Time from `load_messages` of an `n_messages` session to the newest message's first paint."""
    app = _app()
    history = _history(n_messages * 200, per_message=200)
    view = _view()
    started = time.perf_counter()
    view.load_messages(history)
    newest: MessageView = view.views()[-1]
    watcher = _FirstPaint()
    newest._body.viewport().installEventFilter(watcher)
    while watcher.at is None:
        app.processEvents()
    result = {
        "messages": len(history),
        "first_paint_ms": (watcher.at - started) * 1000,
        "built": len(view.views()),
    }
    view.close()
    view.deleteLater()
    _settle()
    return result


def main(argv: list[str] | None = None) -> int:
    """Print the rendering figures."""
    parser = argparse.ArgumentParser(
        prog="python -m llamachat.dev.bench_render", description=__doc__
    )
    parser.add_argument("--tokens", type=int, default=20_000, help="streamed reply length")
    parser.add_argument("--history", type=int, default=100_000, help="history tokens (flatness)")
    parser.add_argument("--messages", type=int, default=5_000, help="session size (open)")
    args = parser.parse_args(argv)
    _app()
    stream = run_stream(args.tokens)
    print(
        f"stream    {stream['tokens']} tokens: {stream['render_s'] * 1000:.0f} ms streamed and "
        f"rendered ({stream['renders']} renders, {stream['per_token_us']:.1f} µs/token) vs "
        f"{stream['concat_s'] * 1000:.2f} ms to concatenate: ratio {stream['ratio']:.0f}"
    )
    flat = run_flatness(history_tokens=args.history)
    print(
        f"flatness  {flat['start_us']:.1f} µs/token at the start, {flat['after_us']:.1f} µs/token "
        f"after {flat['history_tokens']} tokens in {flat['history_messages']} messages: "
        f"ratio {flat['ratio']:.2f} (target <= 1.2)"
    )
    opened = run_open(args.messages)
    print(
        f"open      {opened['messages']} messages: first paint after "
        f"{opened['first_paint_ms']:.0f} ms ({opened['built']} built) (target < 300 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
