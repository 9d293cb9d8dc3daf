"""The tests of `llamachat.ui.chat.context_watch`."""

from __future__ import annotations

import dataclasses

import httpx
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton

from llamachat import context
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.router.client import Client
from llamachat.router.model_files import set_preset_context
from llamachat.router.models import Models
from llamachat.tests.support import (
    make_wordy_chat,
    mcp_time_toml,
    mcp_window,
    send_and_wait,
    visible_widget_named,
    write_skill,
)
from llamachat.ui import tasks
from llamachat.ui.chat import context_watch
from llamachat.ui.views.figures import ReadingProgress
from llamachat.ui.views.overflow import OverflowPanel, raised_context


class TestContextWatch:
    """The next request's size for one conversation, counted off the GUI thread and kept current."""

    def test_context_keystrokes_send_no_request_and_the_draft_is_counted_once(
        self, chat_window, router, qtbot
    ) -> None:
        """Typing is estimated at once; the server counts the draft after a pause, once."""

        window, _history = chat_window()
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.breakdown().exact and watch.context_size() == 4096)
        before = len(router.requests)
        for n in range(1, 40):
            window.composer.set_text("word " * n)
        assert len(router.requests) == before
        assert watch.breakdown().get("user") > 0 and not watch.breakdown().exact
        qtbot.waitUntil(lambda: watch.breakdown().exact)
        counted = [q for q in router.requests[before:] if q.path == "/tokenize"]
        assert [q.json["content"] for q in counted] == ["word " * 39]
        assert watch.breakdown().get("user") == 39

    def test_context_oversized_message_is_refused_kept_and_offers_ways_out(
        self, chat_window, router, qtbot
    ) -> None:
        """Request + reply reserve over the context: nothing is sent, the message stays in the
        composer, the numbers are shown with one-click ways out (unload a skill, new chat)."""

        router.models["test-model"].n_ctx = 2048
        window, history = chat_window()
        qtbot.waitUntil(lambda: window.meter.context_size() == 2048)
        send_and_wait(qtbot, window, "/weather hi")
        asked = len(router.chat_requests())
        long = "word " * 1900
        window.composer.set_text(long)
        qtbot.waitUntil(lambda: window.meter.state == "over")
        assert "does not fit" in window.meter.toolTip()

        window.send()
        assert len(router.chat_requests()) == asked
        assert window.composer.text() == long
        assert [m["content"] for m in history.messages(window.session_id)][-1] != long
        panel = window.overflow
        assert panel.isVisible()
        said = panel.text.text()
        assert "Not sent" in said and "2,048" in said and "512 for the reply" in said
        buttons = {b.text(): b for b in panel.findChildren(QPushButton)}
        unload = next(text for text in buttons if text.startswith("Unload weather (−"))
        assert "New chat with this message" in buttons and "Dismiss" in buttons

        qtbot.mouseClick(buttons[unload], Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == [] and not panel.isVisible()
        assert window.composer.text() == long
        window.send()
        assert panel.isVisible() and len(router.chat_requests()) == asked
        buttons = {b.text(): b for b in panel.findChildren(QPushButton)}
        qtbot.mouseClick(buttons["New chat with this message"], Qt.MouseButton.LeftButton)
        assert window.session_id is None and window.composer.text() == long

    def test_context_prompt_progress_shows_in_the_reply_and_stop_works_during_it(
        self, chat_window, router, qtbot
    ) -> None:
        """return_progress: the reply shows "Reading N of M tokens" with a bar while the prompt
        is read, the meter follows it live, and Stop ends it and drops the connection."""

        window, history = chat_window()
        router.script(Reply(content="Answer.", stall_after=0))
        window.composer.set_text("read this")
        window.send()
        view = window.messages.last_assistant()
        qtbot.waitUntil(lambda: view.findChild(ReadingProgress) is not None)
        reading = view.findChild(ReadingProgress)
        # The three chunks may come in more than one frame: the last one read it all.
        qtbot.waitUntil(lambda: 1 < reading.bar.maximum() == reading.bar.value())
        sent = router.chat_requests()[-1].json
        assert sent["return_progress"] is True and sent["timings_per_token"] is True
        total = reading.bar.maximum()
        assert reading.label.text() == f"Reading {total:,} of {total:,} tokens"
        assert reading.isVisible() and reading.bar.value() == total
        assert window.meter.used() == total

        window.stop()
        assert not window.is_streaming() and not reading.isVisible()
        qtbot.waitUntil(lambda: router.disconnects == 1)
        row = history.messages(window.session_id)[-1]
        assert row["status"] == "stopped" and row["timings"]["prompt_n"] == total

    def test_context_size_of_a_model_the_reply_loads_shows_while_it_streams(
        self, chat_window, qtbot
    ) -> None:
        """A model not loaded has no size to show; the reply that loads it brings it, live."""

        with ScriptedRouter([Model("test-model", n_ctx=4096)]) as cold:
            window, _history = chat_window(url=cold.url)
            qtbot.waitUntil(lambda: tasks.manager().running() == 0)
            assert window.meter.context_size() is None
            cold.script(Reply(content=["Once ", "upon ", "a ", "time"], stall_after=2))
            window.composer.set_text("Tell me a story")
            window.send()
            qtbot.waitUntil(lambda: "Once" in window.messages.last_assistant().content())
            qtbot.waitUntil(lambda: window.meter.context_size() == 4096)
            assert window.is_streaming() and "/ 4,096" in window.meter.label.text()
            window.stop()

    def test_context_stopped_reply_keeps_its_figures_in_history_and_on_screen(
        self, chat_window, router, qtbot
    ) -> None:
        """A reply stopped mid-way keeps prompt, cache, speeds and time to first token; the
        line under it and its tooltip show them, also when the chat is opened again."""

        window, history = chat_window()
        send_and_wait(qtbot, window, "first")
        router.script(Reply(content=["one ", "two ", "three ", "four"], stall_after=3))
        window.composer.set_text("second")
        window.send()
        qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "one two ")
        window.stop()
        row = history.messages(window.session_id)[-1]
        assert row["status"] == "stopped"
        timings = row["timings"]
        assert timings["predicted_n"] == 2 and timings["cache_n"] > 0 and timings["prompt_n"] > 0
        assert timings["ttft_ms"] >= 0

        def shown() -> tuple[str, str]:
            label = visible_widget_named(
                window.messages.last_assistant(), QLabel, "Reply statistics"
            )
            return label.text(), label.toolTip()

        line, tip = shown()
        assert "2 tokens" in line and f"{timings['cache_n']:,} cached" in line
        assert "reused from the cache" in tip and "Time to first token" in tip
        session = window.session_id
        window.new_session()
        window.open_session(session)
        assert shown() == (line, tip)

    def test_context_raise_offers_the_trained_size_and_writes_the_models_preset(
        self, tmp_path, qtbot
    ) -> None:
        """Raising the context: the next usual size that fits, at most the trained size, written
        as ctx-size into that model's section of the preset, the rest of the file kept."""

        parts = context.Breakdown((("history", 5000), ("user", 100)), exact=True)
        overflow = context.Overflow("smol", parts, 4096, 1024, trained=8192)
        assert raised_context(overflow) == 8192
        assert raised_context(dataclasses.replace(overflow, trained=6000)) is None
        panel = OverflowPanel()
        qtbot.addWidget(panel)
        with qtbot.waitSignal(panel.raise_context) as raised:
            panel.show_overflow(overflow, managed=True)
            button = next(
                b for b in panel.findChildren(QPushButton) if b.text().startswith("Raise")
            )
            assert button.text() == "Raise the context to 8,192"
            button.click()
        assert raised.args == ["smol", 8192]
        panel.show_overflow(overflow, managed=False)
        assert not any(b.text().startswith("Raise") for b in panel.findChildren(QPushButton))

        preset = tmp_path / "preset.ini"
        preset.write_text("[other]\nmodel = /m/other.gguf\n[smol]\nmodel = /m/smol.gguf\n")
        set_preset_context(preset, "smol", 8192)
        set_preset_context(preset, "new-one", 2048)
        written = preset.read_text()
        assert "[other]\nmodel = /m/other.gguf" in written
        assert "[smol]\nmodel = /m/smol.gguf\nctx-size = 8192" in written
        assert "[new-one]\nctx-size = 2048" in written

    def test_context_a_skill_the_message_loads_is_counted_before_send_and_retry(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A skill loaded by the message itself (its estimate fits, its count does not) is
        counted by the server before the send: refused with the panel (the skill unloaded
        with the refusal, as before the message), and so is a Retry."""

        router.models["test-model"].n_ctx = 2048
        # One token a character for the scripted tokenizer: the estimate is a third of it.
        write_skill(
            tmp_path / "skills",
            "big-skill",
            "---\nname: big-skill\ndescription: Big.\n---\n" + "a." * 900 + "\n",
        )
        window, history = chat_window()
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and watch.breakdown().exact)
        send_and_wait(qtbot, window, "hello")
        reply_id = history.messages(window.session_id)[-1]["id"]
        asked = len(router.chat_requests())

        window.composer.set_text("/big-skill say hello")
        window.send()
        assert window.overflow.isVisible()
        unload = [b.text() for b in window.overflow.findChildren(QPushButton)]
        assert not any(text.startswith("Unload big-skill") for text in unload), unload
        assert "Your message loads skill big-skill (1,8" in window.overflow.text.text()
        assert len(router.chat_requests()) == asked
        assert window.loaded_skills() == []
        assert window.composer.text() == "/big-skill say hello"

        window.overflow.hide()
        window.load_skill("big-skill")
        window.retry(reply_id)
        assert window.overflow.isVisible() and not window.is_streaming()
        assert len(router.chat_requests()) == asked
        assert history.messages(window.session_id)[-1]["id"] == reply_id

    def test_context_size_is_asked_as_soon_as_the_model_loads(self, chat_window, qtbot) -> None:
        """A model not loaded has no size; loading it (not a send) brings the size at once."""

        with ScriptedRouter([Model("test-model", n_ctx=4096)]) as cold:
            window, _history = chat_window(url=cold.url)
            qtbot.waitUntil(lambda: tasks.manager().running() == 0)
            assert window.meter.context_size() is None
            Models(Client(cold.url)).load("test-model")
            qtbot.waitUntil(lambda: window.meter.context_size() == 4096, timeout=10_000)
            assert cold.chat_requests() == []

    def test_context_model_that_cannot_take_tools_is_sent_none_and_told(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """`/props` says the template takes no tools: the Turn has none (MCP's neither, once
        its server is up), the meter counts none and says why, the panels say so."""

        router.models["test-model"].tools = False
        window, _history = mcp_window(chat_window, router, tmp_path, mcp_time_toml())
        watch = window.chat.context
        qtbot.waitUntil(lambda: not watch.takes_tools() and watch.breakdown().exact)
        assert window.chat.next_turn().tools == ()
        assert watch.breakdown().get("tools") == 0
        assert "tools: none sent (this model's chat template cannot take tools)" in (
            window.meter.toolTip()
        )
        send_and_wait(qtbot, window, "What time is it?")
        qtbot.waitUntil(lambda: window.app.mcp.ready_tools(None) != (), timeout=30_000)
        send_and_wait(qtbot, window, "And now?")
        for request in router.chat_requests():
            assert "tools" not in request.json
        assert window.chat.next_turn().tools == ()
        mcp_panel = window.open_mcp_panel()
        assert "None of these tools is sent" in mcp_panel.total.text()
        skills_panel = window.skills.open_panel()
        assert skills_panel is not None and skills_panel.tools_label.isVisible()
        assert "cannot load skills itself" in skills_panel.tools_label.text()

    def test_context_a_models_load_counts_what_waited_for_it(
        self, chat_window, qtbot, monkeypatch
    ) -> None:
        """A chat shown while its model is unloaded is estimated (counting never loads a
        model); once the model loads, its size already known from the router's list, it is
        counted, and the meter is exact (issue 38, item 3)."""
        monkeypatch.setattr(context_watch, "RETRIES", 0)  # the load must count, not a retry
        with ScriptedRouter(
            [Model("test-model", "unloaded", n_ctx=2048, args=("--ctx-size", "2048"))]
        ) as cold:
            window, history = chat_window(url=cold.url)
            session = make_wordy_chat(history)
            window.open_session(session)
            qtbot.waitUntil(lambda: window.chat.context.context_size() == 2048)
            watch = window.chat.context
            qtbot.waitUntil(lambda: watch.request() is not None and tasks.manager().running() == 0)
            assert not watch.breakdown().exact
            httpx.post(cold.url + "/models/load", json={"model": "test-model"})
            qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=5000)
            assert watch.breakdown().total + watch.reserve() <= 2048
