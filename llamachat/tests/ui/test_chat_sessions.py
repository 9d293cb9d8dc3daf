"""The tests of `llamachat.ui.chat_sessions`."""

from __future__ import annotations


class TestChatSessions:
    """The chat a chat window shows: starting, opening, forking and reopening one."""

    def test_the_window_reopens_on_the_chat_opened_last(self, qtbot, chat_window, router) -> None:
        """A new window shows the chat the last one showed (one it opened, or a new chat it
        sent in), not an empty new chat; with none ever opened, a new chat."""
        from llamachat.history.store import History
        from llamachat.tests.support import send_and_wait

        first, history = chat_window()
        assert first.session_id is None
        send_and_wait(qtbot, first, "older")
        older = first.session_id
        first.new_session()
        send_and_wait(qtbot, first, "newer")
        newer = first.session_id
        first.open_session(older)
        first.close()

        second, _ = chat_window(history=History(history.path))
        assert second.session_id == older
        assert second.history.messages(older)[0]["content"] == "older"
        assert second.sidebar.current() == older
        second.new_session()
        send_and_wait(qtbot, second, "newest")
        newest = second.session_id
        assert newest not in (older, newer)
        second.close()

        third, _ = chat_window(history=History(history.path))
        assert third.session_id == newest
        third.new_session()  # left on a new chat: the next window starts on one
        third.close()
        fourth, _ = chat_window(history=History(history.path))
        assert fourth.session_id is None
