"""The tests of `llamachat.ui.chat.outbox`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import send_and_wait, visible_widget_named
from llamachat.ui.chat import conversation as controller


class TestOutbox:
    """What a conversation sends: its questions saved, each request sent, the reply streaming back."""

    def test_length_cut_reply_is_marked_and_continue_goes_on_in_the_same_reply(
        self, chat_window, router, qtbot
    ) -> None:
        """finish_reason "length": the reply says it was cut and offers Continue, which sends
        the chat with the reply last (a prefill) and adds what comes to the same reply and
        row; llama.cpp's echo of the prefilled text is dropped."""

        window, history = chat_window()
        router.script(Reply(content=["One, two,"], finish_reason="length"))
        send_and_wait(qtbot, window, "Count to five.")
        view = window.messages.last_assistant()
        assert view.is_cut()
        status = visible_widget_named(view, QLabel, "Status")
        assert status.text() == "Cut at the length limit"
        cont = visible_widget_named(view, QToolButton, "Continue reply")
        row = history.messages(window.session_id)[-1]
        assert row["timings"]["finish_reason"] == "length"

        # llama.cpp streams the prefilled text back first, then the new text.
        router.script(Reply(content=["One, two, ", "three, four, five."]))
        qtbot.mouseClick(cont, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[-1] == {"role": "assistant", "content": "One, two,"}
        rows = history.messages(window.session_id)
        assert [r["role"] for r in rows] == ["user", "assistant"]
        assert rows[-1]["id"] == row["id"]
        assert rows[-1]["content"] == "One, two, three, four, five."
        assert rows[-1]["status"] == "complete"
        assert "finish_reason" not in rows[-1]["timings"]
        view = window.messages.last_assistant()
        assert view.content() == "One, two, three, four, five." and not view.is_cut()
        shown = [label.text() for label in view.findChildren(QLabel) if label.isVisible()]
        assert "Cut at the length limit" not in shown

    def test_send_starts_the_reply_before_the_window_is_shown_the_message(
        self, conversation, router, qtbot
    ) -> None:
        """The request leaves before the views are built: when the window hears of the
        message, the reply is already streaming, and its view attaches before any text."""

        chat, _history = conversation()
        streaming_when_shown: list[bool] = []
        chat.message_added.connect(lambda _row: streaming_when_shown.append(chat.is_streaming()))
        router.script(Reply(content=["Hello", " there."]))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("Hi") == controller.SENT
        assert streaming_when_shown == [True]
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "Hi"
