"""The HTTP client for llama.cpp's router (or any OpenAI-compatible server) and the tool loop.

`Client.stream_chat()` is a generator of `(kind, piece)` events: `reasoning` and
`content` deltas, the events its tools hand the window (`search_start` / `search_done`
around each web search, `skill_loaded` for each skill the model loads, `tool_done` for
each skill file it reads), `progress` while llama.cpp reads the prompt (its
`prompt_progress`: total, cache, processed, time_ms, when the request asks
`return_progress`), `timings` whenever a chunk carries the figures so far
(`timings_per_token`), and one final `stats` event. It sends one kind of request, built
whole before (`turn.Turn`): its first round is the turn's `body()`, byte for byte. With
tools on the turn (`tools.Tool`, looked up there by name, their settings unknown here) it
runs the tool loop: up to the turn's round cap, rounds offer the tools (a tool with an
empty schema sits a round out); a round that ends in tool calls gets every call answered
(failures included, as tool results the model reads, `tools.answer`) and the request is
sent again; one final round offers no tools, so the model answers.
Reading the answer is `stream`'s work, the sockets and their watchdog `transport`'s.

Errors: the `BackendError` tree of `llamachat.errors` (RouterUnreachable, ServerError, StreamError,
StallError), raised by `Client` methods and by the `stream_chat` generator, and
importable from here too.

The API key only ever travels in the Authorization header: no message, log line or
exception here contains it (`api_keys.mask_secret` hides it, or any 8-character piece of it,
in any quoting, from every error message). A key that no header can carry (non-ASCII,
control characters) fails each request with a BackendError naming its variable.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, Protocol

import httpx

from llamachat import skills
from llamachat.api_keys import key_problem, mask_secret
from llamachat.errors import (
    BackendError,
    RouterUnreachable,
    ServerError,
    StallError,
    StreamError,
    request_failure,
    without_key,
)
from llamachat.router import resume
from llamachat.router.resume import end_thinking, new_conversation, resume_chat
from llamachat.router.stream import (
    Call,
    Position,
    Round,
    StreamEvent,
    data_objects,
    lines,
    read_capped,
    refusal,
    whole_reply,
)
from llamachat.router.transport import ManagedKey, SocketTracker, Transport, Watchdog
from llamachat.tools.base import Tool, answer

# What callers import from here, the errors and helpers of the modules it uses included.
__all__ = [
    "LLAMA_PARAMS",
    "MAX_LINE_BYTES",
    "BackendError",
    "Client",
    "Position",
    "RouterUnreachable",
    "ServerError",
    "StallError",
    "StreamError",
    "StreamEvent",
    "api_base",
    "embeddings",
    "end_thinking",
    "key_problem",
    "mask_secret",
    "new_conversation",
    "resume_chat",
    "server_root",
]

log = logging.getLogger(__name__)

# A single SSE line longer than this is garbage, not a delta; 64 MiB leaves room for a
# 10 MB delta after JSON escaping while keeping a runaway stream from eating memory.
MAX_LINE_BYTES = 64 * 1024 * 1024

# What a request to llama.cpp's router asks for besides the reply: prompt processing
# progress, the figures so far on every chunk (what a stopped reply keeps), and that its
# thinking may be ended early (`Client.end_thinking`).
LLAMA_PARAMS = {"return_progress": True, "timings_per_token": True, "reasoning_control": True}


def request_body(
    model: str, messages: list[dict], tools: Sequence[dict], params: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The JSON body of one round of a chat request, as it is sent (no `tools`: none offered)."""
    payload: dict[str, Any] = dict(params or {})
    payload.update(
        model=model, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    if tools:
        payload["tools"] = list(tools)
    return payload


class ChatRequest(Protocol):
    """A request built whole before it is sent (`turn.Turn`), as `stream_chat` reads it."""

    @property
    def model(self) -> str:
        """The model asked."""

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools the model may call, looked up by name."""

    @property
    def offer(self) -> tuple[dict, ...]:
        """The schemas of the tools offered in the first round."""

    @property
    def params(self) -> Mapping[str, Any]:
        """The body fields besides the messages and tools."""

    @property
    def max_rounds(self) -> int:
        """How many rounds may call tools."""

    def messages(self) -> list[dict]:
        """The wire messages."""


def api_base(base_url: str) -> str:
    """The OpenAI-style prefix for a configured URL (a bare host gets /v1)."""
    url = base_url.rstrip("/")
    return url if httpx.URL(url).path.strip("/") else url + "/v1"


def server_root(base_url: str) -> str:
    """The server root for llama.cpp's own endpoints (/props, /models/load, ...)."""
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")


class Client:
    """A connection to one server: streaming chat, the tool loop, and plain JSON calls.

    `base_url` is the server root (http://host:8080) or an OpenAI-style base ending in
    /v1. `max_line_bytes` bounds one SSE line (a garbage stream is an error, not an
    out-of-memory). The read timeout is None by default because a router loading a model sends
    nothing for a long time; silence *inside* a reply is bounded by `idle_timeout`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "",
        connect_timeout: float = 5.0,
        read_timeout: float | None = None,
        idle_timeout: float | None = 120.0,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.settings = {
            "base_url": base_url,
            "api_key": api_key,
            "api_key_env": api_key_env,
            "connect_timeout": connect_timeout,
            "read_timeout": read_timeout,
            "idle_timeout": idle_timeout,
            "max_line_bytes": max_line_bytes,
        }
        """The arguments this client was made with: `Client(**settings)` is its twin."""
        self.base_url = base_url.rstrip("/")
        self.api_base = api_base(self.base_url)
        self.root = server_root(self.base_url)
        self.idle_timeout = idle_timeout
        self.max_line_bytes = max_line_bytes
        self.resumable: bool | None = None
        """Whether the server keeps a reply's stream for it to be read again (llama.cpp's
        /v1/stream): None until a broken reply made it matter, then found out once."""
        self._api_key = api_key or ""
        # A key no header can carry would fail inside httpx with the key in the message;
        # every request fails instead with this sentence.
        self._key_problem = key_problem(api_key, api_key_env)
        headers = (
            {"Authorization": f"Bearer {api_key}"} if api_key and not self._key_problem else {}
        )
        self._sockets = SocketTracker()
        self._http = httpx.Client(
            headers=headers,
            # With no key configured, the server may be one llamachat started: it wants its
            # own key, which no config names.
            auth=ManagedKey(self.base_url, self._learn_key) if api_key is None else None,
            transport=Transport(self._sockets),
            timeout=httpx.Timeout(
                connect=connect_timeout, read=read_timeout, write=connect_timeout * 6, pool=None
            ),
        )

    def _learn_key(self, key: str) -> None:
        # The managed server's key, sent by ManagedKey: error messages mask it too.
        self._api_key = key

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    # ------------------------------------------------------------------ plain requests

    def request_json(
        self,
        method: str,
        path: str,
        *,
        root: bool = False,
        timeout: float | None = 30.0,
        **kwargs: Any,
    ) -> Any:
        """Send one request to `api_base + path` (or `root + path`) and return its JSON."""
        url = (self.root if root else self.api_base) + path
        self._check_key()
        request = self._http.build_request(
            method,
            url,
            timeout=httpx.Timeout(timeout, connect=self._http.timeout.connect),
            **kwargs,
        )
        try:
            response = self._send(request)
        except httpx.HTTPError as exc:
            raise self._failure(exc, url) from None
        refused = refusal(response, url, self._api_key)
        if refused is not None:
            raise refused
        try:
            return response.json()
        except ValueError:
            raise StreamError(f"{url} did not answer with JSON") from None

    def _send(
        self, request: httpx.Request, *, stream: bool = False, watchdog: Watchdog | None = None
    ) -> httpx.Response:
        """Send `request`; once more when the reused connection it went out on closed with
        not one byte of answer.

        llama-server (the router more than a model's server) now and then closes a kept-alive
        connection, an idle one or the one a proxied answer came on, just as the next request
        goes out on it. The server has answered nothing, so sending again is safe, POSTs too;
        the closed connection is dropped, as is every pooled one the server closed, so it
        goes out on a fresh one. A connection closed unanswered on its first request is the
        server's fault, and reported; one that `watchdog` shut (a cancel, a hang) is ours.
        """
        try:
            return self._http.send(request, stream=stream)
        except httpx.RemoteProtocolError:
            if watchdog is not None and watchdog.reason:
                raise
            if not self._sockets.unanswered_on_reused(threading.get_ident()):
                raise
            log.debug(
                "%s %s met a closed connection; sending it again", request.method, request.url
            )
        return self._http.send(request, stream=stream)

    def stream_events(
        self,
        path: str,
        *,
        root: bool = True,
        cancel: threading.Event | None = None,
        on_open: Callable[[], None] | None = None,
    ) -> Iterator[dict]:
        """The JSON objects of a long-lived SSE stream at `path` (GET), until it ends or `cancel`.

        `on_open()` is called once the server accepted the stream (its headers arrived).

        Setting `cancel` shuts the socket down from a watchdog thread, so a reader
        waiting for the next event returns at once instead of at the next event.
        """
        url = (self.root if root else self.api_base) + path
        self._check_key()
        if cancel is not None and cancel.is_set():
            return
        thread = threading.get_ident()
        watchdog = Watchdog(lambda: self._sockets.socket_of(thread), None, cancel)
        try:
            with self._http.stream("GET", url, timeout=httpx.Timeout(None, connect=5.0)) as resp:
                # The request is out and its socket known: from now on a cancel shuts it.
                watchdog.start()
                refused = refusal(resp, url, self._api_key)
                if refused is not None:
                    raise refused
                if on_open is not None:
                    on_open()
                yield from data_objects(lines(resp, watchdog, self.max_line_bytes))
        except httpx.HTTPError as exc:
            if watchdog.reason == "cancelled":
                return
            raise self._failure(exc, url) from None
        finally:
            watchdog.stop()

    def loading(self, model: str) -> bool:
        """Whether the server lists `model` as being loaded (loading, downloading, waking).

        Asked while a request waits past idle_timeout for its response headers: a router
        loading the model may take minutes to begin the answer, anything else is a hang.
        """
        timeout = min(self.idle_timeout or 30.0, 30.0)
        try:
            listed = self.request_json("GET", "/models", timeout=timeout)
        except BackendError:
            return False
        # A sleeping model is loaded again for the request.
        return _listed_status(listed, model) in ("loading", "downloading", "sleeping")

    def _check_key(self) -> None:
        if self._key_problem:
            raise BackendError(self._key_problem, error_type="bad_api_key")

    # ------------------------------------------------------------------ the tool loop

    def stream_chat(
        self,
        request: ChatRequest,
        *,
        model: str | None = None,
        cancel: threading.Event | None = None,
        sent: threading.Event | None = None,
        before_read: Callable[[], None] | None = None,
        query: Mapping[str, str] | None = None,
        conversation: str | None = None,
        leave: threading.Event | None = None,
    ) -> Generator[StreamEvent, None, None]:
        """Stream one assistant turn as (kind, piece) events, running its tools as asked.

        `request` (a `turn.Turn`) is sent as built: its messages, tools, parameters and
        round cap; only later tool rounds are appended. `model` is the name this server
        knows the turn's model by (a provider's may differ; default: the turn's).
        Closing the generator, or setting `cancel`, closes the HTTP response at once so
        the server stops generating; no stats event follows a cancel. `sent` is set once
        the first request has been written to the socket, long before its answer's first
        event (a router may load a model first). `before_read` is called in this thread
        before each read from a reply's socket, once the events of the read before have
        been yielded: a window hands them on there, and may wait, so that a slow stream
        is read a few tokens at a time. `query` goes on the request's URL (a warm-up's
        `autoload=false`). A reply cut at the length limit (`finish_reason` "length") ends
        with a ("cut", "length") event before its stats.

        `conversation` (llama.cpp): each request carries it as `X-Conversation-Id`, so
        the server keeps the reply's stream; after each line that brought text a
        ("resume", {conversation, offset, content, reasoning}) event says where the reply
        stands (`Position`), a ("completion", id) event gives each round's completion id
        (what `resume.end_thinking` takes), and a connection that breaks is picked up again from there
        (`resume.resume_chat`), quietly, for as long as idle_timeout. Stopping such a reply
        also tells the server to stop it (`DELETE /v1/stream/<id>`), unless `leave` is
        set: the server then finishes it on its own.
        """
        model = request.model if model is None else model
        position = Position(conversation) if conversation else None
        tools = request.tools
        convo, params = request.messages(), dict(request.params)
        rounds = request.max_rounds if request.offer else 0
        last: Round | None = None
        for number in range(rounds + 1):
            state = Round()
            offering = number < rounds
            # Per round: a tool may come on mid-turn (read_skill_file once a skill with
            # files is loaded); an empty schema is a tool not offered yet. The first
            # round offers the tools as the turn was built.
            schemas = list(request.offer) if number == 0 else [t.schema for t in tools if t.schema]
            yield from self._stream_round(
                model,
                convo,
                schemas if offering else None,
                params,
                cancel,
                state,
                sent,
                before_read,
                query,
                position,
                leave,
            )
            last = state
            if state.cancelled:
                return
            calls = [state.calls[i] for i in sorted(state.calls)]
            if not offering or not calls:
                break
            for n, call in enumerate(calls):
                if not call.id:
                    call.id = f"call_{number}_{n}"
            convo.append(_assistant_message(state, calls))
            results: list[dict] = []
            for call in calls:
                announced, result = answer(tools, call.name, call.arguments)
                yield from announced
                yield from result.events
                results.append(_tool_message(call.id, result.text))
                if cancel is not None and cancel.is_set():
                    return
            if number + 1 == rounds:
                # The next round offers no tools. Saying so on the last result is what
                # makes the model answer instead of asking for a tool it cannot have; a
                # trailing system message would be rejected by many chat templates.
                results[-1]["content"] += "\n\n" + skills.NO_MORE_TOOLS
            convo.extend(results)
        if last is not None:
            if last.finish_reason == "length":
                # Cut by max_tokens or a full context: the reply is not whole.
                yield ("cut", last.finish_reason)
            yield (
                "stats",
                {"usage": last.usage, "timings": last.timings, "model": last.model or model},
            )

    # ------------------------------------------------------------------ one round

    def _stream_round(
        self,
        model: str,
        convo: list[dict],
        tools: list[dict] | None,
        params: dict | None,
        cancel: threading.Event | None,
        state: Round,
        sent: threading.Event | None = None,
        before_read: Callable[[], None] | None = None,
        query: Mapping[str, str] | None = None,
        position: Position | None = None,
        leave: threading.Event | None = None,
    ) -> Iterator[StreamEvent]:
        payload = request_body(model, convo, tools or [], params)
        state.per_token = bool(payload.get("timings_per_token"))
        url = self.api_base + "/chat/completions"
        if cancel is not None and cancel.is_set():
            state.cancelled = True
            return
        self._check_key()
        headers = {}
        if position is not None:
            # Each round is a stream of its own, under the reply's conversation id.
            position.offset = 0
            headers["X-Conversation-Id"] = position.conversation
        request = self._http.build_request("POST", url, json=payload, params=query, headers=headers)
        thread = threading.get_ident()
        watchdog = Watchdog(
            lambda: self._sockets.socket_of(thread),
            self.idle_timeout,
            cancel,
            probe=lambda: self.loading(model),
        )

        def on_sent() -> None:
            if sent is not None:
                sent.set()
            watchdog.start()

        self._sockets.on_sent[thread] = on_sent
        if before_read is not None:
            self._sockets.before_read[thread] = before_read
        try:
            try:
                response = self._send(request, stream=True, watchdog=watchdog)
            except httpx.HTTPError as exc:
                if watchdog.reason == "cancelled":
                    state.cancelled = True
                    return
                if watchdog.reason == "hung":
                    raise StallError(
                        f"{self.base_url} took the request but has not begun its answer in "
                        f"{self.idle_timeout:g} s, and it is not loading the model: the server "
                        "may be stopped or stuck. Restart it and try again, or raise "
                        "idle_timeout in the config if it needs longer.",
                        error_type="hung",
                    ) from None
                raise self._failure(exc, url) from None
            watchdog.arm()
            try:
                yield from self._read_round(response, url, watchdog, cancel, state, position)
            except resume.Dropped as drop:
                if position is None or self.resumable is False:
                    raise drop.error from None
                response.close()
                watchdog.stop()
                log.info("the reply broke at byte %d; reading on from there", position.offset)
                yield from resume.resume(self, position, state, cancel, drop.error)
            finally:
                response.close()
        finally:
            watchdog.stop()
            self._sockets.on_sent.pop(thread, None)
            self._sockets.before_read.pop(thread, None)
            resume.end_stream(self, position, state, leave)

    def _read_round(
        self,
        response: httpx.Response,
        url: str,
        watchdog: Watchdog,
        cancel: threading.Event | None,
        state: Round,
        position: Position | None = None,
    ) -> Iterator[StreamEvent]:
        try:
            refused = refusal(response, url, self._api_key)
            if refused is not None:
                raise refused
            if response.headers.get("content-type", "").startswith("application/json"):
                yield from whole_reply(read_capped(response, self.max_line_bytes), state)
                return
        except httpx.HTTPError as exc:
            if watchdog.reason == "cancelled":
                state.cancelled = True
                return
            raise resume.broken(self, exc, watchdog) from None
        except BackendError as exc:
            raise self._without_key(exc) from None
        yield from resume.read_lines(self, response, watchdog, cancel, state, position)

    def _without_key(self, exc: BackendError) -> BackendError:
        """`exc` with this client's API key masked: some gateways quote the key they got."""
        return without_key(exc, self._api_key)

    def _failure(self, exc: httpx.HTTPError, url: str) -> BackendError:
        """The BackendError for a request that got no response, the key masked."""
        # httpx and h11 quote the request's headers in some errors (an illegal header
        # value is shown whole), so the key is masked here as in every server error.
        return self._without_key(request_failure(exc, url, self.base_url))


