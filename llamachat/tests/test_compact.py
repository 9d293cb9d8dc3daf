"""The tests of `llamachat.compact`."""

from __future__ import annotations

import re

import httpx

from llamachat import compact, context, turn
from llamachat.dev.scripted_router import Reply, render
from llamachat.router.client import LLAMA_PARAMS, Client


class TestCompact:
    """Summaries of earlier messages (in pieces) and trimming, for a full context."""

    def test_compact_split_keeps_the_last_exchanges_and_trim_leaves_whole_exchanges_out(
        self,
    ) -> None:
        """`compact.split` summarizes all but the last `keep` exchanges (an earlier summary's
        count carries on); `trim_count` leaves out whole exchanges, the fewest that make room."""

        rows = [
            {"role": "system", "content": "old", "usage": {"summary_of": 10}},
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2"},
            {"role": "user", "content": "q3"},
            {"role": "assistant", "content": "a3"},
        ]
        cut = compact.split(rows, 2)
        assert [r["content"] for r in cut.kept] == ["q2", "a2", "q3", "a3"]
        assert cut.count() == 12 and compact.summary_title(cut.count()).endswith(
            "12 earlier messages"
        )
        assert compact.split(rows, 3).earlier == compact.split(rows, 5).earlier == ()
        assert compact.transcript(cut.earlier) == [
            "Summary of what came before:\nold",
            "User: q1",
            "Assistant: a1",
        ]
        cost = {"old": 0, "q1": 5, "a1": 5, "q2": 5, "a2": 5, "q3": 5, "a3": 5}
        count = compact.trim_count(rows[1:], 6, lambda row: cost[row["content"]])
        assert count == 2  # q1 and its reply: the request starts at a question
        assert compact.trim_count(rows[1:], 31, lambda row: cost[row["content"]]) is None
        lines = "a\nb\nc\n"
        assert compact.trim_text(lines, 1, lambda _line: 20) == (
            "[1 earlier line not sent]\nb\nc\n",
            1,
        )
        assert compact.trim_text(lines, 20, lambda _line: 20) == (
            "[2 earlier lines not sent]\nc\n",
            2,
        )
        assert compact.trim_text(lines, 60, lambda _line: 20) is None

    def test_compact_summarizes_a_60000_token_history_in_pieces_within_a_small_context(
        self, router
    ) -> None:
        """A 60,000-token history against a 2,048-token context: every summarizing request
        fits the context with its answer, the history is summarized in pieces, then the
        pieces' summaries in one last request, with the fixed prompt and the focus."""

        router.models["test-model"].n_ctx = 2048
        rows: list[dict] = []
        for n in range(100):
            rows.append({"role": "user", "content": f"question {n} " + "alpha beta " * 200})
            rows.append({"role": "assistant", "content": f"answer {n} " + "gamma " * 198})
        words = sum(len(re.findall(r"\w+|[^\w\s]", r["content"])) for r in rows)
        assert words >= 60_000
        router.script(*[Reply(content=f"Part {n} said little.") for n in range(400)])
        client = Client(router.url)
        tokenizer = context.Tokenizer(client, "test-model")
        budget = compact.Budget.for_context(2048, tokenizer.quick(compact.instructions("API")))
        seen: list[tuple[int, int]] = []
        summary = compact.summarize(
            compact.transcript(rows),
            compact.ask_model(client, "test-model"),
            budget=budget,
            cost=tokenizer.quick,
            focus="API",
            on_piece=lambda n, total: seen.append((n, total)),
        )
        client.close()
        requests = [r.json for r in router.chat_requests()]
        assert summary.startswith("Part ") and len(requests) == len(seen) > 2
        assert seen[-1] == (1, 1) and seen[0][1] == len(requests) - 1
        for body in requests:
            tokens = len(re.findall(r"\w+|[^\w\s]", render(body["messages"])))
            assert tokens + body["max_tokens"] <= 2048, tokens
            assert body["messages"][0]["content"].startswith(compact.SUMMARY_PROMPT)
            assert "Pay particular attention to: API" in body["messages"][0]["content"]
        assert "part 1 of" in requests[0]["messages"][0]["content"]
        assert requests[-1]["messages"][1]["content"].count("said little") == len(requests) - 1

    def test_compact_a_summary_is_asked_with_a_turn_sent_as_built(self, router) -> None:
        """Compaction sends a `Turn` like every other request: its instructions as the system
        message, the material as the question, no tools; the bytes on the wire are its body."""

        router.script(Reply(content="- the user likes tea"))
        client = Client(router.url)
        try:
            summary = compact.ask_model(client, "test-model")("Summarize.", "User: tea", 128)
        finally:
            client.close()
        assert summary == "- the user likes tea"
        [sent] = router.chat_requests()
        expected = turn.Turn(
            "test-model",
            system=(turn.Part("system", "Summarize."),),
            question=(turn.Part("user", "User: tea"),),
            params={**LLAMA_PARAMS, "max_tokens": 128},
        )
        assert sent.body == httpx.Request("POST", router.url, json=expected.body()).content
        assert "tools" not in sent.json
