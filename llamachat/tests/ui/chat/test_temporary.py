"""The tests of `llamachat.ui.chat.temporary`."""

from __future__ import annotations

from PySide6.QtCore import Qt

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import send_and_wait


class TestTemporary:
    """Temporary chats: a conversation whose questions and replies never reach the history file."""

    def test_window_temporary_chat_is_never_written_until_kept(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Ctrl+Shift+N starts a temporary chat: the bar says so, nothing reaches the
        history file (its replies, versions included, live in memory), and Keep this chat
        saves it whole as an ordinary chat."""

        window, history = chat_window()
        qtbot.keyClick(
            window,
            Qt.Key.Key_N,
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
        )
        assert window.temporary_bar.isVisible() and window.chat.scratch is not None
        router.script(Reply(content="A first answer."), Reply(content="zebra-quartz answer."))
        send_and_wait(qtbot, window, "Tell me the secret-walrus word.")
        window.retry(window.messages.views()[1].message_id)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        assert history.count_sessions() == 0 and window.sidebar.session_ids() == []
        assert window.sidebar.current() is None
        on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("history.db*"))
        assert b"secret-walrus" not in on_disk and b"zebra-quartz" not in on_disk
        qtbot.mouseClick(window.temporary_bar.keep_button, Qt.MouseButton.LeftButton)
        assert not window.temporary_bar.isVisible() and window.chat.scratch is None
        [kept] = window.sidebar.session_ids()
        assert window.session_id == kept and window.sidebar.current() == kept
        path = history.messages(kept)
        assert [m["content"] for m in path] == [
            "Tell me the secret-walrus word.",
            "zebra-quartz answer.",
        ]
        assert len(path[1]["versions"]) == 2
        # Kept, it is an ordinary chat: the next reply is saved as any other.
        router.script(Reply(content="More."))
        send_and_wait(qtbot, window, "And more?")
        assert [m["content"] for m in history.messages(kept)][-1] == "More."

    def test_window_leaving_a_temporary_chat_asks_and_discards_it(
        self, chat_window, router, qtbot
    ) -> None:

        window, history = chat_window()
        asked: list[bool] = []
        answers = ["cancel", "discard", "discard"]

        def ask(closing: bool) -> str:
            asked.append(closing)
            return answers.pop(0)

        window.temporary.ask = ask
        # Nothing sent yet: leaving asks nothing.
        window.temporary.start()
        window.new_session()
        assert asked == [] and not window.temporary_bar.isVisible()
        window.temporary.start()
        router.script(Reply(content="Gone soon."))
        send_and_wait(qtbot, window, "Forget this.")
        window.new_session()  # cancelled: still the temporary chat
        assert asked == [False] and window.chat.scratch is not None
        assert [v.content() for v in window.messages.views()] == ["Forget this.", "Gone soon."]
        window.new_session()
        assert asked == [False, False] and window.chat.scratch is None
        assert window.messages.views() == [] and history.count_sessions() == 0
        window.temporary.start()
        router.script(Reply(content="Also gone."))
        send_and_wait(qtbot, window, "And this.")
        window.close()
        assert asked == [False, False, True] and history.count_sessions() == 0

    def test_a_temporary_chat_has_no_slot_files_on_our_server(
        self, chat_window, router, tmp_path
    ) -> None:
        """What llamachat's own server read of a chat is kept on disk for a stored chat only:
        a temporary chat writes nothing (its ids are its own database's, and would name a
        stored chat's file)."""
        from llamachat.config import Config
        from llamachat.router.server import ManagedServer
        from llamachat.ui.chat.temporary import ConversationApp, scratch_history

        window, history = chat_window()
        stored = ConversationApp(window.app, lambda: history)
        assert stored.slot_files() is None  # a router llamachat does not run
        server = ManagedServer(
            Config(models_dir=tmp_path / "models"),
            lock_path=tmp_path / "server.lock",
            log_path=tmp_path / "server.log",
        )
        window.app.use_router(router.url, server=server)
        temporary = ConversationApp(window.app, scratch_history)
        assert stored.slot_files() is server.slot_files is not None
        assert temporary.slot_files() is None
        server.log_file.close()