def embeddings(
    client: Client, model: str, texts: Sequence[str], timeout: float = 60.0
) -> list[list[float]]:
    """One vector per text from the server's OpenAI-style `POST /v1/embeddings`, in order.

    Raises the BackendError tree (the key masked) when the server fails or refuses (a
    llama-server model not started with `--embeddings` answers 501), and StreamError when
    the answer holds no vector for each text.
    """
    answer = client.request_json(
        "POST", "/embeddings", timeout=timeout, json={"model": model, "input": list(texts)}
    )
    items = answer.get("data") if isinstance(answer, dict) else None
    try:
        ordered = sorted(items or [], key=lambda item: int(item.get("index", 0)))
        found = [[float(x) for x in item["embedding"]] for item in ordered]
    except (AttributeError, KeyError, TypeError, ValueError):
        found = []
    if len(found) != len(texts):
        raise StreamError(
            f"{client.api_base}/embeddings answered without a vector for each of the "
            f"{len(texts)} texts sent"
        )
    return found


def _listed_status(listed: object, model: str) -> object:
    """The status a `GET /models` answer gives `model` (by id or alias); None if unlisted."""
    entries = listed.get("data") if isinstance(listed, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and (
            model == entry.get("id") or model in (entry.get("aliases") or ())
        ):
            status = entry.get("status")
            return status.get("value") if isinstance(status, dict) else status
    return None


def _tool_message(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _assistant_message(state: Round, calls: list[Call]) -> dict:
    """The assistant turn that asked for the tools, as the next request must replay it."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(state.content) or None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                # llama.cpp parses replayed arguments as JSON for many chat templates and
                # fails the whole request on garbage; the model still sees its mistake in
                # the error tool result.
                "function": {
                    "name": c.name,
                    "arguments": c.arguments if _is_json_object(c.arguments) else "{}",
                },
            }
            for c in calls
        ],
    }
    # Interleaved-thinking models need their chain of thought replayed on the tool-call
    # message or the follow-up round ends in thinking with no answer; others ignore it.
    if state.reasoning:
        message["reasoning_content"] = "".join(state.reasoning)
    return message


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
