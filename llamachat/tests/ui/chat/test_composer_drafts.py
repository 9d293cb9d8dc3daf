"""The tests of `llamachat.ui.chat.composer_drafts`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Reply


class TestComposerDrafts:
    """Each chat's draft: what is typed in the composer stays with the chat it was typed in."""

    def test_window_draft_stays_with_its_chat_survives_quit_and_sending_clears_it(
        self, chat_window, router, qtbot
    ) -> None:
        """Text typed in chat A does not follow into chat B; each chat (the new one too)
        gets its own back after a restart; sending clears the draft (issue 30, item 2)."""

        window, history = chat_window()
        first = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(first, "user", "A question")
        second = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(second, "user", "B question")
        window.sidebar.refresh()
        assert window.open_session(first)
        window.composer.set_text("half-typed for A")
        assert window.open_session(second)
        assert window.composer.text() == ""
        window.composer.set_text("for B")
        assert window.open_session(first)
        assert window.composer.text() == "half-typed for A"
        window.new_session()
        assert window.composer.text() == ""
        window.composer.set_text("a new chat's draft")
        window.close()

        window, _ = chat_window(history=history)
        assert window.composer.text() == "a new chat's draft"
        assert window.open_session(second)
        assert window.composer.text() == "for B"
        assert window.open_session(first)
        assert window.composer.text() == "half-typed for A"
        router.script(Reply(content="Sent."))
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: history.draft(first) == "", timeout=5000)
        assert history.draft(second) == "for B" and history.draft(None) == "a new chat's draft"

        # The new chat's first message makes its session: the draft goes with the message.
        window.new_session()
        assert window.composer.text() == "a new chat's draft"
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: history.draft(None) == "", timeout=5000)
        assert history.draft(window.session_id) == ""
        window.new_session()
        assert window.composer.text() == ""
