"""Tests of branch h-context, pending the split of test_llamachat.py (moved there after)."""

from __future__ import annotations

import contextlib

import httpx
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton

from llamachat import compact, context
from llamachat.dev.pytest_plugin import SMOL_ID, _by_name, _long_chat, _overflow_buttons, _send
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.router.client import Client, ServerError
from llamachat.router.models import Models
from llamachat.ui import tasks
from llamachat.ui.chat import context_watch
from llamachat.ui.views.figures import ReadingProgress
from llamachat.ui.views.overflow import OverflowPanel, fixed_context


def _wordy_chat(history, exchanges: int = 10, words: int = 50) -> int:
    """A stored chat whose long words the server counts far below their estimate."""
    session = history.create_session("chat", "test-model", prompt_name="Default")
    for n in range(exchanges):
        history.add_message(session, "user", f"q{n} " + "internationalization " * words)
        history.add_message(session, "assistant", f"a{n} " + "characterization " * words)
    return session


def _cold_router() -> ScriptedRouter:
    """A router whose one model is not loaded, its context (2,048) listed in its args."""
    return ScriptedRouter(
        [Model("test-model", "unloaded", n_ctx=2048, args=("--ctx-size", "2048"))]
    )


class TestCountBeforeRefusing:
    def test_a_models_load_counts_what_waited_for_it(self, chat_window, qtbot, monkeypatch) -> None:
        """A chat shown while its model is unloaded is estimated; once the model loads
        (its size already known from the list), it is counted, and the meter is exact."""
        monkeypatch.setattr(context_watch, "RETRIES", 0)  # the load must count, not a retry
        with _cold_router() as cold:
            window, history = chat_window(url=cold.url)
            session = _wordy_chat(history)
            window.open_session(session)
            qtbot.waitUntil(lambda: window.chat.context.context_size() == 2048)
            watch = window.chat.context
            qtbot.waitUntil(lambda: watch.request() is not None and tasks.manager().running() == 0)
            assert not watch.breakdown().exact
            httpx.post(cold.url + "/models/load", json={"model": "test-model"})
            qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=5000)
            assert watch.breakdown().total + watch.reserve() <= 2048

    def test_send_counts_what_was_only_estimated_instead_of_refusing(
        self, chat_window, qtbot, monkeypatch
    ) -> None:
        """The estimate of a chat the model (not loaded) could not count says it does not
        fit; Send has the server count it first (loading the model) and sends it."""
        monkeypatch.setattr(context_watch, "RETRIES", 0)
        with _cold_router() as cold:
            window, history = chat_window(url=cold.url)
            session = _wordy_chat(history)
            window.open_session(session)
            qtbot.waitUntil(lambda: window.chat.context.context_size() == 2048)
            watch = window.chat.context
            qtbot.waitUntil(lambda: watch.request() is not None and tasks.manager().running() == 0)
            assert not watch.breakdown().exact
            assert watch.breakdown().total + watch.reserve() > 2048  # the estimate refuses
            cold.script(Reply(content="Fine."))
            window.composer.set_text("And then?")
            window.send()
            qtbot.waitUntil(lambda: len(cold.chat_requests()) == 1, timeout=5000)
            assert not window.overflow.isVisible()
            qtbot.waitUntil(lambda: not window.is_streaming())
            assert history.messages(session)[-1]["content"] == "Fine."
            # Counted, a message that does not fit is refused, and put back in the box.
            long = "word " * 1500
            window.composer.set_text(long)
            window.send()
            qtbot.waitUntil(lambda: window.overflow.isVisible())
            assert "Not sent" in window.overflow.text.text()
            assert window.composer.text() == long and len(cold.chat_requests()) == 1


