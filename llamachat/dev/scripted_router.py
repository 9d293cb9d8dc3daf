"""A scripted stand-in for llama.cpp's router, served over real HTTP on 127.0.0.1.

Tests and the benchmark talk to it exactly as they would to `llama-server` in router
mode: `GET /v1/models` (and `/models`), `POST /v1/chat/completions` (SSE streaming or
one JSON answer), `GET /props?model=..`, `POST /models/load`, `POST /models/unload`,
`POST /tokenize`, `POST /apply-template`, `POST /v1/embeddings`, `GET /health`, and the model management of
newer routers: `GET /models/sse` (the events of loads, with stages and progress, and of
downloads), `POST /models` (download a Hugging Face reference listed in
`router.downloads`, cancelled by `/models/unload`) and `DELETE /models?model=..` (a
downloaded model). Its tokenizer is deterministic
(a token is a run of word characters or one other character) and its chat template
ChatML (`render`), so a prompt's tokens are exactly what llamachat can count ahead;
like llama.cpp it reuses the longest common prefix of the previous prompt (`cache_n`),
streams `prompt_progress` chunks when asked to `return_progress` and the figures so far
on every chunk with `timings_per_token`. Each chat request takes the next scripted `Reply` from
a queue (or echoes the last user message when the queue is empty); every request is
recorded in `router.requests`.

    from llamachat.dev.scripted_router import Reply, ScriptedRouter, ToolCall

    with ScriptedRouter() as router:            # serves "test-model", already loaded
        router.script(
            Reply(reasoning=["Let me ", "look."],
                  tool_calls=[ToolCall("web_search", '{"query": "x"}')]),
            Reply(content=["The ", "answer."], delay=0.01),
            Reply(status=400, error={"type": "exceed_context_size_error", "message": "too long",
                                     "n_prompt_tokens": 9000, "n_ctx": 4096}),
        )
        ...  # point a client at router.url
        assert router.requests[-1].json["model"] == "test-model"

Resumable streams, as the pinned llama-server (b10068) has them: a streaming chat request
with an `X-Conversation-Id` header writes its SSE bytes into a session kept under that id
(a new request with the id replaces, and cancels, the one before), and generation goes on
when the client leaves. `GET /v1/stream/<id>?from=<byte offset>` replays the session from
that offset, then follows it until it ends (404 "File Not Found" for an id it does not
hold, 400 "Invalid 'from' offset" for one that is not a number, nothing for an offset past
the end of a finished one); `POST /v1/streams/lookup` `{"conversation_ids": [..]}` answers
`[{conversation_id, is_done, total_bytes, started_at, completed_at}]` for the ids asked
only; `DELETE /v1/stream/<id>` stops the generation and forgets the session (204, even
for an unknown id). `streams=False` answers 404 on all three, as servers before them do.
A request with `reasoning_control: true` may have its thinking ended by `POST
/v1/chat/completions/control` `{"id": <completion id>, "action": "reasoning_end",
"model": ..}`: the rest of its reasoning is skipped and the answer follows; the answer is
`{"success": true}`, or `{"success": false, "message": ..}` for a completion that is not
streaming ("no active completion for this id") or did not ask ("reasoning control not
enabled for this completion"); a missing model, id or known action is a 400.

Faults a Reply can carry: an HTTP error status with a JSON error (or any raw body), a
`data: {"error": ..}` chunk after N chunks (`error_after`), the socket closed after N
chunks (`die_after`, as a crashed server: its session ends too), the connection dropped
after N chunks while the server goes on generating (`drop_after`, a network drop), silence after N chunks until `router.release()` or `close()`
(`stall_after`), a delay before each chunk, or raw SSE text sent verbatim (`raw`, no
`data: [DONE]` added).
Models carry a status that load/unload change; a `Model(fail_exit_code=1)` fails to load.
A model lists its `modalities` (`architecture.input_modalities`); a chat request carrying
an `input_audio` part to one without "audio" is refused as llama-server refuses it (500
"audio input is not supported - hint: ...", checked before anything is generated), and a
format other than "wav" or "mp3" is a 400.
`events=False` answers 404 on /models/sse, as routers before it did.

Embeddings (`POST /v1/embeddings`, `{"model", "input": [texts]}`) are a hashed bag of
words: each word of a text (lowercased, mapped through `router.synonyms` first) adds 1
to one of `EMBEDDING_DIMENSION` places, and the vector is normalised; texts that share
words, or synonyms, are near. A `Model(embeddings=False)` answers 501 as llama-server
does for a model not started with `--embeddings`.

Transcription (`POST /v1/audio/transcriptions`, a multipart form with `file` and `model`)
answers `{"text": ..}` as llama.cpp does for a model that hears audio (`"audio"` in its
`modalities`): the text is what `router.hear(file bytes)` returns when the test gave it an
engine, else the next scripted reply's content (llama.cpp turns the upload into a chat
completion). A model without audio answers 501 "The current model does not support audio
input." (before any check of the form, as llama-server does), a form without a file 400
"No input file found for transcription", a `response_format` other than `json` 400.

Prompt reading can cost time as on real hardware: with `prompt_ms_per_token` each request
spends that long per prompt token it does not find in the cache before its first chunk,
one request at a time per model (llama.cpp's slot), and the cache is what the last request
read. A request with `max_tokens: 0` (a prompt-cache warm-up) is answered as llama.cpp
answers it, one token cut at the length limit, without taking a scripted reply.

Chunks are serialised before the first byte is written and, when no delay or fault
applies, sent in one write, so tens of thousands of tokens stream in well under a second.
Qt-free; standard library only. `ScriptedRouter` raises nothing of its own: a broken
client connection only ends that one reply (`router.disconnects` counts them).
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import hashlib
import itertools
import json
import logging
import math
import re
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

_WORD = re.compile(r"\S+\s*|\s+")
EMBEDDING_DIMENSION = 64
_TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted model makes; `arguments` is streamed in `fragments` parts."""

    name: str
    arguments: str = "{}"
    id: str = ""
    fragments: int = 3


