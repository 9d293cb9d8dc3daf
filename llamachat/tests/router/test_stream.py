"""The tests of `llamachat.router.stream`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.router import client as backend
from llamachat.tests.support import (
    raw_router,
    stream_events,
    stream_outcome,
    turn_of,
    user_turn,
    web_search_tool,
)


class TestStream:
    """Reading a server's answer: the SSE stream, its faults, stalls and hangs."""

    def test_backend_keeps_reasoning_and_content_apart_and_ends_with_stats(self, router) -> None:

        router.script(
            Reply(
                reasoning=["Think", "ing"],
                content=["Hel", "lo"],
                usage={"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11},
                timings={"predicted_per_second": 42.0, "cache_n": 3},
            )
        )
        events = stream_events(router.url, {"messages": user_turn()})
        assert events[:4] == [
            ("reasoning", "Think"),
            ("reasoning", "ing"),
            ("content", "Hel"),
            ("content", "lo"),
        ]
        kind, stats = events[-1]
        assert kind == "stats"
        assert stats == {
            "usage": {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11},
            "timings": {"predicted_per_second": 42.0, "cache_n": 3},
            "model": "test-model",
        }
        sent = router.chat_requests()[0].json
        assert sent["stream"] is True
        assert sent["stream_options"] == {"include_usage": True}
        assert "tools" not in sent

    def test_backend_sse_tolerates_comments_empty_deltas_null_content_and_bare_usage(
        self, router
    ) -> None:

        router.script(
            Reply(
                raw=[
                    ": keep-alive comment\n\n",
                    "event: message\n",
                    'data: {"choices":[{"index":0,"delta":{}}]}\n\n',
                    'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}\n\n',
                    'data: {"choices":[]}\n\n',
                    'data:{"choices":[{"index":0,"delta":{"content":"ok"}}]}\r\n\r\n',
                    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
                    'data: {"choices":[],"usage":{"total_tokens":5},"timings":{"predicted_n":1}}\n\n',
                ]
            )
        )
        events = stream_events(router.url, {"messages": user_turn()})
        assert events == [
            ("content", "ok"),
            (
                "stats",
                {
                    "usage": {"total_tokens": 5},
                    "timings": {"predicted_n": 1},
                    "model": "test-model",
                },
            ),
        ]

    def test_backend_error_chunk_mid_stream_raises_stream_error_with_server_message(
        self, router
    ) -> None:

        router.script(
            Reply(
                content=["a", "b", "c"],
                error_after=2,
                error={"message": "slot crashed", "type": "server_error"},
            )
        )
        client = backend.Client(router.url)
        got = []
        with pytest.raises(backend.StreamError) as info:
            got.extend(client.stream_chat(turn_of(user_turn())))
        assert info.value.message == "slot crashed"
        assert info.value.error_type == "server_error"
        assert got == [("content", "a")]
        client.close()

    def test_backend_idle_timeout_mid_stream_raises_stall_error(self, router) -> None:

        router.script(Reply(content=["a", "b", "c"], stall_after=2))
        client = backend.Client(router.url, idle_timeout=0.3)
        got = []
        with pytest.raises(backend.StallError, match="sent nothing for 0.3 s"):
            got.extend(client.stream_chat(turn_of(user_turn())))
        assert got == [("content", "a")]
        client.close()

    def test_backend_model_load_silence_before_the_reply_is_not_a_stall(self) -> None:

        with ScriptedRouter([Model("big")], load_delay=0.5) as r:
            events = stream_events(
                r.url, {"model": "big", "messages": user_turn("x")}, idle_timeout=0.2
            )
            assert events[0] == ("content", "echo: ")
            assert r.status("big") == "loaded"

    def test_backend_socket_closed_mid_reply_raises_stream_error(self, router) -> None:

        router.script(Reply(content=["a"] * 10, die_after=4))
        with pytest.raises(backend.StreamError, match="broke in the middle of the reply"):
            stream_events(router.url, {"messages": user_turn()})

    def test_backend_stream_ending_without_finish_raises_stream_error(self, router) -> None:

        router.script(Reply(raw=['data: {"choices":[{"index":0,"delta":{"content":"half"}}]}\n\n']))
        client = backend.Client(router.url)
        got = []
        with pytest.raises(backend.StreamError, match="ended before it was complete"):
            got.extend(client.stream_chat(turn_of(user_turn())))
        assert got == [("content", "half")]
        client.close()

    @pytest.mark.parametrize(
        ("raw", "match"),
        [
            ("<html><body>502 Bad Gateway</body></html>\n", "not an event stream"),
            ("data: {not json}\n\n", "not JSON"),
            ('data: ["a list"]\n\n', "unexpected chunk"),
            ("data: " + "x" * 3_000_000 + "\n\n", "line longer than 1,000,000 bytes"),
            ("data: " + "y" * 3_000_000, "line longer than 1,000,000 bytes"),
        ],
    )
    def test_backend_garbage_streams_raise_stream_error_not_a_crash(
        self, router, raw, match
    ) -> None:

        router.script(Reply(raw=[raw]))
        with pytest.raises(backend.StreamError, match=match):
            stream_events(router.url, {"messages": user_turn()}, max_line_bytes=1_000_000)

    def test_backend_ten_megabyte_single_delta_arrives_whole(self, router) -> None:

        big = "é" * (5 * 1024 * 1024)  # 10 MB of UTF-8, 30 MB once JSON-escaped
        router.script(Reply(content=[big, "!"]))
        events = stream_events(router.url, {"messages": user_turn()})
        assert events[0] == ("content", big)
        assert events[1] == ("content", "!")

    def test_backend_server_ignoring_stream_true_still_answers(self, router, searx) -> None:

        whole = {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "reasoning_content": "hm",
                        "tool_calls": [
                            {
                                "id": "w1",
                                "type": "function",
                                "function": {"name": "web_search", "arguments": '{"query": "q"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"total_tokens": 3},
        }
        router.script(Reply(body=json.dumps(whole)), Reply(content=["fine"]))
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": [web_search_tool(searx)]}
        )
        assert events[:2] == [("reasoning", "hm"), ("search_start", "q")]
        assert ("content", "fine") in events
        assert router.chat_requests()[1].json["messages"][-1]["tool_call_id"] == "w1"

    def test_fault_a_socket_that_accepts_and_never_answers_is_a_hang_not_a_wait(
        self,
        tmp_path: Path,
    ) -> None:
        """Something takes the connection and never says a byte: the reply ends with a message
        once idle_timeout passes and a status check gets no answer either."""

        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel accepts; nobody ever reads or answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        try:
            pieces, error = stream_outcome(url, idle_timeout=0.3)
        finally:
            listener.close()
        assert pieces == []
        assert isinstance(error, backend.StallError) and error.error_type == "hung"
        assert url in error.message and "stopped or stuck" in error.message

    def test_fault_a_stopped_router_process_is_a_hang(self, tmp_path: Path) -> None:
        """A router process that got SIGSTOP mid-conversation: the next reply ends with a message
        instead of waiting forever; once it runs again, replies work."""
        import signal

        proc = subprocess.Popen(
            [sys.executable, "-m", "llamachat.dev.scripted_router"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = proc.stdout.readline().strip()
            assert stream_outcome(url, idle_timeout=0.3) == (["echo: ", "hi"], None)
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                pieces, error = stream_outcome(url, idle_timeout=0.3)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            assert pieces == [] and isinstance(error, backend.StallError), error
            assert error.error_type == "hung"
            assert stream_outcome(url, idle_timeout=0.3) == (["echo: ", "hi"], None)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stdin.close()

    def test_fault_a_model_loading_longer_than_idle_timeout_is_waited_for(self) -> None:
        """The router takes many idle_timeouts to load the model before it answers: the model
        status says `loading`, so the reply waits and arrives."""

        with ScriptedRouter([Model("test-model", "unloaded")], load_delay=1.5) as slow:
            slow.script(Reply(content=["loaded ", "at last"]))
            pieces, error = stream_outcome(slow.url, idle_timeout=0.2)
            assert (pieces, error) == (["loaded ", "at last"], None)
            assert slow.status("test-model") == "loaded"
            # The wait was checked on, not merely outlasted.
            assert any(r.path.endswith("/models") for r in slow.requests)

    def test_fault_a_router_that_never_begins_the_reply_but_answers_status_checks_is_a_hang(
        self,
    ) -> None:
        """The chat request is taken and its headers never come, while /models (the model
        loaded, not loading) and /props answer: the reply ends once idle_timeout passes."""
        never = threading.Event()
        with raw_router(lambda handler: never.wait(30)) as url:
            try:
                pieces, error = stream_outcome(url, idle_timeout=0.3, limit=10)
            finally:
                never.set()
        assert pieces == [] and isinstance(error, backend.StallError), error
        assert error.error_type == "hung" and url in error.message
        assert "not loading the model" in error.message and "idle_timeout" in error.message
