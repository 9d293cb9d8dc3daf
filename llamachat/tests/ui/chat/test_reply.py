"""The tests of `llamachat.ui.chat.reply`."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QLabel, QToolButton

from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History, HistoryError
from llamachat.router.client import Client
from llamachat.tests.support import (
    SIGKILL_CHILD_SCRIPT,
    TimedRelay,
    big_text,
    last_saved_message,
    reply_label_texts,
    send_and_wait,
    start_sending,
    turn_of,
    type_message,
    user_turn,
    visible_widget_named,
)
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.chat.worker import WorkerThreads


class TestReply:
    """One streaming reply: its worker and its History row, saved as it streams."""

    def test_fault_ten_megabyte_single_delta_arrives_whole_in_client_window_and_history(
        self, chat_window, router, qtbot
    ) -> None:
        """One 10 MB delta: the client yields it as one piece; the window shows and saves it."""

        big = big_text(10)
        router.script(Reply(content=[big]))
        client = Client(router.url)
        try:
            pieces = [
                value
                for kind, value in client.stream_chat(turn_of(user_turn("x")))
                if kind == "content"
            ]
        finally:
            client.close()
        assert len(pieces) == 1 and pieces[0] == big

        window, history = chat_window()
        router.script(Reply(content=[big]))
        start_sending(qtbot, window, "big")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=120000)
        row = last_saved_message(history, window)
        assert row["status"] == "complete" and row["content"] == big
        assert window.messages.last_assistant().content() == big

    def test_window_saves_streaming_reply_within_a_second(self, chat_window, router, qtbot) -> None:
        """While a reply streams its row holds the text so far with status 'streaming'."""

        window, history = chat_window()
        router.script(Reply(content=["saved ", "early ", "never"], stall_after=3))
        type_message(qtbot, window, "go")
        window.send()

        def saved() -> bool:
            row = history.messages(window.session_id)[-1]
            return row["status"] == "streaming" and row["content"] == "saved early "

        qtbot.waitUntil(saved, timeout=5000)
        window.stop()

    def test_window_reply_left_streaming_by_a_crash_opens_as_stopped(
        self, chat_window, qtbot
    ) -> None:
        """A reply a dead process left 'streaming' opens as 'stopped', text kept, Regenerate offered."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "hello")
        reply = history.add_message(session, "assistant", "partial te", status="streaming")
        assert window.open_session(session)
        assert history.messages(session)[-1]["status"] == "stopped"
        view = window.messages.last_assistant()
        assert view.content() == "partial te" and not view.is_streaming()
        qtbot.waitUntil(view.isVisible)
        assert visible_widget_named(view, QAbstractButton, "Regenerate")
        assert not [
            b for b in view.findChildren(QAbstractButton) if b.text() == "Retry" and b.isVisible()
        ]
        assert view.message_id == reply

    def test_window_reply_a_crash_cut_off_before_any_text_opens_failed_with_retry(
        self, chat_window, router, qtbot
    ) -> None:
        """A reply a dead process left 'streaming' and empty opens as an error with Retry."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model")
        history.add_message(session, "user", "hello")
        history.add_message(session, "assistant", "", status="streaming")
        assert window.open_session(session)
        row = history.messages(session)[-1]
        assert (row["status"], row["error"]) == (
            "error",
            "llamachat closed before this reply began.",
        )
        view = window.messages.last_assistant()
        qtbot.waitUntil(view.isVisible)
        assert row["error"] in reply_label_texts(view)
        assert not [
            b
            for b in view.findChildren(QAbstractButton)
            if b.accessibleName() in ("Regenerate", "Copy reply") and b.isVisible()
        ]
        router.script(Reply(content="Hello there."))
        qtbot.mouseClick(
            visible_widget_named(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [(m["role"], m["content"], m["status"]) for m in history.messages(session)] == [
            ("user", "hello", "complete"),
            ("assistant", "Hello there.", "complete"),
        ]

    @pytest.mark.parametrize(
        ("answer", "status", "content"),
        [
            (Reply(content=["Hello ", "there."]), "complete", "Hello there."),
            (Reply(status=500, error={"message": "boom"}), "error", ""),
        ],
        ids=["with-text", "failed-without-text"],
    )
    def test_reply_whose_row_cannot_be_added_at_start_is_saved_once_there_is_room(
        self, chat_window, router, qtbot, answer, status, content
    ) -> None:
        """The reply's row is added once its request is out; History full then (a full
        disk): the reply goes on, and its saves add the row once there is room, its outcome
        with it, a failure without text as well."""

        window, history = chat_window()
        session = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(session, "user", "hi")
        before = history.message_count(session)
        pages = history._conn.execute("PRAGMA page_count").fetchone()[0]
        history._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
        # Every free byte taken, so even an empty reply needs a page there is none of.
        filler = history.create_session("chat", "test-model", prompt_name="Default")
        for size in (4000, 400, 40, 0):
            with pytest.raises(HistoryError):
                while True:
                    history.add_message(filler, "assistant", "x" * size, model="test-model")
        router.script(answer)
        reply = ReplyStream(
            history,
            window.app.registry,
            session_id=session,
            model="test-model",
            request=turn_of(user_turn()),
        )
        ended: list[str] = []
        reply.ended.connect(lambda outcome, _error: ended.append(outcome))
        reply.start(WorkerThreads(reply))
        assert reply.message_id is None
        qtbot.waitUntil(lambda: ended == [status], timeout=10000)
        assert not reply.is_saved()

        history._conn.execute("PRAGMA max_page_count = 1073741823")  # room again
        qtbot.waitUntil(reply.is_saved, timeout=5000)
        assert history.message_count(session) == before + 1
        saved = history.messages(session)[-1]
        assert (saved["role"], saved["status"], saved["content"]) == ("assistant", status, content)

    def test_window_disk_full_keeps_the_reply_marks_it_unsaved_and_saves_it_when_room_is_back(
        self, chat_window, router, qtbot
    ) -> None:
        """History full mid-reply (max_page_count): the reply stays whole on screen, marked
        "not saved"; nothing is sent while History lags; once there is room it is saved whole
        without any action, and the next request carries the whole reply."""

        # Room in the context for the long reply and the message after it.
        router.models["test-model"].n_ctx = 32768
        window, history = chat_window()
        tail = ["word " * 2000, "more " * 2000, "end."]
        # The worker hands on a piece once the next one arrived: two show before the stall.
        router.script(Reply(content=["kept ", "early ", "then ", *tail], stall_after=3))
        window.composer.set_text("Write a lot")
        window.send()

        def streaming_row() -> dict:
            return history.messages(window.session_id)[-1]

        qtbot.waitUntil(lambda: streaming_row()["content"] == "kept early ", timeout=5000)
        pages = history._conn.execute("PRAGMA page_count").fetchone()[0]
        history._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        whole = "kept early then " + "".join(tail)
        view = window.messages.last_assistant()
        assert view.content() == whole
        assert "Not saved" in view.unsaved_text()
        assert streaming_row()["content"] == "kept early "
        assert "could not be saved" in window.problem_bar.text()

        asked = len(router.chat_requests())
        window.composer.set_text("Go on")
        window.send()
        assert len(router.chat_requests()) == asked
        assert window.composer.text() == "Go on"
        assert "not saved yet" in window.problem_bar.text()

        history._conn.execute("PRAGMA max_page_count = 1073741823")  # room again
        qtbot.waitUntil(lambda: streaming_row()["content"] == whole, timeout=5000)
        assert streaming_row()["status"] == "complete"
        assert view.unsaved_text() == ""

        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        replayed = router.chat_requests()[-1].json["messages"]
        assert [(m["role"], m["content"]) for m in replayed[1:]] == [
            ("user", "Write a lot"),
            ("assistant", whole),
            ("user", "Go on"),
        ]

    def test_fault_sigkill_mid_reply_keeps_the_reply_up_to_the_last_second(
        self, router, tmp_path: Path
    ) -> None:
        """llamachat SIGKILLed while a reply streams: on reopen the row holds what arrived by
        a second before the kill (plus scheduling slack), a prefix of the reply; the file is sound."""
        import signal

        pieces = [f"w{n:04d} " for n in range(9000)]
        router.script(Reply(content=pieces, delay=0.01))
        relay = TimedRelay(int(router.url.rsplit(":", 1)[1]))
        db = tmp_path / "history.db"
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        with (tmp_path / "child.log").open("wb") as log:
            child = subprocess.Popen(
                [sys.executable, "-c", SIGKILL_CHILD_SCRIPT, relay.url, str(tmp_path)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:

            def saved_text() -> str:
                if not db.exists():
                    return ""
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                try:
                    row = conn.execute(
                        "SELECT content FROM messages WHERE role = 'assistant' ORDER BY id DESC"
                    ).fetchone()
                finally:
                    conn.close()
                return row[0] if row else ""

            deadline = time.monotonic() + 90
            first = None
            while time.monotonic() < deadline and child.poll() is None:
                if first is None and relay.content_until(time.monotonic()):
                    first = time.monotonic()
                # Two full save periods of streaming, and a save seen on disk.
                if first is not None and time.monotonic() - first > 2.5 and saved_text():
                    break
                time.sleep(0.05)
            assert child.poll() is None, (tmp_path / "child.log").read_text()
            assert first is not None, "no reply text reached llamachat"
            killed_at = time.monotonic()
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            relay.close()

        full = "".join(pieces)
        sent_by_kill = relay.content_until(killed_at)
        # The window saves at most once a second; half a second more for a busy shared machine.
        sent_a_second_before = relay.content_until(killed_at - 1.5)
        with History(db) as history:
            [session] = history.list_sessions()
            user, reply = history.messages(session["id"])
        assert (user["content"], reply["status"]) == ("Tell me a long story", "streaming")
        text = reply["content"]
        assert text and full.startswith(text) and sent_by_kill.startswith(text)
        assert len(text) >= len(sent_a_second_before), (len(text), len(sent_a_second_before))
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()

    def test_continue_adds_its_figures_to_those_of_the_reply_before(
        self, chat_window, router, qtbot
    ) -> None:
        """The figures under a continued reply count all of it: the tokens and generating
        time of the part before plus the new part (issue 38, item 9)."""
        window, history = chat_window()
        router.script(Reply(content=["a ", "b ", "c "], finish_reason="length"))
        send_and_wait(qtbot, window, "Count.")
        first = history.messages(window.session_id)[-1]["timings"]
        assert first["predicted_n"] == 3
        router.script(Reply(content=["d ", "e ", "f ", "g ", "h "]))
        view = window.messages.last_assistant()
        qtbot.mouseClick(
            visible_widget_named(view, QToolButton, "Continue reply"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        row = history.messages(window.session_id)[-1]
        assert row["timings"]["predicted_n"] == 8
        assert row["usage"]["completion_tokens"] == 8
        line = visible_widget_named(window.messages.last_assistant(), QLabel, "Reply statistics")
        assert "8 tokens" in line.text()


class TestReplyResumes:
    """A reply from llama.cpp streams under a conversation id and survives a dropped connection."""

    def test_a_dropped_connection_goes_on_in_place_with_no_error(
        self, chat_window, router, qtbot
    ) -> None:

        words = [f"w{i} " for i in range(60)]
        window, history = chat_window()
        router.script(Reply(content=words, drop_after=10))
        start_sending(qtbot, window, "go")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        row = last_saved_message(history, window)
        assert (row["status"], row["error"], row["content"]) == ("complete", "", "".join(words))
        assert window.messages.last_assistant().content() == "".join(words)
        conversation = router.chat_requests()[-1].headers["x-conversation-id"]
        reads = [r for r in router.requests if r.path == f"/v1/stream/{conversation}"]
        assert len(reads) == 1 and int(reads[0].query["from"]) > 0


class TestStopThinking:
    """While the model thinks, "Stop thinking" ends the thinking and the model answers now."""

    def test_stop_thinking_ends_the_reasoning_and_the_answer_follows(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        button = window.composer.stop_thinking_button
        router.script(Reply(reasoning=["think "] * 100, content=["the ", "answer"], stall_after=4))
        start_sending(qtbot, window, "Think hard")
        qtbot.waitUntil(button.isVisible, timeout=5000)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        assert not button.isVisible()
        control = lambda: [r for r in router.requests if r.path.endswith("/completions/control")]
        qtbot.waitUntil(lambda: bool(control()), timeout=5000)
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        row = last_saved_message(history, window)
        assert (row["status"], row["content"]) == ("complete", "the answer")
        assert row["reasoning"] == "think " * 3
        assert control()[0].json["model"] == "test-model"
        assert router.chat_requests()[-1].json["reasoning_control"] is True

    def test_no_stop_thinking_for_a_reply_that_does_not_think(
        self, chat_window, router, qtbot
    ) -> None:

        window, _history = chat_window()
        shown: list[bool] = []
        window.chat.reply_started.connect(lambda reply: reply.thinking.connect(shown.append))
        router.script(Reply(content=["just ", "the ", "answer"]))
        send_and_wait(qtbot, window, "Hi")
        assert shown == [] and not window.composer.stop_thinking_button.isVisible()
