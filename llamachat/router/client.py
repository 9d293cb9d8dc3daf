"""The HTTP client for llama.cpp's router (or any OpenAI-compatible server) and the tool loop.

`Client.stream_chat()` is a generator of `(kind, piece)` events: `reasoning` and
`content` deltas, the events its tools hand the window (`search_start` / `search_done`
around each web search, `skill_loaded` for each skill the model loads, `tool_done` for
each skill file it reads), `progress` while llama.cpp reads the prompt (its
`prompt_progress`: total, cache, processed, time_ms, when the request asks
`return_progress`), `timings` whenever a chunk carries the figures so far
(`timings_per_token`), and one final `stats` event. With tools on (`tools.Tool`,
looked up by name) it runs the tool loop: up to a round cap, rounds offer the tools (a
tool with an empty schema sits a round out); a round that ends in tool calls gets every
call answered (failures included, as tool results the model reads, `tools.answer`) and
the request is sent again; one final round offers no tools, so the model answers.

Exceptions, raised by `Client` methods and by the `stream_chat` generator:

    BackendError           base class; attributes message, error_type, status
    ├── RouterUnreachable  nothing answers at the URL (refused, no route, DNS, connect
    │                      timeout); the message names the URL and says what to do
    ├── ServerError        HTTP status >= 400, carrying the server's error.message and
    │                      error.type (e.g. exceed_context_size_error) plus `details`
    ├── StreamError        an error chunk mid-stream, or a broken / garbled stream
    └── StallError         no byte for idle_timeout seconds in the middle of a reply

The API key only ever travels in the Authorization header: no message, log line or
exception here contains it (`mask_secret` hides it, or any 8-character piece of it, in
any quoting, from every error message). A key that no header can carry (non-ASCII,
control characters) fails each request with a BackendError naming its variable.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import httpcore
import httpx

from llamachat import skills
from llamachat.tools import web_search
from llamachat.tools.base import Tool, answer
from llamachat.tools.offer import offered
from llamachat.tools.skill_tools import SkillsConfig
from llamachat.tools.web_search import SearchConfig

log = logging.getLogger(__name__)

# A single SSE line longer than this is garbage, not a delta; 64 MiB leaves room for a
# 10 MB delta after JSON escaping while keeping a runaway stream from eating memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
# Error bodies are read up to this size; the rest of a huge error page is noise.
MAX_ERROR_BYTES = 256 * 1024

# The shortest piece of a secret that is masked on its own: a server that cuts a key
# short, or wraps it over two lines, still must not show most of it.
SECRET_FRAGMENT = 8

# What a request to llama.cpp's router asks for besides the reply: prompt processing
# progress, and the figures so far on every chunk (what a stopped reply keeps).
LLAMA_PARAMS = {"return_progress": True, "timings_per_token": True}

StreamEvent = tuple[str, object]
"""One item stream_chat yields: (kind, piece), e.g. ("content", "Hel")."""


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
    def tools(self) -> tuple[dict, ...]:
        """The schemas of the tools offered in the first round."""

    @property
    def params(self) -> Mapping[str, Any]:
        """The body fields besides the messages and tools."""

    @property
    def max_rounds(self) -> int:
        """How many rounds may call tools."""

    @property
    def search_cfg(self) -> SearchConfig | None:
        """The web search tool's settings, when it is offered."""

    @property
    def skills_cfg(self) -> SkillsConfig | None:
        """The skill tools' settings, when they are offered."""

    def messages(self) -> list[dict]:
        """The wire messages."""


class BackendError(Exception):
    """Something went wrong talking to the server; str() is a sentence for the user."""

    def __init__(self, message: str, *, error_type: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.status = status


class RouterUnreachable(BackendError):
    """Nothing answers at the server's URL."""


class ServerError(BackendError):
    """The server answered with an HTTP error; `details` holds its extra error fields."""

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "",
        status: int | None = None,
        details: dict | None = None,
    ) -> None:
        super().__init__(message, error_type=error_type, status=status)
        self.details = details or {}


class StreamError(BackendError):
    """The reply stream carried an error or broke."""


class StallError(BackendError):
    """The server went silent in the middle of a reply."""


