"""The tests of `llamachat.ui.quick`."""

from __future__ import annotations

import socket

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton

from llamachat import skills
from llamachat.config import Config
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter, ToolCall
from llamachat.history.store import History
from llamachat.tests.support import (
    QUICK_SKILL_WEATHER,
    add_router_models,
    instance_config,
    make_app,
    quick_ask,
    quick_offscreen,
    quick_skills_folder,
    quick_widget_named,
    write_wav,
)
from llamachat.turn import MEMORY_HEADING
from llamachat.ui.instance import RunningInstance
from llamachat.ui.quick import WIDTH, QuickWindow


class TestQuick:
    """The quick window: one question, one streamed answer, in a small window near the pointer."""

    @quick_offscreen
    def test_quick_window_is_a_frameless_on_top_window_with_the_input_focused(
        self, quick, qtbot
    ) -> None:
        """present() shows a frameless, always-on-top window with the focus in "Message"."""

        window, _history = quick(default_model="test-model")
        window.present(QPoint(200, 200))
        qtbot.waitExposed(window)
        flags = window.windowFlags()
        assert flags & Qt.WindowType.FramelessWindowHint
        assert flags & Qt.WindowType.WindowStaysOnTopHint
        editor = quick_widget_named(window, QPlainTextEdit, "Message")
        qtbot.waitUntil(editor.hasFocus)
        quick_widget_named(window, QPushButton, "Send")
        quick_widget_named(window, QPushButton, "Continue in chat")

    @quick_offscreen
    def test_quick_window_stays_inside_the_screen_near_the_pointer(self, quick, qtbot) -> None:
        """Placed at a screen corner or beyond it, the window is moved fully inside the screen."""

        window, _history = quick(default_model="test-model")
        area = QGuiApplication.primaryScreen().availableGeometry()
        for point in (area.bottomRight(), area.topLeft(), QPoint(area.center().x(), area.top())):
            window.place_near(point)
            placed = window.geometry()
            assert area.contains(placed), (point, placed, area)
        window.place_near(area.center())
        assert abs(window.geometry().center().x() - area.center().x()) <= 1
        assert window.geometry().top() > area.center().y()

    @quick_offscreen
    def test_quick_window_keeps_its_width_when_the_answer_arrives(
        self, quick, router, qtbot
    ) -> None:
        """The window opens 640 px wide and stays so when it grows to show the answer."""

        window, _history = quick(default_model="test-model")
        window.present()
        assert window.width() == WIDTH
        quick_ask(qtbot, window, "what is 2+2")
        assert window.width() == WIDTH
        assert window.height() >= window.messages.minimumHeight()

    @quick_offscreen
    def test_quick_window_reads_on_after_a_dropped_connection(self, quick, router, qtbot) -> None:
        """The connection drops mid-answer: the answer goes on in place, whole, with no error."""

        words = [f"q{i} " for i in range(40)]
        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=words, drop_after=5))
        quick_ask(qtbot, window, "go")
        reply = history.messages(window.session_id)[-1]
        assert (reply["status"], reply["error"], reply["content"]) == (
            "complete",
            "",
            "".join(words),
        )

    @quick_offscreen
    def test_quick_window_sends_a_sound_to_a_model_that_hears(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """Once the listing says the model hears audio, the quick window attaches a WAV and
        asks with it as an `input_audio` part."""
        add_router_models(router, Model("ears", "loaded", modalities=("text", "audio")))
        window, _history = quick(default_model="ears")
        window.present()
        window.refresh_models()
        qtbot.waitUntil(lambda: "sounds" in window.composer.attach_button.toolTip())
        window.composer.add_files([write_wav(tmp_path / "hum.wav")])
        quick_ask(qtbot, window, "What is this?")
        sound = router.chat_requests()[-1].json["messages"][-1]["content"][-1]
        assert (sound["type"], sound["input_audio"]["format"]) == ("input_audio", "wav")

    @quick_offscreen
    def test_quick_uses_a_skills_folder_created_after_it_was_built(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """The skills folder appears after start-up: the next question's `/weather` still loads it."""

        later = tmp_path / "later"
        window, _history = quick(default_model="test-model", skills_dir=later)
        (later / "weather").mkdir(parents=True)
        (later / "weather" / "SKILL.md").write_text(QUICK_SKILL_WEATHER, encoding="utf-8")
        window.present()
        quick_ask(qtbot, window, "/weather will it rain")
        system, user = router.chat_requests()[-1].json["messages"]
        assert user["content"] == "will it rain"
        assert system["content"].endswith(
            skills.system_part(skills.SkillStore(later).load("weather"))
        )

    @quick_offscreen
    def test_quick_skill_the_model_loads_serves_only_that_answer(
        self, quick, router, qtbot
    ) -> None:
        """The model's load_skill shows a chip for that answer; nothing reaches the session."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="k1")]),
            Reply(content=["Balance ", "checked."], stall_after=2),
        )
        quick_ask(qtbot, window, "what is my balance", wait=False)
        qtbot.waitUntil(
            lambda: (
                window.is_streaming() and window.messages.last_assistant().content() == "Balance "
            )
        )
        assert window.loaded_skills() == ["finance-cli"]
        quick_widget_named(window, QPushButton, "Unload skill finance-cli")
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        tool = router.chat_requests()[-1].json["messages"][-1]
        assert tool["role"] == "tool" and "finance auth test" in tool["content"]
        assert window.loaded_skills() == [] and not window.skill_chips.isVisible()
        assert history.get_session(window.session_id)["skills"] == []
        assert window.messages.last_assistant().content() == "Balance checked."

    @quick_offscreen
    def test_quick_question_carries_the_memories_kept_everywhere_and_offers_no_remember(
        self, quick, router, qtbot
    ) -> None:
        """With memory on, the quick question's system message ends with the memories kept
        everywhere (it has no project), which it marks used; `remember` is never offered."""

        window, history = quick(default_model="test-model", memory_enabled=True)
        kept = history.memories.add("Prefers answers in metric units")
        work = history.projects.create("Work")
        history.memories.add("The project's API is FastAPI", project_id=work)
        window.present()
        router.script(Reply(content="384,400 km."))
        quick_ask(qtbot, window, "how far is the moon?")
        sent = router.chat_requests()[-1].json
        system = sent["messages"][0]["content"]
        assert system.endswith(f"{MEMORY_HEADING}\n- Prefers answers in metric units")
        assert "remember" not in [tool["function"]["name"] for tool in sent.get("tools") or []]
        assert history.memories.get(kept)["used_at"] > 0

    @quick_offscreen
    def test_quick_escape_stops_the_answer_and_hides(self, quick, router, qtbot) -> None:
        """Esc mid-answer: the stream stops (saved as stopped) and the window hides."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=["Partial ", "answer"], stall_after=2))
        quick_ask(qtbot, window, "long one", wait=False)
        qtbot.waitUntil(
            lambda: (
                window.messages.last_assistant() is not None
                and window.messages.last_assistant().content() == "Partial "
            )
        )
        qtbot.keyClick(quick_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Escape)
        assert not window.isVisible() and not window.is_streaming()
        reply = history.messages(window.session_id)[-1]
        assert (reply["content"], reply["status"]) == ("Partial ", "stopped")
        qtbot.waitUntil(lambda: window.running_workers() == 0, timeout=10000)

    @quick_offscreen
    def test_quick_ctrl_enter_continues_the_exchange_as_a_chat(
        self, router, qtbot, tmp_path
    ) -> None:
        """Ctrl+Enter turns the one-shot into a chat session shown in the chat window, draft sent."""

        cfg = instance_config(router, tmp_path, skills_dir=quick_skills_folder(tmp_path))
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        try:
            quick = running.ask("first question", send=True)
            qtbot.waitUntil(
                lambda: quick.session_id is not None and not quick.is_streaming(), timeout=30000
            )
            session_id = quick.session_id
            editor = quick_widget_named(quick, QPlainTextEdit, "Message")
            qtbot.keyClicks(editor, "and a follow-up")
            qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
            chat = running.chat_window()
            assert chat is not None and chat.isVisible() and not quick.isVisible()
            assert chat.session_id == session_id
            qtbot.waitUntil(
                lambda: not chat.is_streaming() and len(history.messages(session_id)) == 4,
                timeout=30000,
            )
            assert history.get_session(session_id)["mode"] == "chat"
            assert [m["content"] for m in history.messages(session_id)] == [
                "first question",
                "echo: first question",
                "and a follow-up",
                "echo: and a follow-up",
            ]
            assert router.chat_requests()[-1].json["messages"][1:] == [
                {"role": "user", "content": "first question"},
                {"role": "assistant", "content": "echo: first question"},
                {"role": "user", "content": "and a follow-up"},
            ]
        finally:
            running.shutdown()
            history.close()

    @quick_offscreen
    def test_quick_continue_lists_and_highlights_the_chat_in_an_open_chat_window(
        self, router, qtbot, tmp_path
    ) -> None:
        """ "Continue in chat" with no draft, while the chat window is open: the chat is in
        its sidebar at once, highlighted, without another message being sent."""

        cfg = instance_config(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history), tray=False)
        try:
            chat = running.show_chat()
            assert chat.sidebar.session_ids() == []
            quick = running.ask("a quick one", send=True)
            qtbot.waitUntil(
                lambda: quick.session_id is not None and not quick.is_streaming(), timeout=30000
            )
            session_id = quick.session_id
            qtbot.mouseClick(
                quick_widget_named(quick, QPushButton, "Continue in chat"), Qt.LeftButton
            )
            assert chat.session_id == session_id
            assert chat.sidebar.session_ids() == [session_id]
            assert chat.sidebar.list_view.currentIndex().row() == 0
            assert [i.row() for i in chat.sidebar.list_view.selectedIndexes()] == [0]
            assert len(history.messages(session_id)) == 2
        finally:
            running.shutdown()
            history.close()

    @quick_offscreen
    def test_quick_picks_a_loaded_model_when_none_is_configured(self, qtbot, tmp_path) -> None:
        """No oneshot_model nor default_model: a loaded model is preferred to the first listed."""

        with (
            ScriptedRouter(models=[Model("cold", "unloaded"), Model("warm", "loaded")]) as server,
            History(tmp_path / "h.db") as history,
        ):
            window = QuickWindow(
                make_app(
                    Config(
                        router_url=server.url,
                        prompts_dir=tmp_path / "p",
                        history_path=tmp_path / "h.db",
                    ),
                    history,
                )
            )
            qtbot.addWidget(window)
            qtbot.waitUntil(lambda: window.current_model() == "warm")
            configured = QuickWindow(
                make_app(
                    Config(
                        router_url=server.url,
                        oneshot_model="cold",
                        default_model="warm",
                        prompts_dir=tmp_path / "p",
                        history_path=tmp_path / "h.db",
                    ),
                    history,
                )
            )
            qtbot.addWidget(configured)
            assert configured.current_model() == "cold"
            window.close()
            configured.close()

    @quick_offscreen
    def test_quick_without_a_router_says_so_in_the_window(self, quick, qtbot) -> None:
        """A dead router: the notice line names it, for a listing and for an answer alike."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
        listing, _history = quick(router_url=dead)
        listing.present()
        notice = listing.notice
        quick_ask(qtbot, listing, "hello", wait=False)
        qtbot.waitUntil(
            lambda: "Cannot reach the server at " + dead in notice.text(), timeout=10000
        )
        assert quick_widget_named(listing, QLabel, "Notice") is notice
        answering, history = quick(router_url=dead, default_model="m")
        answering.present()
        quick_ask(qtbot, answering, "hello")
        assert "Cannot reach the server at " + dead in answering.notice.text()
        assert history.messages(answering.session_id)[-1]["status"] == "error"

    @quick_offscreen
    def test_quick_lists_no_models_while_the_router_is_awaited_then_lists_at_use_router(
        self, router, qtbot, tmp_path
    ) -> None:
        """No model configured and the router still looked for: the quick window's own listing
        of the (dead) configured URL never replaces the instance's notice, not even after the
        router failed; a question waits; once use_router names a router it lists, picks a
        model and asks the waiting question. A router found at the configured URL is listed
        too."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"

        def config(url: str) -> Config:
            return Config(
                router_url=url,
                manage_server=False,
                history_path=tmp_path / "h.db",
                prompts_dir=tmp_path / "p",
                skills_dir=quick_skills_folder(tmp_path),
            )

        history = History(tmp_path / "h.db")
        running = RunningInstance(make_app(config(dead), history), tray=False)
        same_url = RunningInstance(make_app(config(router.url), history), tray=False)
        try:
            looking = f"Looking for the llama.cpp router at {dead}…"
            running.app.router_pending(looking)
            quick = running.quick_window()
            quick.present()
            qtbot.waitUntil(lambda: quick.running_workers() == 0, timeout=10000)
            assert quick.notice.text() == looking
            assert quick.current_model() == ""
            quick_ask(qtbot, quick, "still there?", wait=False)
            assert quick.notice.text() == looking and quick.session_id is None

            failed = "No llama-server found: install one or set router_url."
            running.app.router_failed(failed)
            quick.refresh_models()
            assert quick.running_workers() == 0
            assert quick.notice.text() == failed

            running.app.use_router(router.url)
            qtbot.waitUntil(
                lambda: quick.session_id is not None and not quick.is_streaming(), timeout=30000
            )
            assert quick.current_model() == "test-model"
            assert quick.notice.text() == ""
            assert history.messages(quick.session_id)[0]["content"] == "still there?"
            assert history.messages(quick.session_id)[-1]["status"] == "complete"

            same_url.app.router_pending(f"Looking for the llama.cpp router at {router.url}…")
            found_here = same_url.quick_window()
            qtbot.waitUntil(lambda: found_here.running_workers() == 0, timeout=10000)
            assert found_here.current_model() == ""
            same_url.app.use_router(router.url)
            qtbot.waitUntil(lambda: found_here.current_model() == "test-model", timeout=10000)
            assert found_here.notice.text() == ""
        finally:
            running.shutdown()
            same_url.shutdown()
            history.close()
