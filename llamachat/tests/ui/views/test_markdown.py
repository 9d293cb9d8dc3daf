"""The tests of `llamachat.ui.views.markdown`."""

from __future__ import annotations

import re

import pytest
from PySide6.QtGui import QTextDocument, QTextFormat

from llamachat.dev.bench_render import sample_tokens
from llamachat.tests.support import (
    TRICKY_STREAMS,
    longest_unbroken_run,
    shown_text,
    stream_markdown,
)
from llamachat.ui.views.document import DocumentWriter
from llamachat.ui.views.markdown import (
    BREAK,
    MAX_RUN,
    StreamingMarkdown,
    break_text_runs,
    render_markdown,
)
from llamachat.ui.views.message import MessageView


class TestMarkdown:
    """Incremental markdown to Qt rich-text HTML for streamed replies."""

    def test_markdown_fence_with_blank_lines_inside_stays_one_block(self) -> None:
        text = "Intro line.\n\n```python\na = 1\n\n\nb = 2\n```\n\nAfter the code.\n"
        md, updates = stream_markdown(text)
        finished = [u.finished for u in updates if u.finished]
        # Intro, the whole fence, the closing paragraph: the blank lines in the fence split nothing.
        assert len(finished) == 3
        assert finished[1].count("Copy code") == 1
        assert "a" in finished[1] and "b" in finished[1]
        assert md.code(0) == "a = 1\n\n\nb = 2\n"
        assert md.code_count() == 1

    def test_markdown_finished_blocks_are_rendered_exactly_once(self) -> None:
        blocks = ["First paragraph, *emphasis*.", "- one\n- two\n- three", "## A heading", "Last."]
        text = "\n\n".join(blocks) + "\n"
        md, updates = stream_markdown(text)
        finished = [u.finished for u in updates if u.finished]
        for marker in ("First paragraph", "<li>two</li>", "A heading", "Last."):
            assert sum(marker in html for html in finished) == 1, marker
        # Every character went through a finished render once, never twice.
        assert md.stats.finished_chars == len(text)
        assert md.stats.finished_renders == len(finished) <= len(blocks)
        # The tail never held more than one block's worth of text.
        longest = max(len(b) for b in blocks) + 2
        assert md.stats.tail_chars <= md.stats.tail_renders * longest
        assert md.text() == text

    def test_markdown_model_html_is_shown_as_text_not_interpreted(self) -> None:

        out = render_markdown('Say <b>x</b> <script>alert(1)</script> ![pic](/etc/passwd "t")\n')
        assert "&lt;b&gt;x&lt;/b&gt;" in out
        assert "<b>" not in out and "<script" not in out
        # Images are never loaded: they become a plain link.
        assert "<img" not in out and 'href="/etc/passwd"' in out

    @pytest.mark.parametrize(
        "text",
        [
            "a" * 30_000,
            "&" * 3_000,
            "**a**" * 2_000,
            "x`" * 3_000,
            "```\n" + "b" * 3_000 + "\n```\n",
        ],
    )
    def test_markdown_long_unbroken_text_gets_a_break_every_max_run_characters(
        self, text: str
    ) -> None:
        """Qt lays out a run with no break opportunity in quadratic time: runs are broken."""

        out = render_markdown(text)
        shown = shown_text(out)
        assert longest_unbroken_run(shown) <= MAX_RUN
        assert longest_unbroken_run(shown.replace(BREAK, "")) > MAX_RUN  # the breaks did it
        assert "<" not in shown_text(out.replace(BREAK, "")).replace("&lt;", "")  # tags whole

        pieces, run, shown = [text[i : i + 7] for i in range(0, len(text), 7)], 0, ""
        for piece in pieces:  # streamed plain text, as the reasoning panel gets it
            piece, run = break_text_runs(piece, run)
            shown += piece
        assert shown.replace(BREAK, "") == text and longest_unbroken_run(shown) <= MAX_RUN

    def test_markdown_prose_and_short_words_get_no_breaks(self) -> None:

        text = "Words, [a link](https://example.com/a/b?c=d) and `code` " * 200
        assert BREAK not in render_markdown(text)

    def test_markdown_code_block_is_highlighted_only_once_closed(self) -> None:

        md = StreamingMarkdown()
        md.append("```python\ndef f():\n    return 1\n")
        open_update = md.flush()
        code_part = open_update.tail.split("<pre")[1]
        assert "def f" in code_part and "<font" not in code_part
        md.append("```\n")
        closed = md.flush()
        assert "<font color=" in closed.finished.split("<pre")[1] and closed.tail == ""

    def test_markdown_copy_links_return_each_blocks_raw_code(self) -> None:

        md = StreamingMarkdown()
        first = 'if a < b and c > "d":\n    x = a & b\n'
        second = "<html>&amp;</html>\n"
        for piece in ("```python\n", first, "```\n\ntext\n\n~~~html\n", second, "~~~\n"):
            md.append(piece)
            md.flush()
        md.finish()
        assert md.code(0) == first and md.code(1) == second
        assert md.code(2) == "" and md.code_count() == 2

    def test_markdown_copy_link_numbers_follow_the_blocks(self) -> None:

        out = render_markdown("```\na\n```\n\n```\nb\n```\n")
        assert out.index('href="copy:0"') < out.index('href="copy:1"')

    def test_streamed_rules_stay_as_a_complete_reply_shows_them(self, qapp) -> None:
        """A thematic break finished while streaming is kept when the text after it streams
        in (its empty block used to take the tail and lose the rule): token by token the
        reply shows the rules a complete one does."""

        text = "***\n\nFirst part.\n\n---\n\nSecond part, **bold**.\n\n- - -\n\nEnd."
        rules = lambda view: sum(
            1
            for n in range(view.text_document().blockCount())
            if view.text_document()
            .findBlockByNumber(n)
            .blockFormat()
            .hasProperty(QTextFormat.Property.BlockTrailingHorizontalRulerWidth)
        )
        live = MessageView({"role": "assistant", "status": "streaming", "content": ""})
        for token in re.findall(r"\S+|\s+", text):
            live.append_content(token)
        assert rules(live) == 3
        live.finish()
        whole = MessageView({"role": "assistant", "status": "complete", "content": text})
        assert rules(live) == rules(whole) == 3
        assert live.text_document().toPlainText() == whole.text_document().toPlainText()

    @pytest.mark.parametrize(
        "tokens",
        [sample_tokens(400, seed=seed) for seed in (1, 2, 3, 9)] + TRICKY_STREAMS,
        ids=[f"sample-{seed}" for seed in (1, 2, 3, 9)]
        + [f"tricky-{n}" for n in range(len(TRICKY_STREAMS))],
    )
    def test_plain_appends_show_exactly_what_rendering_the_tail_shows(
        self, qapp, tokens: list[str]
    ) -> None:
        """Words appended as plain text leave the document as a render of the open tail
        would, token after token and at the end."""

        fast, full = StreamingMarkdown(), StreamingMarkdown(plain_appends=False)
        fast_doc, full_doc = QTextDocument(), QTextDocument()
        writers = [(fast, DocumentWriter(fast_doc)), (full, DocumentWriter(full_doc))]
        for n, token in enumerate(tokens):
            for md, writer in writers:
                md.append(token)
                writer.write(md.flush())
            assert fast_doc.toHtml() == full_doc.toHtml(), repr("".join(tokens[: n + 1]))
        for md, writer in writers:
            writer.write(md.finish(), final=True)
        assert fast_doc.toHtml() == full_doc.toHtml()
        assert fast.text() == full.text() == "".join(tokens)
        assert full.stats.plain_appends == 0

    def test_plain_appends_serve_most_tokens_of_prose_and_code(self) -> None:
        """The fast path is the common one: most tokens of a usual reply take it, and an open
        code block's "Copy code" still copies all of its code."""

        md = StreamingMarkdown()
        tokens = sample_tokens(2000, seed=9)
        for token in tokens:
            md.append(token)
            md.flush()
        assert md.stats.plain_appends > len(tokens) / 2
        code = StreamingMarkdown()
        for token in ["```python\n", "def", " f(x):", "\n", "    return", " x", " + 1"]:
            code.append(token)
            code.flush()
        assert code.stats.plain_appends >= 3
        assert code.code(0) == "def f(x):\n    return x + 1"