class TestOverflowWaysOut:
    def test_the_panel_offers_only_what_can_help_and_says_why(
        self, chat_window, router, qtbot
    ) -> None:
        """Two exchanges: compacting keeps them all, so "Compact and send" is not offered
        and the panel says why; with more, it is."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window()
        session = history.create_session("chat", "test-model", prompt_name="Default")
        for n in range(2):
            history.add_message(session, "user", f"question {n}")
            history.add_message(session, "assistant", f"answer {n}")
        window.open_session(session)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and watch.breakdown().exact)
        long = "word " * 1900
        window.composer.set_text(long)
        window.send()
        panel = window.overflow
        assert panel.isVisible() and window.composer.text() == long
        buttons = _overflow_buttons(panel)
        assert "Compact and send" not in buttons, buttons
        assert "no more than its last 2 exchanges" in panel.text.text()

        history.add_message(session, "user", "question 2")
        history.add_message(session, "assistant", "answer 2")
        window.open_session(session)
        window.composer.set_text(long)
        qtbot.waitUntil(lambda: watch.breakdown().exact)
        window.send()
        assert _overflow_buttons(panel)[0] == "Compact and send"
        assert "Compacting cannot help" not in panel.text.text()

    def test_raising_the_context_is_not_offered_while_server_args_fix_it(self, qtbot) -> None:
        """server_args' --ctx-size overrides a preset's: the panel says so instead of a button."""
        assert fixed_context(("--ctx-size", "2048", "-t", "2")) == 2048
        assert fixed_context(("-c", "4096")) == 4096 and fixed_context(("-t", "2")) is None
        parts = context.Breakdown((("history", 3000), ("user", 100)), exact=True)
        overflow = context.Overflow("smol", parts, 2048, 512, trained=8192)
        panel = OverflowPanel()
        qtbot.addWidget(panel)
        panel.show_overflow(overflow, managed=True, fixed_context=2048)
        assert not any(b.startswith("Raise") for b in _overflow_buttons(panel))
        assert "server_args sets --ctx-size 2,048" in panel.text.text()
        panel.show_overflow(overflow, managed=True)
        assert "Raise the context to 4,096" in _overflow_buttons(panel)

    def test_policy_compact_with_nothing_to_compact_shows_what_can_help(
        self, chat_window, router, qtbot
    ) -> None:
        """context_overflow "compact" and nothing (more) to compact: the panel, not
        "Nothing to compact"; after a compaction the refusal says the chat was compacted."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="compact")
        session = _long_chat(history, 4, 20)
        window.open_session(session)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and watch.breakdown().exact)
        router.script(Reply(content="- a summary"))
        long = "word " * 1700
        window.composer.set_text(long)
        window.send()
        qtbot.waitUntil(lambda: window.overflow.isVisible(), timeout=10_000)
        said = window.overflow.text.text()
        assert said.startswith("Not sent, even with the chat compacted"), said
        assert "Compacting cannot help" in said
        assert window.composer.text() == long
        window.overflow.hide()
        window.send()
        assert window.overflow.isVisible() and "Nothing to compact" not in said