@dataclass
class Reply:
    """One scripted answer to a chat completion request.

    `content` / `reasoning`: a list of delta pieces, or a str split after each word.
    `usage` / `timings`: sent in the final chunks (computed from the pieces when None).
    `status` >= 400 answers with that HTTP status and `{"error": {"code", **error}}`.
    `body` is sent verbatim with `status` instead of any generated answer (as JSON when
    it parses as JSON, else as text/plain).
    `rate`: text pieces a second, paced on a fixed schedule from the first (a local
    model's pace; drift does not add up); the closing chunks follow the last at once.
    """

    content: str | Sequence[str] = ()
    reasoning: str | Sequence[str] = ()
    tool_calls: Sequence[ToolCall] = ()
    usage: dict | None = None
    timings: dict | None = None
    finish_reason: str | None = None
    delay: float = 0.0
    status: int = 200
    error: dict | None = None
    body: str | bytes | None = None
    error_after: int | None = None
    die_after: int | None = None
    drop_after: int | None = None
    stall_after: int | None = None
    raw: Sequence[str | bytes] | None = None
    rate: float = 0.0

    @classmethod
    def tokens(cls, n: int, *, word: str = "tok ", **kwargs: Any) -> Reply:
        """A reply of `n` content pieces (the benchmark's load)."""
        return cls(content=[word] * n, **kwargs)


@dataclass
class Model:
    """A model the router lists; status is one of llama.cpp's values.

    With `fail_exit_code` every load of it fails with that exit code and leaves
    `failed` set, which the listing reports as `failed: true` + `exit_code`.
    """

    id: str
    status: str = "unloaded"
    aliases: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ("text",)
    n_ctx: int = 4096
    fail_exit_code: int | None = None
    failed: bool = False
    removable: bool = False
    """Downloaded into the router's cache: DELETE /models may remove it."""
    tools: bool = True
    """Its chat template takes tools (`/props` chat_template_caps.supports_tools)."""
    embeddings: bool = True
    """It answers /v1/embeddings (False: 501, as a llama-server without --embeddings)."""
    args: tuple[str, ...] = ()
    """The command line the router lists for it (`status.args`), e.g. ("--ctx-size", "2048"):
    how llama.cpp's router tells the context of a model not loaded yet."""


@dataclass
class Download:
    """A Hugging Face reference `POST /models` can fetch: `steps` progress events of
    `size` bytes in all, `step_delay` apart; with `fail_at` (0..1) it fails there."""

    size: int = 1_000_000
    steps: int = 5
    step_delay: float = 0.05
    fail_at: float | None = None
    error: str = "connection reset by peer"


@dataclass
class RecordedRequest:
    """One request as the router received it."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    query: dict[str, str] = field(default_factory=dict)
    peer: tuple[str, int] = ("", 0)
    received: float = 0.0
    finished: float = 0.0
    """`time.monotonic()` when the request line arrived and when the answer's last byte went
    out (the clock every process on the machine shares)."""
    body: bytes = b""
    """The request's body, byte for byte."""


def _pieces(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, str):
        return _WORD.findall(value)
    return list(value)


def _error_body(code: int, message: str, type_: str, **extra: Any) -> dict:
    return {"error": {"code": code, "message": message, "type": type_, **extra}}