def _quotings(secret: str) -> set[str]:
    """`secret` as it may appear in a message: raw, JSON-, repr- and URL-quoted."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        repr(secret.encode("utf-8", "backslashreplace"))[2:-1],
        urllib.parse.quote(secret, safe=""),
    }
    return {form for form in forms if form}


def mask_secret(text: str, secret: str | None) -> str:
    """`text` with `secret`, and every piece of it SECRET_FRAGMENT+ characters long, as ***."""
    if not secret or not text:
        return text
    for form in sorted(_quotings(secret), key=len, reverse=True):
        if len(form) < SECRET_FRAGMENT:
            text = text.replace(form, "***")
            continue
        grams = {form[i : i + SECRET_FRAGMENT] for i in range(len(form) - SECRET_FRAGMENT + 1)}
        parts: list[str] = []
        start = i = 0
        while i <= len(text) - SECRET_FRAGMENT:
            if text[i : i + SECRET_FRAGMENT] not in grams:
                i += 1
                continue
            end = i + SECRET_FRAGMENT
            while end < len(text) and text[i : end + 1] in form:
                end += 1
            parts += [text[start:i], "***"]
            start = i = end
        text = "".join(parts) + text[start:]
    return text


def key_problem(key: str | None, variable: str = "") -> str:
    """Why `key` cannot go in an Authorization header ("" when it can), naming `variable`."""
    if not key:
        return ""
    if not key.isascii():
        what = "a character that is not ASCII"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        what = "a control character (a line break, tab or similar)"
    else:
        return ""
    where = f"the environment variable {variable}" if variable else "the configured API key"
    return (
        f"The API key in {where} cannot be sent: it contains {what}. "
        f"Set {variable or 'it'} to the key alone."
    )


def api_base(base_url: str) -> str:
    """The OpenAI-style prefix for a configured URL (a bare host gets /v1)."""
    url = base_url.rstrip("/")
    return url if httpx.URL(url).path.strip("/") else url + "/v1"


def server_root(base_url: str) -> str:
    """The server root for llama.cpp's own endpoints (/props, /models/load, ...)."""
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")


def server_error(status: int, body: bytes, url: str) -> ServerError:
    """A ServerError from an error response's status and body (JSON or not)."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or f"HTTP {status}")
        details = {k: v for k, v in error.items() if k not in ("message", "type", "code")}
        return ServerError(
            message, error_type=str(error.get("type") or ""), status=status, details=details
        )
    if isinstance(error, str):
        return ServerError(error, status=status)
    text = body[:300].decode("utf-8", "replace").strip()
    return ServerError(
        f"{url} answered HTTP {status}" + (f": {text}" if text else ""), status=status
    )


@dataclass
class _Call:
    """One tool call being accumulated from deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Round:
    """What one streamed round produced besides the deltas it yielded."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    done: bool = False
    usage: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    per_token: bool = False  # the request asked for timings_per_token
    model: str = ""
    cancelled: bool = False

    def add_tool_deltas(self, deltas: list) -> None:
        """Merge tool-call fragments: id/name come first, arguments in pieces, by index."""
        for delta in deltas:
            if not isinstance(delta, dict):
                continue
            index = delta.get("index")
            if not isinstance(index, int):
                index = self._index_without_index(delta.get("id"))
            call = self.calls.setdefault(index, _Call())
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


class _SocketTracker(httpcore.NetworkBackend):
    """httpcore's default network backend, remembering the socket each thread last wrote.

    A request waiting for its response (a router loading a model, a long prompt being
    processed) sits in recv() on that socket, and no httpx call made from another thread
    wakes it; shutting the socket down does, at once, and tells the server to stop.
    """

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()
        self._writers: dict[int, socket.socket] = {}
        # Called, and dropped, at the first read a thread makes after writing: its request
        # is out then (httpcore writes a whole request before it reads the answer).
        self.on_sent: dict[int, Callable[[], None]] = {}
        # Called before each read a thread makes, for as long as it is set.
        self.before_read: dict[int, Callable[[], None]] = {}

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Open a TCP stream whose writes are tracked."""
        return _TrackedStream(
            self._backend.connect_tcp(
                host,
                port,
                timeout=timeout,
                local_address=local_address,
                socket_options=socket_options,
            ),
            self,
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        """Open a Unix socket stream whose writes are tracked."""
        return _TrackedStream(
            self._backend.connect_unix_socket(path, timeout=timeout, socket_options=socket_options),
            self,
        )

    def sleep(self, seconds: float) -> None:
        """Sleep, as the pool's retry logic asks."""
        self._backend.sleep(seconds)

    def socket_of(self, thread_id: int) -> socket.socket | None:
        """The socket `thread_id` last sent a request on."""
        return self._writers.get(thread_id)


class _TrackedStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, tracker: _SocketTracker) -> None:
        self._stream = stream
        self._tracker = tracker

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        tracker = self._tracker
        if tracker.on_sent or tracker.before_read:
            thread = threading.get_ident()
            on_sent = tracker.on_sent.pop(thread, None)
            if on_sent is not None:
                on_sent()
            before_read = tracker.before_read.get(thread)
            if before_read is not None:
                before_read()
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._tracker._writers[threading.get_ident()] = self._stream.get_extra_info("socket")
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _TrackedStream(
            self._stream.start_tls(ssl_context, server_hostname, timeout), self._tracker
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


_CORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ProxyError,
)


