"""The tests of `llamachat.dev.scripted_router`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from llamachat.dev.scripted_router import AUDIO_REFUSED, Model, Reply, ScriptedRouter, ToolCall
from llamachat.router import client as backend
from llamachat.tests.support import SMOL_ID, sse_objects, turn_of


class TestScriptedRouter:
    """A scripted stand-in for llama.cpp's router, served over real HTTP on 127.0.0.1."""

    def test_scripted_router_streams_pieces_then_usage_timings_and_done(self, router) -> None:

        router.script(
            Reply(
                reasoning=["think ", "hard"],
                content=["Hel", "lo"],
                tool_calls=[ToolCall("web_search", '{"query": "abc"}', fragments=3)],
            )
        )
        body = {
            "model": "test-model",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi there"}],
        }
        r = httpx.post(router.url + "/v1/chat/completions", json=body)
        assert r.headers["content-type"].startswith("text/event-stream")
        objs = sse_objects(r.text)
        assert objs[-1] == "[DONE]"
        deltas = [o["choices"][0]["delta"] for o in objs[:-1] if o["choices"]]
        assert "".join(d.get("reasoning_content") or "" for d in deltas) == "think hard"
        assert "".join(d.get("content") or "" for d in deltas) == "Hello"
        frags = [tc for d in deltas for tc in d.get("tool_calls", [])]
        assert len(frags) == 3 and frags[0]["function"]["name"] == "web_search"
        assert all("name" not in f.get("function", {}) for f in frags[1:])
        assert "".join(f["function"]["arguments"] for f in frags) == '{"query": "abc"}'
        assert objs[-3]["choices"][0]["finish_reason"] == "tool_calls"
        usage_chunk = objs[-2]
        assert usage_chunk["choices"] == []
        assert usage_chunk["usage"]["completion_tokens"] == 5
        assert usage_chunk["timings"]["predicted_per_second"] > 0

    def test_scripted_router_echoes_last_user_message_and_records_requests(self, router) -> None:

        body = {
            "model": "test-model",
            "stream": False,
            "messages": [{"role": "user", "content": "ping"}],
        }
        r = httpx.post(
            router.url + "/v1/chat/completions", json=body, headers={"Authorization": "Bearer k"}
        )
        assert r.json()["choices"][0]["message"]["content"] == "echo: ping"
        recorded = router.chat_requests()[-1]
        assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
        assert recorded.json == body
        assert recorded.headers["authorization"] == "Bearer k"

    def test_scripted_router_load_goes_loading_then_loaded_and_unload_resets(self) -> None:

        with ScriptedRouter([Model("a", aliases=("alpha",))], load_delay=0.3) as r:
            assert httpx.post(r.url + "/models/load", json={"model": "a"}).json() == {
                "success": True
            }
            statuses = {
                m["id"]: m["status"]["value"] for m in httpx.get(r.url + "/models").json()["data"]
            }
            assert statuses == {"a": "loading"}
            while r.status("a") == "loading":
                httpx.get(r.url + "/health")
            assert r.status("a") == "loaded"
            listed = httpx.get(r.url + "/v1/models").json()["data"][0]
            assert listed["aliases"] == ["alpha"]
            assert httpx.post(r.url + "/models/unload", json={"model": "a"}).status_code == 200
            assert r.status("a") == "unloaded"

    def test_scripted_router_failing_model_reports_failed_with_exit_code(self) -> None:

        with ScriptedRouter([Model("broken", fail_exit_code=3)]) as r:
            resp = httpx.post(r.url + "/models/load", json={"model": "broken"})
            assert resp.status_code == 500
            assert "exit code 3" in resp.json()["error"]["message"]
            status = httpx.get(r.url + "/models").json()["data"][0]["status"]
            assert status == {"value": "unloaded", "failed": True, "exit_code": 3}

    def test_scripted_router_props_with_autoload_false_never_loads(self) -> None:

        with ScriptedRouter([Model("a", n_ctx=8192)]) as r:
            resp = httpx.get(r.url + "/props", params={"model": "a", "autoload": "false"})
            assert resp.status_code == 400
            assert r.status("a") == "unloaded"
            resp = httpx.get(r.url + "/props", params={"model": "a"})
            assert resp.json()["default_generation_settings"]["n_ctx"] == 8192
            assert r.status("a") == "loaded"

    def test_scripted_router_http_error_and_mid_stream_error_chunk(self, router) -> None:

        router.script(
            Reply(
                status=400,
                error={
                    "type": "exceed_context_size_error",
                    "message": "too big",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 4096,
                },
            ),
            Reply(content=["a", "b", "c"], error_after=2, error={"message": "boom"}),
        )
        body = {"model": "test-model", "stream": True, "messages": []}
        resp = httpx.post(router.url + "/v1/chat/completions", json=body)
        assert resp.status_code == 400
        assert resp.json()["error"]["n_ctx"] == 4096
        objs = sse_objects(httpx.post(router.url + "/v1/chat/completions", json=body).text)
        assert objs[-1] == {"error": {"code": 500, "message": "boom", "type": "server_error"}}
        assert len(objs) == 3

    def test_scripted_router_takes_input_audio_only_for_a_model_that_hears(self) -> None:
        """An `input_audio` part to a model listed without audio is refused as llama-server
        refuses it (500, before generating); a model that hears answers; a format other than
        wav or mp3 is a 400."""
        listed = [Model("ears", "loaded", modalities=("text", "audio")), Model("plain", "loaded")]
        with ScriptedRouter(listed) as r:

            def ask(model: str, audio_format: str = "wav") -> httpx.Response:
                sound = {
                    "type": "input_audio",
                    "input_audio": {"data": "UklGRg==", "format": audio_format},
                }
                content = [{"type": "text", "text": "Hi"}, sound]
                body = {"model": model, "messages": [{"role": "user", "content": content}]}
                return httpx.post(r.url + "/v1/chat/completions", json=body)

            assert ask("ears").status_code == 200
            refused = ask("plain")
            assert refused.status_code == 500
            assert refused.json()["error"]["message"] == (
                "audio input is not supported - hint: if this is unexpected, you may need to "
                "provide the mmproj"
            )
            assert ask("ears", "flac").status_code == 400

    @pytest.mark.real_router
    def test_real_router_refuses_input_audio_to_a_model_that_does_not_hear_the_same_way(
        self, real_router
    ) -> None:
        """What the scripted router imitates: llama-server (SmolLM2, no mmproj, listed with
        `input_modalities` ["text"]) answers an `input_audio` part with this 500."""
        content = [
            {"type": "text", "text": "Hi"},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ]
        body = {
            "model": SMOL_ID,
            "max_tokens": 1,
            "messages": [{"role": "user", "content": content}],
        }
        answer = httpx.post(
            real_router.url + "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {real_router.server.api_key}"},
            timeout=120,
        )
        assert (answer.status_code, answer.json()["error"]["message"]) == (500, AUDIO_REFUSED)

    def test_scripted_router_die_after_closes_socket_mid_body(self, router) -> None:

        router.script(Reply(content=["x"] * 10, die_after=3))
        body = {"model": "test-model", "stream": True, "messages": []}
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(router.url + "/v1/chat/completions", json=body)

    def test_scripted_router_stall_holds_until_released_and_sees_client_leave(self, router) -> None:

        body = {"model": "test-model", "stream": True, "messages": []}
        router.script(Reply(content=["a", "b"], stall_after=2))
        with (
            httpx.Client(timeout=httpx.Timeout(5.0, read=0.3)) as client,
            pytest.raises(httpx.ReadTimeout),
        ):
            client.post(router.url + "/v1/chat/completions", json=body)

        deadline = time.monotonic() + 10
        while router.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.disconnects == 1

        router.script(Reply(content=["a", "b"], stall_after=2))
        with httpx.stream("POST", router.url + "/v1/chat/completions", json=body) as resp:
            events = (line for line in resp.iter_lines() if line)
            first_two = [next(events), next(events)]
            router.release()
            rest = list(events)
        assert '"content":"a"' in first_two[1]
        assert rest[-1] == "data: [DONE]"

    def test_scripted_router_streams_twenty_thousand_tokens_intact(self, router) -> None:

        router.script(Reply.tokens(20_000, word="w "))
        body = {"model": "test-model", "stream": True, "messages": []}
        objs = sse_objects(httpx.post(router.url + "/v1/chat/completions", json=body).text)
        text = "".join(
            o["choices"][0]["delta"].get("content") or "" for o in objs[:-1] if o["choices"]
        )
        assert text == "w " * 20_000

    def test_scripted_router_api_key_guards_all_but_health(self) -> None:

        with ScriptedRouter(api_key="sekrit") as r:
            assert httpx.get(r.url + "/health").status_code == 200
            denied = httpx.get(r.url + "/v1/models")
            assert denied.status_code == 401
            assert denied.json()["error"]["type"] == "authentication_error"
            ok = httpx.get(r.url + "/v1/models", headers={"Authorization": "Bearer sekrit"})
            assert ok.status_code == 200

    def test_scripted_router_runs_as_a_process_of_its_own(self) -> None:
        """`python -m llamachat.dev.scripted_router` serves replies queued as JSON lines on stdin."""

        process = subprocess.Popen(
            [sys.executable, "-m", "llamachat.dev.scripted_router"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = process.stdout.readline().strip()
            process.stdin.write(json.dumps({"content": ["from ", "afar"]}) + "\n")
            process.stdin.flush()
            assert process.stdout.readline().strip() == "ok"
            client = backend.Client(url)
            got = [
                v
                for k, v in client.stream_chat(turn_of([{"role": "user", "content": "x"}]))
                if k == "content"
            ]
            client.close()
            assert "".join(got) == "from afar"
        finally:
            process.stdin.close()
            process.wait(timeout=10)


def _chat_body(**extra: object) -> dict:
    return {
        "model": "test-model",
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


def _text_of(objects: list) -> tuple[str, str]:
    deltas = [o["choices"][0]["delta"] for o in objects if o != "[DONE]" and o["choices"]]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    return reasoning, "".join(d.get("content") or "" for d in deltas)


class TestResumableStreams:
    """The resumable streams of the pinned llama-server (X-Conversation-Id, /v1/stream/<id>)."""

    def test_a_dropped_reply_goes_on_and_is_read_from_its_byte_offset(self, router) -> None:

        router.script(Reply(content=[f"w{i} " for i in range(20)], drop_after=5))
        headers = {"X-Conversation-Id": "conv-42"}
        with (
            httpx.stream(
                "POST", router.url + "/v1/chat/completions", json=_chat_body(), headers=headers
            ) as r,
            pytest.raises(httpx.HTTPError),
        ):
            b"".join(r.iter_raw())
        # The first five events reached the client; the rest is read from any offset.
        session = router.session("conv-42")
        assert session is not None
        whole = httpx.get(router.url + "/v1/stream/conv-42?from=0").content
        assert whole.endswith(b"data: [DONE]\n\n")
        assert _text_of(sse_objects(whole.decode()))[1] == "".join(f"w{i} " for i in range(20))
        cut = whole.index(b"\n\n", whole.index(b"w3 ")) + 2
        rest = httpx.get(router.url + f"/v1/stream/conv-42?from={cut}").content
        assert whole[:cut] + rest == whole
        lookup = httpx.post(
            router.url + "/v1/streams/lookup", json={"conversation_ids": ["conv-42", "other"]}
        ).json()
        assert lookup == [
            {
                "conversation_id": "conv-42",
                "is_done": True,
                "total_bytes": len(whole),
                "started_at": lookup[0]["started_at"],
                "completed_at": lookup[0]["completed_at"],
            }
        ]

    def test_stream_endpoints_answer_as_the_pinned_server_does(self, router) -> None:

        assert httpx.get(router.url + "/v1/stream/nope?from=0").status_code == 404
        router.script(Reply(content="a b"))
        httpx.post(
            router.url + "/v1/chat/completions",
            json=_chat_body(),
            headers={"X-Conversation-Id": "c1"},
        )
        bad = httpx.get(router.url + "/v1/stream/c1?from=abc")
        assert bad.status_code == 400 and bad.json()["error"]["message"] == "Invalid 'from' offset"
        assert httpx.get(router.url + "/v1/stream/c1?from=999999").content == b""
        assert httpx.delete(router.url + "/v1/stream/c1").status_code == 204
        assert httpx.delete(router.url + "/v1/stream/c1").status_code == 204
        assert httpx.get(router.url + "/v1/stream/c1?from=0").status_code == 404

    def test_delete_stops_the_generation(self, router) -> None:

        router.script(Reply(content=["a "] * 10, stall_after=3))
        with httpx.stream(
            "POST",
            router.url + "/v1/chat/completions",
            json=_chat_body(),
            headers={"X-Conversation-Id": "c2"},
        ) as r:
            lines = r.iter_lines()
            while "a " not in next(lines):
                pass
            assert httpx.delete(router.url + "/v1/stream/c2").status_code == 204
            router.release()
            rest = "\n".join(lines)
        assert "[DONE]" not in rest
        assert router.session("c2") is None

    def test_without_streams_a_router_has_no_stream_endpoints(self) -> None:

        with ScriptedRouter(streams=False) as old:
            assert httpx.post(old.url + "/v1/streams/lookup", json={}).status_code == 404
            httpx.post(
                old.url + "/v1/chat/completions",
                json=_chat_body(),
                headers={"X-Conversation-Id": "c3"},
            )
            assert httpx.get(old.url + "/v1/stream/c3?from=0").status_code == 404


class TestReasoningControl:
    """POST /v1/chat/completions/control ends a reply's thinking, as the pinned server does."""

    def test_reasoning_end_skips_the_rest_of_the_thinking(self, router) -> None:

        router.script(Reply(reasoning=["think "] * 50, content=["the ", "answer"], stall_after=3))
        with httpx.stream(
            "POST", router.url + "/v1/chat/completions", json=_chat_body(reasoning_control=True)
        ) as r:
            lines = r.iter_lines()
            first = json.loads(next(lines).removeprefix("data: "))
            answer = httpx.post(
                router.url + "/v1/chat/completions/control",
                json={"id": first["id"], "action": "reasoning_end", "model": "test-model"},
            )
            assert answer.json() == {"success": True}
            router.release()
            body = next(lines) + "\n" + "\n".join(lines)
        reasoning, content = _text_of(sse_objects(body))
        assert reasoning == "think think " and content == "the answer"

    @pytest.mark.parametrize(
        ("ask", "status", "answer"),
        [
            ({"action": "reasoning_end", "model": "test-model"}, 400, "missing completion id"),
            ({"id": "x", "action": "bogus", "model": "test-model"}, 400, "unknown control action"),
            ({"id": "x", "action": "reasoning_end"}, 400, "model name is missing from the request"),
            (
                {"id": "chatcmpl-nope", "action": "reasoning_end", "model": "test-model"},
                200,
                "no active completion for this id",
            ),
        ],
    )
    def test_control_refusals(self, router, ask, status, answer) -> None:

        reply = httpx.post(router.url + "/v1/chat/completions/control", json=ask)
        assert reply.status_code == status
        body = reply.json()
        assert (body["error"]["message"] if status == 400 else body["message"]) == answer

    def test_control_needs_reasoning_control_on_the_request(self, router) -> None:

        router.script(Reply(reasoning=["think "] * 5, content="ok", stall_after=2))
        with httpx.stream("POST", router.url + "/v1/chat/completions", json=_chat_body()) as r:
            lines = r.iter_lines()
            first = json.loads(next(lines).removeprefix("data: "))
            answer = httpx.post(
                router.url + "/v1/chat/completions/control",
                json={"id": first["id"], "action": "reasoning_end", "model": "test-model"},
            ).json()
            router.release()
            list(lines)
        assert answer == {
            "success": False,
            "message": "reasoning control not enabled for this completion",
        }


class TestScriptedTranscription:
    """POST /v1/audio/transcriptions answers as llama-server does (multipart in, {"text"} out)."""

    WAV = ("speech.wav", b"RIFF....WAVEfmt ", "audio/wav")

    def post(self, router, files=None, **fields):
        # Fields as parts without a file name: multipart even with no file, as curl -F sends.
        parts = {**{name: (None, value) for name, value in fields.items()}, **(files or {})}
        return httpx.post(router.url + "/v1/audio/transcriptions", files=parts)

    def test_a_model_that_hears_answers_the_scripted_text_and_the_form_is_recorded(self) -> None:
        with ScriptedRouter([Model("voxtral", "loaded", modalities=("text", "audio"))]) as router:
            router.script(Reply(content=["Hello ", "there."]))
            answer = self.post(router, files={"file": self.WAV}, model="voxtral")

            assert (answer.status_code, answer.json()) == (200, {"text": "Hello there."})
            assert router.requests[-1].json == {"model": "voxtral", "file": "<16 bytes>"}

    def test_a_model_without_audio_answers_501_before_looking_at_the_form(self, router) -> None:
        answer = self.post(router, model="test-model")

        assert answer.status_code == 501
        assert answer.json()["error"] == {
            "code": 501,
            "message": "The current model does not support audio input.",
            "type": "not_supported_error",
        }

    def test_no_model_no_file_or_another_format_are_400s(self) -> None:
        with ScriptedRouter([Model("voxtral", "loaded", modalities=("text", "audio"))]) as router:
            no_model = self.post(router, files={"file": self.WAV})
            no_file = self.post(router, model="voxtral")
            as_text = self.post(
                router, files={"file": self.WAV}, model="voxtral", response_format="text"
            )

        assert no_model.json()["error"]["message"] == "model name is missing from the request"
        assert no_file.json()["error"]["message"] == "No input file found for transcription"
        assert as_text.status_code == 400
        assert "Only 'json' response_format" in as_text.json()["error"]["message"]
