"""The tests of `llamachat.ui.chat.composer_drafts`."""

from __future__ import annotations

from PySide6.QtCore import Qt

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import send_and_wait


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

    def test_temporary_chats_draft_stays_in_memory_and_keep_carries_it(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A temporary chat's unsent text never reaches the history file (not under the
        oldest chat's id, whose draft stays its own); Keep carries it to the kept chat."""

        window, history = chat_window()
        oldest = history.create_session("chat", "test-model", prompt_name="Default")
        history.add_message(oldest, "user", "An old question")
        history.set_draft(oldest, "the oldest chat's own draft")
        window.sidebar.refresh()
        window.temporary.ask = lambda _closing: "discard"
        for leave in ("discard", "keep", "close"):
            qtbot.keyClick(
                window,
                Qt.Key.Key_N,
                Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
            )
            assert window.chat.scratch is not None and window.composer.text() == ""
            router.script(Reply(content="Noted."))
            send_and_wait(qtbot, window, "A temporary question")
            window.composer.set_text(f"unsent-walrus {leave}")
            window.drafts.save()  # as the pause after typing does
            assert history.draft(oldest) == "the oldest chat's own draft"
            assert history.draft(None) == ""
            on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("history.db*"))
            assert f"unsent-walrus {leave}".encode() not in on_disk
            if leave == "discard":
                assert window.open_session(oldest)
                assert window.composer.text() == "the oldest chat's own draft"
            elif leave == "keep":
                qtbot.mouseClick(window.temporary_bar.keep_button, Qt.MouseButton.LeftButton)
                kept = window.session_id
                assert kept != oldest and window.chat.scratch is None
                assert window.composer.text() == "unsent-walrus keep"
                assert history.draft(kept) == "unsent-walrus keep"
                assert window.open_session(oldest)
            else:
                window.close()
        assert history.draft(oldest) == "the oldest chat's own draft"
        on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("history.db*"))
        assert b"unsent-walrus discard" not in on_disk and b"unsent-walrus close" not in on_disk

    def test_escape_after_edit_puts_back_the_draft_held_before_edit(
        self, qtbot, chat_window, router
    ) -> None:
        """Edit puts a sent message in the box; Esc gives back what was typed before Edit (and
        the draft saved is still that); sending the edit gives it back too."""
        from PySide6.QtCore import Qt

        from llamachat.tests.support import send_and_wait

        window, history = chat_window()
        send_and_wait(qtbot, window, "first")
        session_id = window.session_id
        window.composer.set_text("half a thought")
        first = history.messages(session_id)[0]["id"]
        window.messages.edit_requested.emit(first)
        assert window.composer.text() == "first"
        window.drafts.save()  # what a pause in typing or a switch of chats does
        assert history.draft(session_id) == "half a thought"
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda: window.composer.text() == "half a thought")
        window.drafts.save()
        assert history.draft(session_id) == "half a thought"

        window.messages.edit_requested.emit(first)
        window.composer.set_text("first, better")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
        qtbot.waitUntil(lambda: window.composer.text() == "half a thought")
        assert history.messages(session_id)[0]["content"] == "first, better"
        window.drafts.save()
        assert history.draft(session_id) == "half a thought"
