"""The MCP sessions, owned by one background thread with its own asyncio loop.

`Sessions` runs the loop thread; every MCP session (the official `mcp` SDK, stdio or
Streamable HTTP) lives there, each in the one task that owns it from start to stop (the
SDK's contexts must be entered and left in one task), and nothing of it touches the
caller's thread. The hub hands it what it needs: the start timeout, the mask for what
servers say, and the two ways a server's state changes (`set_state`, `failed`); it
submits coroutines (`start`, `stop`, `call`) with `submit`.

A stdio server is started through `mcp_stdio`'s launcher; a server whose stdout is not
UTF-8 fails, saying which bytes it wrote. Its `tools/list` is listed again on
`notifications/tools/list_changed`.

Errors: `call` raises `McpError` (a sentence for the model); a connection that breaks
mid-call marks the server failed first. Whatever a session raises at start becomes the
server's failure, never an exception in the caller.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llamachat.config import McpServerConfig
from llamachat.logs import RotatingLog
from llamachat.tools.mcp import mcp_log, mcp_stdio
from llamachat.tools.mcp.mcp_config import FAILED, IDLE, READY, McpError, ServerState, ToolInfo
from llamachat.tools.mcp.mcp_log import Mask

log = logging.getLogger(__name__)

# The OpenAI tools API accepts these names only.
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class ServerRecord:
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


class Sessions:
    """The loop thread and the sessions on it: start, stop and call a server's session."""

    def __init__(
        self,
        *,
        start_timeout: float,
        mask: Mask,
        set_state: Callable[..., None],
        failed: Callable[[ServerRecord, str], None],
    ) -> None:
        self.start_timeout = start_timeout
        self._mask = mask
        # set_state(server, **changes) replaces the server's state; failed(server, reason).
        self._set_state = set_state
        self._failed = failed
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="mcp hub", daemon=True)
        self._thread.start()

    def submit(self, coro: Any) -> Any:
        """Run `coro` on the loop thread; its concurrent Future."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def running(self) -> bool:
        """True until `end` has stopped the loop thread."""
        return self._thread.is_alive()

    def end(self, timeout: float) -> None:
        """Stop the loop thread, waiting at most `timeout` seconds for it."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

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

    async def start(self, server: ServerRecord) -> None:
        """Start `server`'s session (stopping the one it had) and wait until it is up or failed."""
        await self.stop(server)
        server.stop = asyncio.Event()
        started = asyncio.get_running_loop().create_future()
        server.owner = asyncio.create_task(self._own(server, started))
        with contextlib.suppress(Exception):
            await started

    async def stop(self, server: ServerRecord) -> None:
        """End `server`'s session, its process with it; cancelled if it will not end."""
        owner, server.owner = server.owner, None
        if owner is None or owner.done():
            return
        if server.stop is not None:
            server.stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), 8)
        except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - any end will do
            owner.cancel()

    async def _own(self, server: ServerRecord, started: asyncio.Future) -> None:
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
                mcp_log.note(server.log, bad_output[0], self._mask)
                asyncio.get_running_loop().call_soon(owner.cancel)

        mcp_log.notes_to(lambda line: mcp_log.note(server.log, line, self._mask))
        mcp_stdio.BAD_OUTPUT.set(on_bad_output)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if cfg.command:
                    reader_fd, errlog = mcp_log.stderr_pipe(server.log, server.stderr, self._mask)
                    stack.callback(errlog.close)
                    client = mcp_stdio.stdio_client(cfg, errlog, McpError)
                    streams = await stack.enter_async_context(client)
                else:
                    streams = await stack.enter_async_context(self._http(cfg))
                read, write = streams[0], streams[1]

                async def on_message(message: Any) -> None:
                    if log.isEnabledFor(logging.DEBUG):
                        log.debug("MCP %s says %s", cfg.name, self._mask(repr(message)))
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
                self._set_state(server, status=IDLE)
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
                reason = mcp_log.reason(exc, self.start_timeout)
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

    async def _list(self, server: ServerRecord) -> None:
        listed = await server.session.list_tools()
        tools = tuple(tool_info(server.cfg.name, tool) for tool in listed.tools)
        self._set_state(server, status=READY, error="", tools=tools)

    async def _refresh(self, server: ServerRecord) -> None:
        try:
            await asyncio.wait_for(self._list(server), self.start_timeout)
        except Exception as exc:  # noqa: BLE001 - the cached list stays
            log.warning("MCP server %s: tools/list failed: %s", server.cfg.name, exc)

    async def call(self, server: ServerRecord, tool: str, arguments: dict, timeout: float) -> Any:
        """Call `tool` of `server`'s session; McpError with a sentence when it cannot."""
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
            if is_protocol_error(exc):
                raise McpError(f"{server.cfg.name}_{tool} failed: {mcp_log.reason(exc)}") from None
            # The connection broke: the server crashed or closed; it starts again later.
            await asyncio.sleep(0.1)
            self._failed(server, f"the server stopped during a call ({mcp_log.reason(exc)})")
            if server.stop is not None:
                server.stop.set()
            raise McpError(
                f"the MCP server {server.cfg.name} stopped while answering "
                f"({mcp_log.reason(exc)}); it is started again at a later call"
            ) from None


def is_protocol_error(exc: BaseException) -> bool:
    """True for an error the server answered with (the session still works)."""
    return type(exc).__name__ in ("McpError", "MCPError") and "closed" not in str(exc).lower()


def tool_info(server: str, tool: Any) -> ToolInfo:
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
