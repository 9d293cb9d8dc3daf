"""MCP servers' tools in the tool loop: one hub owning every session, and its `Tool` entries.

`Hub(servers)` runs one background thread with its own asyncio loop; every MCP
session (the official `mcp` SDK, stdio or Streamable HTTP) lives there and nothing
of it touches the caller's thread. Callers use plain blocking methods, safe from any
thread but the loop's: `turn_tools` (start what the turn offers, wait a bounded
time, return `McpTool`s), `call`, `states` (a snapshot for the panel), `close`.

A server starts lazily, at the first turn that offers its tools, or at `start()`
when `autostart` is set. Its `tools/list` is cached and listed again on
`notifications/tools/list_changed`. A server that fails (at start, or its
connection breaks mid-call) is shown as failed with the last lines of its stderr,
and started again at a later call, after a backoff that doubles per failure. A
server that hangs at start-up only costs a turn `start_wait` seconds.

Child processes: each stdio server is started through `mcp_stdio`'s launcher, so neither
a server nor anything it started outlives llamachat, even one killed with SIGKILL. A server
whose stdout is not UTF-8 fails, saying which bytes it wrote. Its stderr
goes to a rotating log per server (`logs.RotatingLog`) in llamachat's log folder, and
so does one line for each thing the SDK complains of (garbage or invalid JSON-RPC on the server's stdout), which would
otherwise be a traceback on llamachat's stderr.

Secrets: what a server says (stderr, failures, tool descriptions) is shown in the panel
and written to logs with every configured secret masked (`Hub.mask`): the router's and
the providers' keys (`config_secrets`, given as `secrets`) and every server's env_vars
and header values.

Errors: nothing here raises into the tool loop. `McpTool.run` turns a denial, a
timeout, a dead server and a tool error into a tool result the model reads; `call`
raises `McpError` (str(): a sentence) for `McpTool` to convert.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import contextvars
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llamachat import logs
from llamachat.api_keys import mask_secret
from llamachat.config import Config, McpServerConfig
from llamachat.logs import RotatingLog
from llamachat.tools import mcp_stdio
from llamachat.tools.base import Tool, ToolError, ToolResult, json_arguments

log = logging.getLogger(__name__)

# What the model reads of one result at most; the rest is cut, and the cut is said.
RESULT_CAP = 20_000
# Images larger than this are described to the user, not kept in the history.
IMAGE_CAP = 1_000_000
# Seconds a server has to answer `initialize` and `tools/list`.
START_TIMEOUT = 30.0
# Seconds a turn waits for servers that are still starting before it goes on without them.
START_WAIT = 10.0
# Seconds before a failed server is started again: doubles per failure in a row, up to the cap.
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0
STDERR_LINES = 12
# A stderr "line" longer than this is logged in pieces of this size.
STDERR_LINE_CAP = 65536
# Characters of one line llamachat writes to a server's log about it.
NOTE_CAP = 500

# The OpenAI tools API accepts these names only.
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")

# Consent answers (`Consent` callbacks return one).
ALLOW_ONCE = "once"
ALLOW_ALWAYS = "always"
DENY = "deny"
Consent = Callable[[str, str], str]
"""Asked before a call runs with (tool name, JSON arguments); answers ALLOW_ONCE, ALLOW_ALWAYS or DENY."""

# Server states, as the panel shows them.
OFF = "off"  # disabled in the config
IDLE = "not started"
STARTING = "starting"
READY = "ready"
FAILED = "failed"


def config_secrets(cfg: Config) -> tuple[str, ...]:
    """The router's and the providers' keys that are set: what a Hub's `secrets` should be."""
    keys = [cfg.api_key(), *(provider.api_key() for provider in cfg.providers)]
    return tuple(key for key in keys if key)


def _server_secrets(cfg: McpServerConfig) -> list[str]:
    """The secret values a server is given: its env_vars' values and its headers' values."""
    environment = cfg.environment()
    return [
        *(environment.get(name, "") for name, _variable in cfg.env_vars),
        *cfg.headers().values(),
    ]


