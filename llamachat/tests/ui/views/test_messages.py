"""The tests of `llamachat.ui.views.messages`."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import QToolButton

from llamachat.dev.bench_render import sample_tokens
from llamachat.tests.support import longest_unbroken_run
from llamachat.ui.views.markdown import BREAK, MAX_RUN
from llamachat.ui.views.message import open_link


class TestMessages:
    """The conversation: a scrolling column of messages, built to stay fast at 100,000 tokens."""

    def test_conversation_streams_20000_tokens_without_crash(self, messages_view, qtbot) -> None:
        # PySide6 6.12.0 under Python < 3.12 aborted after a few thousand streamed tokens.

        tokens = sample_tokens(20_000)
        reply = messages_view.append_message({"id": 1, "role": "assistant", "status": "streaming"})
        for start in range(0, len(tokens), 500):
            # The stream worker hands over a burst per frame.
            with qtbot.waitSignal(reply.rendered, timeout=10_000):
                reply.append_content("".join(tokens[start : start + 500]))
        reply.append_content("\n\nThe last words.")
        reply.finish()
        assert reply.content() == "".join(tokens) + "\n\nThe last words."
        assert reply.render_count >= 40
        assert reply.text_document().toPlainText().rstrip().endswith("The last words.")

    def test_conversation_one_character_repeated_is_laid_out_with_breaks_and_copied_without(
        self, messages_view, qtbot
    ) -> None:
        """A degenerate reply (and reasoning) of one character: its layout has break
        opportunities (rendering stays linear), its text and copies are what the model sent."""

        saved = messages_view.append_message(
            {"id": 1, "role": "assistant", "content": "a" * 200_000, "reasoning": "r" * 50_000}
        )
        streamed = messages_view.append_message({"id": 2, "role": "assistant"})
        for _ in range(100):
            streamed.append_reasoning("t" * 997)
        with qtbot.waitSignal(streamed.rendered, timeout=10_000):
            for _ in range(100):
                streamed.append_content("b" * 997)
        streamed.finish()
        for view, content, reasoning in (
            (saved, "a" * 200_000, "r" * 50_000),
            (streamed, "b" * 99_700, "t" * 99_700),
        ):
            assert view.content() == content and view.reasoning() == reasoning
            for document in (view.text_document(), view._reasoning_body.document()):
                assert longest_unbroken_run(document.toPlainText()) <= MAX_RUN
            body = view._body
            body.selectAll()
            copied = body.createMimeDataFromSelection()
            assert BREAK not in copied.text() and copied.text().strip() == content
            body.setTextCursor(QTextCursor(body.document()))

    def test_conversation_append_renders_the_burst_at_once(self, messages_view, qtbot) -> None:
        reply = messages_view.append_message({"id": 1, "role": "assistant", "status": "streaming"})
        burst = "".join(f"word{number} " for number in range(1_000))
        reply.append_content(burst)
        assert reply.render_count == 1
        assert "word999" in reply.text_document().toPlainText()

    def test_conversation_model_html_appears_literally(self, messages_view, qtbot) -> None:
        view = messages_view.append_message(
            {"id": 1, "role": "assistant", "content": "Use <b>x</b> here.", "status": "complete"}
        )
        assert "Use <b>x</b> here." in view.text_document().toPlainText()

    def test_conversation_streamed_reply_matches_one_shot_render(
        self, messages_view, qtbot
    ) -> None:
        text = (
            "# Title\n\nA *para* with `code`.\n\n- a\n- b\n\n1. one\n\n2. two\n\n"
            "```python\ndef f(x):\n\n    return x < 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
            "> quote\n\nend\n"
        )
        streamed = messages_view.append_message(
            {"id": 1, "role": "assistant", "status": "streaming"}
        )
        for char in text:
            streamed.append_content(char)
        streamed.finish()
        whole = messages_view.append_message(
            {"id": 2, "role": "assistant", "content": text, "status": "complete"}
        )

        def lines(view) -> list[str]:
            return [
                line for line in view.text_document().toPlainText().splitlines() if line.strip()
            ]

        assert lines(streamed) == lines(whole)
        heading = streamed.text_document().begin()
        assert heading.text() == "Title" and heading.blockFormat().headingLevel() == 1

    def test_conversation_copy_code_link_puts_raw_code_on_clipboard(
        self, messages_view, qtbot
    ) -> None:

        code = "print('<hi>' & 1)\n"
        view = messages_view.append_message(
            {
                "id": 1,
                "role": "assistant",
                "content": f"```python\n{code}```\n",
                "status": "complete",
            }
        )
        assert 'href="copy:0"' in view.text_document().toHtml()
        view._body.anchorClicked.emit(QUrl("copy:0"))
        assert QGuiApplication.clipboard().text() == code
        # The link says it copied, for a moment.
        assert "✓ Copied!" in view.text_document().toPlainText()
        assert "Copy code" not in view.text_document().toPlainText()
        qtbot.waitUntil(lambda: "Copy code" in view.text_document().toPlainText(), timeout=3000)
        assert "✓ Copied!" not in view.text_document().toPlainText()

    def test_conversation_long_code_lines_wrap_inside_the_reply(self, messages_view, qtbot) -> None:
        """A code line longer than the reply is wide wraps (indentation kept), so none of it is
        cut off at the edge; Copy code still copies it as one line."""

        line = "result = compute(" + ", ".join(f"argument_{n}" for n in range(40)) + ")"
        code = f"def f():\n    {line}\n"
        messages_view.resize(500, 400)
        view = messages_view.append_message(
            {
                "id": 1,
                "role": "assistant",
                "content": f"```python\n{code}```\n",
                "status": "complete",
            }
        )
        qtbot.waitUntil(view.isVisible)
        document = view.text_document()
        assert document.size().width() <= view._body.viewport().width() + 1
        assert document.toPlainText().count("argument_39") == 1
        view._body.anchorClicked.emit(QUrl("copy:0"))
        assert QGuiApplication.clipboard().text() == code

    def test_conversation_reasoning_collapses_once_the_answer_starts(
        self, messages_view, qtbot
    ) -> None:

        reply = messages_view.append_message({"id": 3, "role": "assistant", "status": "streaming"})
        reply.append_reasoning("Let me think about ")
        reply.append_reasoning("this carefully.")
        qtbot.waitUntil(lambda: reply.reasoning_expanded() is True)
        qtbot.waitUntil(lambda: "carefully" in reply._reasoning_body.toPlainText())
        reply.append_content("The answer is 42.")
        qtbot.waitUntil(lambda: reply.reasoning_expanded() is False)
        toggle = next(
            b for b in reply.findChildren(QToolButton) if b.accessibleName() == "Show reasoning"
        )
        assert toggle.text().startswith("Thought for ")
        qtbot.mouseClick(toggle, Qt.MouseButton.LeftButton)
        assert reply.reasoning_expanded() is True
        assert reply.reasoning() == "Let me think about this carefully."

    def test_conversation_links_open_only_for_http_and_https(self, messages_view) -> None:

        for url in ("file:///etc/passwd", "javascript:alert(1)", "copy:0", "/tmp/x"):
            assert open_link(QUrl(url)) is False

    def test_conversation_stats_line_shows_speed_tokens_and_time(self, messages_view) -> None:
        reply = messages_view.append_message({"id": 1, "role": "assistant", "content": "ok"})
        reply.set_stats(
            {"completion_tokens": 412}, {"predicted_per_second": 38.21, "predicted_ms": 1200.0}
        )
        assert reply._footer.figures() == "38.2 tok/s · 412 tokens · 1.2 s"

    def test_conversation_5000_messages_show_newest_first_and_load_older_on_scroll(
        self, messages_view, qtbot
    ) -> None:
        messages = [
            {
                "id": n,
                "role": "user" if n % 2 else "assistant",
                "content": f"Message number {n}.\n\nSome more text for message {n}.",
                "status": "complete",
            }
            for n in range(1, 5001)
        ]
        messages_view.load_messages(messages)
        built = messages_view.views()
        assert len(built) < 50
        assert built[-1].message_id == 5000
        assert "Message number 5000." in built[-1].text_document().toPlainText()
        bar = messages_view.verticalScrollBar()
        qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
        qtbot.waitUntil(lambda: not messages_view._page_timer.isActive())
        before = len(messages_view.views())
        oldest = messages_view.views()[0]
        bar.setValue(0)
        shown_at = oldest.y() - bar.value()
        qtbot.waitUntil(lambda: len(messages_view.views()) > before)
        qtbot.waitUntil(lambda: not messages_view._page_timer.isActive())
        qtbot.wait(200)
        # What the user was looking at stays put while older messages arrive above it.
        assert abs((oldest.y() - bar.value()) - shown_at) <= 2
        assert messages_view.views()[0].message_id < oldest.message_id
        assert messages_view.unloaded_count() + len(messages_view.views()) == 5000

    def test_conversation_follows_the_stream_only_while_at_the_bottom(
        self, messages_view, qtbot
    ) -> None:
        for n in range(30):
            messages_view.append_message({"id": n, "role": "user", "content": f"line {n}\n\nmore"})
        bar = messages_view.verticalScrollBar()
        qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
        reply = messages_view.append_message({"id": 99, "role": "assistant", "status": "streaming"})
        reply.append_content("para one\n\npara two\n\npara three\n\n")
        qtbot.waitUntil(lambda: reply.render_count > 0 and bar.value() == bar.maximum())
        bar.setValue(bar.maximum() // 2)
        held = bar.value()
        old_max = bar.maximum()
        for n in range(20):
            reply.append_content(f"more text {n}\n\n")
        qtbot.waitUntil(lambda: bar.maximum() > old_max)
        assert bar.value() == held
        messages_view.scroll_to_bottom()
        reply.append_content("and the end\n\n")
        qtbot.waitUntil(lambda: "and the end" in reply.text_document().toPlainText())
        qtbot.waitUntil(lambda: bar.value() == bar.maximum())