def _httpx_error(exc: Exception, request: httpx.Request) -> httpx.HTTPError:
    # httpcore's and httpx's transport exceptions share their names.
    kind = getattr(httpx, type(exc).__name__, httpx.TransportError)
    return kind(str(exc), request=request)


@cache
def shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle costs ~15 ms each time."""
    return httpx.create_ssl_context()


class _Transport(httpx.BaseTransport):
    """httpx over an httpcore pool that uses _SocketTracker (httpx cannot be given one)."""

    def __init__(self, sockets: _SocketTracker) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=shared_ssl_context(),
            max_connections=100,
            max_keepalive_connections=20,
            # Under llama-server's own 5 s keep-alive, so an idle connection is never
            # reused at the moment the server closes it.
            keepalive_expiry=4.0,
            network_backend=sockets,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send one request through the pool."""
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = self._pool.handle_request(core)
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc, request) from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response, request),
            extensions=response.extensions,
        )

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_stream()
        except _CORE_ERRORS as exc:
            raise _httpx_error(exc, self._request) from exc

    def close(self) -> None:
        self._response.close()


class _Watchdog:
    """Shuts the request's socket down on cancel, on a stall, or when the server hangs.

    Cancel works from the moment the request is sent. The idle clock only starts when
    the response headers arrive, because before that a router may be loading a model
    for minutes; so a wait for headers longer than idle_timeout asks `probe` (on a
    thread of its own, so a cancel is not held up) whether the server is still there:
    a model loading or a server that answers means wait on, no answer means it hangs
    (stopped, or a socket that accepts and never replies). The reader checks `reason`
    to tell a stall, a hang or a cancel from a real network error.

    The watch thread starts once the request is written (`start`; before that there is
    no socket to shut down, and starting a thread costs the request ~1 ms). It sleeps on
    the cancel event itself until the idle deadline, so a cancel wakes it at once and a
    streaming reply does not wake it at all (`feed` only moves the deadline); it looks
    again at least every MAX_REST seconds, which is also how long it may outlive `stop`.
    """

    MAX_REST = 1.0
    PROBE_TICK = 0.05

    def __init__(
        self,
        find_socket: Callable[[], socket.socket | None],
        idle_timeout: float | None,
        cancel: threading.Event | None,
        probe: Callable[[], bool] | None = None,
    ) -> None:
        self.reason = ""
        self._find_socket = find_socket
        self._idle = idle_timeout if idle_timeout and idle_timeout > 0 else None
        self._cancel = cancel
        self._probe = probe
        self._verdict: bool | None = None
        self._probing = False
        self._last = time.monotonic()
        self._armed = False
        self._stop = threading.Event()

    def start(self) -> None:
        """Start watching (the request has been written)."""
        self._last = time.monotonic()
        if (self._idle or self._cancel is not None) and not self._stop.is_set():
            threading.Thread(
                target=self._run, daemon=True, name="llamachat-stream-watchdog"
            ).start()

    def arm(self) -> None:
        """Start the idle clock (the response headers arrived)."""
        self._last = time.monotonic()
        self._armed = True

    def feed(self) -> None:
        """Note that bytes arrived."""
        self._last = time.monotonic()

    def stop(self) -> None:
        """End the watch (the round finished or was closed)."""
        self._stop.set()

    def _ask_probe(self) -> None:
        try:
            self._verdict = bool(self._probe and self._probe())
        except Exception:  # a probe that breaks says nothing about the server: wait on
            log.exception("the server status check failed")
            self._verdict = True

    def _waiting_hangs(self) -> bool:
        """Whether the wait for headers, past idle_timeout, is a hang (False: wait on)."""
        if self._probe is None:
            return False
        if not self._probing:
            self._probing, self._verdict = True, None
            threading.Thread(target=self._ask_probe, daemon=True, name="llamachat-probe").start()
            return False
        if self._verdict is None:
            return False
        self._probing = False
        if self._verdict:
            self._last = time.monotonic()
            return False
        return True

    def _rest(self) -> float:
        """How long to sleep before looking again."""
        if self._probing:
            return self.PROBE_TICK
        if self._idle is None:
            return self.MAX_REST
        left = self._last + self._idle - time.monotonic()
        # Past the deadline yet still watching: headers not in, the server looked at.
        return min(self.MAX_REST, left) if left > 0 else self.PROBE_TICK

    def _run(self) -> None:
        # Waiting on the cancel event wakes the thread the moment it is set; with no
        # cancel event, stop() wakes it.
        wake = self._cancel if self._cancel is not None else self._stop
        while True:
            wake.wait(self._rest())
            if self._stop.is_set():
                return
            silent = self._idle is not None and time.monotonic() - self._last > self._idle
            if self._cancel is not None and self._cancel.is_set():
                self.reason = "cancelled"
            elif self._armed and silent:
                self.reason = "stalled"
            elif not self._armed and silent and self._waiting_hangs():
                self.reason = "hung"
            else:
                continue
            sock = self._find_socket()
            if sock is not None and not self._stop.is_set():
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return


