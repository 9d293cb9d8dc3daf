"""What an MCP server says, written to its own log: its stderr, our notes, the SDK's complaints.

Each server has a rotating log (`logs.RotatingLog`) in llamachat's log folder. Its stderr
goes there through a pipe (`stderr_pipe`), whole lines, masked, and the last lines are
kept for the panel; llamachat's own lines about it go there through `note`; and each
thing the SDK complains of (garbage or invalid JSON-RPC on the server's stdout), which
would otherwise be a traceback on llamachat's stderr, becomes one line of the log of the
server whose task it came from (`notes_to`).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from llamachat.logs import RotatingLog
from llamachat.tools.mcp.mcp_config import NOTE_CAP, START_TIMEOUT, STDERR_LINE_CAP

Mask = Callable[[str], str]
"""Masks every configured secret in a text (the hub's `mask`)."""


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
            line += f": {reason(exc)}"
        note(line)
        return False


_TO_SERVER_LOG = _ToServerLog()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_TO_SERVER_LOG)


def notes_to(note: Callable[[str], None]) -> None:
    """Send the SDK's complaints from the current task (and those it spawns) to `note`."""
    _NOTE.set(note)


def note(server_log: RotatingLog, line: str, mask: Mask) -> None:
    """One line of llamachat's own about a server in its log (masked, one line)."""
    text = " ".join(mask(line).split())[:NOTE_CAP]
    server_log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n".encode())


def stderr_pipe(server_log: RotatingLog, kept: collections.deque, mask: Mask) -> tuple[int, Any]:
    """A pipe for a server's stderr: written to its log and kept (in `kept`) for the panel."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    pending = bytearray()

    def keep(lines: Sequence[bytes | bytearray]) -> None:
        # Whole lines are masked (a secret split over two reads is still found),
        # then written to the log and kept for the panel.
        masked = [mask(line.decode("utf-8", "replace")) for line in lines]
        server_log.write("".join(f"{line}\n" for line in masked).encode())
        kept.extend(line for line in masked if line)

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
    server_log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting\n".encode())
    return read_fd, os.fdopen(write_fd, "w")


def reason(exc: BaseException, start_timeout: float = START_TIMEOUT) -> str:
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
