"""The tests of `llamachat.ui.chat.worker`."""

from __future__ import annotations

import gc
import itertools
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QObject, Qt, QThread, QTimer
from PySide6.QtWidgets import QAbstractButton

from llamachat.config import Config
from llamachat.dev.scripted_router import Reply
from llamachat.router import client as backend
from llamachat.router.server import ManagedServer
from llamachat.tests.support import (
    OK_CHUNK,
    SMOL_ID,
    last_saved_message,
    library_sources,
    make_zebra_folder,
    real_assets,
    reply_label_texts,
    send_and_wait,
    smol_models_folder,
    start_sending,
    streamed_content,
    turn_of,
    user_turn,
    visible_widget_named,
)
from llamachat.ui.chat.worker import (
    FRAME_INTERVAL_MS,
    MAX_READ_WAIT_MS,
    StreamWorker,
    WorkerThreads,
    collect_garbage_on_gui_thread,
)


class TestWorker:
    """Background work for the window: a streaming reply in a QThread."""

    def test_fault_stalled_router_is_stopped_by_the_user_or_ended_by_idle_timeout(
        self, chat_window, router, qtbot
    ) -> None:
        """Headers then silence: Stop ends it at once; else cfg.idle_timeout ends it with a message."""

        window, history = chat_window(idle_timeout=0.5)
        router.script(Reply(content=["first ", "lost"], stall_after=2))
        start_sending(qtbot, window, "stall")
        qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "first ")
        qtbot.mouseClick(
            visible_widget_named(window, QAbstractButton, "Stop"), Qt.MouseButton.LeftButton
        )
        assert not window.is_streaming()
        assert (
            last_saved_message(history, window)["content"],
            last_saved_message(history, window)["status"],
        ) == (
            "first ",
            "stopped",
        )
        qtbot.waitUntil(lambda: router.disconnects == 1, timeout=5000)

        # Nothing at all after the headers, and nobody presses Stop.
        router.script(Reply(content=["never"], stall_after=0))
        start_sending(qtbot, window, "stall again")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        row = last_saved_message(history, window)
        assert (row["content"], row["status"]) == ("", "error")
        assert "sent nothing for 0.5 s" in row["error"] and "idle_timeout" in row["error"]
        assert row["error"] in reply_label_texts(window.messages.last_assistant())
        router.release()

    @pytest.mark.parametrize(
        ("raw", "says"),
        [
            pytest.param([OK_CHUNK, b"data: {not json\n\n"], "not JSON", id="invalid-json"),
            pytest.param(
                [OK_CHUNK, b"data: [1, 2, 3]\n\n"], "unexpected chunk", id="json-not-object"
            ),
            pytest.param(
                [OK_CHUNK, b"<html>502 Bad Gateway</html>\n\n"],
                "not an event stream",
                id="html-in-stream",
            ),
            pytest.param(
                [OK_CHUNK, b"\x00\xff\xfe\x80garbage\n\n"],
                "not an event stream",
                id="binary-garbage",
            ),
            pytest.param([OK_CHUNK], "ended before it was complete", id="no-finish"),
            pytest.param(
                [OK_CHUNK, b"data: " + b"x" * (64 * 1024 * 1024 + 16)],
                "longer than",
                id="oversized-line",
            ),
        ],
    )
    def test_fault_garbage_sse_ends_the_reply_with_a_message_and_the_window_goes_on(
        self, chat_window, router, qtbot, raw, says
    ) -> None:
        """Broken streams: the text before the damage is kept, the reply says what broke."""

        window, history = chat_window()
        router.script(Reply(raw=raw))
        send_and_wait(qtbot, window, "garbage please")
        row = last_saved_message(history, window)
        assert (row["content"], row["status"]) == ("ok ", "error")
        assert says in row["error"]
        assert len(row["error"]) < 400, "the message quotes a whole garbage line"
        assert row["error"] in reply_label_texts(window.messages.last_assistant())

        send_and_wait(qtbot, window, "still there?")
        row = last_saved_message(history, window)
        assert (row["content"], row["status"]) == ("echo: still there?", "complete")

    def test_worker_streams_events_then_finishes(self, router, qtbot) -> None:
        """The worker re-emits reasoning, content and stats from the stream, then finished."""

        router.script(Reply(reasoning=["hm"], content=["a", "b"]))
        client = backend.Client(router.url)
        worker = StreamWorker(client, "test-model", turn_of(user_turn("x")))
        events: list = []
        worker.reasoning.connect(lambda t: events.append(("reasoning", t)))
        worker.content.connect(lambda t: events.append(("content", t)))
        worker.stats.connect(lambda s: events.append(("stats", s["usage"]["completion_tokens"])))
        worker.failed.connect(lambda m, e: events.append(("failed", m)))
        worker.finished.connect(lambda: events.append(("finished", None)))
        threads = WorkerThreads()
        threads.start(worker)
        qtbot.waitUntil(lambda: threads.running() == 0, timeout=10000)
        client.close()
        # Text that arrives in one burst is delivered joined; order and kinds are kept.
        merged: list = []
        for kind, value in events:
            if merged and kind == merged[-1][0] == "content":
                merged[-1] = (kind, merged[-1][1] + value)
            else:
                merged.append((kind, value))
        assert merged == [
            ("reasoning", "hm"),
            ("content", "ab"),
            ("stats", 3),
            ("finished", None),
        ]

    def test_worker_cancel_closes_stalled_response_without_failing(self, router, qtbot) -> None:
        """Cancelling a worker stuck on a silent server ends it and closes the connection."""

        router.script(Reply(content=["first ", "never"], stall_after=2))
        client = backend.Client(router.url)
        worker = StreamWorker(client, "test-model", turn_of(user_turn("x")))
        received: list = []
        failures: list = []
        worker.content.connect(received.append)
        worker.failed.connect(lambda m, e: failures.append(m))
        threads = WorkerThreads()
        threads.start(worker)
        qtbot.waitUntil(lambda: received == ["first "], timeout=10000)
        worker.cancel()
        qtbot.waitUntil(lambda: threads.running() == 0, timeout=10000)
        qtbot.waitUntil(lambda: router.disconnects == 1, timeout=5000)
        client.close()
        assert failures == []

    def test_worker_failure_carries_server_message_and_exception(self, router, qtbot) -> None:
        """A server error reaches the GUI thread as failed(message, ServerError), then finished."""

        router.script(Reply(status=503, error={"message": "loading model"}))
        client = backend.Client(router.url)
        worker = StreamWorker(client, "test-model", turn_of(user_turn("x")))
        failures: list = []
        worker.failed.connect(lambda m, e: failures.append((m, e)))
        threads = WorkerThreads()
        threads.start(worker)
        qtbot.waitUntil(lambda: threads.running() == 0, timeout=10000)
        client.close()
        [(message, error)] = failures
        assert "loading model" in message
        assert isinstance(error, backend.ServerError) and error.status == 503

    def test_worker_hands_a_burst_of_tokens_over_joined_in_a_few_frames(
        self, router, qtbot
    ) -> None:
        """Thousands of tokens sent at once reach the GUI thread as a few joined pieces."""

        pieces = [
            text for _at, text in streamed_content(router, qtbot, Reply.tokens(5_000, word="w "))
        ]
        assert "".join(pieces) == "w " * 5_000
        # One signal per token would be 5,000; one per ~30 Hz frame is a handful.
        assert len(pieces) < 100

    def test_worker_paced_stream_reaches_the_gui_at_most_about_30_times_a_second(
        self, router, qtbot
    ) -> None:
        """At 1,000 tokens/s the GUI thread gets a frame's worth at a time, never a signal each."""

        streamed = streamed_content(router, qtbot, Reply(content=["t "] * 400, rate=1000))
        arrivals = [at for at, _text in streamed]
        pieces = [text for _at, text in streamed]
        assert "".join(pieces) == "t " * 400
        # Drains are FRAME_INTERVAL_MS apart at least; the last one, queued at the end, is extra.
        frames = (arrivals[-1] - arrivals[0]) * 1000 / FRAME_INTERVAL_MS
        assert 2 <= len(pieces) <= frames + 2

    def test_worker_reads_a_reading_pace_stream_a_few_tokens_at_a_time(self, router, qtbot) -> None:
        """At 20 tokens/s the first token comes alone, at once; after it the worker reads
        about READ_BATCH_TOKENS at a time, so the window renders once per few tokens, none
        lost and none held back longer than MAX_READ_WAIT_MS and a frame."""

        streamed = streamed_content(router, qtbot, Reply(content=["w "] * 40, rate=20))
        pieces = [text for _at, text in streamed]
        assert "".join(pieces) == "w " * 40
        assert pieces[0] == "w "
        # One render a token would be 40, one per two 21; batches of six make about 8.
        assert len(pieces) <= 12, pieces
        gaps = [later - earlier for (earlier, _a), (later, _b) in itertools.pairwise(streamed)]
        assert max(gaps) * 1000 <= MAX_READ_WAIT_MS + 2 * FRAME_INTERVAL_MS + 50, gaps

    def test_garbage_qt_objects_are_destroyed_on_the_gui_thread(self, qapp, qtbot) -> None:
        """A QObject with a running timer, dropped in a cycle, dies on the GUI thread.

        Collected by a worker thread, Qt would warn "Timers cannot be stopped from another
        thread" (a failure here) and later crash when the timer fired.
        """

        collect_garbage_on_gui_thread()
        qapp.processEvents()  # startup's objects get frozen on the loop's first turn
        assert not gc.isenabled()
        died_on: list = []

        def make_garbage() -> None:
            owner = QObject()
            owner.timer = QTimer(owner)
            owner.timer.start(10)
            owner.cycle = owner  # only the cycle collector can free it
            owner.destroyed.connect(lambda: died_on.append(QThread.currentThread()))

        make_garbage()
        # A worker thread allocating as much as a streamed reply does: with automatic
        # collection this is where the cycle would be freed.
        churn = threading.Thread(target=lambda: [[{} for _ in range(50)] for _ in range(20_000)])
        churn.start()
        churn.join()
        assert died_on == []
        # Enough new objects for the next collection to be due, as an app allocates anyway.
        ballast = [[] for _ in range(5000)]
        qtbot.waitUntil(lambda: bool(died_on), timeout=5000)
        del ballast
        assert died_on == [qapp.thread()]

    def test_window_first_message_to_a_model_not_loaded_learns_it_takes_no_tools_before_sending(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The server says whether a template takes tools only once the model is loaded: the
        first message to a model not loaded yet, with a library, loads it, asks, and goes out
        without tools and with the passages found (not with search_documents, which such a
        template cannot take); the window then knows, and the next request is built so."""
        router.models["test-model"].status = "unloaded"
        router.models["test-model"].tools = False
        root = make_zebra_folder(tmp_path / "docs")
        window, _history = chat_window()
        watch = window.chat.context
        assert watch.takes_tools()  # unknown yet: nothing is loaded
        window.libraries.add_folders([root])
        router.script(Reply(content="It earned 42 million."))
        send_and_wait(qtbot, window, "How did the zebra division do?")
        [first] = [request.json for request in router.chat_requests()]
        assert "tools" not in first
        assert "42 million" in first["messages"][-1]["content"]
        assert ">zebra.md (Zebra)</a>" in library_sources(window)
        qtbot.waitUntil(lambda: not watch.takes_tools(), timeout=10_000)
        assert window.chat.next_turn().tools == ()

    @pytest.mark.real_router
    def test_worker_reply_broken_by_a_lost_rpc_worker_names_it_and_retry_answers(
        self, chat_window, rpc_worker, qtbot, tmp_path
    ) -> None:
        """A worker killed mid-reply: the reply's error names it; Retry answers without it."""
        _binary, model = real_assets()
        first, _ = rpc_worker()
        second, second_proc = rpc_worker()
        cfg = Config(
            models_dir=smol_models_folder(tmp_path, model),
            rpc_workers=(first, second),
            server_args=("--ctx-size", "1024"),
        )
        kinds: list[str] = []
        server = ManagedServer(
            cfg, log_path=tmp_path / "server.log", on_event=lambda kind, _m: kinds.append(kind)
        )
        server.start()
        try:
            assert server.wait_ready(60), server.log_file.tail()
            window, history = chat_window(url=server.url, default_model=SMOL_ID)
            start_sending(qtbot, window, "Write a long story about a lighthouse keeper.")

            def shown() -> str:
                view = window.messages.last_assistant()
                return view.content() if view is not None else ""

            qtbot.waitUntil(lambda: bool(shown()), timeout=60000)
            second_proc.kill()
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
            failed = last_saved_message(history, window)
            assert failed["status"] == "error"
            assert failed["error"].startswith(f"RPC worker {second} was lost during this reply")
            view = window.messages.last_assistant()
            assert failed["error"] in reply_label_texts(view)

            # Ready again after the restart: until the old router has gone, it still runs.
            qtbot.waitUntil(
                lambda: kinds.count("ready") == 2 and server.is_running(), timeout=30000
            )
            assert server.workers.in_use == (first,)
            qtbot.mouseClick(
                visible_widget_named(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton
            )
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=60000)
            answer = last_saved_message(history, window)
            assert answer["status"] == "complete" and answer["content"], answer["error"]
        finally:
            server.stop()