class _ManagedKey(httpx.Auth):
    """Sends the key of the llama-server llamachat started, looked up at each request.

    Looked up late because the server usually starts after the client is made (the
    window lists models while it starts), and another llamachat may restart it with a new key.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from llamachat.router.server import managed_key

        key = managed_key(self._client.base_url)
        if key:
            # Known to the client too, so its error messages mask it.
            self._client._api_key = key
            request.headers["Authorization"] = f"Bearer {key}"
        yield request


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
        self._api_key = api_key or ""
        # A key no header can carry would fail inside httpx with the key in the message;
        # every request fails instead with this sentence.
        self._key_problem = key_problem(api_key, api_key_env)
        headers = (
            {"Authorization": f"Bearer {api_key}"} if api_key and not self._key_problem else {}
        )
        self._sockets = _SocketTracker()
        self._http = httpx.Client(
            headers=headers,
            # With no key configured, the server may be one llamachat started: it wants its
            # own key, which no config names.
            auth=_ManagedKey(self) if api_key is None else None,
            transport=_Transport(self._sockets),
            timeout=httpx.Timeout(
                connect=connect_timeout, read=read_timeout, write=connect_timeout * 6, pool=None
            ),
        )
        self._search_http: httpx.Client | None = None

    def _search_client(self) -> httpx.Client:
        # Made at the first search, not on the way to the first request.
        if self._search_http is None:
            self._search_http = httpx.Client()
        return self._search_http

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()
        if self._search_http is not None:
            self._search_http.close()

    # ------------------------------------------------------------------ plain requests

    def request_json(
        self,
        method: str,
        path: str,
        *,
        root: bool = False,
        timeout: float | None = 30.0,
        idempotent: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Send one request to `api_base + path` (or `root + path`) and return its JSON.

        An `idempotent` request (by default a GET) is sent once more when the server closed
        the connection it went out on without answering.
        """
        url = (self.root if root else self.api_base) + path
        self._check_key()
        if idempotent is None:
            idempotent = method == "GET"
        attempts = 2 if idempotent else 1
        for attempt in range(attempts):
            try:
                response = self._http.request(
                    method,
                    url,
                    timeout=httpx.Timeout(timeout, connect=self._http.timeout.connect),
                    **kwargs,
                )
                break
            except httpx.RemoteProtocolError as exc:
                # llama-server now and then closes a connection (an idle kept-alive one, a
                # proxied answer's) just as a request goes out on it; a fresh one answers.
                if attempt + 1 == attempts:
                    raise self._failure(exc, url) from None
                log.debug("%s %s met a closed connection; sending it again", method, url)
            except httpx.HTTPError as exc:
                raise self._failure(exc, url) from None
        if response.status_code >= 400:
            raise self._without_key(server_error(response.status_code, response.content, url))
        try:
            return response.json()
        except ValueError:
            raise StreamError(f"{url} did not answer with JSON") from None

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
        watchdog = _Watchdog(lambda: self._sockets.socket_of(thread), None, cancel)
        try:
            with self._http.stream("GET", url, timeout=httpx.Timeout(None, connect=5.0)) as resp:
                # The request is out and its socket known: from now on a cancel shuts it.
                watchdog.start()
                if resp.status_code >= 400:
                    raise self._without_key(server_error(resp.status_code, _read_capped(resp), url))
                if on_open is not None:
                    on_open()
                for raw in _lines(resp, watchdog, self.max_line_bytes):
                    line = raw.rstrip(b"\r")
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    try:
                        value = json.loads(data)
                    except ValueError:
                        log.debug("not an event: %s", _preview(data))
                        continue
                    if isinstance(value, dict):
                        yield value
        except httpx.HTTPError as exc:
            if watchdog.reason == "cancelled":
                return
            raise self._failure(exc, url) from None
        finally:
            watchdog.stop()

    def answers(self, model: str) -> bool:
        """Whether the server still answers for `model`: listed as loading, or responsive.

        Asked while a request waits for its response headers. A router lists a loading
        model as such; a loaded one runs in a server of its own behind the router, so
        that one is asked too (`/props`, which never starts a load).
        """
        timeout = min(self.idle_timeout or 30.0, 30.0)
        try:
            listed = self.request_json("GET", "/models", timeout=timeout)
        except ServerError:
            return True  # it answered, if only with an error
        except BackendError:
            return False
        entries = listed.get("data") if isinstance(listed, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, dict):
                continue
            if model != entry.get("id") and model not in (entry.get("aliases") or ()):
                continue
            status = entry.get("status")
            value = status.get("value") if isinstance(status, dict) else status
            if value in ("loading", "downloading"):
                return True
            if value != "loaded":
                return True  # not this model's server that keeps the request waiting
            try:
                self.request_json(
                    "GET",
                    "/props",
                    root=True,
                    timeout=timeout,
                    params={"model": model, "autoload": "false"},
                )
            except ServerError:
                return True
            except BackendError:
                return False
        return True

    def _check_key(self) -> None:
        if self._key_problem:
            raise BackendError(self._key_problem, error_type="bad_api_key")

    def _unreachable(self, exc: Exception) -> RouterUnreachable:
        return RouterUnreachable(
            f"Cannot reach the server at {self.base_url} ({exc.__class__.__name__}: {exc}). "
            "Start llama-server in router mode there, or set router_url in the config "
            "to where it runs.",
            error_type="unreachable",
        )

    # ------------------------------------------------------------------ the tool loop

    def stream_chat(
        self,
        model: str,
        messages: Sequence[dict] = (),
        search_cfg: SearchConfig | None = None,
        skills_cfg: SkillsConfig | None = None,
        *,
        cancel: threading.Event | None = None,
        params: dict | None = None,
        tools: Sequence[Tool] | None = None,
        max_rounds: int | None = None,
        sent: threading.Event | None = None,
        extra_tools: Sequence[Tool] = (),
        extra_rounds: int = 2,
        before_read: Callable[[], None] | None = None,
        request: ChatRequest | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Generator[StreamEvent, None, None]:
        """Stream one assistant turn as (kind, piece) events, running tools as asked.

        With `request` (a `turn.Turn`), that request is sent as built: its messages,
        tools, parameters and round cap; `extra_tools` run the tools it offers beyond
        the built-in ones (an MCP server's), and only later tool rounds are appended.
        Without it, the request is `messages` and `params`; the tools offered are `tools`
        when given (called for up to `max_rounds` rounds, default 2), else the ones
        `search_cfg` and `skills_cfg` turn on (`tools.offered`) plus `extra_tools` (for
        `extra_rounds` rounds; the built-in tools win a clash of names), and today's
        date goes into the system message while web search is offered.
        Closing the generator, or setting `cancel`, closes the HTTP response at once so
        the server stops generating; no stats event follows a cancel. `sent` is set once
        the first request has been written to the socket, long before its answer's first
        event (a router may load a model first). `before_read` is called in this thread
        before each read from a reply's socket, once the events of the read before have
        been yielded: a window hands them on there, and may wait, so that a slow stream
        is read a few tokens at a time. `query` goes on the request's URL (a warm-up's
        `autoload=false`). The caller's `messages` list and dicts are never modified.
        """
        first: list[dict] | None = None
        if request is not None:
            # Only the extra tools the request offers can be called (others are unknown).
            names = {schema.get("function", {}).get("name") for schema in request.tools}
            extra = [t for t in extra_tools if t.name in names]
            offer, _rounds = offered(
                request.search_cfg, request.skills_cfg, self._search_client, extra
            )
            rounds, first = request.max_rounds, list(request.tools)
            convo, params = request.messages(), dict(request.params)
        elif tools is None:
            offer, rounds = offered(
                search_cfg, skills_cfg, self._search_client, extra_tools, extra_rounds
            )
        else:
            offer, rounds = list(tools), 2
        if max_rounds is not None:
            rounds = max_rounds
        rounds = rounds if offer else 0
        if request is None:
            convo = [dict(m) for m in messages]
            if any(t.name == web_search.TOOL_NAME for t in offer):
                convo = _with_date_note(convo)
        last: _Round | None = None
        for number in range(rounds + 1):
            state = _Round()
            offering = number < rounds
            # Per round: a tool may come on mid-turn (read_skill_file once a skill with
            # files is loaded); an empty schema is a tool not offered yet. A built
            # request's first round offers its tools as built.
            schemas = (
                first
                if number == 0 and first is not None
                else [t.schema for t in offer if t.schema]
            )
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
                announced, result = answer(offer, call.name, call.arguments)
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
        state: _Round,
        sent: threading.Event | None = None,
        before_read: Callable[[], None] | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Iterator[StreamEvent]:
        payload = request_body(model, convo, tools or [], params)
        state.per_token = bool(payload.get("timings_per_token"))
        url = self.api_base + "/chat/completions"
        if cancel is not None and cancel.is_set():
            state.cancelled = True
            return
        self._check_key()
        request = self._http.build_request("POST", url, json=payload, params=query)
        thread = threading.get_ident()
        watchdog = _Watchdog(
            lambda: self._sockets.socket_of(thread),
            self.idle_timeout,
            cancel,
            probe=lambda: self.answers(model),
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
                response = self._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                if watchdog.reason == "cancelled":
                    state.cancelled = True
                    return
                if watchdog.reason == "hung":
                    raise StallError(
                        f"{self.base_url} took the request but has not answered for "
                        f"{self.idle_timeout:g} s, and it does not answer a status check "
                        "either: the server may be stopped or stuck. Restart it and try again.",
                        error_type="hung",
                    ) from None
                raise self._failure(exc, url) from None
            watchdog.arm()
            try:
                yield from self._read_round(response, url, watchdog, cancel, state)
            finally:
                response.close()
        finally:
            watchdog.stop()
            self._sockets.on_sent.pop(thread, None)
            self._sockets.before_read.pop(thread, None)

    def _read_round(
        self,
        response: httpx.Response,
        url: str,
        watchdog: _Watchdog,
        cancel: threading.Event | None,
        state: _Round,
    ) -> Iterator[StreamEvent]:
        try:
            if response.status_code >= 400:
                raise server_error(response.status_code, _read_capped(response), url)
            if response.headers.get("content-type", "").startswith("application/json"):
                yield from _whole_reply(_read_capped(response, self.max_line_bytes), state)
                return
            for line in _lines(response, watchdog, self.max_line_bytes):
                if cancel is not None and cancel.is_set():
                    state.cancelled = True
                    return
                # Past [DONE] the body is only read to its end, so the connection goes
                # back to the pool instead of being closed half-read.
                if not state.done:
                    yield from _handle_line(line, state)
            if not state.done and state.finish_reason is None:
                raise StreamError(
                    f"the reply from {self.base_url} ended before it was "
                    "complete; the server may have stopped or crashed."
                )
        except httpx.HTTPError as exc:
            if watchdog.reason == "cancelled":
                state.cancelled = True
                return
            if watchdog.reason == "stalled":
                raise StallError(
                    f"{self.base_url} sent nothing for {self.idle_timeout:g} s in the middle "
                    "of the reply; gave up. Try again, or raise idle_timeout in the config."
                ) from None
            raise StreamError(
                f"the connection to {self.base_url} broke in the middle of the "
                f"reply ({exc.__class__.__name__})."
            ) from None
        except BackendError as exc:
            raise self._without_key(exc) from None

    def _without_key(self, exc: BackendError) -> BackendError:
        """`exc` with this client's API key masked: some gateways quote the key they got."""
        key = self._api_key
        if key:
            exc.message = mask_secret(exc.message, key)
            exc.args = (exc.message,)
            if isinstance(exc, ServerError):
                exc.details = {
                    k: mask_secret(v, key) if isinstance(v, str) else v
                    for k, v in exc.details.items()
                }
        return exc

    def _failure(self, exc: httpx.HTTPError, url: str) -> BackendError:
        """The BackendError for a request that got no response, the key masked."""
        # httpx and h11 quote the request's headers in some errors (an illegal header
        # value is shown whole), so the key is masked here as in every server error.
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return self._without_key(self._unreachable(exc))
        if isinstance(exc, httpx.TimeoutException):
            return StallError(f"{url} did not answer in time; the server may be stuck.")
        return self._without_key(
            StreamError(f"the request to {url} failed ({exc.__class__.__name__}: {exc}).")
        )


def _tool_message(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _assistant_message(state: _Round, calls: list[_Call]) -> dict:
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


def _with_date_note(convo: list[dict]) -> list[dict]:
    """Put today's date into the system prompt once (a new system message if none)."""
    note = web_search.date_note()
    if convo and convo[0].get("role") == "system":
        text = convo[0].get("content")
        if isinstance(text, str):
            if note not in text:
                convo[0] = {**convo[0], "content": f"{text}\n\n{note}" if text else note}
            return convo
    return [{"role": "system", "content": note}, *convo]


def _read_capped(response: httpx.Response, limit: int = MAX_ERROR_BYTES) -> bytes:
    parts: list[bytes] = []
    size = 0
    for data in response.iter_bytes():
        parts.append(data)
        size += len(data)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def _lines(response: httpx.Response, watchdog: _Watchdog, limit: int) -> Iterator[bytes]:
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


def _handle_line(raw: bytes, state: _Round) -> Iterator[StreamEvent]:
    """Interpret one SSE line; data lines carry the JSON chunks."""
    line = raw.rstrip(b"\r")
    if not line or line.startswith(b":"):
        return
    field_name, _, value = line.partition(b":")
    if field_name in (b"event", b"id", b"retry"):
        return
    if field_name != b"data":
        raise StreamError(
            f"the server sent something that is not an event stream: {_preview(line)}"
        )
    data = value[1:] if value.startswith(b" ") else value
    if data.strip() == b"[DONE]":
        state.done = True
        return
    yield from _handle_chunk(_json_object(data, "chunk"), state, "delta")


def _handle_chunk(chunk: dict, state: _Round, key: str) -> Iterator[StreamEvent]:
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


def _whole_reply(body: bytes, state: _Round) -> Iterator[StreamEvent]:
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
        raise StreamError(f"the server sent a {what} that is not JSON: {_preview(data)}") from None
    if not isinstance(value, dict):
        raise StreamError(f"the server sent an unexpected {what}: {_preview(data)}")
    return value


def _preview(data: bytes) -> str:
    text = data[:120].decode("utf-8", "replace")
    return repr(text + ("…" if len(data) > 120 else ""))
