"""The tests of `llamachat.router.client`."""

from __future__ import annotations

import copy
import json
import logging
import socket
import threading

import httpx
import pytest

from llamachat import skills
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter, ToolCall
from llamachat.router import client as backend
from llamachat.router.client import Client, ServerError
from llamachat.tests.support import (
    SMOL_ID,
    finance_skill_store,
    skill_tools_of,
    stream_events,
    stream_reply,
    turn_of,
    user_turn,
    wait_for,
    web_search_tool,
)


class TestClient:
    """The HTTP client for the router: errors, keys, cancelling, and the tool loop."""

    def test_backend_http_error_raises_server_error_with_type_and_token_counts(
        self, router
    ) -> None:

        message = "request (9412 tokens) exceeds the available context size (8192 tokens)"
        router.script(
            Reply(
                status=400,
                error={
                    "type": "exceed_context_size_error",
                    "message": message,
                    "n_prompt_tokens": 9412,
                    "n_ctx": 8192,
                },
            )
        )
        with pytest.raises(backend.ServerError) as info:
            stream_events(router.url, {"messages": user_turn()})
        err = info.value
        assert (err.status, err.error_type, err.message) == (
            400,
            "exceed_context_size_error",
            message,
        )
        assert err.details == {"n_prompt_tokens": 9412, "n_ctx": 8192}
        assert str(err) == message

    def test_backend_non_json_http_error_keeps_status_and_body_text(self, router) -> None:

        router.script(Reply(status=502, body="Bad Gateway from the proxy"))
        with pytest.raises(backend.ServerError, match="HTTP 502: Bad Gateway from the proxy"):
            stream_events(router.url, {"messages": user_turn()})

    def test_backend_model_that_fails_to_load_gives_the_servers_message(self) -> None:

        with ScriptedRouter([Model("broken", fail_exit_code=1)]) as r:
            with pytest.raises(backend.ServerError, match="failed to load") as info:
                stream_events(r.url, {"model": "broken", "messages": user_turn()})
            assert info.value.status == 500

    def test_backend_connection_refused_names_the_url_and_what_to_do(self) -> None:

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(backend.RouterUnreachable) as info:
            stream_events(url, {"messages": user_turn()})
        assert url in str(info.value)
        assert "Start llama-server" in str(info.value)
        assert "router_url" in str(info.value)

    def test_backend_api_key_goes_in_the_header_only(self, caplog) -> None:

        caplog.set_level(logging.DEBUG)
        key = "sk-test-0123456789"
        with ScriptedRouter(api_key=key) as r:
            events = stream_events(r.url, {"messages": user_turn()}, api_key=key)
            assert events[0] == ("content", "echo: ")
            assert r.chat_requests()[0].headers["authorization"] == f"Bearer {key}"
            assert key not in repr(r.chat_requests()[0].json)
            r.script(Reply(status=500, error={"message": "boom"}))
            with pytest.raises(backend.ServerError) as server_err:
                stream_events(r.url, {"messages": user_turn()}, api_key=key)
            with pytest.raises(backend.ServerError) as auth_err:
                stream_events(r.url, {"messages": user_turn()}, api_key="wrong-key-987")
            assert auth_err.value.status == 401
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(backend.RouterUnreachable) as unreachable:
            stream_events(url, {"messages": user_turn()}, api_key=key)
        for err in (server_err.value, auth_err.value, unreachable.value):
            assert key not in str(err) and key not in repr(err.args)
        assert "wrong-key-987" not in str(auth_err.value)
        assert key not in caplog.text

    def test_backend_cancel_event_ends_a_silent_stream_and_keeps_what_arrived(self, router) -> None:

        router.script(Reply(content=["a", "b", "c"], stall_after=3))
        cancel = threading.Event()
        client = backend.Client(router.url, idle_timeout=None)
        got = []
        for event in client.stream_chat(turn_of(user_turn()), cancel=cancel):
            got.append(event)
            if event == ("content", "b"):
                cancel.set()
        assert got == [("content", "a"), ("content", "b")]
        client.close()

    def test_backend_cancel_while_the_router_loads_the_model_returns_at_once(self) -> None:

        with ScriptedRouter([Model("huge")], load_delay=60) as r:
            cancel = threading.Event()
            client = backend.Client(r.url)
            timer = threading.Timer(0.2, cancel.set)
            timer.start()
            events = list(client.stream_chat(turn_of(user_turn(), model="huge"), cancel=cancel))
            # The reply cannot exist before the load ends: returning now proves the wait
            # for the response headers itself was cut short.
            assert events == []
            assert r.status("huge") == "loading"
            client.close()

    def test_backend_base_url_with_v1_suffix_reaches_the_same_endpoints(self, router) -> None:

        client = backend.Client(router.url + "/v1/")
        assert client.api_base == router.url + "/v1" and client.root == router.url
        events = list(client.stream_chat(turn_of(user_turn("v1"))))
        assert events[0] == ("content", "echo: ")
        assert router.chat_requests()[0].path == "/v1/chat/completions"
        client.close()

    def test_backend_an_error_web_page_shows_its_status_and_title_and_logs_the_page(
        self, router, caplog
    ) -> None:
        """A proxy's 502 page: the error is the status and the page's title (else its first
        line of text), not its HTML; the page's start goes to the log, the key masked."""
        key = "sk-page-secret-0123456789"
        filler = "x" * 5000
        page = (
            "<!DOCTYPE html>\n<html><head><meta charset=utf-8>"
            f"<title>502 Bad Gateway &amp; more</title><style>{filler}</style></head>"
            f"<body><h1>Bad Gateway</h1><p>upstream said {key}</p><p>the end</p></body></html>"
        )
        untitled = "<html><body>\n<h1>Internal <b>Server</b> Error</h1><p>details</p></body></html>"
        router.script(Reply(status=502, body=page), Reply(status=500, body=untitled))
        client = backend.Client(router.url, api_key=key)
        seen = []
        try:
            for _ in range(2):
                with pytest.raises(ServerError) as caught:
                    list(client.stream_chat(turn_of(user_turn())))
                seen.append((caught.value.status, caught.value.message))
        finally:
            client.close()
        url = router.url + "/v1/chat/completions"
        assert seen == [
            (502, f"{url} answered HTTP 502 with an error page: 502 Bad Gateway & more"),
            (500, f"{url} answered HTTP 500 with an error page: Internal Server Error"),
        ]
        logged = caplog.text
        # The page's start only (PAGE_LOG_CHARS): the end of a 5 KB page is not logged.
        assert "x" * 3000 in logged and "<p>the end</p>" not in logged and "details" in logged
        assert key not in logged

    def test_backend_tool_call_fragments_accumulate_by_index(self, router, searx) -> None:

        def delta(tc: dict) -> str:
            return (
                "data: "
                + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]})
                + "\n\n"
            )

        router.script(
            Reply(
                raw=[
                    delta(
                        {
                            "index": 0,
                            "id": "a",
                            "type": "function",
                            "function": {"name": "web_search", "arguments": ""},
                        }
                    ),
                    delta(
                        {
                            "index": 1,
                            "id": "b",
                            "type": "function",
                            "function": {"name": "web_search", "arguments": '{"qu'},
                        }
                    ),
                    delta({"index": 0, "function": {"arguments": '{"query": '}}),
                    delta({"index": 1, "function": {"arguments": 'ery": "second"}'}}),
                    delta({"index": 0, "function": {"arguments": '"first"}'}}),
                    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
                ]
            ),
            Reply(content="done"),
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)]}
        )
        assert [p for k, p in events if k == "search_start"] == ["first", "second"]
        second = router.chat_requests()[1].json["messages"]
        calls = second[-3]["tool_calls"]
        assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
            ("a", '{"query": "first"}'),
            ("b", '{"query": "second"}'),
        ]
        assert [(m["tool_call_id"], m["content"].splitlines()[0]) for m in second[-2:]] == [
            ("a", 'Search results for "first":'),
            ("b", 'Search results for "second":'),
        ]
        assert searx.queries == ["first", "second"]

    def test_backend_unknown_tool_and_malformed_arguments_get_error_results(
        self, router, searx
    ) -> None:

        router.script(
            Reply(
                tool_calls=[
                    ToolCall("calculator", '{"x": 1}', id="u1"),
                    ToolCall("web_search", "{not json", id="m1"),
                ]
            ),
            Reply(content="ok"),
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)]}
        )
        assert ("content", "ok") in events
        assert not any(k == "search_start" for k, _ in events)
        messages = router.chat_requests()[1].json["messages"]
        assistant, unknown, malformed = messages[-3:]
        assert unknown["tool_call_id"] == "u1"
        assert unknown["content"].startswith("error: unknown tool 'calculator'")
        assert "web_search" in unknown["content"]
        assert malformed["tool_call_id"] == "m1"
        assert malformed["content"].startswith("error: the web_search arguments could not be used")
        # Garbage arguments are not replayed: llama.cpp would reject the whole request.
        assert assistant["tool_calls"][1]["function"]["arguments"] == "{}"
        assert searx.queries == []

    def test_backend_reasoning_is_replayed_on_the_tool_call_message(self, router, searx) -> None:

        router.script(
            Reply(
                reasoning=["I should ", "search."],
                content=["Let me look."],
                tool_calls=[ToolCall("web_search", '{"query": "q"}')],
            ),
            Reply(content="done"),
        )
        stream_events(router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)]})
        assistant = router.chat_requests()[1].json["messages"][-2]
        assert assistant["reasoning_content"] == "I should search."
        assert assistant["content"] == "Let me look."

    def test_backend_never_mutates_the_callers_messages(self, router, searx) -> None:

        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
        before = copy.deepcopy(messages)
        router.script(
            Reply(tool_calls=[ToolCall("web_search", '{"query": "q"}')]), Reply(content="done")
        )
        stream_events(router.url, {"messages": messages, "tools": [web_search_tool(searx)]})
        assert messages == before
        assert len(router.chat_requests()[1].json["messages"]) == 4

    def test_backend_search_and_skills_share_one_dispatcher(self, router, searx, tmp_path) -> None:
        from llamachat.tools import web_search

        store = finance_skill_store(tmp_path)
        router.script(
            Reply(
                tool_calls=[
                    ToolCall("load_skill", '{"name": "finance-cli"}', id="k"),
                    ToolCall("web_search", '{"query": "rates"}', id="s"),
                ]
            ),
            Reply(content="Both."),
        )
        events = stream_events(
            router.url,
            {
                "messages": user_turn(),
                "tools": [web_search_tool(searx), *skill_tools_of(store)],
                "rounds": 1,
            },
        )
        assert [k for k, _ in events][:3] == ["skill_loaded", "search_start", "search_done"]
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [web_search.TOOL_SCHEMA, store.tool_schema()]
        assert "tools" not in second
        skill_msg, search_msg = second["messages"][-2:]
        assert (skill_msg["tool_call_id"], search_msg["tool_call_id"]) == ("k", "s")
        assert skills.NO_MORE_TOOLS not in skill_msg["content"]
        assert search_msg["content"].endswith(skills.NO_MORE_TOOLS)

    @pytest.mark.real_router
    def test_real_router_streams_reply_with_timings(self, real_router) -> None:
        pieces, stats = stream_reply(
            real_router.url,
            SMOL_ID,
            [{"role": "user", "content": "Count from one to ten in words."}],
            max_tokens=32,
            temperature=0,
        )

        assert len(pieces) > 1, "the reply arrived in one piece, not streamed"
        timings = stats["timings"]
        assert timings["predicted_n"] > 1
        assert timings["prompt_n"] + timings.get("cache_n", 0) > 0
        assert timings["predicted_per_second"] > 0
        assert stats["usage"]["completion_tokens"] == timings["predicted_n"]

    @pytest.mark.real_router
    def test_real_router_second_turn_reuses_prompt_cache(self, real_router) -> None:
        first = [
            {"role": "system", "content": "You are a terse assistant. Answer in one short line."},
            {"role": "user", "content": "Name three primary colours of light."},
        ]
        pieces, stats1 = stream_reply(real_router.url, SMOL_ID, first, max_tokens=24, temperature=0)
        second = [
            *first,
            {"role": "assistant", "content": "".join(pieces)},
            {"role": "user", "content": "Now name three farm animals."},
        ]
        _pieces, stats2 = stream_reply(
            real_router.url, SMOL_ID, second, max_tokens=24, temperature=0
        )

        t1, t2 = stats1["timings"], stats2["timings"]
        first_prompt = t1["prompt_n"] + t1["cache_n"]
        second_prompt = t2["prompt_n"] + t2["cache_n"]
        added = second_prompt - first_prompt
        print(
            f"\nprompt cache: turn 1 prompt {first_prompt} tokens (cache_n {t1['cache_n']}); "
            f"turn 2 prompt {second_prompt} tokens = cache_n {t2['cache_n']} + prompt_n "
            f"{t2['prompt_n']}; tokens added by turn 2: {added}"
        )
        assert t2["cache_n"] >= first_prompt, "turn 2 re-evaluated the first turn's prompt"
        assert t2["prompt_n"] <= added

    @pytest.mark.real_router
    def test_real_router_cancel_stops_generation_mid_stream(self, real_router) -> None:

        cancel = threading.Event()
        client = Client(real_router.url)
        received = 0
        try:
            request = turn_of(
                [{"role": "user", "content": "Write a very long story about a dragon."}],
                model=SMOL_ID,
                params={"max_tokens": 1500, "ignore_eos": True},
            )
            stream = client.stream_chat(request, cancel=cancel)
            for kind, _value in stream:
                if kind == "content":
                    received += 1
                    if received == 3:
                        cancel.set()
        finally:
            client.close()

        assert received < 50, f"{received} pieces arrived after cancelling"

        def idle_slots():
            # The managed server wants its key everywhere but /health.
            key = real_router.server.api_key
            slots = httpx.get(
                f"{real_router.url}/slots",
                params={"model": SMOL_ID},
                headers={"Authorization": f"Bearer {key}"},
            ).json()
            return None if any(s["is_processing"] for s in slots) else slots

        slots = wait_for(idle_slots, 30, "the server to stop generating")
        last = max((s for s in slots if "id_task" in s), key=lambda s: s["id_task"])
        # The slot holds the prompt and what was generated before the cancel, far from 1500 tokens.
        assert last["n_prompt_tokens"] < 300


