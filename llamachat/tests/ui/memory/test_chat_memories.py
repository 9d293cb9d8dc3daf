"""The tests of `llamachat.ui.memory.chat_memories`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.tests.support import reply_label_texts, send_and_wait
from llamachat.ui.views import more_actions


class TestChatMemories:
    """A chat window's memories on screen: Remembered with Undo, Remember this, the panel."""

    def test_the_models_memory_is_shown_in_the_reply_with_an_undo(
        self, chat_window, router, qtbot
    ) -> None:
        """The remember call shows "Remembered" in the reply and "Remembered: …" with Undo
        in the status bar; Undo forgets it."""

        window, history = chat_window(memory_enabled=True)
        call = ToolCall("remember", '{"fact": "Prefers answers in metric units"}')
        router.script(Reply(tool_calls=[call]), Reply(content="Noted."))
        send_and_wait(qtbot, window, "I use metric, remember that")
        reply = window.messages.views()[-1]
        assert "Prefers answers in metric units" in " ".join(reply_label_texts(reply))
        bar = window.memories
        assert (
            bar.bar.isVisible()
            and bar.label.text() == "Remembered: Prefers answers in metric units"
        )
        assert [m["text"] for m in history.memories.listed()] == ["Prefers answers in metric units"]
        bar.undo_button.click()
        assert history.memories.listed() == [] and not bar.bar.isVisible()

    def test_remember_this_opens_the_panel_with_the_message_to_cut_down(
        self, chat_window, router, qtbot
    ) -> None:
        window, history = chat_window(memory_enabled=True)
        router.script(Reply(content="Your API is **FastAPI**, on Python 3.12."))
        send_and_wait(qtbot, window, "What is my API?")
        reply = window.messages.views()[-1]
        assert more_actions.REMEMBER in reply.more_actions()
        reply.trigger_more(more_actions.REMEMBER)
        panel = window.memories._panel
        assert panel is not None and panel.isVisible()
        assert panel.new_text.text() == "Your API is **FastAPI**, on Python 3.12."
        panel.new_text.setText("The API is FastAPI")
        panel.add_button.click()
        [memory] = history.memories.listed()
        assert (memory["text"], memory["project_id"], memory["session_id"]) == (
            "The API is FastAPI",
            None,
            window.session_id,
        )
        assert ("The API is FastAPI", "", "you", "sent with the next message") in panel.rows_text()
        router.script(Reply(content="OK."))
        send_and_wait(qtbot, window, "Thanks")
        assert "- The API is FastAPI" in router.chat_requests()[-1].json["messages"][0]["content"]
        assert ("The API is FastAPI", "", "you", "sent in this chat") in panel.rows_text()
