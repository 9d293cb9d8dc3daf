"""The tests of `llamachat.tools.web_search`."""

from __future__ import annotations

import datetime as dt
import socket

import httpx
import pytest

from llamachat import skills, tools, turn
from llamachat.config import Config
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.router.client import Client
from llamachat.tests.support import stream_events, user_turn, web_search_tool


class TestWebSearch:
    """Web search for the model's `web_search` tool, through a SearXNG instance's JSON API."""

    def test_search_lists_top_results_compactly_deduplicated_and_capped(self, searx) -> None:
        from llamachat.tools import web_search

        searx.results.insert(1, dict(searx.results[0]))
        found = web_search.search(searx.url, "llamas", max_results=3)
        assert [r["url"] for r in found] == [f"https://example.org/{n}" for n in (1, 2, 3)]
        assert found[0] == {
            "title": "Result 1",
            "url": "https://example.org/1",
            "snippet": "Snippet number 1 with spaces",
        }
        assert searx.queries == ["llamas"]
        text = web_search.result_text("llamas", found)
        assert text.splitlines()[0] == 'Search results for "llamas":'
        assert "1. Result 1\n   https://example.org/1\n   Snippet number 1 with spaces" in text
        assert "Result 4" not in text

    def test_search_long_snippets_are_cut_with_an_ellipsis(self, searx) -> None:
        from llamachat.tools import web_search

        searx.results[0]["content"] = "word " * 500
        snippet = web_search.search(searx.url, "q")[0]["snippet"]
        assert len(snippet) == web_search.SNIPPET_CHARS and snippet.endswith("…")

    @pytest.mark.parametrize(
        ("mode", "reason"),
        [
            ("error", "answered HTTP 500"),
            ("html", "did not answer with JSON"),
            ("forbidden", "enable the json format"),
            ("slow", "did not answer within 0.3 s"),
        ],
    )
    def test_search_failures_raise_search_error_saying_why(self, searx, mode, reason) -> None:
        from llamachat.tools import web_search

        searx.mode = mode
        with pytest.raises(web_search.SearchError, match=reason):
            web_search.search(searx.url, "q", timeout=0.3)

    def test_search_unreachable_engine_raises_search_error(self) -> None:

        from llamachat.tools import web_search

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(web_search.SearchError, match="could not be reached"):
            web_search.search(f"http://127.0.0.1:{port}", "q")

    def test_search_empty_results_give_a_clear_tool_result(self, searx) -> None:
        from llamachat.tools import web_search

        searx.mode = "empty"
        assert web_search.search(searx.url, "nothing") == []
        assert web_search.result_text("nothing", []).startswith('No results for "nothing".')

    def test_search_date_note_has_day_granularity(self) -> None:

        from llamachat.tools import web_search

        assert (
            web_search.date_note(dt.date(2026, 11, 30))
            == "Today's date is Monday, 30 November 2026."
        )
        assert web_search.date_note() == web_search.date_note(dt.date.today())

    def test_search_parse_query_rejects_malformed_arguments(self) -> None:
        from llamachat.tools import web_search

        assert web_search.parse_query('{"query": " llamas "}') == "llamas"
        for bad in ("{not json", "[]", '{"q": "x"}', '{"query": ""}'):
            with pytest.raises(ValueError):
                web_search.parse_query(bad)

    def test_backend_search_round_runs_search_and_answers_the_call(self, router, searx) -> None:
        from llamachat.tools import web_search

        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "llama news"}', id="c1")]),
            Reply(content="Here you go."),
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)]}
        )
        kinds = [k for k, _ in events]
        assert kinds == ["search_start", "search_done", "content", "content", "content", "stats"]
        assert events[0] == ("search_start", "llama news")
        done = events[1][1]
        assert done["query"] == "llama news" and done["error"] == ""
        assert [r["url"] for r in done["results"]] == [
            f"https://example.org/{n}" for n in range(1, 6)
        ]
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [web_search.TOOL_SCHEMA]
        assert second["tools"] == [web_search.TOOL_SCHEMA]  # round 2 of 2 still offers tools
        assistant, tool = second["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert assistant["tool_calls"] == [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "web_search", "arguments": '{"query": "llama news"}'},
            }
        ]
        assert tool["role"] == "tool" and tool["tool_call_id"] == "c1"
        assert "1. Result 1\n   https://example.org/1" in tool["content"]
        assert "last available tool use" not in tool["content"]

    def test_backend_after_max_searches_a_final_round_offers_no_tools(self, router, searx) -> None:

        call = ToolCall("web_search", '{"query": "again"}')
        router.script(
            Reply(tool_calls=[call]),
            Reply(tool_calls=[call]),
            Reply(tool_calls=[call]),
            Reply(content="never asked"),
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)], "rounds": 2}
        )
        requests = [r.json for r in router.chat_requests()]
        assert len(requests) == 3
        assert "tools" in requests[0] and "tools" in requests[1]
        assert "tools" not in requests[2]
        assert [k for k, _ in events].count("search_start") == 2
        tool_results = [m for m in requests[2]["messages"] if m["role"] == "tool"]
        assert len(tool_results) == 2
        assert skills.NO_MORE_TOOLS not in tool_results[0]["content"]
        assert tool_results[1]["content"].endswith("\n\n" + skills.NO_MORE_TOOLS)
        assert router.pending() == 1

    @pytest.mark.parametrize(
        ("mode", "reason"),
        [
            ("error", "answered HTTP 500"),
            ("html", "did not answer with JSON"),
            ("slow", "did not answer within 0.3 s"),
            ("forbidden", "HTTP 403"),
        ],
    )
    def test_backend_search_failures_become_tool_results(self, router, searx, mode, reason) -> None:

        searx.mode = mode
        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "q"}', id="s1")]),
            Reply(content=["answered anyway"]),
        )
        search = tools.WebSearch(searx.url, timeout=0.3)
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [search], "rounds": 1}
        )
        done = dict(events)["search_done"]
        assert reason in done["error"] and done["results"] == []
        assert ("content", "answered anyway") in events
        tool = router.chat_requests()[1].json["messages"][-1]
        assert tool["tool_call_id"] == "s1"
        assert tool["content"].startswith('error: the web search for "q" failed:')
        assert reason in tool["content"]

    def test_backend_empty_search_results_tell_the_model(self, router, searx) -> None:

        searx.mode = "empty"
        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "zzz"}')]), Reply(content="nothing")
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)]}
        )
        assert dict(events)["search_done"] == {"query": "zzz", "results": [], "error": ""}
        tool = router.chat_requests()[1].json["messages"][-1]
        assert tool["content"].startswith('No results for "zzz".')

    def test_backend_search_date_is_a_part_of_the_turn_and_the_client_adds_none(
        self, router, searx
    ) -> None:
        """Today's date is in the system message a turn is built with while web search is on,
        once; the client sends the turn as built and puts no date in one built without."""
        from llamachat.tools import web_search

        note = web_search.date_note()
        cfg = Config(search_url=searx.url)
        system = turn.system_parts("Be brief.", search_on=True, store=None)
        dated = turn.build_turn(cfg, model="test-model", system=system, messages=user_turn())
        assert dated.system_message() == f"Be brief.\n\n{note}"
        bare = turn.Turn("test-model", history=tuple(user_turn()), tools=dated.tools, max_rounds=1)
        for request in (dated, bare):
            client = Client(router.url)
            try:
                list(client.stream_chat(request))
            finally:
                client.close()
        first, second = router.chat_requests()
        assert first.body == httpx.Request("POST", router.url, json=dated.body()).content
        assert second.json["messages"] == user_turn() and second.json["tools"]

    def test_backend_disabled_search_offers_no_tools_and_runs_no_loop(self, router, searx) -> None:
        """Web search off (the config's key, or the chat's toggle): no tool, no loop."""

        off = Config(search_url=searx.url, search_enabled=False)
        toggled = Config(search_url=searx.url)
        for request in (
            turn.build_turn(off, model="test-model", system=(), messages=user_turn()),
            turn.build_turn(
                toggled, model="test-model", system=(), messages=user_turn(), search_on=False
            ),
        ):
            assert request.tools == () and request.max_rounds == 0
            client = Client(router.url)
            try:
                list(client.stream_chat(request))
            finally:
                client.close()
        assert all("tools" not in sent.json for sent in router.chat_requests())
