"""The tests of `llamachat.ui.chat.conversation`."""

from __future__ import annotations

import subprocess
import sys

from llamachat.dev.scripted_router import Reply
from llamachat.ui.chat import conversation as controller


class TestConversation:
    """One conversation's actions and state, shared by the chat window and the quick window."""

    def test_conversation_controller_loads_no_widget_module(self) -> None:
        """The conversation and its reply import no widgets: a window is only their viewer."""

        code = (
            "import sys, llamachat.ui.chat.conversation\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith("
            "('PySide6.QtWidgets', 'PySide6.QtGui')))))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert out == "", f"the controller pulled in: {out}"

    def test_conversation_without_a_window_sends_saves_and_replays(
        self, conversation, router, qtbot
    ) -> None:
        """The controller alone: a message is saved, its reply streams into History, and the
        next request replays both; a `/name` loads the skill into the session."""

        chat, history = conversation(preset=lambda: "Be brief.")
        added: list = []
        started: list = []
        chat.message_added.connect(added.append)
        chat.reply_started.connect(started.append)
        router.script(Reply(content=["Hello", " there."]))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000) as ended:
            assert chat.submit("/weather Hi") == controller.SENT
        assert ended.args == ["complete", ""]
        assert [m["content"] for m in added] == ["Hi"]
        assert started[0].view is None  # nobody attached a view: the reply streams all the same
        rows = history.messages(chat.session_id)
        assert [(m["role"], m["content"], m["status"]) for m in rows] == [
            ("user", "Hi", "complete"),
            ("assistant", "Hello there.", "complete"),
        ]
        assert history.get_session(chat.session_id)["skills"] == ["weather"]
        assert chat.loaded_skills() == ["weather"]

        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("And again") == controller.SENT
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[0]["role"] == "system" and sent[0]["content"].startswith("Be brief.")
        assert "Celsius" in sent[0]["content"]
        assert [(m["role"], m["content"]) for m in sent[1:]] == [
            ("user", "Hi"),
            ("assistant", "Hello there."),
            ("user", "And again"),
        ]
        assert chat.submit("/finance-cli") == controller.HELD
        assert len(router.chat_requests()) == 2
        assert chat.loaded_skills() == ["weather", "finance-cli"]
