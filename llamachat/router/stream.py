"""Reading a server's answer: SSE lines into (kind, piece) events and one round's state.

`refusal` says why a response is no answer (a redirect, an error status); `lines` splits
a body into lines without holding more than a limit of one; `data_objects` gives the
objects of a long-lived event stream. `handle_line` reads one line of a chat reply (data
lines carry the JSON chunks) and `whole_reply` the single JSON completion of a server that
ignored stream=true: both yield `StreamEvent`s and gather into a `Round` what the tool loop
needs besides them (the tool calls, usage, timings, finish reason). Errors: the
`errors.BackendError` tree; a `StreamError` for an error chunk or a stream that is not
one (a garbled line, a line over the limit).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import httpx

from llamachat.errors import (
    BackendError,
    StreamError,
    redirect_error,
    server_error,
    without_key,
)
from llamachat.router.transport import Watchdog

log = logging.getLogger(__name__)

# Error bodies are read up to this size; the rest of a huge error page is noise.
MAX_ERROR_BYTES = 256 * 1024

StreamEvent = tuple[str, object]
"""One item stream_chat yields: (kind, piece), e.g. ("content", "Hel")."""


@dataclass
class Call:
    """One tool call being accumulated from deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class Position:
    """Where a resumable reply stands: its conversation id, the bytes of the current
    round's stream read so far (whole lines), and the text yielded up to there."""

    conversation: str
    offset: int = 0
    content: int = 0
    reasoning: int = 0

    def event(self) -> StreamEvent:
        """The ("resume", {...}) event saying where the reply stands now."""
        return (
            "resume",
            {
                "conversation": self.conversation,
                "offset": self.offset,
                "content": self.content,
                "reasoning": self.reasoning,
            },
        )


@dataclass
class Round:
    """What one streamed round produced besides the deltas it yielded."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, Call] = field(default_factory=dict)
    finish_reason: str | None = None
    done: bool = False
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    per_token: bool = False  # the request asked for timings_per_token
    model: str = ""
    completion: str = ""  # the server's id of the completion (what its control endpoint takes)
    announced: bool = False  # the ("completion", id) event was yielded
    cancelled: bool = False

    def add_tool_deltas(self, deltas: list) -> None:
        """Merge tool-call fragments: id/name come first, arguments in pieces, by index."""
        for delta in deltas:
            if not isinstance(delta, dict):
                continue
            index = delta.get("index")
            if not isinstance(index, int):
                index = self._index_without_index(delta.get("id"))
            call = self.calls.setdefault(index, Call())
            if isinstance(delta.get("id"), str) and not call.id:
                call.id = delta["id"]
            function = delta.get("function")
            if not isinstance(function, dict):
                continue
            name = function.get("name")
            # Most servers send the name once; some repeat it whole in every fragment.
            if isinstance(name, str) and name and name != call.name:
                call.name += name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments += arguments
            elif isinstance(arguments, dict):
                call.arguments += json.dumps(arguments)

    def _index_without_index(self, call_id: object) -> int:
        # Servers that omit index stream one call at a time: a new id starts a call.
        for index, call in self.calls.items():
            if call_id and call.id == call_id:
                return index
        if call_id or not self.calls:
            return len(self.calls)
        return max(self.calls)


def read_capped(response: httpx.Response, limit: int = MAX_ERROR_BYTES) -> bytes:
    """The body of `response`, up to `limit` bytes."""
    parts: list[bytes] = []
    size = 0
    for data in response.iter_bytes():
        parts.append(data)
        size += len(data)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def refusal(response: httpx.Response, url: str, key: str | None) -> BackendError | None:
    """The error for a response that is no answer (None for one that is), `key` masked.

    A redirect is never followed: the request, and the key with it, would go wherever it
    points. An error status gets the server's own message.
    """
    status = response.status_code
    if 300 <= status < 400:
        location = response.headers.get("location", "")
        return without_key(redirect_error(status, location, url), key)
    if status >= 400:
        return without_key(server_error(status, read_capped(response), url, secret=key), key)
    return None


def lines(response: httpx.Response, watchdog: Watchdog, limit: int) -> Iterator[bytes]:
    """Split the body into lines without ever holding more than `limit` bytes of one."""
    pending: list[bytes] = []
    pending_size = 0
    for data in response.iter_bytes():
        watchdog.feed()
        parts = data.split(b"\n")
        if len(parts) == 1:
            pending.append(data)
            pending_size += len(data)
            if pending_size > limit:
                raise StreamError(
                    f"the server sent a line longer than {limit:,} bytes; "
                    "that is not a reply stream."
                )
            continue
        if pending:
            pending.append(parts[0])
            parts[0] = b"".join(pending)
            pending.clear()
        tail = parts.pop()
        yield from parts
        pending_size = len(tail)
        if tail:
            pending.append(tail)
    if pending:
        yield b"".join(pending)


def data_objects(raw_lines: Iterable[bytes]) -> Iterator[dict]:
    """The JSON objects an event stream's data lines carry; any other line is skipped."""
    for raw in raw_lines:
        line = raw.rstrip(b"\r")
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        try:
            value = json.loads(data)
        except ValueError:
            log.debug("not an event: %s", preview(data))
            continue
        if isinstance(value, dict):
            yield value


