"""The tests of `llamachat.ui.views.message`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import reply_button
from llamachat.ui.views.figures import ReadingProgress


class TestMessage:
    """One message of the conversation: its actions shown once it has text."""

    def test_window_reply_offers_copy_and_more_only_once_it_has_text(
        self, chat_window, router, qtbot
    ) -> None:
        """While the prompt is read the reply is empty: no Copy and no ⋯ under it until text
        comes (issue 30, item 9); a reply stopped before any text offers neither."""

        window, _history = chat_window()
        router.script(Reply(content="Answer.", stall_after=0))
        window.composer.set_text("read this")
        window.send()
        reply = window.messages.last_assistant()
        qtbot.waitUntil(lambda: reply.findChild(ReadingProgress) is not None)
        copy = reply_button(reply, "Copy reply")
        assert reply.isVisible() and not copy.isVisible() and reply.more_actions() == []
        window.stop()
        assert not copy.isVisible() and reply.more_actions() == []

        router.script(Reply(content=["Hello ", "there."], stall_after=2))
        window.composer.set_text("again")
        window.send()
        reply = window.messages.last_assistant()
        qtbot.waitUntil(lambda: reply.content() == "Hello ")
        copy = reply_button(reply, "Copy reply")
        assert copy.isVisible() and reply.more_actions() == [
            "New chat from here",
            "Remember this",
            "Read aloud",
            "Reading speed",
        ]
        window.stop()