class TestResumingReplies:
    """A reply under a conversation id survives a dropped connection (llama.cpp's /v1/stream)."""

    def test_a_dropped_connection_resumes_from_the_saved_offset_in_place(self, router) -> None:

        words = [f"w{i} " for i in range(30)]
        router.script(Reply(content=words, drop_after=7))
        client = Client(router.url)
        try:
            events = list(client.stream_chat(turn_of(user_turn()), conversation="conv-a"))
        finally:
            client.close()
        text = "".join(str(v) for k, v in events if k == "content")
        assert text == "".join(words)
        assert events[-1][0] == "stats"
        assert client.resumable is True
        gets = [r for r in router.requests if r.path == "/v1/stream/conv-a"]
        assert len(gets) == 1 and int(gets[0].query["from"]) > 0
        chat = router.chat_requests()[0]
        assert chat.headers["x-conversation-id"] == "conv-a"
        # Each resume event says where the reply stands: the last covers all of its text.
        positions = [v for k, v in events if k == "resume"]
        assert positions[-1]["content"] == len(text)
        session = router.session("conv-a")
        assert session is not None and positions[-1]["offset"] <= len(session.buffer)

    def test_resume_chat_reads_the_rest_from_an_offset_exactly_once(self, router) -> None:

        words = [f"w{i} " for i in range(12)]
        router.script(Reply(content=words))
        client = Client(router.url)
        # As a llamachat killed mid-reply: it leaves, the server goes on.
        left = threading.Event()
        left.set()
        try:
            seen = []
            for kind, value in client.stream_chat(
                turn_of(user_turn()), conversation="conv-b", leave=left
            ):
                seen.append((kind, value))
                if kind == "resume" and value["content"] >= len("".join(words[:5])):
                    break
            at = backend.Position(**[v for k, v in seen if k == "resume"][-1])
            before = "".join(str(v) for k, v in seen if k == "content")
            rest = list(backend.resume_chat(client, at, model="test-model"))
        finally:
            client.close()
        after = "".join(str(v) for k, v in rest if k == "content")
        assert before[: at.content] + after == "".join(words)
        assert rest[-1][0] == "stats"

    def test_a_stream_the_server_no_longer_holds_says_so(self, router) -> None:

        client = Client(router.url)
        try:
            with pytest.raises(backend.StreamError, match="no longer holds"):
                list(backend.resume_chat(client, backend.Position("gone", 10), model="test-model"))
        finally:
            client.close()
        assert client.resumable is True  # /v1/streams/lookup answered: it has streams

    def test_a_server_without_streams_fails_the_drop_as_before_and_is_known(self) -> None:

        with ScriptedRouter(streams=False) as old:
            old.script(Reply(content=["a "] * 10, drop_after=3), Reply(content="b"))
            client = Client(old.url)
            try:
                with pytest.raises(backend.StreamError, match="broke|ended before"):
                    list(client.stream_chat(turn_of(user_turn()), conversation="c"))
                assert client.resumable is False
                lookups = [r for r in old.requests if r.path == "/v1/streams/lookup"]
                with pytest.raises(backend.StreamError):
                    list(backend.resume_chat(client, backend.Position("c", 3), model="test-model"))
                # Found out once per server.
                assert [r for r in old.requests if r.path == "/v1/streams/lookup"] == lookups
            finally:
                client.close()

    def test_stop_tells_the_server_to_stop_unless_it_is_to_finish(self, router) -> None:

        for leave, conversation in ((False, "stop-me"), (True, "let-it-finish")):
            router.script(Reply(content=["a "] * 40, delay=0.02))
            cancel, left = threading.Event(), threading.Event()
            if leave:
                left.set()
            client = Client(router.url)
            try:
                for kind, _value in client.stream_chat(
                    turn_of(user_turn()), conversation=conversation, cancel=cancel, leave=left
                ):
                    if kind == "content":
                        cancel.set()
            finally:
                client.close()
        deletes = [r.path for r in router.requests if r.method == "DELETE"]
        assert deletes == ["/v1/stream/stop-me"]
        assert router.session("stop-me") is None
        finished = router.session("let-it-finish")
        assert finished is not None
        assert wait_for(lambda: finished.done, 5, "the reply finished") and b"[DONE]" in bytes(
            finished.buffer
        )

    @pytest.mark.real_router
    def test_real_router_reply_left_mid_stream_is_read_on_exactly(self, real_router) -> None:
        """llama-server keeps a reply's stream after its client left: read on from the saved
        place, the two parts are exactly the text the server generated, nothing twice."""

        left = threading.Event()
        left.set()
        client = Client(real_router.url)
        try:
            request = turn_of(
                [{"role": "user", "content": "Count from one to twenty in words."}],
                model=SMOL_ID,
                params={"max_tokens": 24, "temperature": 0},
            )
            seen = []
            for kind, value in client.stream_chat(request, conversation="real-left", leave=left):
                seen.append((kind, value))
                if kind == "resume" and value["content"] >= 6:
                    break  # as a llamachat killed mid-reply
            at = backend.Position(**[v for k, v in seen if k == "resume"][-1])
            before = "".join(str(v) for k, v in seen if k == "content")[: at.content]
            rest = list(backend.resume_chat(client, at, model=SMOL_ID))
            # What the server generated, read whole from its copy of the stream.
            whole = list(backend.resume_chat(client, backend.Position("real-left"), model=SMOL_ID))
        finally:
            client.close()
        generated = "".join(str(v) for k, v in whole if k == "content")
        after = "".join(str(v) for k, v in rest if k == "content")
        assert before + after == generated and len(after) > 0
        assert rest[-1][0] == "stats"