# The note-taker of the server whose session the current task serves: the tasks the SDK
# spawns inherit it, so its complaints about that server reach that server's log.
_NOTE: contextvars.ContextVar[Callable[[str], None]] = contextvars.ContextVar("mcp_note")
# The SDK's loggers that complain about what a server sent ("client" is its session's).
_SDK_LOGGERS = (
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.shared.dispatcher",
    "mcp.shared.jsonrpc_dispatcher",
    "client",
)


class _ToServerLog(logging.Filter):
    """Turns an SDK record about one of our servers into one line of that server's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        note = _NOTE.get(None)
        if note is None:
            return True
        line = record.getMessage()
        exc = record.exc_info[1] if record.exc_info else None
        errors = getattr(exc, "errors", None)
        if callable(errors) and errors():
            # Pydantic's first complaint and what it was about (the whole line when the
            # server wrote no JSON at all), quoted.
            first = errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ()))
            line += f": {where or 'the message'}: {first.get('msg', '')}"
            line += f" (got {first.get('input')!r:.200})"
        elif exc is not None:
            line += f": {_reason(exc)}"
        note(line)
        return False


_TO_SERVER_LOG = _ToServerLog()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_TO_SERVER_LOG)


class McpError(Exception):
    """A call that could not be made or answered; str() is the sentence the model reads."""


@dataclass(frozen=True)
class ToolInfo:
    """One tool a server lists: its wire name in the turn and the schema offered."""

    server: str
    tool: str  # the server's own name for it
    name: str  # <server>_<tool>, as the model calls it
    description: str
    schema: dict  # the OpenAI `tools` entry; {} when the server's schema is unusable
    problem: str = ""  # why it cannot be offered ('' when it can)


@dataclass(frozen=True)
class ServerState:
    """A server as the panel shows it: its state, last stderr lines and tools."""

    name: str
    status: str
    error: str = ""
    stderr: tuple[str, ...] = ()
    tools: tuple[ToolInfo, ...] = ()
    log_path: Path | None = None


@dataclass
class _Server:
    """The loop thread's record of one server; `state` is replaced whole, under the hub lock."""

    cfg: McpServerConfig
    state: ServerState
    log: RotatingLog
    stderr: collections.deque = field(default_factory=lambda: collections.deque(maxlen=64))
    session: Any = None
    owner: asyncio.Task | None = None
    stop: asyncio.Event | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    failures: int = 0
    retry_at: float = 0.0