def handle_line(raw: bytes, state: Round) -> Iterator[StreamEvent]:
    """Interpret one SSE line; data lines carry the JSON chunks."""
    line = raw.rstrip(b"\r")
    if not line or line.startswith(b":"):
        return
    field_name, _, value = line.partition(b":")
    if field_name in (b"event", b"id", b"retry"):
        return
    if field_name != b"data":
        raise StreamError(f"the server sent something that is not an event stream: {preview(line)}")
    data = value[1:] if value.startswith(b" ") else value
    if data.strip() == b"[DONE]":
        state.done = True
        return
    yield from _handle_chunk(_json_object(data, "chunk"), state, "delta")


def _handle_chunk(chunk: dict, state: Round, key: str) -> Iterator[StreamEvent]:
    error = chunk.get("error")
    if error:
        if isinstance(error, dict):
            raise StreamError(
                str(error.get("message") or "the server reported an error"),
                error_type=str(error.get("type") or ""),
                status=error.get("code") if isinstance(error.get("code"), int) else None,
            )
        raise StreamError(str(error))
    if isinstance(chunk.get("usage"), dict):
        state.usage = chunk["usage"]
    if isinstance(chunk.get("timings"), dict):
        state.timings = chunk["timings"]
        if state.per_token:
            # With timings_per_token every chunk carries the figures so far: a stopped
            # reply keeps them, and the meter follows the reply as it grows.
            yield ("timings", state.timings)
    if isinstance(chunk.get("prompt_progress"), dict):
        # llama.cpp's return_progress: total, cache, processed, time_ms while it reads.
        yield ("progress", chunk["prompt_progress"])
    if isinstance(chunk.get("model"), str):
        state.model = chunk["model"]
    if isinstance(chunk.get("id"), str) and not state.completion:
        state.completion = chunk["id"]
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return
    choice = choices[0]
    if choice.get("finish_reason"):
        state.finish_reason = str(choice["finish_reason"])
    delta = choice.get(key)
    if not isinstance(delta, dict):
        return
    # llama.cpp and DeepSeek say reasoning_content; vLLM and OpenRouter say reasoning.
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        state.reasoning.append(reasoning)
        yield ("reasoning", reasoning)
    content = delta.get("content")
    if isinstance(content, str) and content:
        state.content.append(content)
        yield ("content", content)
    if isinstance(delta.get("tool_calls"), list):
        state.add_tool_deltas(delta["tool_calls"])


def whole_reply(body: bytes, state: Round) -> Iterator[StreamEvent]:
    """A server that ignored stream=true answered with one JSON completion."""
    chunk = _json_object(body, "reply")
    choices = chunk.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        choice = {}
    message = choice.get("message")
    if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
        # Whole tool calls carry no index; give them their position so they merge as one.
        calls = [
            {**c, "index": i} for i, c in enumerate(message["tool_calls"]) if isinstance(c, dict)
        ]
        chunk = {**chunk, "choices": [{**choice, "message": {**message, "tool_calls": calls}}]}
    yield from _handle_chunk(chunk, state, "message")
    state.finish_reason = state.finish_reason or "stop"
    state.done = True


def _json_object(data: bytes, what: str) -> dict:
    """`data` as a JSON object; else a StreamError saying the server sent a bad `what`."""
    try:
        value = json.loads(data)
    except ValueError:
        raise StreamError(f"the server sent a {what} that is not JSON: {preview(data)}") from None
    if not isinstance(value, dict):
        raise StreamError(f"the server sent an unexpected {what}: {preview(data)}")
    return value


def preview(data: bytes) -> str:
    """The start of `data`, quoted, to name it in a message."""
    text = data[:120].decode("utf-8", "replace")
    return repr(text + ("…" if len(data) > 120 else ""))