class TestContinuedFigures:
    def test_continue_adds_its_figures_to_those_of_the_reply_before(
        self, chat_window, router, qtbot
    ) -> None:
        """The figures under a continued reply count all of it: the tokens and generating
        time of the part before plus the new part."""
        window, history = chat_window()
        router.script(Reply(content=["a ", "b ", "c "], finish_reason="length"))
        _send(qtbot, window, "Count.")
        first = history.messages(window.session_id)[-1]["timings"]
        assert first["predicted_n"] == 3
        router.script(Reply(content=["d ", "e ", "f ", "g ", "h "]))
        view = window.conversation.last_assistant()
        qtbot.mouseClick(_by_name(view, QToolButton, "Continue reply"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        row = history.messages(window.session_id)[-1]
        assert row["timings"]["predicted_n"] == 8
        assert row["usage"]["completion_tokens"] == 8
        line = _by_name(window.conversation.last_assistant(), QLabel, "Reply statistics")
        assert "8 tokens" in line.text()


class TestTrimmedFollowsThePolicy:
    def test_changing_the_chats_policy_sends_the_trimmed_messages_again(
        self, chat_window, router, qtbot
    ) -> None:
        """ "N earlier messages not sent" goes once the chat's policy is no longer "trim"."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window(context_overflow="trim")
        session_id = _long_chat(history, 6, 150)
        window.open_session(session_id)
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        _send(qtbot, window, "and now?")
        assert window.chat.state.trimmed >= 2 and window.trim_marker.isVisible()
        window.chat.set_params({**window.chat.params(), compact.CHAT_KEY: compact.ASK})
        assert window.chat.state.trimmed == 0 and not window.trim_marker.isVisible()


class TestReadingProgress:
    def test_a_reading_reported_only_at_its_start_never_shows_full_at_zero(self, qtbot) -> None:
        """llama.cpp may report only the first and the last batch: past the time estimated
        from earlier replies the bar slows down short of the end and no time left is said."""
        now = [100.0]
        reading = ReadingProgress(speed=100.0, clock=lambda: now[0])
        qtbot.addWidget(reading)
        reading.show_progress({"total": 1256, "cache": 0, "processed": 0, "time_ms": 0})
        now[0] = 105.0
        reading.refresh()
        assert reading.bar.value() == 500 and reading.timing.text() == "5 s · about 8 s left"
        now[0] = 116.0
        reading.refresh()
        assert 1130 < reading.bar.value() < 1256 and reading.timing.text() == "16 s"
        now[0] = 160.0
        reading.refresh()
        assert reading.bar.value() < 0.95 * 1256
        reading.show_progress({"total": 1256, "cache": 0, "processed": 1256, "time_ms": 60000})
        assert reading.bar.value() == 1256


class TestLoadingBeforeReading:
    def test_a_reply_whose_model_loads_says_loading_with_the_routers_progress(
        self, chat_window, qtbot
    ) -> None:
        """Before the prompt is read, the reply says "Loading <model>" with the load's
        progress from the router's events; then the answer comes as usual."""
        with ScriptedRouter([Model("test-model", "unloaded")], load_delay=1.0) as cold:
            window, _history = chat_window(url=cold.url)
            cold.script(Reply(content="Hi."))
            window.composer.set_text("hello")
            window.send()
            view = window.conversation.last_assistant()
            qtbot.waitUntil(lambda: view.findChild(ReadingProgress) is not None)
            reading = view.findChild(ReadingProgress)
            qtbot.waitUntil(lambda: reading.label.text() == "Loading test-model… 50%")
            assert reading.isVisible() and reading.bar.value() == 50
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
            assert view.content() == "Hi." and not reading.isVisible()


class TestCompactingShowsItsProgress:
    def test_compacting_shows_the_reading_then_the_summary_as_it_is_written(
        self, chat_window, router, qtbot
    ) -> None:
        """While the model reads the chat the compaction shows a reading bar as a reply
        does; then the summary appears as it is written; the view goes when it ends."""
        window, history = chat_window()
        session_id = _long_chat(history, 6, 20)
        window.open_session(session_id)
        router.script(Reply(content=["- one ", "- two"], stall_after=0))
        assert window.chat.compaction.compact()
        view = window.compacting
        qtbot.waitUntil(lambda: view.isVisible() and view.reading.isVisible())
        assert view.reading.label.text().startswith("Reading ")
        assert "summarizing 8 earlier messages" in view.title.text()
        assert not view.text.isVisible()
        router.release()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())
        assert not view.isVisible()
        assert history.messages(session_id)[0]["content"] == "- one - two"

    def test_the_summary_shows_as_it_is_written(self, chat_window, router, qtbot) -> None:
        """The summary's text shows as it comes, in place of the reading bar."""
        window, history = chat_window()
        session_id = _long_chat(history, 6, 20)
        window.open_session(session_id)
        router.script(Reply(content=["- one ", "- two"], stall_after=2))
        assert window.chat.compaction.compact()
        view = window.compacting
        qtbot.waitUntil(lambda: view.text.isVisible(), timeout=5000)
        assert view.text.toPlainText() == "- one " and not view.reading.isVisible()
        router.release()
        qtbot.waitUntil(lambda: not window.chat.compaction.running())


class TestCountBeforeRefusingRealRouter:
    def test_a_chat_estimated_while_smollm2_is_unloaded_is_counted_and_sent(
        self, chat_window, real_router, qtbot, monkeypatch
    ) -> None:
        """llama-server's router refuses counts (autoload=false) while SmolLM2 is not loaded
        and lists its --ctx-size 2048: a chat whose estimate is over is counted at Send
        (the model loads) and sent, not refused."""
        monkeypatch.setattr(context_watch, "RETRIES", 0)
        models = Models(Client(real_router.url))
        with contextlib.suppress(ServerError):  # "model is not running": as wanted
            models.unload(SMOL_ID)
        qtbot.waitUntil(lambda: models.get(SMOL_ID).status == "unloaded", timeout=30_000)
        window, history = chat_window(url=real_router.url, default_model=SMOL_ID)
        session = history.create_session("chat", SMOL_ID, prompt_name="Default")
        for n in range(6):
            history.add_message(session, "user", f"q{n} " + "internationalization " * 40)
            history.add_message(session, "assistant", f"a{n} " + "characterization " * 40)
        window.open_session(session)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048, timeout=10_000)
        qtbot.waitUntil(lambda: watch.request() is not None and tasks.manager().running() == 0)
        assert not watch.breakdown().exact
        assert watch.breakdown().total + watch.reserve() > 2048  # the estimate would refuse
        window.composer.set_text("Say yes.")
        window.send()
        qtbot.waitUntil(lambda: window.is_streaming(), timeout=60_000)
        assert not window.overflow.isVisible()
        # Sent: its first words are enough (SmolLM2 may go on for a while).
        reply = window.conversation.last_assistant()
        qtbot.waitUntil(lambda: bool(reply.content()), timeout=60_000)
        window.stop()
        assert history.messages(session)[-1]["role"] == "assistant"
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=30_000)  # loaded: it counts
