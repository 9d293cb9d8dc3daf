"""The tests of `llamachat.ui.chat.versions`."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QPlainTextEdit, QTextBrowser, QToolButton

from llamachat.dev.scripted_router import Reply, ScriptedRouter
from llamachat.tests.support import (
    last_saved_message,
    quick_ask,
    quick_offscreen,
    quick_skill_part,
    quick_widget_named,
    reply_button,
    reply_button_label,
    reply_label_texts,
    send_and_wait,
    start_sending,
    visible_widget_named,
)
from llamachat.ui.chat import conversation as controller


class TestVersions:
    """A conversation's versions: editing a sent message, switching versions, forking."""

    def _texts(self, window) -> list[str]:
        return [view.content() for view in window.messages.views()]

    def test_fault_router_killed_mid_reply_keeps_partial_error_and_retry_recovers(
        self, chat_window, qtbot
    ) -> None:
        """The router dies mid-reply: once it stayed out of reach for idle_timeout, the text is
        kept as 'error' with Retry; Retry on a live router works."""

        doomed = ScriptedRouter()
        window, history = chat_window(url=doomed.url, idle_timeout=2.0)
        doomed.script(Reply(content=["kept ", "text ", "never ", "sent"], stall_after=3))
        start_sending(qtbot, window, "Tell me")
        qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "kept text ")
        doomed.close()  # the router process is gone: its sockets close mid-body
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)

        failed = last_saved_message(history, window)
        assert (failed["content"], failed["status"]) == ("kept text ", "error")
        assert "ended before it was complete" in failed["error"] or "broke" in failed["error"]
        view = window.messages.last_assistant()
        assert failed["error"] in reply_label_texts(view)

        # Retry while nothing listens: a clear message naming the URL, still no crash, and the
        # earlier text stays (the attempt produced none to replace it).
        qtbot.mouseClick(
            visible_widget_named(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        kept = last_saved_message(history, window)
        assert (kept["content"], kept["status"]) == ("kept text ", "error")
        said = window.problem_bar.text()  # a notice that stays: the user must act on it
        assert doomed.url in said and "router_url" in said
        assert window.messages.last_assistant().content() == "kept text "

        with ScriptedRouter() as revived:
            revived.script(Reply(content="Back again."))
            window.app.use_router(revived.url)
            view = window.messages.last_assistant()
            qtbot.mouseClick(
                visible_widget_named(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton
            )
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
            rows = history.messages(window.session_id)
            assert [(m["role"], m["content"], m["status"]) for m in rows] == [
                ("user", "Tell me", "complete"),
                ("assistant", "Back again.", "complete"),
            ]
            window.close()

    def test_conversation_stop_and_error_show_marks_and_retry_carries_the_id(
        self, messages_view, qtbot
    ) -> None:

        reply = messages_view.append_message({"id": 7, "role": "assistant", "status": "streaming"})
        reply.append_content("Partial answ")
        reply.set_status("stopped")
        qtbot.waitUntil(reply._status.isVisible)
        assert reply._status.text() == "Stopped"
        assert "Partial answ" in reply.text_document().toPlainText()
        # One action to ask again, and the figures of what was produced.
        assert (
            not reply_button(reply, "Retry").isVisible()
            and reply_button(reply, "Regenerate").isVisible()
        )
        stats = reply_button_label(reply, "Reply statistics")
        assert stats.isVisible() and re.fullmatch(r"2 words · \d+\.\d s", stats.text())
        with qtbot.waitSignal(messages_view.regenerate_requested) as caught:
            qtbot.mouseClick(reply_button(reply, "Regenerate"), Qt.MouseButton.LeftButton)
        assert caught.args == [7]

        failed = messages_view.append_message({"id": 8, "role": "assistant", "status": "streaming"})
        failed.set_status("error", "model 'x' failed to load")
        assert failed._status.text() == "model 'x' failed to load"
        assert "d1242f" in failed._status.styleSheet()
        assert (
            reply_button(failed, "Retry").isVisible()
            and not reply_button(failed, "Regenerate").isVisible()
        )
        with qtbot.waitSignal(messages_view.retry_requested) as caught:
            qtbot.mouseClick(reply_button(failed, "Retry"), Qt.MouseButton.LeftButton)
        assert caught.args == [8]

        # Reopened, a stopped reply still shows what it produced (no time: it was not timed).
        messages_view.load_messages(
            [{"id": 9, "role": "assistant", "content": "one two three", "status": "stopped"}]
        )
        [reopened] = messages_view.views()
        qtbot.waitUntil(reopened.isVisible)
        assert reply_button_label(reopened, "Reply statistics").text() == "3 words"

    def test_conversation_edit_and_regenerate_signals_carry_the_ids(
        self, messages_view, qtbot
    ) -> None:

        messages_view.load_messages(
            [
                {"id": 1, "role": "user", "content": "hi", "status": "complete"},
                {"id": 2, "role": "assistant", "content": "hello", "status": "complete"},
                {"id": 3, "role": "user", "content": "again", "status": "complete"},
                {"id": 4, "role": "assistant", "content": "sure", "status": "complete"},
            ]
        )
        views = messages_view.views()
        assert [v.accessibleName() for v in views] == ["Message from you", "Reply"] * 2
        assert not reply_button(views[1], "Regenerate").isVisible()
        with qtbot.waitSignal(messages_view.regenerate_requested) as caught:
            qtbot.mouseClick(reply_button(views[3], "Regenerate"), Qt.MouseButton.LeftButton)
        assert caught.args == [4]
        with qtbot.waitSignal(messages_view.edit_requested) as caught:
            qtbot.mouseClick(reply_button(views[2], "Edit message"), Qt.MouseButton.LeftButton)
        assert caught.args == [3]
        views[3].set_message_id(40)
        with qtbot.waitSignal(messages_view.regenerate_requested) as caught:
            qtbot.mouseClick(reply_button(views[3], "Regenerate"), Qt.MouseButton.LeftButton)
        assert caught.args == [40]

    @quick_offscreen
    def test_quick_regenerate_asks_again_and_edit_puts_the_question_back(
        self, quick, router, qtbot
    ) -> None:
        """The answer's Regenerate and the question's Edit work in the quick window too."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=["First."]))
        quick_ask(qtbot, window, "name a colour")
        router.script(Reply(content=["Second."]))
        answer = window.messages.last_assistant()
        qtbot.mouseClick(
            quick_widget_named(answer, QAbstractButton, "Regenerate"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: not window.is_streaming() and window.running_workers() == 0)
        assert [(m["role"], m["content"]) for m in history.messages(window.session_id)] == [
            ("user", "name a colour"),
            ("assistant", "Second."),
        ]
        assert len(router.chat_requests()) == 2
        question = window.messages.views()[0]
        qtbot.mouseClick(
            quick_widget_named(question, QAbstractButton, "Edit message"), Qt.MouseButton.LeftButton
        )
        assert window.composer.text() == "name a colour"

    @quick_offscreen
    def test_quick_failed_answer_retries_with_the_same_skills(
        self, quick, router, qtbot, tmp_path
    ) -> None:
        """Retry on a failed answer asks again, with the skills that question loaded."""

        window, history = quick(default_model="test-model")
        window.present()
        router.script(
            Reply(status=500, error={"message": "out of memory"}), Reply(content=["Fine ", "now."])
        )
        quick_ask(qtbot, window, "/weather again")
        assert "out of memory" in window.notice.text()
        reply = window.messages.last_assistant()
        retry = [b for b in reply.findChildren(QToolButton) if b.accessibleName() == "Retry"]
        assert len(retry) == 1
        retry[0].click()
        qtbot.waitUntil(
            lambda: (
                not window.is_streaming()
                and history.messages(window.session_id)[-1]["status"] == "complete"
            ),
            timeout=30000,
        )
        assert [m["content"] for m in history.messages(window.session_id)] == ["again", "Fine now."]
        first, second = router.chat_requests()[-2:]
        assert first.json["messages"] == second.json["messages"]
        assert second.json["messages"][0]["content"].endswith(quick_skill_part(tmp_path, "weather"))
        assert history.get_session(window.session_id)["skills"] == []

    def test_window_server_dying_mid_reply_saves_error_and_retry_streams_again(
        self, chat_window, router, qtbot
    ) -> None:
        """A dropped connection keeps the partial reply as 'error' with Retry; Retry replaces it."""

        window, history = chat_window()
        router.script(
            Reply(content=["half ", "a ", "reply ", "lost"], die_after=3),
            Reply(content="Whole reply."),
        )
        send_and_wait(qtbot, window, "Tell me")
        failed = history.messages(window.session_id)[-1]
        assert (failed["content"], failed["status"]) == ("half a ", "error")
        assert failed["error"]
        view = window.messages.last_assistant()
        assert view.content() == "half a "

        qtbot.mouseClick(
            visible_widget_named(view, QAbstractButton, "Retry"), Qt.MouseButton.LeftButton
        )
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        rows = history.messages(window.session_id)
        assert [(m["role"], m["content"], m["status"]) for m in rows] == [
            ("user", "Tell me", "complete"),
            ("assistant", "Whole reply.", "complete"),
        ]
        assert [m["role"] for m in router.chat_requests()[-1].json["messages"]] == [
            "system",
            "user",
        ]

    def test_window_regenerate_and_edit_replace_from_there(
        self, chat_window, router, qtbot
    ) -> None:
        """Regenerate replaces the last reply; editing a message resends from that message."""

        window, history = chat_window()
        router.script(Reply(content="first answer"), Reply(content="second answer"))
        send_and_wait(qtbot, window, "question")
        reply_id = history.messages(window.session_id)[-1]["id"]
        window.messages.regenerate_requested.emit(reply_id)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "question",
            "second answer",
        ]

        user_id = history.messages(window.session_id)[0]["id"]
        window.messages.edit_requested.emit(user_id)
        assert window.composer.text() == "question"
        window.composer.set_text("better question")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "better question",
            "echo: better question",
        ]

    def test_window_escape_leaves_edit_mode_so_send_appends(
        self, chat_window, router, qtbot
    ) -> None:
        """Esc while editing (not streaming) drops the edit: the next send adds, replaces nothing."""

        window, history = chat_window()
        send_and_wait(qtbot, window, "first")
        window.messages.edit_requested.emit(history.messages(window.session_id)[0]["id"])
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
        window.composer.set_text("second")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        assert [m["content"] for m in history.messages(window.session_id)] == [
            "first",
            "echo: first",
            "second",
            "echo: second",
        ]

    def test_window_message_being_edited_is_highlighted_until_sent_or_cancelled(
        self, chat_window, router, qtbot
    ) -> None:
        """Edit marks the message in the conversation; Stop (leaving editing) or sending the
        edit clears the mark (issue 30, item 10)."""

        window, _history = chat_window()
        router.script(Reply(content="Dolly."))
        send_and_wait(qtbot, window, "Name a llama.")
        question = window.messages.views()[0]
        assert not question.is_editing()
        qtbot.mouseClick(reply_button(question, "Edit message"), Qt.MouseButton.LeftButton)
        assert question.is_editing() and question.accessibleDescription() == "Being edited"
        assert not window.messages.views()[1].is_editing()
        window.stop()
        assert not question.is_editing()

        qtbot.mouseClick(reply_button(question, "Edit message"), Qt.MouseButton.LeftButton)
        assert question.is_editing()
        router.script(Reply(content="Alpaca."))
        window.composer.set_text("Name an alpaca.")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        assert [v.content() for v in window.messages.views()] == ["Name an alpaca.", "Alpaca."]
        assert not any(view.is_editing() for view in window.messages.views())

    def test_conversation_oneshot_drops_its_skills_after_the_answer_and_retry_asks_them_again(
        self, conversation, router, qtbot
    ) -> None:
        """One-shot: every question is a new session; its skills serve that answer only, and a
        retry of the answer asks with them again."""

        chat, history = conversation(mode=controller.ONESHOT)
        assert chat.submit("/weather") == controller.HELD
        assert chat.loaded_skills() == ["weather"]
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("Rain tomorrow?") == controller.SENT
        first = chat.session_id
        assert history.get_session(first)["mode"] == "oneshot"
        assert history.get_session(first)["skills"] == []
        assert chat.loaded_skills() == []
        assert "Celsius" in router.chat_requests()[-1].json["messages"][0]["content"]

        reply_id = history.messages(first)[-1]["id"]
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.retry(reply_id)
        assert "Celsius" in router.chat_requests()[-1].json["messages"][0]["content"]
        assert [m["content"] for m in history.messages(first)] == [
            "Rain tomorrow?",
            "echo: Rain tomorrow?",
        ]
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            chat.submit("Another")
        assert chat.session_id != first
        assert "Celsius" not in router.chat_requests()[-1].json["messages"][0]["content"]

    def test_conversation_retry_keeps_the_earlier_reply_until_the_new_one_has_text(
        self, conversation, router, qtbot
    ) -> None:
        """A retry leaves the saved reply in place while the new attempt has produced nothing;
        an attempt that fails with no text keeps it for good, one with text replaces it."""

        chat, history = conversation()
        router.script(Reply(content="Old answer."))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            chat.submit("Question")
        old_id = history.messages(chat.session_id)[-1]["id"]
        before = [(m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)]

        router.script(Reply(status=500, error={"message": "the model crashed"}))
        notices: list = []
        chat.notice.connect(lambda text, _ms: notices.append(text))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000) as ended:
            assert chat.retry(old_id)
        assert ended.args[0] == "error"
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)
        ] == (before)
        assert "the model crashed" in notices[-1] and "earlier reply is kept" in notices[-1]

        # Reasoning alone is no answer: the connection dies before any text, the reply stays.
        router.script(Reply(reasoning=["Let me ", "think ", "again."], die_after=2))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000) as ended:
            assert chat.retry(old_id)
        assert ended.args[0] == "error"
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)
        ] == (before)
        assert history.messages(chat.session_id)[-1]["reasoning"] == ""

        router.script(Reply(content=["New ", "answer."], stall_after=0))
        assert chat.retry(old_id)
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 4, timeout=5000)
        # Asked again, nothing back yet: the earlier reply is still what History holds.
        assert history.messages(chat.session_id)[-1]["content"] == "Old answer."
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            router.release()
        assert [
            (m["role"], m["content"], m["status"]) for m in history.messages(chat.session_id)
        ] == [
            ("user", "Question", "complete"),
            ("assistant", "New answer.", "complete"),
        ]
        # The reply being replaced is not part of the request that replaces it.
        assert [m["role"] for m in router.chat_requests()[-1].json["messages"]] == ["user"]

    def test_regenerate_adds_versions_and_the_arrows_walk_them(
        self, chat_window, router, qtbot
    ) -> None:
        """Three regenerations make `4/4`; ‹ shows the third version, and the next request
        replays exactly the path on screen."""

        window, history = chat_window()
        router.script(Reply(content="First."))
        send_and_wait(qtbot, window, "Name a llama.")
        for text in ("Second.", "Third.", "Fourth."):
            router.script(Reply(content=text))
            reply = window.messages.last_assistant()
            qtbot.mouseClick(reply_button(reply, "Regenerate"), Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
            qtbot.waitUntil(lambda text=text: window.messages.last_assistant().content() == text)
        reply = window.messages.last_assistant()
        qtbot.waitUntil(lambda: reply.version_text() == "4/4")
        assert not reply_button(reply, "Next version").isEnabled()
        qtbot.mouseClick(reply_button(reply, "Previous version"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: self._texts(window) == ["Name a llama.", "Third."])
        shown = window.messages.last_assistant()
        assert shown.version_text() == "3/4"
        assert history.message_count(window.session_id) == 5

        router.script(Reply(content="Because."))
        send_and_wait(qtbot, window, "Why?")
        sent = router.chat_requests()[-1].json["messages"]
        assert [(m["role"], m["content"]) for m in sent if m["role"] != "system"] == [
            ("user", "Name a llama."),
            ("assistant", "Third."),
            ("user", "Why?"),
        ]
        # Reopened, the chat shows the path last shown.
        window.new_session()
        assert window.open_session(history.list_sessions()[0]["id"])
        assert self._texts(window) == ["Name a llama.", "Third.", "Why?", "Because."]

    def test_a_failed_reply_is_replaced_not_kept_as_a_version(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        router.script(Reply(status=500, error={"message": "model crashed"}))
        send_and_wait(qtbot, window, "Hello")
        router.script(Reply(content="Hi."))
        failed = window.messages.last_assistant()
        qtbot.mouseClick(reply_button(failed, "Retry"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: self._texts(window) == ["Hello", "Hi."])
        assert window.messages.last_assistant().version_text() == ""
        assert history.message_count(window.session_id) == 2

    def test_regenerate_after_stop_keeps_the_stopped_reply_as_a_version(
        self, chat_window, router, qtbot
    ) -> None:
        """A stopped reply with text is a version like any other: Regenerate adds `2/2`,
        and ‹ shows the stopped text, still in History."""

        window, history = chat_window()
        router.script(Reply(content=["Half ", "an ", "answer"], stall_after=2))
        window.composer.set_text("Tell me")
        window.send()
        qtbot.waitUntil(lambda: window.messages.last_assistant().content() == "Half ")
        window.stop()
        router.release()
        stopped = window.messages.last_assistant()
        router.script(Reply(content="Whole answer."))
        qtbot.mouseClick(reply_button(stopped, "Regenerate"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: self._texts(window) == ["Tell me", "Whole answer."])
        reply = window.messages.last_assistant()
        qtbot.waitUntil(lambda: reply.version_text() == "2/2")
        rows = history._conn.execute(
            "SELECT content, status FROM messages WHERE role = 'assistant' ORDER BY id"
        ).fetchall()
        assert [tuple(row) for row in rows] == [("Half ", "stopped"), ("Whole answer.", "complete")]
        qtbot.mouseClick(reply_button(reply, "Previous version"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: self._texts(window) == ["Tell me", "Half "])
        assert window.messages.last_assistant().version_text() == "1/2"

    def test_edits_are_branches_switched_with_alt_arrows(self, chat_window, router, qtbot) -> None:
        """Editing a question twice gives `3/3` on it; Alt+Left in the message shows the
        second branch with its own reply; the first branch is still there."""

        window, history = chat_window()
        router.script(Reply(content="Dolly."))
        send_and_wait(qtbot, window, "Name a llama.")
        for text in ("Name an alpaca.", "Name a vicuna."):
            router.script(Reply(content=f"For: {text}"))
            question = window.messages.views()[0]
            qtbot.mouseClick(reply_button(question, "Edit message"), Qt.MouseButton.LeftButton)
            editor = visible_widget_named(window, QPlainTextEdit, "Message")
            editor.selectAll()
            send_and_wait(qtbot, window, text)
        assert self._texts(window) == ["Name a vicuna.", "For: Name a vicuna."]
        question = window.messages.views()[0]
        assert question.version_text() == "3/3"
        assert history.get_session(window.session_id)["title"] == "Name a vicuna."

        body = visible_widget_named(question, QTextBrowser, "Message text")
        body.setFocus()
        qtbot.waitUntil(body.hasFocus)
        qtbot.keyClick(body, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)
        qtbot.waitUntil(lambda: self._texts(window) == ["Name an alpaca.", "For: Name an alpaca."])
        assert window.messages.views()[0].version_text() == "2/3"
        first = window.messages.views()[0]
        qtbot.mouseClick(reply_button(first, "Previous version"), Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: self._texts(window) == ["Name a llama.", "Dolly."])
        assert history.message_count(window.session_id) == 6

    def test_new_chat_from_here_opens_a_copy_of_the_path_up_to_the_message(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        router.script(Reply(content="Dolly."))
        send_and_wait(qtbot, window, "/weather Name a llama.")
        router.script(Reply(content="Because."))
        send_and_wait(qtbot, window, "Why?")
        original = window.session_id
        reply = window.messages.views()[1]
        assert reply.more_actions() == [
            "New chat from here",
            "Remember this",
            "Read aloud",
            "Reading speed",
        ]
        reply.trigger_more("New chat from here")
        qtbot.waitUntil(lambda: window.session_id != original)
        assert self._texts(window) == ["Name a llama.", "Dolly."]
        assert window.chat.loaded_skills() == ["weather"]
        model = window.sidebar.model
        listed = [model.data(model.index(row)) for row in range(model.rowCount())]
        assert "Name a llama. (fork)" in listed and window.sidebar.current() == window.session_id
        assert history.message_count(original) == 4

        router.script(Reply(content="Kuzco."))
        send_and_wait(qtbot, window, "Another?")
        sent = router.chat_requests()[-1].json["messages"]
        assert [m["content"] for m in sent if m["role"] != "system"] == [
            "Name a llama.",
            "Dolly.",
            "Another?",
        ]
