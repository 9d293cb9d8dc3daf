"""Picking a reply up again: reading its SSE lines with its place in the server's stream,
and reading on from that place, after a dropped connection or at the next start.

llama.cpp (the pinned b10068 build) keeps the SSE bytes of a request that carried an
`X-Conversation-Id` header under that id while it generates, whether or not the client
still reads: `GET /v1/stream/<id>?from=<byte offset>` replays them from any offset and
follows the generation to its end, `DELETE /v1/stream/<id>` stops it, `POST
/v1/streams/lookup` `{"conversation_ids": [..]}` tells whether the server has streams at
all (a 404 there: it has none, found out once per `Client`). A finished stream is kept
five minutes. Functions of a `client.Client`; errors: the `BackendError` tree, and `Dropped`
(internal to `client`) for a connection that went mid-reply.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from llamachat.errors import BackendError, ServerError, StallError, StreamError
from llamachat.router.stream import Position, Round, StreamEvent, handle_line, lines, refusal
from llamachat.router.transport import SocketTracker, Watchdog

log = logging.getLogger(__name__)


class Client(Protocol):
    """What of `client.Client` picking a reply up again uses."""

    root: str
    base_url: str
    idle_timeout: float | None
    max_line_bytes: int
    resumable: bool | None
    _api_key: str
    _http: httpx.Client
    _sockets: SocketTracker

    def request_json(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send one request and return its JSON."""

    def _without_key(self, exc: BackendError) -> BackendError:
        """`exc` with the API key masked."""


# A reply whose connection broke is read again from the server's copy of its stream
# (llama.cpp's `X-Conversation-Id` sessions): first at once, then after waits doubling
# from RETRY_FIRST up to RETRY_MAX, for as long as idle_timeout (or RESUME_PATIENCE).
RETRY_FIRST = 0.25
RETRY_MAX = 4.0
RESUME_PATIENCE = 120.0
STREAM_GONE = (
    "the server no longer holds the rest of this reply (it was restarted, or the reply "
    "ended more than 5 minutes ago)."
)


def new_conversation() -> str:
    """A fresh id for the X-Conversation-Id of one reply's requests."""
    return f"llamachat-{uuid.uuid4().hex}"


class Dropped(Exception):
    """Internal: the connection went in the middle of a reply; `error` if it stays down.

    `ended`: the body ended cleanly, short of the reply's end (the server's copy of the
    stream, read again, ends there too), rather than the connection breaking.
    """

    def __init__(self, error: StreamError, *, ended: bool = False) -> None:
        super().__init__(error.message)
        self.error = error
        self.ended = ended


def end_stream(
    client: Client, position: Position | None, state: Round, leave: threading.Event | None
) -> None:
    """A reply left before its end: the server stops it too, unless it is to finish it."""
    if position is None or state.done or state.finish_reason is not None:
        return
    if leave is not None and leave.is_set():
        return
    stop_stream(client, position.conversation)


def learn_resumable(client: Client, conversation: str) -> None:
    """Find out once whether the server keeps streams (a 404 may be one that ended)."""
    if client.resumable is not None:
        return
    try:
        client.request_json(
            "POST",
            "/v1/streams/lookup",
            root=True,
            timeout=10.0,
            json={"conversation_ids": [conversation]},
        )
    except ServerError as exc:
        if exc.status == 404:
            client.resumable = False
        return
    except BackendError:
        return
    client.resumable = True


def resume(
    client: Client,
    position: Position,
    state: Round,
    cancel: threading.Event | None,
    error: StreamError,
) -> Iterator[StreamEvent]:
    """Read the reply on from `position` off the server's copy of its stream,
    reconnecting with backoff while the server is out of reach; `error` once it
    stays so for idle_timeout, or the server no longer holds the stream."""
    url = f"{client.root}/v1/stream/{quote(position.conversation, safe='')}"
    patience = client.idle_timeout or RESUME_PATIENCE
    deadline = time.monotonic() + patience
    wait = RETRY_FIRST
    thread = threading.get_ident()
    while True:
        watchdog = Watchdog(lambda: client._sockets.socket_of(thread), client.idle_timeout, cancel)
        client._sockets.on_sent[thread] = watchdog.start
        before = position.offset
        try:
            request = client._http.build_request("GET", url, params={"from": position.offset})
            try:
                response = client._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                log.info("the reply's stream is out of reach: %s", exc)
            else:
                try:
                    if response.status_code == 404:
                        learn_resumable(client, position.conversation)
                        raise error
                    refused = refusal(response, url, client._api_key)
                    if refused is not None:
                        raise refused
                    client.resumable = True
                    watchdog.arm()
                    yield from read_lines(client, response, watchdog, cancel, state, position)
                    return
                except Dropped as drop:
                    if drop.ended:
                        raise drop.error from None
                    log.info("the reply's stream broke again at byte %d", position.offset)
                finally:
                    response.close()
        finally:
            watchdog.stop()
            client._sockets.on_sent.pop(thread, None)
        if watchdog.reason == "cancelled" or (cancel is not None and cancel.is_set()):
            state.cancelled = True
            return
        if position.offset > before:
            deadline, wait = time.monotonic() + patience, RETRY_FIRST
        if time.monotonic() + wait > deadline:
            raise error
        if cancel is not None and cancel.wait(wait):
            state.cancelled = True
            return
        if cancel is None:
            time.sleep(wait)
        wait = min(wait * 2, RETRY_MAX)


