"""The mission's end-to-end suite: llamachat as a user meets it.

The chat window streaming a reply through the worker's tool loop (`web_search`,
`load_skill`); skills loaded three ways (`/name`, a mention, the model's `load_skill`) with
their chips kept per chat; the quick window and `llamachat ask --print` sending the same
turn; the history found again by search. Real parts throughout: HTTP to the scripted
router on 127.0.0.1, real SQLite files, real widgets under QT_QPA_PLATFORM=offscreen, a
private HOME for every test.

The tests of each module sit beside its mirror in `llamachat/tests/` (the tests of
`llamachat/ui/chat/warmup.py` are `llamachat/tests/ui/chat/test_warmup.py`); the fixtures
are in `llamachat.tests.plugin` (pyproject.toml loads it) and the helpers in
`llamachat.tests.support`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTextBrowser,
    QToolButton,
)

from llamachat import cli
from llamachat.dev.scripted_router import Model, Reply, ToolCall
from llamachat.history.store import History
from llamachat.prompts import Prompts
from llamachat.router import client as backend
from llamachat.router.client import Client
from llamachat.router.lock import default_lock_path
from llamachat.router.server import free_port
from llamachat.tests.support import (
    MAIN_SENDS_SCRIPT,
    SMOL_ID,
    add_router_models,
    click_session,
    combo_ids,
    live_group_members,
    offscreen_dialogs,
    offscreen_popup,
    quick_ask,
    quick_offscreen,
    quick_skill_part,
    quick_widget_named,
    real_assets,
    run_llamachat,
    send_and_wait,
    skill_part,
    smol_models_folder,
    subprocess_config_file,
    type_message,
    visible_widget_named,
    wait_for,
)


class TestWindowStreaming:
    """The chat window streams, saves and shows a reply through the worker's tool loop."""

    def test_chrome_window_web_search_toggle_offers_the_tool_and_date_note(
        self, chat_window, router, qtbot
    ) -> None:
        """Turning Web search off drops the web_search tool and the date note from requests."""

        window, _history = chat_window(search_url="http://127.0.0.1:9")
        toggle = visible_widget_named(window, QToolButton, "Web search")
        assert toggle.isChecked()
        send_and_wait(qtbot, window, "one")
        first = router.chat_requests()[-1].json
        assert "Today's date is" in first["messages"][0]["content"]
        assert "web_search" in [t["function"]["name"] for t in first.get("tools", [])]

        qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
        assert not window.web_search.is_on()
        send_and_wait(qtbot, window, "two")
        second = router.chat_requests()[-1].json
        assert "Today's date is" not in second["messages"][0]["content"]
        assert "web_search" not in [t["function"]["name"] for t in second.get("tools", [])]

    def test_window_full_chat_streams_saves_and_shows_stats(
        self, chat_window, router, qtbot
    ) -> None:
        """A typed message streams a reply into the view; both are saved with stats."""

        window, history = chat_window()
        router.script(Reply(reasoning=["Thinking ", "it over."], content=["Hello", " there", "!"]))
        visible_widget_named(window, QPushButton, "Send")
        send_and_wait(qtbot, window, "Hi")

        messages = history.messages(window.session_id)
        assert [(m["role"], m["content"], m["status"]) for m in messages] == [
            ("user", "Hi", "complete"),
            ("assistant", "Hello there!", "complete"),
        ]
        assert messages[1]["reasoning"] == "Thinking it over."
        assert messages[1]["usage"]["completion_tokens"] == 5
        assert messages[1]["timings"]["predicted_per_second"] == 50.0
        view = window.messages.last_assistant()
        assert view.content() == "Hello there!"
        [stats] = [w for w in view.findChildren(QLabel) if w.accessibleName() == "Reply statistics"]
        assert "50.0 tok/s" in stats.text()
        sent = router.chat_requests()[-1].json
        assert sent["model"] == "test-model"
        assert [m["role"] for m in sent["messages"]] == ["system", "user"]
        assert sent["messages"][1]["content"] == "Hi"
        assert history.get_session(window.session_id)["title"]

        send_and_wait(qtbot, window, "And again")
        second = router.chat_requests()[-1].json["messages"]
        assert [(m["role"], m["content"]) for m in second[1:]] == [
            ("user", "Hi"),
            ("assistant", "Hello there!"),
            ("user", "And again"),
        ]

    def test_window_web_search_results_show_on_the_reply(self, chat_window, router, qtbot) -> None:
        """The model's web_search runs against SearXNG; its results appear on the reply."""

        class SearXNG(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(
                    {
                        "results": [
                            {
                                "title": "llama.cpp router mode",
                                "url": "https://example.org/router",
                                "content": "Start llama-server without -m.",
                            }
                        ]
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        searx = ThreadingHTTPServer(("127.0.0.1", 0), SearXNG)
        threading.Thread(target=searx.serve_forever, daemon=True).start()
        try:
            window, history = chat_window(search_url=f"http://127.0.0.1:{searx.server_port}")
            router.script(
                Reply(tool_calls=[ToolCall("web_search", '{"query": "router mode"}')]),
                Reply(content="Start it without -m."),
            )
            send_and_wait(qtbot, window, "How do I run the router?")
        finally:
            searx.shutdown()
            searx.server_close()
        [results] = [
            label
            for label in window.messages.last_assistant().findChildren(QLabel)
            if label.accessibleName() == "Search results"
        ]
        assert "router mode" in results.text() and "https://example.org/router" in results.text()
        assert history.messages(window.session_id)[-1]["content"] == "Start it without -m."

    def test_window_streams_twenty_thousand_tokens_without_crash(
        self, chat_window, router, qtbot
    ) -> None:
        """20,000 streamed tokens go through the real window and arrive whole (PySide6 leak guard)."""

        window, history = chat_window()
        router.script(Reply.tokens(20_000))
        send_and_wait(qtbot, window, "long")
        assert history.messages(window.session_id)[-1]["content"] == "tok " * 20_000
        assert history.messages(window.session_id)[-1]["status"] == "complete"
        qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "tok " * 20_000)


class TestHistoryFlow:
    """A chat found again in the history by search, opened where the words are."""

    @offscreen_dialogs
    def test_chrome_window_search_finds_old_session_and_opening_restores_it(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Sidebar search finds an old chat's message; opening it restores messages, model,
        prompt and loaded skills."""

        add_router_models(router, Model("other", "loaded"))
        window, _history = chat_window()
        Prompts(tmp_path / "prompts").save("Pirate", "Answer like a pirate.")
        window.preset_picker.reload()
        qtbot.waitUntil(lambda: "other" in combo_ids(window.model_picker.combo))
        window.model_picker.combo.setCurrentIndex(window.model_picker.combo.findData("other"))
        window.preset_picker.combo.setCurrentIndex(window.preset_picker.combo.findData("Pirate"))
        send_and_wait(qtbot, window, "/weather where do aardvarks live")
        old = window.session_id
        qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
        assert window.session_id is None and window.messages.views() == []
        assert window.loaded_skills() == []
        window.model_picker.combo.setCurrentIndex(window.model_picker.combo.findData("test-model"))
        window.preset_picker.combo.setCurrentIndex(window.preset_picker.combo.findData("Default"))
        send_and_wait(qtbot, window, "something else entirely")
        assert window.sidebar.session_ids() == [window.session_id, old]

        # Offscreen, the hidden `/` completion popup stays the active window: take it back.
        window.activateWindow()
        qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
        web_search = visible_widget_named(window, QLineEdit, "Search sessions")
        assert web_search.hasFocus()
        qtbot.keyClicks(web_search, "aardvarks")
        qtbot.waitUntil(lambda: window.sidebar.session_ids() == [old])
        click_session(qtbot, window, old)
        assert window.session_id == old
        assert [(v.role, v.content()) for v in window.messages.views()] == [
            ("user", "where do aardvarks live"),
            ("assistant", "echo: where do aardvarks live"),
        ]
        assert window.current_model() == "other"
        assert window.model_picker.combo.currentData() == "other"
        assert window.preset_picker.current_name() == "Pirate"
        assert window.loaded_skills() == ["weather"] and window.skill_chips.skills() == ["weather"]
        send_and_wait(qtbot, window, "and in winter?")
        sent = router.chat_requests()[-1].json
        assert sent["model"] == "other"
        assert sent["messages"][0]["content"].startswith("Answer like a pirate.")
        assert "[skill: weather]" in sent["messages"][0]["content"]

    def test_window_search_hit_opens_the_version_holding_it_scrolled_to_and_marked(
        self, chat_window, qtbot
    ) -> None:
        """A hit in version 1/2 of a reply opens 1/2 (not the newer 2/2 the chat last
        showed), scrolled so the match is on screen, its word marked (issue 30, item 3)."""

        window, history = chat_window()
        window.resize(900, 500)
        session = history.create_session("chat", "test-model", prompt_name="Default")
        question = history.add_message(session, "user", "Name a llama.")
        filler = "".join(f"Line {n} of a long answer.\n\n" for n in range(120))
        history.add_message(
            session, "assistant", f"{filler}Call it Zebracorn, then.\n\n{filler}", parent=question
        )
        history.add_message(session, "assistant", "Dolly.", parent=question)
        history.add_message(session, "user", "Why?")
        window.sidebar.refresh()
        assert window.open_session(session)
        assert window.messages.views()[1].version_text() == "2/2"
        window.open_session(history.create_session("chat", "test-model"))

        window.sidebar.search("zebracorn")
        assert window.sidebar.model.rowCount() == 1
        rect = window.sidebar.list_view.visualRect(window.sidebar.model.index(0))
        qtbot.mouseClick(
            window.sidebar.list_view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center()
        )
        qtbot.waitUntil(lambda: window.session_id == session)
        qtbot.waitUntil(lambda: len(window.messages.views()) == 2)
        reply = window.messages.views()[1]
        assert reply.version_text() == "1/2" and "Zebracorn" in reply.content()
        body = next(
            b for b in reply.findChildren(QTextBrowser) if b.document() is reply.text_document()
        )
        marks = body.extraSelections()
        assert [mark.cursor.selectedText() for mark in marks] == ["Zebracorn"]
        cursor = marks[0].cursor
        bar = window.messages.verticalScrollBar()
        height = window.messages.viewport().height()

        def on_screen() -> bool:
            corner = body.cursorRect(cursor).topLeft()
            top = body.mapTo(window.messages.widget(), corner).y()
            return bar.value() <= top <= bar.value() + height - 20

        qtbot.waitUntil(lambda: body.height() >= body.document().size().height())
        qtbot.waitUntil(on_screen)
        assert reply.geometry().bottom() > 3000  # laid out whole: the match is mid-message


class TestQuickAndPrint:
    """The quick window and `ask --print`: one-shot answers, the turn the chat window sends."""

    def test_cli_print_writes_exactly_the_content_to_stdout_and_reasoning_to_stderr(
        self, router, tmp_path
    ) -> None:
        """`ask --print` streams the router's content pieces byte for byte, then a line break
        (even into a pipe: a shell prompt or the next `>>` line follows); reasoning on stderr."""

        config = subprocess_config_file(tmp_path, router.url)
        pieces = ["The ", "answer", " is **4**.\n", "```py\nprint(2 + 2)\n```"]
        router.script(Reply(reasoning=["Two ", "and two."], content=pieces))
        done = run_llamachat(config, "ask", "--print", "what", "is", "2+2?")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "".join(pieces) + "\n"
        assert done.stderr == "Two and two."
        sent = router.chat_requests()[-1].json
        assert sent["stream"] is True and sent["messages"][-1] == {
            "role": "user",
            "content": "what is 2+2?",
        }

    def test_cli_print_saves_a_searchable_oneshot_session_without_skills(
        self, router, tmp_path
    ) -> None:
        """The exchange is kept as a "oneshot" session that search finds; its skills stay empty."""

        config = subprocess_config_file(tmp_path, router.url)
        router.script(Reply(content=["Paris ", "it is."]))
        done = run_llamachat(config, "ask", "--print", "/weather capital of France")
        assert done.returncode == 0, done.stderr
        with History(tmp_path / "history.db") as history:
            (session,) = history.list_sessions()
            assert session["mode"] == "oneshot" and session["skills"] == []
            assert [
                (m["role"], m["content"], m["status"]) for m in history.messages(session["id"])
            ] == [
                ("user", "capital of France", "complete"),
                ("assistant", "Paris it is.", "complete"),
            ]
            assert [hit["id"] for hit in history.search("France")] == [session["id"]]

    def test_cli_print_skill_command_and_mention_load_skills_for_that_reply(
        self, router, tmp_path
    ) -> None:
        """`/weather` is stripped and loads its skill, a mention loads another, into the system text."""
        config = subprocess_config_file(tmp_path, router.url)
        done = run_llamachat(config, "ask", "--print", "/weather will it rain? ask finance-cli too")
        assert done.returncode == 0, done.stderr
        system, user = router.chat_requests()[-1].json["messages"]
        assert user["content"] == "will it rain? ask finance-cli too"
        assert system["role"] == "system"
        assert system["content"].endswith(
            quick_skill_part(tmp_path, "weather")
            + "\n\n"
            + quick_skill_part(tmp_path, "finance-cli")
        )

    @quick_offscreen
    def test_quick_window_answers_and_saves_a_searchable_oneshot_session(
        self, quick, router, qtbot
    ) -> None:
        """A question streams its answer into the window and is kept as a "oneshot" session."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(reasoning=["Hmm."], content=["Four", ", of course."]))
        quick_ask(qtbot, window, "what is 2+2")
        reply = window.messages.last_assistant()
        assert reply is not None and reply.content() == "Four, of course."
        session = history.get_session(window.session_id)
        assert session["mode"] == "oneshot" and session["skills"] == []
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(session["id"])
        ] == [
            ("user", "what is 2+2", "complete"),
            ("assistant", "Four, of course.", "complete"),
        ]
        assert [hit["id"] for hit in history.search("2+2")] == [session["id"]]
        assert router.chat_requests()[-1].json["model"] == "test-model"

    @quick_offscreen
    def test_quick_skills_apply_to_one_answer_then_are_dropped(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """`/weather` shows its chip while the answer streams, is sent, and is gone afterwards."""

        window, history = quick(default_model="test-model")
        window.present()
        # The stall comes after the role chunk and one piece: once "Sunny " shows, the
        # router is holding the rest until release().
        router.script(Reply(content=["Sunny ", "and ", "warm."], stall_after=2))
        quick_ask(qtbot, window, "/weather will it rain", wait=False)
        qtbot.waitUntil(
            lambda: window.is_streaming() and window.messages.last_assistant().content() == "Sunny "
        )
        quick_widget_named(window, QPushButton, "Unload skill weather")
        router.release()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        system, user = router.chat_requests()[-1].json["messages"]
        assert system["content"].endswith(quick_skill_part(tmp_path, "weather"))
        assert user["content"] == "will it rain"
        assert window.loaded_skills() == [] and not window.skill_chips.isVisible()
        assert history.get_session(window.session_id)["skills"] == []
        router.script(Reply(content=["No skill now."]))
        quick_ask(qtbot, window, "and tomorrow")
        assert (
            quick_skill_part(tmp_path, "weather")
            not in router.chat_requests()[-1].json["messages"][0]["content"]
        )

    # quick_offscreen also covers the `/` completer popup the chat window shows.
    @quick_offscreen
    def test_chat_quick_and_cli_send_the_same_system_message_and_tools(
        self, chat_window, quick, router, qtbot, tmp_path
    ) -> None:
        """For the same preset and skills, all three callers send the same system bytes and tools."""

        web_search = {"search_url": "http://127.0.0.1:9"}
        chat, _ = chat_window(**web_search)
        send_and_wait(qtbot, chat, "/weather will it rain")
        quick_window, _ = quick(default_model="test-model", **web_search)
        quick_window.present()
        quick_ask(qtbot, quick_window, "/weather will it rain")
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(
            parser.parse_args(["--print", "/weather", "will", "it", "rain"]),
            chat.cfg,
            stdin=io.StringIO(),
            stdout=out,
            stderr=err,
        )
        assert code == 0, err.getvalue()

        sent = [r.json for r in router.chat_requests()[-3:]]
        systems = [json.dumps(body["messages"][0]).encode() for body in sent]
        assert systems[0] == systems[1] == systems[2]
        assert json.loads(systems[0])["content"].endswith(quick_skill_part(tmp_path, "weather"))
        assert sent[0]["tools"] == sent[1]["tools"] == sent[2]["tools"]
        assert [body["messages"][-1]["content"] for body in sent] == ["will it rain"] * 3


class TestSkillsThreeWays:
    """Skills loaded by `/name`, a mention and the model (`load_skill`), chips kept per chat."""

    @offscreen_popup
    def test_window_slash_command_alone_loads_skill_and_sends_nothing(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """`/name` on its own loads the skill, shows its chip and sends no request."""

        window, history = chat_window()
        type_message(qtbot, window, "/weat")
        popup = window.composer.completer.popup()
        qtbot.waitUntil(popup.isVisible)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.composer.text() == "/weather "
        qtbot.keyClick(visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
        assert window.loaded_skills() == ["weather"]
        assert router.chat_requests() == []
        assert window.composer.text() == ""
        assert "weather" in window.statusBar().currentMessage()
        assert visible_widget_named(window, QPushButton, "Unload skill weather")

        send_and_wait(qtbot, window, "Will it rain?")
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[0]["content"].endswith(skill_part(tmp_path, "weather"))
        assert sent[-1]["content"] == "Will it rain?"
        assert history.get_session(window.session_id)["skills"] == ["weather"]

    @offscreen_popup
    def test_window_slash_command_stripped_and_mention_loads_skill(
        self, chat_window, router, qtbot
    ) -> None:
        """`/name` inside a message is stripped; a hyphenated skill named as a word loads and
        stays in the text."""
        window, _history = chat_window()
        send_and_wait(qtbot, window, "/weather will it rain")
        assert window.loaded_skills() == ["weather"]
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "will it rain"

        send_and_wait(qtbot, window, "and what does finance-cli say of my balance?")
        assert window.loaded_skills() == ["weather", "finance-cli"]
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[-1]["content"] == "and what does finance-cli say of my balance?"
        system = sent[0]["content"]
        assert system.index("[skill: weather]") < system.index("[skill: finance-cli]")

    def test_window_model_load_skill_loads_for_session_and_says_so(
        self, chat_window, router, qtbot
    ) -> None:
        """The model's load_skill call loads the skill for the chat, saved and announced."""

        window, history = chat_window()
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}')]),
            Reply(content="Run the auth test first."),
        )
        send_and_wait(qtbot, window, "How do I check my balance?")
        assert window.loaded_skills() == ["finance-cli"]
        assert "finance-cli" in window.statusBar().currentMessage()
        assert visible_widget_named(window, QPushButton, "Unload skill finance-cli")
        assert history.get_session(window.session_id)["skills"] == ["finance-cli"]
        assert history.messages(window.session_id)[-1]["content"] == "Run the auth test first."

        send_and_wait(qtbot, window, "thanks")
        assert "[skill: finance-cli]" in router.chat_requests()[-1].json["messages"][0]["content"]

    @offscreen_popup
    def test_chips_click_unloads_skill_and_hides_row(self, chat_window, router, qtbot) -> None:
        """Clicking a skill chip unloads the skill, saves the set, and the empty row hides."""

        window, history = chat_window()
        send_and_wait(qtbot, window, "/weather /finance-cli hello")
        assert window.skill_chips.isVisible()
        qtbot.mouseClick(
            visible_widget_named(window, QPushButton, "Unload skill weather"),
            Qt.MouseButton.LeftButton,
        )
        assert window.loaded_skills() == ["finance-cli"]
        assert history.get_session(window.session_id)["skills"] == ["finance-cli"]
        qtbot.mouseClick(
            visible_widget_named(window, QPushButton, "Unload skill finance-cli"),
            Qt.MouseButton.LeftButton,
        )
        assert window.loaded_skills() == []
        assert not window.skill_chips.isVisible()
        send_and_wait(qtbot, window, "plain")
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]

    @offscreen_popup
    def test_window_reopened_chat_keeps_a_deleted_skill_as_missing_until_removed(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A skill gone from disk stays on the chat, struck through, with a notice; the model
        does not get it; the user's click removes it from the chat."""

        window, history = chat_window()
        send_and_wait(qtbot, window, "/finance-cli /weather hello")
        session_id = window.session_id
        window.close()
        shutil.rmtree(tmp_path / "skills" / "weather")

        again, _ = chat_window(history=History(history.path))
        assert again.open_session(session_id)
        assert again.skill_chips.skills() == ["finance-cli", "weather"]
        assert again.skill_chips.missing() == ["weather"]
        chip = visible_widget_named(again, QPushButton, "Remove missing skill weather")
        assert chip.font().strikeOut() and "(missing)" in chip.text()
        assert "no longer found: weather" in again.statusBar().currentMessage()
        assert history.get_session(session_id)["skills"] == ["finance-cli", "weather"]

        send_and_wait(qtbot, again, "next")
        system = router.chat_requests()[-1].json["messages"][0]["content"]
        assert skill_part(tmp_path, "finance-cli") in system and "weather" not in system
        assert history.get_session(session_id)["skills"] == ["finance-cli", "weather"]

        qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
        assert again.skill_chips.skills() == ["finance-cli"] and again.skill_chips.missing() == []
        assert history.get_session(session_id)["skills"] == ["finance-cli"]

    @offscreen_popup
    def test_window_reopen_restores_skills_and_new_session_starts_empty(
        self, chat_window, router, qtbot
    ) -> None:
        """A chat reopened in a new window has its messages and skills; a new chat has none."""

        window, history = chat_window()
        send_and_wait(qtbot, window, "/finance-cli hello")
        session_id = window.session_id
        window.close()

        again, _ = chat_window(history=History(history.path))
        assert again.open_session(session_id)
        assert again.loaded_skills() == ["finance-cli"]
        assert again.skill_chips.skills() == ["finance-cli"]
        assert [v.role for v in again.messages.views()] == ["user", "assistant"]
        again.new_session()
        assert again.loaded_skills() == []
        assert not again.skill_chips.isVisible()
        assert again.messages.views() == []

    @offscreen_popup
    def test_window_system_message_is_byte_identical_across_turns(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Preset, date note and skills form one system message that never changes between turns."""

        window, _history = chat_window(search_url="http://127.0.0.1:9")
        send_and_wait(qtbot, window, "/weather first")
        send_and_wait(qtbot, window, "second")
        first, second = (r.json["messages"][0] for r in router.chat_requests()[-2:])
        assert first["role"] == "system"
        assert json.dumps(first).encode() == json.dumps(second).encode()
        assert first["content"].startswith("You are a helpful assistant.")
        assert "Today's date is" in first["content"]
        assert first["content"].endswith(skill_part(tmp_path, "weather"))
        send_and_wait(qtbot, window, "/finance-cli third")
        third = router.chat_requests()[-1].json["messages"][0]["content"]
        assert third.startswith(first["content"]) and "[skill: finance-cli]" in third


class TestReplyOutlivesLlamachat:
    """Issue 40 end to end: a reply outlives the llamachat that asked for it."""

    @pytest.mark.real_router
    @pytest.mark.timeout(600)  # two starts of llamachat and SmolLM2 writing 200 tokens
    @pytest.mark.parametrize("taken", [False, True], ids=["at_router_url", "router_url_taken"])
    def test_kill_9_of_llamachat_and_its_server_mid_reply_then_restart_completes_it_exactly(
        self, tmp_path, taken
    ) -> None:
        """`llamachat` runs its own llama-server (SmolLM2) and streams a reply in its window;
        SIGKILLed mid-reply, its server outlives it (the grace period), the next `llamachat`
        adopts that server, reopens the chat and reads the reply on: the row completes with
        exactly the text the server generated (its own copy of the stream, from byte 0).
        Quitting then stops the adopted server: nothing is left running. `taken`: another
        program holds router_url's port (it accepts, never answers), so the server runs on
        another port, and the reply is read on from there, not from router_url."""
        _binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        db = tmp_path / "history.db"
        config_path = tmp_path / "config.toml"
        holder = socket.create_server(("127.0.0.1", 0))  # listens; accepts nothing
        port = holder.getsockname()[1] if taken else free_port()
        if not taken:
            holder.close()
        config_path.write_text(
            f'router_url = "http://127.0.0.1:{port}"\nmanage_server = true\n'
            f'models_dir = "{models}"\nserver_args = ["--ctx-size", "2048", "-t", "2"]\n'
            f'default_model = "{SMOL_ID}"\nwarm_cache = false\n'
            f'history_path = "{db}"\nprompts_dir = "{tmp_path / "prompts"}"\n'
            f'skills_dir = "{tmp_path / "skills"}"\n'
            f'[model_params."{SMOL_ID}"]\ntemperature = 0\nseed = 7\nmax_tokens = 200\n',
            encoding="utf-8",
        )
        lock = default_lock_path(config_path)
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
        question = "Write a long story about a dragon who learns to count."
        started: list[subprocess.Popen[bytes]] = []
        server_pid = 0

        def start(*command: str, log: str) -> subprocess.Popen[bytes]:
            with (tmp_path / log).open("wb") as out:
                child = subprocess.Popen(
                    [sys.executable, *command], env=env, stdout=out, stderr=subprocess.STDOUT
                )
            started.append(child)
            return child

        try:
            first = start("-c", MAIN_SENDS_SCRIPT, str(config_path), question, log="first.log")
            # Killed once the reply's place in the server's stream is saved with some text.
            place = wait_for(
                lambda: _alive(first, tmp_path / "first.log") and _streaming_place(db),
                300,
                "the first llamachat's reply to be streaming",
            )
            record = json.loads(lock.read_text())
            server_pid, url, key = int(record["server"]), record["url"], record["key"]
            assert (url == f"http://127.0.0.1:{port}") is not taken
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            message_id, conversation, before = place
            # The server outlives it, still answering, its reply going on.
            assert live_group_members(server_pid)
            assert httpx.get(f"{url}/health", timeout=5).status_code == 200

            second = start("-m", "llamachat", "--config", str(config_path), log="second.log")
            reply = wait_for(
                lambda: _finished_reply(db, message_id),
                300,
                f"the reply to complete in the next llamachat ({tmp_path / 'second.log'})",
            )
            # Adopted, not started again: the same server process, now in the next one's lock.
            assert int(json.loads(lock.read_text())["server"]) == server_pid

            client = Client(url, api_key=key)
            try:
                whole = list(
                    backend.resume_chat(client, backend.Position(conversation), model=SMOL_ID)
                )
            finally:
                client.close()
            generated = "".join(str(value) for kind, value in whole if kind == "content")
            assert reply["status"] == "complete"
            assert reply["content"] == generated
            # Killed mid-reply: the first llamachat had only part of it.
            assert 0 < len(before) < len(generated) and generated.startswith(before)
            print(
                f"\nkill -9 mid-reply: {len(before)} of {len(generated)} chars saved at the kill, "
                "the rest read on after adoption, 0 lost"
            )

            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=60) == 0, (tmp_path / "second.log").read_text()
            wait_for(lambda: not live_group_members(server_pid), 30, "the adopted server to stop")
            wait_for(lambda: not _keepers(lock), 30, "the server's keeper to end")
        finally:
            for child in started:
                if child.poll() is None:
                    child.kill()
                    child.wait()
            if server_pid and live_group_members(server_pid):
                os.killpg(server_pid, signal.SIGKILL)
            for keeper in _keepers(lock):
                os.kill(keeper, signal.SIGKILL)
            holder.close()


def _keepers(lock) -> list[int]:
    """The pids of the keeper processes watching the server of `lock` (router.keeper)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"llamachat.router.keeper" in argv and os.fsencode(lock) in argv:
            found.append(int(entry.name))
    return found


def _alive(child: subprocess.Popen[bytes], log) -> bool:
    """True while `child` runs; a failure showing its output once it ended."""
    if child.poll() is not None:
        pytest.fail(f"llamachat ended with {child.returncode}:\n{log.read_text()[-3000:]}")
    return True


def _streaming_place(db) -> tuple[int, str, str] | None:
    """(message id, conversation id, text saved) of a reply still streaming whose place in
    the server's stream is saved with some text, in the history file `db`."""
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT m.id, s.conversation, m.content FROM reply_streams s"
            " JOIN messages m ON m.id = s.message_id"
            " WHERE s.content_chars > 0 AND m.status = 'streaming'"
        ).fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return (int(rows[0][0]), str(rows[0][1]), str(rows[0][2])) if rows else None


def _finished_reply(db, message_id: int) -> dict | None:
    """The reply `message_id` in the history file `db` once it is no longer streaming."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute(
            "SELECT status, content FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return {"status": row[0], "content": row[1]} if row and row[0] != "streaming" else None