class Hub:
    """Every MCP session, owned by one background thread with its own asyncio loop."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig] = (),
        *,
        log_dir: Path | None = None,
        start_timeout: float = START_TIMEOUT,
        start_wait: float = START_WAIT,
        on_change: Callable[[], None] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        self._log_dir = log_dir or logs.log_dir()
        # Masked in everything servers say, beside the servers' own (config_secrets).
        self.secrets = tuple(secrets)
        self.start_timeout = start_timeout
        self.start_wait = start_wait
        # Called from the loop thread whenever a state changes; the GUI posts it to its thread.
        self.on_change = on_change
        self._lock = threading.Lock()
        self._servers: dict[str, _Server] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="mcp hub", daemon=True)
        self._thread.start()
        self.configure(servers)

    # ------------------------------------------------------------------ any thread

    def configure(self, servers: Sequence[McpServerConfig]) -> None:
        """Follow a new server list: changed and removed servers stop, new ones wait to start."""
        wanted = {s.name: s for s in servers}
        with self._lock:
            for name in list(self._servers):
                server = self._servers[name]
                if wanted.get(name) != server.cfg:
                    self._submit(self._stop_server(server))
                    del self._servers[name]
            for name, cfg in wanted.items():
                if name not in self._servers:
                    status = IDLE if cfg.enabled else OFF
                    self._servers[name] = _Server(
                        cfg,
                        ServerState(name, status, log_path=self._log_dir / f"mcp-{name}.log"),
                        RotatingLog(self._log_dir / f"mcp-{name}.log"),
                    )
        self._changed()

    def mask(self, text: str) -> str:
        """`text` with every configured secret masked (what a server says, before it is shown)."""
        with self._lock:
            configs = [server.cfg for server in self._servers.values()]
        for secret in (*self.secrets, *(s for cfg in configs for s in _server_secrets(cfg))):
            text = mask_secret(text, secret)
        return text

    def start(self) -> None:
        """Start the servers marked `autostart` now, without waiting for them."""
        with self._lock:
            servers = [s for s in self._servers.values() if s.cfg.enabled and s.cfg.autostart]
        for server in servers:
            self._begin(server)

    def states(self) -> list[ServerState]:
        """Every configured server as it stands now, in config order."""
        with self._lock:
            return [server.state for server in self._servers.values()]

    def restart(self, name: str) -> None:
        """Stop server `name` if it runs and start it again, without waiting (the panel's)."""
        with self._lock:
            server = self._servers.get(name)
        if server is None or not server.cfg.enabled:
            return
        server.failures, server.retry_at = 0, 0.0
        with self._lock:
            server.ready.clear()
            server.state = replace(server.state, status=STARTING, error="")
        self._changed()
        self._submit(self._start_server(server))  # which stops it first

    def turn_tools(
        self,
        *,
        consent: Consent,
        disabled: Sequence[str] = (),
        cancel: threading.Event | None = None,
        skip: threading.Event | None = None,
        no_wait: Collection[str] = (),
        on_wait: Callable[[list[str]], None] | None = None,
    ) -> list[McpTool]:
        """The tools of every enabled server for one turn, starting those not started yet.

        Waits at most `start_wait` seconds for servers still starting (a hung one is left
        behind, still trying), but not for those named in `no_wait`, and no longer once
        `skip` is set; `on_wait` is called first with the names waited for, when there
        are any. `disabled` tools are left out.
        """
        with self._lock:
            servers = [s for s in self._servers.values() if s.cfg.enabled]
        for server in servers:
            if server.state.status in (IDLE, FAILED) and time.monotonic() >= server.retry_at:
                self._begin(server)
        waited = [s for s in servers if s.state.status == STARTING and s.cfg.name not in no_wait]
        if waited and on_wait is not None:
            on_wait([server.cfg.name for server in waited])
        deadline = time.monotonic() + self.start_wait
        for server in waited:
            while server.state.status == STARTING and time.monotonic() < deadline:
                if cancel is not None and cancel.is_set():
                    return []
                if skip is not None and skip.is_set():
                    break
                server.ready.wait(0.05)
        tools: list[McpTool] = []
        for server in servers:
            if server.state.status != READY:
                continue
            for info in server.state.tools:
                if info.problem or info.name in disabled:
                    continue
                tools.append(McpTool(self, info, server.cfg.timeout, consent))
        return tools

    def call(self, tool: ToolInfo, arguments: dict, timeout: float) -> Any:
        """Call `tool` and return the SDK's CallToolResult; McpError when there is none."""
        with self._lock:
            server = self._servers.get(tool.server)
        if server is None:
            raise McpError(f"the MCP server {tool.server} is no longer configured")
        if server.state.status != READY:
            wait = server.retry_at - time.monotonic()
            if server.state.status == FAILED and wait > 0:
                raise McpError(
                    f"the MCP server {tool.server} failed ({server.state.error}); it is "
                    f"started again in {wait:.0f} s"
                )
            if server.state.status != STARTING:
                self._begin(server)
            server.ready.wait(self.start_timeout)
            if server.state.status != READY:
                raise McpError(
                    f"the MCP server {tool.server} could not be started: "
                    f"{server.state.error or 'it did not answer in time'}"
                )
        future = self._submit(self._call(server, tool.tool, arguments, timeout))
        try:
            # The loop enforces `timeout`; this margin only guards against a stuck loop.
            return future.result(timeout + 5)
        except TimeoutError:
            future.cancel()
            raise McpError(f"{tool.name} did not answer within {timeout:g} s") from None

    def close(self, timeout: float = 5.0) -> None:
        """Stop every server (their processes end) and the loop thread."""
        if not self._thread.is_alive():
            return
        with self._lock:
            servers = list(self._servers.values())
        stops = [self._submit(self._stop_server(s)) for s in servers]
        deadline = time.monotonic() + timeout
        for stop in stops:
            with contextlib.suppress(Exception):
                stop.result(max(0.1, deadline - time.monotonic()))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(max(0.1, deadline - time.monotonic()))
        for server in servers:
            server.log.close()

    # ------------------------------------------------------------------ helpers

    def _submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _set(self, server: _Server, **changes: Any) -> None:
        with self._lock:
            server.state = replace(server.state, **changes)
        if server.state.status != STARTING:
            server.ready.set()
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("an MCP state listener failed")

    def _begin(self, server: _Server) -> None:
        with self._lock:
            if server.state.status == STARTING:
                return
            server.ready.clear()
            server.state = replace(server.state, status=STARTING, error="")
        self._changed()
        self._submit(self._start_server(server))

    def _failed(self, server: _Server, error: str) -> None:
        server.failures += 1
        delay = min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (server.failures - 1))
        server.retry_at = time.monotonic() + delay
        tail = tuple(server.stderr)[-STDERR_LINES:]
        error = self.mask(error)
        log.warning("MCP server %s failed: %s", server.cfg.name, error)
        self._set(server, status=FAILED, error=error, stderr=tail)

    # ------------------------------------------------------------------ the loop thread

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()
        # Whatever still runs (a server that would not stop) is cancelled with the loop.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _start_server(self, server: _Server) -> None:
        await self._stop_server(server)
        server.stop = asyncio.Event()
        started = asyncio.get_running_loop().create_future()
        server.owner = asyncio.create_task(self._own(server, started))
        with contextlib.suppress(Exception):
            await started

    async def _stop_server(self, server: _Server) -> None:
        owner, server.owner = server.owner, None
        if owner is None or owner.done():
            return
        if server.stop is not None:
            server.stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), 8)
        except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - any end will do
            owner.cancel()

    async def _own(self, server: _Server, started: asyncio.Future) -> None:
        """The task that owns the server's session from start to stop (the SDK's contexts
        must be entered and left in one task)."""
        from mcp import ClientSession

        cfg = server.cfg
        reader_fd = -1
        bad_output: list[str] = []
        owner = asyncio.current_task()
        assert owner is not None

        def on_bad_output(sample: bytes) -> None:
            # The SDK reads on, so the session is ended here, with the reason.
            if not bad_output:
                bad_output.append(
                    f"it wrote bytes that are not UTF-8 on its stdout ({sample!r}); MCP over "
                    "stdio is UTF-8 JSON, one message a line"
                )
                self._note(server, bad_output[0])
                asyncio.get_running_loop().call_soon(owner.cancel)

        _NOTE.set(lambda line: self._note(server, line))
        mcp_stdio.BAD_OUTPUT.set(on_bad_output)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if cfg.command:
                    reader_fd, errlog = self._stderr_pipe(server)
                    stack.callback(errlog.close)
                    client = mcp_stdio.stdio_client(cfg, errlog, McpError)
                    streams = await stack.enter_async_context(client)
                else:
                    streams = await stack.enter_async_context(self._http(cfg))
                read, write = streams[0], streams[1]

                async def on_message(message: Any) -> None:
                    if log.isEnabledFor(logging.DEBUG):
                        log.debug("MCP %s says %s", cfg.name, self.mask(repr(message)))
                    if getattr(message, "method", "") == "notifications/tools/list_changed":
                        asyncio.get_running_loop().create_task(self._refresh(server))

                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=on_message)
                )
                await asyncio.wait_for(session.initialize(), self.start_timeout)
                server.session = session
                await asyncio.wait_for(self._list(server), self.start_timeout)
                server.failures = 0
                if not started.done():
                    started.set_result(None)
                assert server.stop is not None
                await server.stop.wait()
            server.session = None
            if server.state.status == READY:
                self._set(server, status=IDLE)
        except asyncio.CancelledError:
            server.session = None
            if not bad_output:
                raise
            owner.uncancel()
            self._failed(server, bad_output[0])
        except BaseException as exc:  # noqa: BLE001 - the SDK raises groups; each is a failure
            server.session = None
            if server.state.status != FAILED:
                await asyncio.sleep(0.1)  # the last stderr lines arrive after the exit
                reason = _reason(exc, self.start_timeout)
                if not started.done() and cfg.command and "closed" in reason.lower():
                    reason = "it exited during start-up (its last stderr lines are below)"
                self._failed(server, reason)
        finally:
            if reader_fd >= 0:
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().remove_reader(reader_fd)
                with contextlib.suppress(OSError):
                    os.close(reader_fd)
            if not started.done():
                started.set_result(None)

    def _http(self, cfg: McpServerConfig) -> Any:
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

        missing = cfg.missing_variables()
        if missing:
            raise McpError(f"set {', '.join(missing)} in the environment")
        client = create_mcp_http_client(headers=cfg.headers())
        return streamable_http_client(cfg.url, http_client=client)

    def _stderr_pipe(self, server: _Server) -> tuple[int, Any]:
        """A pipe for the server's stderr: written to its log and kept for the panel."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        pending = bytearray()

        def keep(lines: Sequence[bytes | bytearray]) -> None:
            # Whole lines are masked (a secret split over two reads is still found),
            # then written to the log and kept for the panel.
            masked = [self.mask(line.decode("utf-8", "replace")) for line in lines]
            server.log.write("".join(f"{line}\n" for line in masked).encode())
            server.stderr.extend(line for line in masked if line)

        def on_readable() -> None:
            try:
                data = os.read(read_fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                asyncio.get_running_loop().remove_reader(read_fd)
                keep([bytes(pending)] if pending else [])
                pending.clear()
                return
            pending.extend(data)
            *lines, rest = pending.split(b"\n")
            if len(rest) > STDERR_LINE_CAP:
                lines, rest = [*lines, rest], bytearray()
            pending[:] = rest
            keep(lines)

        asyncio.get_running_loop().add_reader(read_fd, on_readable)
        server.log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting\n".encode())
        return read_fd, os.fdopen(write_fd, "w")

    def _note(self, server: _Server, line: str) -> None:
        """One line of llamachat's own about `server` in its log (masked, one line)."""
        text = " ".join(self.mask(line).split())[:NOTE_CAP]
        server.log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n".encode())

    async def _list(self, server: _Server) -> None:
        listed = await server.session.list_tools()
        tools = tuple(_info(server.cfg.name, tool) for tool in listed.tools)
        self._set(server, status=READY, error="", tools=tools)

    async def _refresh(self, server: _Server) -> None:
        try:
            await asyncio.wait_for(self._list(server), self.start_timeout)
        except Exception as exc:  # noqa: BLE001 - the cached list stays
            log.warning("MCP server %s: tools/list failed: %s", server.cfg.name, exc)

    async def _call(self, server: _Server, tool: str, arguments: dict, timeout: float) -> Any:
        session = server.session
        if session is None:
            raise McpError(f"the MCP server {server.cfg.name} is not running")
        try:
            return await asyncio.wait_for(session.call_tool(tool, arguments), timeout)
        except TimeoutError:
            raise McpError(
                f"{server.cfg.name}_{tool} did not answer within {timeout:g} s (the timeout "
                f"of the {server.cfg.name} server); the call was abandoned"
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes a sentence for the model
            if _is_protocol_error(exc):
                raise McpError(f"{server.cfg.name}_{tool} failed: {_reason(exc)}") from None
            # The connection broke: the server crashed or closed; it starts again later.
            await asyncio.sleep(0.1)
            self._failed(server, f"the server stopped during a call ({_reason(exc)})")
            if server.stop is not None:
                server.stop.set()
            raise McpError(
                f"the MCP server {server.cfg.name} stopped while answering "
                f"({_reason(exc)}); it is started again at a later call"
            ) from None


def _is_protocol_error(exc: BaseException) -> bool:
    """True for an error the server answered with (the session still works)."""
    return type(exc).__name__ in ("McpError", "MCPError") and "closed" not in str(exc).lower()


def _reason(exc: BaseException, start_timeout: float = START_TIMEOUT) -> str:
    """One line for an exception, looking inside the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"it did not answer within {start_timeout:g} s"
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        first = errors()[0] if errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        title = getattr(exc, "title", "answer")
        return f"it sent an invalid {title}: {where}: {first.get('msg', '')}"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _info(server: str, tool: Any) -> ToolInfo:
    """A listed tool as the turn offers it, or with the problem that keeps it out."""
    own = str(getattr(tool, "name", ""))
    name = _TOOL_NAME.sub("_", f"{server}_{own}")[:64]
    description = str(getattr(tool, "description", "") or "")
    schema = getattr(tool, "input_schema", None)
    if schema is None:
        schema = getattr(tool, "inputSchema", None)
    problem = ""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        problem = "its input schema is not a JSON object schema"
    elif not isinstance(schema.get("properties", {}), dict):
        problem = "its input schema's properties are not an object"
    if problem:
        return ToolInfo(server, own, name, description, {}, problem)
    entry = {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }
    return ToolInfo(server, own, name, description, entry)


def schema_text(info: ToolInfo) -> str:
    """The tool's entry as the request carries it (what its token cost is measured on)."""
    return json.dumps(info.schema, ensure_ascii=False)


@dataclass
class _Content:
    text: str
    images: list[dict]


def result_content(result: Any) -> _Content:
    """What a CallToolResult says, as text for the model plus images for the user."""
    parts: list[str] = []
    images: list[dict] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind == "image":
            data = str(getattr(block, "data", ""))
            size = len(data) * 3 // 4
            mime = str(getattr(block, "mime_type", "") or getattr(block, "mimeType", ""))
            parts.append(f"[image {mime}, {size:,} bytes: shown to the user]")
            if len(data) <= IMAGE_CAP:
                images.append({"mime": mime, "data": data})
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            uri = str(getattr(resource, "uri", ""))
            text = getattr(resource, "text", None)
            parts.append(f"[resource {uri}]\n{text}" if text else f"[binary resource {uri}]")
        elif kind == "resource_link":
            parts.append(
                f"[resource link: {getattr(block, 'uri', '')} {getattr(block, 'name', '')}]"
            )
        elif kind == "audio":
            data = str(getattr(block, "data", ""))
            parts.append(f"[audio, {len(data) * 3 // 4:,} bytes: not played]")
        else:
            parts.append(f"[{kind or 'unknown'} content: not shown]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    if getattr(result, "is_error", False):
        text = f"error: {text or 'the tool failed'}"
    return _Content(text, images)


def capped(text: str, cap: int = RESULT_CAP) -> str:
    """`text` cut to `cap` characters, saying so (the model learns the cap and the size)."""
    if len(text) <= cap:
        return text
    return (
        text[:cap] + f"\n\n[cut: the result had {len(text):,} characters; results are cut "
        f"at {cap:,}. Ask for less (a narrower query, a smaller range) if you need the rest.]"
    )


class McpTool(Tool):
    """One tool of an MCP server, as the tool loop calls it (asks consent first)."""

    def __init__(self, hub: Hub, info: ToolInfo, timeout: float, consent: Consent) -> None:
        self.hub = hub
        self.info = info
        self.name = info.name
        self.schema = info.schema
        self._timeout = timeout
        self._consent = consent

    def run(self, arguments: str) -> ToolResult:
        """Ask consent, call the server, and return what it said (capped) with a ``mcp_done``."""
        record: dict[str, Any] = {
            "name": self.name,
            "server": self.info.server,
            "tool": self.info.tool,
            "arguments": arguments,
            "result": "",
            "status": "ok",
            "images": [],
        }
        try:
            parsed = json_arguments(arguments, "a JSON object matching its parameters")
        except ToolError as exc:
            record.update(status="error", result=f"error: {exc}")
            return ToolResult(record["result"], [("mcp_done", record)])
        answer = self._consent(self.name, arguments)
        if answer not in (ALLOW_ONCE, ALLOW_ALWAYS):
            text = (
                f"The user did not allow this call of {self.name}; it was not run. Do not "
                "call it again in this reply; answer without it, or ask the user."
            )
            record.update(status="denied", result=text)
            return ToolResult(text, [("mcp_done", record)])
        try:
            result = self.hub.call(self.info, parsed, self._timeout)
        except McpError as exc:
            status = "timeout" if "did not answer within" in str(exc) else "error"
            # The server's own error message may repeat a secret it was given.
            text = f"error: {self.hub.mask(str(exc))}. Carry on without it, and tell the user if the answer needed it."
            record.update(status=status, result=text)
            return ToolResult(text, [("mcp_done", record)])
        content = result_content(result)
        text = capped(content.text)
        record.update(
            status="error" if getattr(result, "is_error", False) else "ok",
            result=text,
            images=content.images,
        )
        return ToolResult(text, [("mcp_done", record)])


def decode_image(record_image: dict) -> bytes:
    """The bytes of an image a `mcp_done` record carries (b'' when it is garbled)."""
    try:
        return base64.b64decode(str(record_image.get("data", "")), validate=False)
    except ValueError:
        return b""