def _count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def render(messages: Sequence[dict], tools: Sequence[dict] | None = None) -> str:
    """The prompt the scripted template makes of a request (ChatML; tools on top)."""
    out = [f"<tools>{json.dumps(list(tools))}</tools>\n"] if tools else []
    for message in messages:
        out.append(f"<|im_start|>{message.get('role')}\n{_message_text(message)}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


AUDIO_REFUSED = (
    "audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
)


def _media_refusal(
    messages: Sequence[Any], modalities: Sequence[str]
) -> tuple[int, str, str] | None:
    """llama-server's answer to the `input_audio` parts of a request it cannot take (its
    OpenAI-compatible parsing: a model without audio, a format not "wav" or "mp3"); None: fine."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            if not isinstance(part, dict) or part.get("type") != "input_audio":
                continue
            if "audio" not in modalities:
                return 500, AUDIO_REFUSED, "server_error"
            if (part.get("input_audio") or {}).get("format") not in ("wav", "mp3"):
                return (
                    400,
                    "input_audio.format must be either 'wav' or 'mp3'",
                    "invalid_request_error",
                )
    return None


def _form(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, bytes]]:
    """A multipart/form-data body's text fields and files (by field name)."""
    if not content_type.startswith("multipart/form-data"):
        return {}, {}
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for part in message.iter_parts() if message.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(data, bytes):
            continue
        if part.get_filename() is not None:
            files[name] = data
        else:
            fields[name] = data.decode("utf-8", "replace")
    return fields, files


def _message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


class Session:
    """The SSE bytes of one generation kept under its conversation id, as llama-server keeps them."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.started_at = int(time.time())
        self.completed_at = 0
        self.buffer = bytearray()
        self.done = False
        self.cancelled = False
        self.changed = threading.Condition()

    def append(self, data: bytes) -> bool:
        """Add generated bytes; False once the session ended (cancelled or replaced)."""
        with self.changed:
            if self.done:
                return False
            self.buffer += data
            self.changed.notify_all()
            return True

    def finish(self, *, cancel: bool = False) -> None:
        """End the session (its generation finished, or `cancel`: stopped)."""
        with self.changed:
            self.cancelled = self.cancelled or cancel
            if not self.done:
                self.done, self.completed_at = True, int(time.time())
            self.changed.notify_all()

    def lookup(self) -> dict:
        """The session as `POST /v1/streams/lookup` describes it."""
        with self.changed:
            return {
                "conversation_id": self.conversation_id,
                "is_done": self.done,
                "total_bytes": len(self.buffer),
                "started_at": self.started_at,
                "completed_at": self.completed_at,
            }


@dataclass
class _Live:
    """A completion streaming now, as the control endpoint finds it."""

    reasoning_control: bool
    end_reasoning: threading.Event = field(default_factory=threading.Event)


class ScriptedRouter:
    """A threaded HTTP/1.1 server speaking the llama.cpp router API with scripted replies.

    `models`: what `/v1/models` lists (default: one loaded "test-model").
    `load_delay`: seconds a load stays "loading" before "loaded" (or failed).
    `router=False` behaves like a plain llama-server: no status, no load/unload.
    `api_key`: when set, every endpoint but /health wants `Authorization: Bearer <key>`.
    `prompt_ms_per_token`: milliseconds each uncached prompt token costs (0: free).
    `streams=False`: no resumable streams (no /v1/stream, no /v1/streams/lookup).
    `models_max`: the models it says it holds at once (`/props` max_instances; 0: no limit).
    `props_delay`: seconds a model's `/props` takes to answer (a server busy reading).
    """

    def __init__(
        self,
        models: Iterable[Model] | None = None,
        *,
        load_delay: float = 0.0,
        router: bool = True,
        api_key: str | None = None,
        events: bool = True,
        downloads: dict[str, Download] | None = None,
        prompt_ms_per_token: float = 0.0,
        streams: bool = True,
        models_max: int = 0,
        props_delay: float = 0.0,
    ) -> None:
        self.models: dict[str, Model] = {
            m.id: m for m in (models if models is not None else [Model("test-model", "loaded")])
        }
        self.load_delay = load_delay
        self.is_router = router
        self.has_events = router and events
        self.prompt_ms_per_token = prompt_ms_per_token
        self.has_streams = streams
        # The models it says it holds at once (`/props` max_instances, llama-server's
        # `--models-max`); 0: no limit. Said, not enforced: no load unloads another here.
        self.models_max = models_max
        self.props_delay = props_delay
        # The resumable streams, by conversation id, and the completions streaming now.
        self.sessions: dict[str, Session] = {}
        self._live: dict[str, _Live] = {}
        # One slot per model: a request reads its prompt while holding the model's slot.
        self._slots: dict[str, threading.Lock] = {}
        self.downloads: dict[str, Download] = dict(downloads or {})
        """References POST /models can download; any other well-formed one "finishes"
        without a model, as llama-server does for a repository that does not exist."""
        self._subscribers: list[deque[dict]] = []
        self._cancelled: set[str] = set()
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.synonyms: dict[str, str] = {}
        """Words /v1/embeddings reads as another (its vectors put them in one place)."""
        self.hear: Callable[[bytes], str] | None = None
        """What a model that hears audio makes of an uploaded file's bytes (a real engine,
        in the tests); None takes the next scripted reply's content."""
        self.disconnects = 0
        self._replies: deque[Reply] = deque()
        # Replies for one model's requests (`script_for`), before the shared queue.
        self._replies_for: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._release = threading.Condition(self._lock)
        self._release_count = 0
        self._closed = threading.Event()
        self._ids = itertools.count(1)
        # The last prompt of each model, as tokens: its prefix is the next one's cache.
        self._prompts: dict[str, list[str]] = {}
        # Open client connections: closing the router closes them too, as a dead process would.
        self._connections: set[socket.socket] = set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.router = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-router",
            daemon=True,
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:40123 (clients add /v1/...)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next chat requests, in order."""
        with self._lock:
            self._replies.extend(replies)

    def script_for(self, model: str, *replies: Reply) -> None:
        """Queue replies for the next chat requests naming `model` (requests to several
        models at once get theirs whatever order they arrive in)."""
        with self._lock:
            self._replies_for.setdefault(model, deque()).extend(replies)

    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._replies)

    def release(self) -> None:
        """Let every reply that started streaming before this call get past its stall."""
        with self._release:
            self._release_count += 1
            self._release.notify_all()

    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded chat completion requests, in order."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def session(self, conversation_id: str) -> Session | None:
        """The resumable stream kept under `conversation_id`, if any."""
        with self._lock:
            return self.sessions.get(conversation_id)

    def status(self, model_id: str) -> str:
        """The current status value of a model ("failed" after a failed load)."""
        with self._lock:
            model = self.models[model_id]
            return "failed" if model.failed else model.status

    def publish(self, model: str, event: str, data: dict | None = None) -> None:
        """Send one event to every open /models/sse stream."""
        message: dict[str, Any] = {"model": model, "event": event}
        if data is not None:
            message["data"] = data
        with self._release:
            for queue in self._subscribers:
                queue.append(message)
            self._release.notify_all()

    def close(self) -> None:
        """Stop serving; stalled replies and event streams end and every socket closes."""
        self._closed.set()
        with self._release:
            self._release.notify_all()
        with self._lock:
            sessions = list(self.sessions.values())
        for session in sessions:
            session.finish()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _record(self, request: RecordedRequest) -> int:
        """Keep `request`; returns the release count it was recorded at."""
        with self._lock:
            self.requests.append(request)
            return self._release_count

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            own = self._replies_for.get(str(body.get("model") or ""))
            if own:
                return own.popleft()
            if self._replies:
                return self._replies.popleft()
        last_user: dict = next(
            (m for m in reversed(body.get("messages") or []) if m.get("role") == "user"), {}
        )
        return Reply(content=f"echo: {_message_text(last_user)}")

    def _find(self, name: str) -> Model | None:
        with self._lock:
            if name in self.models:
                return self.models[name]
            return next((m for m in self.models.values() if name in m.aliases), None)

    def _begin_load(self, model: Model) -> bool:
        """Mark a load as started; False when the model is already loaded."""
        with self._lock:
            if model.status == "loaded":
                return False
            model.status, model.failed = "loading", False
        self.publish(model.id, "model_status", {"status": "loading"})
        return True

    def _load(self, model: Model) -> tuple[bool, str]:
        """Run a load to completion in the calling thread; (ok, error message)."""
        if not self._begin_load(model):
            return True, ""
        return self._finish_load(model)

    def _finish_load(self, model: Model) -> tuple[bool, str]:
        stages = {"stages": ["text_model"], "current": "text_model"}
        for value in (0.0, 0.5):
            self.publish(
                model.id,
                "status_change",
                {"status": "loading", "progress": {**stages, "value": value}},
            )
            if self._closed.wait(self.load_delay / 2):
                return False, "router is shutting down"
        with self._lock:
            failed = model.fail_exit_code is not None
            if failed:
                model.status, model.failed = "unloaded", True
            else:
                model.status = "loaded"
        if failed:
            self.publish(
                model.id, "status_change", {"status": "unloaded", "exit_code": model.fail_exit_code}
            )
            return False, f"model '{model.id}' failed to load (exit code {model.fail_exit_code})"
        self.publish(
            model.id, "status_change", {"status": "loading", "progress": {**stages, "value": 1.0}}
        )
        self.publish(
            model.id,
            "status_change",
            {"status": "loaded", "info": {"id": model.id, "meta": {"n_ctx": model.n_ctx}}},
        )
        return True, ""

    def embedding(self, text: str) -> list[float]:
        """The vector /v1/embeddings gives `text`: its hashed bag of words, normalised."""
        vector = [0.0] * EMBEDDING_DIMENSION
        for word in re.findall(r"\w+", text.lower()):
            word = self.synonyms.get(word, word)
            digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "big") % EMBEDDING_DIMENSION] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def sleep(self, model_id: str) -> None:
        """Put a loaded model to sleep, as --sleep-idle-seconds does after its idle time."""
        with self._lock:
            self.models[model_id].status = "sleeping"
        self.publish(model_id, "status_change", {"status": "sleeping"})

    def _download(self, ref: str) -> None:
        """Run a download of `ref` on this thread, publishing its progress."""
        plan = self.downloads.get(ref)
        self.publish(ref, "model_status", {"status": "downloading"})
        if plan is None:
            self.publish(ref, "download_finished")
            return
        url = f"https://huggingface.co/{ref.split(':')[0]}/resolve/main/model.gguf"
        for step in range(1, plan.steps + 1):
            if self._closed.wait(plan.step_delay):
                return
            with self._lock:
                cancelled = ref in self._cancelled
                self._cancelled.discard(ref)
            if cancelled:
                self.publish(ref, "download_failed", {"message": "download cancelled"})
                return
            fraction = step / plan.steps
            if plan.fail_at is not None and fraction > plan.fail_at:
                self.publish(ref, "download_failed", {"message": plan.error})
                return
            done = int(plan.size * fraction)
            self.publish(ref, "download_progress", {url: {"done": done, "total": plan.size}})
        with self._lock:
            self.models[ref] = Model(ref, "unloaded", removable=True)
        self.publish(ref, "download_finished")

    def _model_json(self, model: Model) -> dict:
        data: dict[str, Any] = {
            "id": model.id,
            "object": "model",
            "owned_by": "llamacpp",
            "created": 1735142223,
            "architecture": {
                "input_modalities": list(model.modalities),
                "output_modalities": ["text"],
            },
        }
        if self.is_router:
            data["aliases"] = list(model.aliases)
            status: dict[str, Any] = {"value": model.status}
            if model.args:
                status["args"] = list(model.args)
            if model.failed:
                status.update(failed=True, exit_code=model.fail_exit_code)
            data["status"] = status
            data["can_remove"] = model.removable
        return data


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-router"
    router: ScriptedRouter

    def setup(self) -> None:
        super().setup()
        self.router = self.server.router  # type: ignore[attr-defined]
        # Small SSE chunks must leave at once, not wait for Nagle.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.router._lock:
            self.router._connections.add(self.connection)

    def finish(self) -> None:
        """Forget the connection as it closes."""
        with self.router._lock:
            self.router._connections.discard(self.connection)
        super().finish()

    def handle(self) -> None:
        """Serve requests on this connection until the client leaves, however it leaves."""
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError, OSError):
            self.close_connection = True

    def parse_request(self) -> bool:
        """Parse the request line and headers, noting when the request line arrived."""
        self._arrived = time.monotonic()
        return super().parse_request()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # ------------------------------------------------------------------ plumbing

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self._body = raw
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, type_: str) -> None:
        self._send_json(status, _error_body(status, message, type_))

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self._body = b""
        body = self._read_json() if method == "POST" else None
        self._recorded = RecordedRequest(
            method,
            parts.path,
            {k.lower(): v for k, v in self.headers.items()},
            body,
            query,
            self.client_address[:2],
            received=self._arrived,
            body=self._body,
        )
        # Counted as the request becomes visible, so a release() sent by anyone who has seen
        # it (or read any of its reply) always frees this reply's stall.
        self._release_mark = self.router._record(self._recorded)
        path = parts.path
        if path in ("/health", "/v1/health"):
            return self._send_json(200, {"status": "ok"})
        key = self.router.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            return self._error(401, "Invalid API Key", "authentication_error")
        routes = {
            ("GET", "/v1/models"): self._models,
            ("GET", "/models"): self._models,
            ("POST", "/v1/chat/completions"): self._chat,
            ("POST", "/chat/completions"): self._chat,
            ("GET", "/props"): self._props,
            ("POST", "/tokenize"): self._tokenize,
            ("POST", "/apply-template"): self._apply_template,
            ("POST", "/v1/embeddings"): self._embeddings,
            ("POST", "/v1/audio/transcriptions"): self._transcriptions,
            ("POST", "/audio/transcriptions"): self._transcriptions,
        }
        if self.router.has_streams:
            routes[("POST", "/v1/streams/lookup")] = self._streams_lookup
            routes[("POST", "/v1/chat/completions/control")] = self._control
            conversation = unquote(path.removeprefix("/v1/stream/"))
            if path.startswith("/v1/stream/") and conversation and method == "GET":
                return self._stream_get(conversation, query)
            if path.startswith("/v1/stream/") and conversation and method == "DELETE":
                return self._stream_delete(conversation)
        if self.router.is_router:
            routes[("POST", "/models/load")] = self._load
            routes[("POST", "/models/unload")] = self._unload
        if self.router.has_events:
            routes[("GET", "/models/sse")] = self._events
            routes[("POST", "/models")] = self._post_download
            routes[("DELETE", "/models")] = self._delete
        handler = routes.get((method, path))
        if handler is None:
            return self._error(404, "File Not Found", "not_found_error")
        handler(body if isinstance(body, dict) else {}, query)

    def do_GET(self) -> None:
        """Serve a GET."""
        self._dispatch("GET")

    def do_POST(self) -> None:
        """Serve a POST."""
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        """Serve a DELETE."""
        self._dispatch("DELETE")

    def _events(self, body: dict, query: dict) -> None:
        router = self.router
        queue: deque[dict] = deque()
        with router._lock:
            router._subscribers.append(queue)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            while not router._closed.is_set():
                with router._release:
                    router._release.wait_for(lambda: queue or router._closed.is_set(), 0.2)
                    pending = list(queue)
                    queue.clear()
                for message in pending:
                    data = b"data: " + json.dumps(message).encode() + b"\n\n"
                    self.wfile.write(_chunk(data))
                    self.wfile.flush()
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    break  # the client left
        except OSError:
            pass
        finally:
            with router._lock:
                router._subscribers.remove(queue)
            self.close_connection = True

    def _post_download(self, body: dict, query: dict) -> None:
        ref = str(body.get("model") or "")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+(:[\w.-]+)?", ref):
            return self._error(
                400,
                "error: invalid HF repo format, expected <user>/<model>[:quant]\n",
                "invalid_request_error",
            )
        threading.Thread(target=self.router._download, args=(ref,), daemon=True).start()
        self._send_json(200, {"success": True})

    def _delete(self, body: dict, query: dict) -> None:
        router = self.router
        name = query.get("model", "")
        model = router._find(name)
        if model is None:
            return self._error(500, f"model name={name} is not found", "server_error")
        if not model.removable:
            return self._error(
                500, f"model name={name} is not removable (not from cache)", "server_error"
            )
        with router._lock:
            del router.models[model.id]
        router.publish(model.id, "model_remove")
        self._send_json(200, {"success": True})

    # ------------------------------------------------------------------ endpoints

    def _models(self, body: dict, query: dict) -> None:
        router = self.router
        if query.get("reload") and router.has_events:
            router.publish("*", "models_reload")
        with router._lock:
            data = [router._model_json(m) for m in router.models.values()]
        self._send_json(200, {"object": "list", "data": data})

    def _resolve(self, name: str, autoload: bool) -> Model | None:
        """The routed model, loaded if allowed; None after an error was sent."""
        router = self.router
        if not router.is_router:
            return next(iter(router.models.values()), None) or Model("model", "loaded")
        model = router._find(name) if name else None
        if model is None:
            self._error(
                400 if not name else 404,
                "model name is missing from the request"
                if not name
                else f"model '{name}' not found",
                "invalid_request_error",
            )
            return None
        if model.status != "loaded":
            if not autoload:
                self._error(400, f"model '{model.id}' is not loaded", "invalid_request_error")
                return None
            ok, message = router._load(model)
            if not ok:
                self._error(500, message, "server_error")
                return None
        return model

    def _props(self, body: dict, query: dict) -> None:
        if self.router.is_router and not query.get("model"):
            # The router's own properties, as llama-server answers them.
            return self._send_json(
                200,
                {
                    "role": "router",
                    "build_info": "b0-scripted",
                    "models_autoload": True,
                    "max_instances": self.router.models_max,
                },
            )
        autoload = query.get("autoload", "true").lower() != "false"
        model = self._resolve(query.get("model", ""), autoload)
        if model is None:
            return
        if self.router.props_delay and self.router._closed.wait(self.router.props_delay):
            return
        self._send_json(
            200,
            {
                "default_generation_settings": {"n_ctx": model.n_ctx, "params": {}},
                "total_slots": 1,
                "model_path": f"/models/{model.id}.gguf",
                "modalities": {"vision": "image" in model.modalities},
                "chat_template_caps": {
                    "supports_tools": model.tools,
                    "supports_tool_calls": model.tools,
                },
                "is_sleeping": False,
            },
        )

    def _tokenize(self, body: dict, query: dict) -> None:
        autoload = query.get("autoload", "true").lower() != "false"
        if self._resolve(str(body.get("model") or ""), autoload) is None:
            return
        n = _count_tokens(str(body.get("content") or ""))
        self._send_json(200, {"tokens": list(range(1, n + 1))})

    def _apply_template(self, body: dict, query: dict) -> None:
        autoload = query.get("autoload", "true").lower() != "false"
        if self._resolve(str(body.get("model") or ""), autoload) is None:
            return
        prompt = render(body.get("messages") or [], body.get("tools"))
        self._send_json(200, {"prompt": prompt})

    def _transcriptions(self, body: dict, query: dict) -> None:
        fields, files = _form(self.headers.get("Content-Type", ""), self._body)
        self._recorded.json = {
            **fields,
            **{name: f"<{len(data)} bytes>" for name, data in files.items()},
        }
        model = self._resolve(fields.get("model", ""), True)
        if model is None:
            return
        if "audio" not in model.modalities:
            return self._error(
                501, "The current model does not support audio input.", "not_supported_error"
            )
        if "file" not in files:
            return self._error(
                400, "No input file found for transcription", "invalid_request_error"
            )
        if fields.get("response_format", "json") != "json":
            return self._error(
                400,
                "Only 'json' response_format is supported for transcription",
                "invalid_request_error",
            )
        hear = self.router.hear
        if hear is not None:
            text = hear(files["file"])
        else:
            reply = self.router._next_reply({"model": model.id, "messages": []})
            text = "".join(_pieces(reply.content))
        self._send_json(200, {"text": text})

    def _embeddings(self, body: dict, query: dict) -> None:
        model = self._resolve(str(body.get("model") or ""), True)
        if model is None:
            return
        if not model.embeddings:
            return self._error(
                501,
                "This server does not support embeddings. Start it with `--embeddings`",
                "not_supported_error",
            )
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return self._error(
                400, "input must be a string or a list of strings", "invalid_request_error"
            )
        data = [
            {"object": "embedding", "index": n, "embedding": self.router.embedding(text)}
            for n, text in enumerate(texts)
        ]
        tokens = sum(_count_tokens(text) for text in texts)
        self._send_json(
            200,
            {
                "model": model.id,
                "object": "list",
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _named(self, body: dict) -> Model | None:
        """The model a load or unload names; None after a 404 was sent."""
        model = self.router._find(str(body.get("model") or ""))
        if model is None:
            self._error(404, f"model '{body.get('model')}' not found", "invalid_request_error")
        return model

    def _load(self, body: dict, query: dict) -> None:
        router = self.router
        model = self._named(body)
        if model is None:
            return
        if model.fail_exit_code is not None:
            # A doomed load is reported synchronously so tests see its message.
            _, message = router._load(model)
            return self._error(500, message, "server_error")
        if router._begin_load(model):
            threading.Thread(target=router._finish_load, args=(model,), daemon=True).start()
        self._send_json(200, {"success": True})

    def _unload(self, body: dict, query: dict) -> None:
        router = self.router
        name = str(body.get("model") or "")
        if name in router.downloads and router._find(name) is None:
            # Unloading a model that is being downloaded cancels the download.
            with router._lock:
                router._cancelled.add(name)
            return self._send_json(200, {"success": True})
        model = self._named(body)
        if model is None:
            return
        with router._lock:
            if model.status not in ("loaded", "sleeping"):
                return self._error(
                    400, f"model '{model.id}' is not running", "invalid_request_error"
                )
            model.status, model.failed = "unloaded", False
        router.publish(model.id, "status_change", {"status": "unloaded"})
        self._send_json(200, {"success": True})

    def _chat(self, body: dict, query: dict) -> None:
        router = self.router
        autoload = query.get("autoload", "true").lower() != "false"
        model = self._resolve(str(body.get("model") or ""), autoload)
        if model is None:
            return
        refused = _media_refusal(body.get("messages") or [], model.modalities)
        if refused is not None:
            return self._error(*refused)
        warm_up = body.get("max_tokens") == 0 or body.get("n_predict") == 0
        reply = (
            Reply(content=["Hello"], finish_reason="length")
            if warm_up
            else router._next_reply(body)
        )
        if reply.body is not None:
            data = reply.body.encode() if isinstance(reply.body, str) else reply.body
            try:
                json.loads(data)
                content_type = "application/json"
            except ValueError:
                content_type = "text/plain"
            return self._send_bytes(reply.status, data, content_type)
        if reply.status >= 400:
            error = {"message": "scripted error", "type": "server_error", **(reply.error or {})}
            return self._send_json(reply.status, {"error": {"code": reply.status, **error}})
        tokens = _TOKEN.findall(render(body.get("messages") or [], body.get("tools")))
        with router._lock:
            slot = router._slots.setdefault(model.id, threading.Lock())
        with slot:
            with router._lock:
                previous = router._prompts.get(model.id, [])
                cached = next(
                    (n for n, (a, b) in enumerate(zip(tokens, previous)) if a != b),
                    min(len(tokens), len(previous)),
                )
                # llama.cpp always evaluates the last prompt token again.
                cached = min(cached, max(len(tokens) - 1, 0))
                router._prompts[model.id] = tokens
            # Like llama.cpp, the prompt is read to its end even if the client has left.
            if router.prompt_ms_per_token and router._closed.wait(
                (len(tokens) - cached) * router.prompt_ms_per_token / 1000
            ):
                return self._die()
        frames = _Stream(
            reply,
            str(body.get("model")),
            next(router._ids),
            len(tokens),
            bool((body.get("stream_options") or {}).get("include_usage")),
            cached=cached,
            progress=bool(body.get("return_progress")),
            per_token=bool(body.get("timings_per_token")),
        )
        if not body.get("stream"):
            return self._send_json(200, frames.whole())
        events = frames.events()
        # The progress chunks go first, outside the faults' counts: a fault after N chunks
        # means N chunks of the reply itself.
        lead = frames.lead if reply.raw is None else 0
        thinking = range(1, 1 + len(frames.reasoning)) if reply.raw is None else range(0)
        self._stream(
            reply, events[lead:], events[:lead], completion=frames.id, thinking=thinking, body=body
        )

    def _stream(
        self,
        reply: Reply,
        events: list[bytes],
        lead: Sequence[bytes] = (),
        *,
        completion: str = "",
        thinking: range = range(0),
        body: dict | None = None,
    ) -> None:
        """Stream `lead` then `events`; `thinking`: the indexes in `events` of reasoning pieces."""
        router = self.router
        body = body or {}
        live = _Live(bool(body.get("reasoning_control")))
        conversation = self.headers.get("X-Conversation-Id") or ""
        session: Session | None = None
        previous: Session | None = None
        with router._lock:
            router._live[completion] = live
            if conversation and router.has_streams:
                previous = router.sessions.get(conversation)
                session = router.sessions[conversation] = Session(conversation)
        if session is not None:
            if previous is not None:
                previous.finish(cancel=True)
            return self._stream_session(reply, events, lead, session, live, thinking, completion)
        try:
            self._stream_direct(reply, events, lead, live, thinking)
        finally:
            with router._lock:
                router._live.pop(completion, None)

    def _stream_direct(
        self,
        reply: Reply,
        events: list[bytes],
        lead: Sequence[bytes],
        live: _Live,
        thinking: range,
    ) -> None:
        """The reply on this connection only: it ends when the client leaves."""
        self._begin_sse()
        plain = not (reply.delay or reply.rate or live.reasoning_control) and (
            reply.die_after,
            reply.drop_after,
            reply.stall_after,
            reply.error_after,
        ) == (None, None, None, None)
        try:
            if lead:
                self.wfile.writelines(_chunk(event) for event in lead)
            if plain:
                self.wfile.write(_chunk(b"".join(events)) + b"0\r\n\r\n")
                self._recorded.finished = time.monotonic()
                return
            for n, event in self._produce(reply, events, live, thinking, watch=True):
                if event is None:
                    return
                if any(x is not None and n >= x for x in (reply.die_after, reply.drop_after)):
                    return self._die()
                self.wfile.write(_chunk(event))
            self.wfile.write(b"0\r\n\r\n")
            self._recorded.finished = time.monotonic()
        except (BrokenPipeError, ConnectionResetError):
            with self.router._lock:
                self.router.disconnects += 1
            self.close_connection = True

    def _stream_session(
        self,
        reply: Reply,
        events: list[bytes],
        lead: Sequence[bytes],
        session: Session,
        live: _Live,
        thinking: range,
        completion: str,
    ) -> None:
        """Generate into `session` on a thread of its own and relay it here from its start."""
        router = self.router

        def generate() -> None:
            try:
                if not session.append(b"".join(lead)):
                    return
                for n, event in self._produce(
                    reply, events, live, thinking, watch=False, stop=lambda: session.done
                ):
                    if n == reply.die_after:
                        # A crashed server: its sessions die with it.
                        with router._lock:
                            if router.sessions.get(session.conversation_id) is session:
                                del router.sessions[session.conversation_id]
                        break
                    if event is None or not session.append(event):
                        break
            finally:
                session.finish()
                with router._lock:
                    router._live.pop(completion, None)

        threading.Thread(target=generate, daemon=True, name="scripted-generation").start()
        cut = min((x for x in (reply.die_after, reply.drop_after) if x is not None), default=None)
        self._relay(session, 0, cut=cut, lead=len(lead))

    def _produce(
        self,
        reply: Reply,
        events: list[bytes],
        live: _Live,
        thinking: range,
        *,
        watch: bool,
        stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[tuple[int, bytes | None]]:
        """(index, event) as the model makes them, paced; (n, None) when it stops early.

        The closing chunks come with index -1. Ends early when the router closes or stalls, or with `watch` when the client left.
        The closing chunks follow the last piece at once; `error_after` ends in an error chunk.
        """
        router = self.router
        release_mark = self._release_mark
        body, done = events[:-1], events[-1:]
        started = time.monotonic()
        # The role chunk and the text pieces are paced; the closing chunks follow at once.
        paced = 1 + len(_pieces(reply.reasoning)) + len(_pieces(reply.content))
        for n, event in enumerate(body):
            if stop():
                yield n, None
                return
            if n == reply.stall_after and not self._stall(release_mark, watch=watch, stop=stop):
                yield n, None
                return
            if reply.error_after is not None and n >= reply.error_after:
                error = {
                    "code": 500,
                    "message": "scripted stream error",
                    "type": "server_error",
                    **(reply.error or {}),
                }
                yield n, b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
                return
            if reply.delay and router._closed.wait(reply.delay):
                yield n, None
                return
            if (
                reply.rate
                and n < paced
                and router._closed.wait(max(0.0, started + n / reply.rate - time.monotonic()))
            ):
                yield n, None
                return
            if live.end_reasoning.is_set() and n in thinking:
                continue  # the thinking was ended: the answer comes now
            yield n, event
        for event in done:
            yield -1, event

    def _begin_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _relay(
        self, session: Session, offset: int, *, cut: int | None = None, lead: int = 0
    ) -> None:
        """Send `session` from byte `offset` as it grows, until it ends (or `cut` events in)."""
        router = self.router
        self._begin_sse()
        sent = 0
        try:
            while True:
                with session.changed:
                    if len(session.buffer) <= offset and not session.done:
                        session.changed.wait(0.2)
                    data, done = bytes(session.buffer[offset:]), session.done
                if router._closed.is_set():
                    return self._die()
                if not data and self._client_left():
                    with router._lock:
                        router.disconnects += 1
                    self.close_connection = True
                    return
                if data and cut is not None:
                    # The session holds whole events: the cut falls between two.
                    for event in _split_events(data):
                        if sent - lead >= cut:
                            return self._die()
                        self.wfile.write(_chunk(event))
                        sent += 1
                elif data:
                    self.wfile.write(_chunk(data))
                offset += len(data)
                if done and not data:
                    break
            self.wfile.write(b"0\r\n\r\n")
            self._recorded.finished = time.monotonic()
        except (BrokenPipeError, ConnectionResetError):
            with router._lock:
                router.disconnects += 1
            self.close_connection = True

    def _client_left(self) -> bool:
        """Whether the client closed its end (it sends nothing more while it reads a reply)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def _stream_get(self, conversation: str, query: dict) -> None:
        session = self.router.session(conversation)
        if session is None:
            return self._error(404, "File Not Found", "not_found_error")
        try:
            offset = int(query.get("from") or 0)
        except ValueError:
            offset = -1
        if offset < 0:
            return self._error(400, "Invalid 'from' offset", "invalid_request_error")
        self._relay(session, offset)

    def _stream_delete(self, conversation: str) -> None:
        with self.router._lock:
            session = self.router.sessions.pop(conversation, None)
        if session is not None:
            session.finish(cancel=True)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _streams_lookup(self, body: dict, query: dict) -> None:
        asked = [i for i in body.get("conversation_ids") or () if isinstance(i, str) and i]
        with self.router._lock:
            found = [self.router.sessions[i] for i in asked if i in self.router.sessions]
        self._send_json(200, [session.lookup() for session in found])

    def _control(self, body: dict, query: dict) -> None:
        router = self.router
        name = str(body.get("model") or "")
        if router.is_router and not name:
            return self._error(
                400, "model name is missing from the request", "invalid_request_error"
            )
        if router.is_router and router._find(name) is None:
            return self._error(400, f"model '{name}' not found", "invalid_request_error")
        if body.get("action") != "reasoning_end":
            return self._error(400, "unknown control action", "invalid_request_error")
        completion = str(body.get("id") or "")
        if not completion:
            return self._error(400, "missing completion id", "invalid_request_error")
        with router._lock:
            live = router._live.get(completion)
        if live is None:
            return self._send_json(
                200, {"success": False, "message": "no active completion for this id"}
            )
        if not live.reasoning_control:
            return self._send_json(
                200,
                {"success": False, "message": "reasoning control not enabled for this completion"},
            )
        live.end_reasoning.set()
        self._send_json(200, {"success": True})

    def _die(self) -> None:
        """Drop the connection mid-body, as a crashed model process would."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stall(
        self, start: int, *, watch: bool = True, stop: Callable[[], bool] = lambda: False
    ) -> bool:
        """Send nothing until a release after `start`; False when we closed, `stop()` says
        so (a stopped session), or, with `watch`, the client left."""
        router = self.router

        def released() -> bool:
            return router._release_count != start or router._closed.is_set() or stop()

        while True:
            with router._release:
                if router._release.wait_for(released, timeout=0.02):
                    break
            if not watch:
                continue
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                gone = bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                gone = True
            if gone:
                with router._lock:
                    router.disconnects += 1
                self.close_connection = True
                return False
        return not (router._closed.is_set() or stop())


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _split_events(data: bytes) -> list[bytes]:
    """`data` cut after each blank line (the end of an SSE event)."""
    parts = data.split(b"\n\n")
    return [p + b"\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


class _Stream:
    """The SSE events (or the single JSON body) of one reply, built up front."""

    def __init__(
        self,
        reply: Reply,
        model: str,
        n: int,
        prompt_tokens: int,
        include_usage: bool,
        *,
        cached: int = 0,
        progress: bool = False,
        per_token: bool = False,
    ) -> None:
        self.reply = reply
        self.prompt_tokens = prompt_tokens
        self.cached = cached
        self.progress = progress
        self.per_token = per_token
        self.lead = 3 if progress else 0
        self.model = model
        self.id = f"chatcmpl-scripted{n}"
        self.include_usage = include_usage
        self.reasoning = _pieces(reply.reasoning)
        self.content = _pieces(reply.content)
        predicted = len(self.reasoning) + len(self.content) + len(reply.tool_calls)
        self.usage = (
            reply.usage
            if reply.usage is not None
            else {
                "completion_tokens": predicted,
                "prompt_tokens": prompt_tokens,
                "total_tokens": predicted + prompt_tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
        )
        self.timings = reply.timings if reply.timings is not None else self._timings(predicted)
        self.finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _timings(self, predicted: int) -> dict:
        read = self.prompt_tokens - self.cached
        return {
            "cache_n": self.cached,
            "prompt_n": read,
            "prompt_ms": 10.0,
            "prompt_per_token_ms": 10.0 / max(read, 1),
            "prompt_per_second": read * 100.0,
            "predicted_n": predicted,
            "predicted_ms": predicted * 20.0,
            "predicted_per_token_ms": 20.0,
            "predicted_per_second": 50.0,
        }

    def _progress(self) -> list[bytes]:
        """llama.cpp's prompt_progress chunks: the cache at once, then the rest in two steps."""
        total, cache = self.prompt_tokens, self.cached
        out = []
        for done in (cache, cache + (total - cache) // 2, total):
            extra: dict[str, Any] = {}
            if self.per_token:
                # llama.cpp sends the figures so far with each (prompt_n: what it has read).
                extra["timings"] = {**self._timings(0), "prompt_n": done - cache}
            progress = {
                "total": total,
                "cache": cache,
                "processed": done,
                "time_ms": 5 * (done - cache),
            }
            out.append(
                self._delta(
                    {"role": "assistant", "content": None}, prompt_progress=progress, **extra
                )
            )
        return out

    def _frame(self, choices: list, **extra: Any) -> bytes:
        obj = {
            "choices": choices,
            "created": 1735142223,
            "id": self.id,
            "model": self.model,
            "system_fingerprint": "b0-scripted",
            "object": "chat.completion.chunk",
            **extra,
        }
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    def _delta(self, delta: dict, **extra: Any) -> bytes:
        return self._frame([{"finish_reason": None, "index": 0, "delta": delta}], **extra)

    def events(self) -> list[bytes]:
        """Every SSE event in order, ending with `data: [DONE]` (raw replies: as given)."""
        if self.reply.raw is not None:
            return [r if isinstance(r, bytes) else r.encode() for r in self.reply.raw]
        out = self._progress() if self.progress else []
        out.append(self._delta({"role": "assistant", "content": None}))
        # Pieces differ only in text: splice them into one pre-serialised template.
        for key, pieces in (("reasoning_content", self.reasoning), ("content", self.content)):
            if self.per_token:
                done = len(out) - self.lead - 1
                out.extend(
                    self._delta({key: p}, timings=self._timings(done + i + 1))
                    for i, p in enumerate(pieces)
                )
                continue
            head, _, tail = self._delta({key: "\x00"}).partition(b'"\\u0000"')
            out.extend(head + json.dumps(p).encode() + tail for p in pieces)
        for index, call in enumerate(self.reply.tool_calls):
            args, parts = call.arguments, max(call.fragments, 1)
            size = -(-len(args) // parts) or 1
            frags = [args[i : i + size] for i in range(0, len(args), size)] or [""]
            call_id = call.id or f"call_{index}_{self.id[-6:]}"
            out.append(
                self._delta(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": frags[0]},
                            }
                        ]
                    }
                )
            )
            out.extend(
                self._delta({"tool_calls": [{"index": index, "function": {"arguments": frag}}]})
                for frag in frags[1:]
            )
        out.append(
            self._frame(
                [{"finish_reason": self.finish, "index": 0, "delta": {}}], timings=self.timings
            )
        )
        if self.include_usage:
            out.append(self._frame([], usage=self.usage, timings=self.timings))
        out.append(b"data: [DONE]\n\n")
        return out

    def whole(self) -> dict:
        """The non-streaming response body."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(self.reply.tool_calls)
            ]
        return {
            "choices": [{"finish_reason": self.finish, "index": 0, "message": message}],
            "created": 1735142223,
            "id": self.id,
            "model": self.model,
            "object": "chat.completion",
            "usage": self.usage,
            "timings": self.timings,
        }


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a router of its own process until stdin closes (the benchmark's, or by hand).

    Prints the URL, then takes one JSON object of `Reply` fields per stdin line (e.g.
    ``{"content": ["Hel", "lo"]}``), queues it and answers "ok" on stdout; the line
    ``"times"`` answers with a JSON list of ``[received, finished]`` per chat request so
    far (`RecordedRequest`). Tool calls and the `Model` list are not scriptable this way.
    """
    parser = argparse.ArgumentParser(prog="python -m llamachat.dev.scripted_router")
    parser.add_argument("--model", default="test-model", help="the model it serves")
    parser.add_argument(
        "--also", action="append", default=[], metavar="NAME", help="another loaded model"
    )
    parser.add_argument("--n-ctx", type=int, default=4096, help="that model's context size")
    parser.add_argument(
        "--prompt-ms-per-token", type=float, default=0.0, help="cost of each uncached prompt token"
    )
    args = parser.parse_args(argv)
    models = [Model(name, "loaded", n_ctx=args.n_ctx) for name in (args.model, *args.also)]
    with ScriptedRouter(models, prompt_ms_per_token=args.prompt_ms_per_token) as router:
        print(router.url, flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            order = json.loads(line)
            if order == "times":
                times = [[r.received, r.finished] for r in router.chat_requests()]
                print(json.dumps(times), flush=True)
            else:
                router.script(Reply(**order))
                print("ok", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
