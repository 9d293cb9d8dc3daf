"""The tests of `llamachat.ui.views.overflow`."""

from __future__ import annotations

from llamachat import context
from llamachat.tests.support import overflow_buttons
from llamachat.ui.views.overflow import OverflowPanel, fixed_context


class TestOverflow:
    """The over-context panel: the ways out that can help, and why none can."""

    def test_the_panel_offers_only_what_can_help_and_says_why(
        self, chat_window, router, qtbot
    ) -> None:
        """Two exchanges: compacting keeps them all, so "Compact and send" is not offered
        and the panel says why; with more, it is (issue 38, item 4)."""
        router.models["test-model"].n_ctx = 2048
        window, history = chat_window()
        session = history.create_session("chat", "test-model", prompt_name="Default")
        for n in range(2):
            history.add_message(session, "user", f"question {n}")
            history.add_message(session, "assistant", f"answer {n}")
        window.open_session(session)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and watch.breakdown().exact)
        long = "word " * 1900
        window.composer.set_text(long)
        window.send()
        panel = window.overflow
        assert panel.isVisible() and window.composer.text() == long
        buttons = overflow_buttons(panel)
        assert "Compact and send" not in buttons, buttons
        assert "no more than its last 2 exchanges" in panel.text.text()

        history.add_message(session, "user", "question 2")
        history.add_message(session, "assistant", "answer 2")
        window.open_session(session)
        window.composer.set_text(long)
        qtbot.waitUntil(lambda: watch.breakdown().exact)
        window.send()
        assert overflow_buttons(panel)[0] == "Compact and send"
        assert "Compacting cannot help" not in panel.text.text()

    def test_raising_the_context_is_not_offered_while_server_args_fix_it(self, qtbot) -> None:
        """server_args' --ctx-size overrides a preset's: the panel says so instead of a button."""
        assert fixed_context(("--ctx-size", "2048", "-t", "2")) == 2048
        assert fixed_context(("-c", "4096")) == 4096 and fixed_context(("-t", "2")) is None
        parts = context.Breakdown((("history", 3000), ("user", 100)), exact=True)
        overflow = context.Overflow("smol", parts, 2048, 512, trained=8192)
        panel = OverflowPanel()
        qtbot.addWidget(panel)
        panel.show_overflow(overflow, managed=True, fixed_context=2048)
        assert not any(b.startswith("Raise") for b in overflow_buttons(panel))
        assert "server_args sets --ctx-size 2,048" in panel.text.text()
        panel.show_overflow(overflow, managed=True)
        assert "Raise the context to 4,096" in overflow_buttons(panel)