def read_lines(
    client: Client,
    response: httpx.Response,
    watchdog: Watchdog,
    cancel: threading.Event | None,
    state: Round,
    position: Position | None,
) -> Iterator[StreamEvent]:
    """The events of a reply's SSE body; `position` follows each whole line read.

    Raises Dropped when the connection breaks (or the body ends) before the reply did.
    """
    try:
        for line in lines(response, watchdog, client.max_line_bytes):
            if cancel is not None and cancel.is_set():
                state.cancelled = True
                return
            # Past [DONE] the body is only read to its end, so the connection goes
            # back to the pool instead of being closed half-read.
            if state.done:
                continue
            if position is None:
                yield from handle_line(line, state)
                continue
            text = False
            for kind, piece in handle_line(line, state):
                if state.completion and not state.announced:
                    state.announced = True
                    yield ("completion", state.completion)
                if kind == "content" or kind == "reasoning":
                    text = True
                    setattr(position, kind, getattr(position, kind) + len(str(piece)))
                yield kind, piece
            position.offset += len(line) + 1
            if text:
                yield position.event()
        if not state.done and state.finish_reason is None:
            raise Dropped(
                StreamError(
                    f"the reply from {client.base_url} ended before it was "
                    "complete; the server may have stopped or crashed."
                ),
                ended=True,
            )
    except httpx.HTTPError as exc:
        if watchdog.reason == "cancelled":
            state.cancelled = True
            return
        raise broken(client, exc, watchdog) from None
    except BackendError as exc:
        raise client._without_key(exc) from None


def broken(client: Client, exc: httpx.HTTPError, watchdog: Watchdog) -> Exception:
    """What a transport error in the middle of a reply is: a stall, or a drop."""
    if watchdog.reason == "stalled":
        return StallError(
            f"{client.base_url} sent nothing for {client.idle_timeout:g} s in the middle "
            "of the reply; gave up. Try again, or raise idle_timeout in the config."
        )
    return Dropped(
        StreamError(
            f"the connection to {client.base_url} broke in the middle of the "
            f"reply ({exc.__class__.__name__})."
        )
    )


def stop_stream(client: Client, conversation: str) -> None:
    """Tell the server to stop the reply it streams for `conversation` (errors ignored)."""
    url = f"{client.root}/v1/stream/{quote(conversation, safe='')}"
    try:
        client._http.delete(url, timeout=httpx.Timeout(5.0))
    except httpx.HTTPError as exc:
        log.info("could not stop the stream %s: %s", conversation, exc)


def resume_chat(
    client: Client,
    position: Position,
    *,
    model: str,
    cancel: threading.Event | None = None,
    before_read: Callable[[], None] | None = None,
    leave: threading.Event | None = None,
) -> Generator[StreamEvent, None, None]:
    """The rest of a reply an earlier run left, read from the server's copy of its
    stream from `position` on: its events as `Client.stream_chat` yields them (no tools are
    run: a round that ends in tool calls ends the reply). Raises StreamError
    (STREAM_GONE) when the server no longer holds it."""
    state = Round(per_token=True)
    thread = threading.get_ident()
    if before_read is not None:
        client._sockets.before_read[thread] = before_read
    try:
        yield from resume(client, position, state, cancel, StreamError(STREAM_GONE))
    finally:
        client._sockets.before_read.pop(thread, None)
        end_stream(client, position, state, leave)
    if state.cancelled:
        return
    if state.finish_reason == "length":
        yield ("cut", state.finish_reason)
    yield (
        "stats",
        {"usage": state.usage, "timings": state.timings, "model": state.model or model},
    )


def end_thinking(client: Client, completion: str, model: str) -> bool:
    """Ask llama.cpp to end the reasoning of `completion` now, so the model answers
    (`POST /v1/chat/completions/control`, `reasoning_end`; the request asked for
    `reasoning_control`). True when the server did; False when the reply is over or
    the server cannot. Raises nothing."""
    try:
        answer = client.request_json(
            "POST",
            "/chat/completions/control",
            timeout=10.0,
            json={"id": completion, "action": "reasoning_end", "model": model},
        )
    except BackendError as exc:
        log.info("the thinking of %s was not ended: %s", completion, exc)
        return False
    if not (isinstance(answer, dict) and answer.get("success") is True):
        log.info("the thinking of %s was not ended: %s", completion, answer)
        return False
    return True
