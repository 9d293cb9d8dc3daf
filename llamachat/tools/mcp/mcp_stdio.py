"""How an MCP server runs on stdio: the launcher that keeps its processes in hand, and its stdout.

`stdio_client(cfg, errlog)` starts a server's command through `LAUNCHER`, a tiny program
that leads the server's own process group and asks the kernel to signal it when the hub's
thread dies (PR_SET_PDEATHSIG, as the router's server.py does for llama-server). It forks
the configured command and, when the server exits or llamachat dies (even by SIGKILL),
kills every process below it: the group, and what left the group (`setsid`, a daemon's
double fork), which the launcher, a child subreaper (PR_SET_CHILD_SUBREAPER), inherits
when its parent dies.

The server's stdout is decoded as UTF-8 (MCP's stdio messages are UTF-8 JSON) with the
`STDOUT_ERRORS` handler: bytes that are not UTF-8 are replaced, so the SDK's reader goes
on (it hangs when a decoding error escapes it), and `BAD_OUTPUT`'s callback, set by the
task that owns the server, is told which bytes they were.

Errors: `stdio_client` raises the `not_found` class it is given (the hub's `McpError`) when
the command is not found; the SDK's own errors pass.
"""

from __future__ import annotations

import codecs
import contextvars
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

from llamachat.config import McpServerConfig

# Run by the launcher interpreter: only os, ctypes, signal and time. It leads the server's
# own process group, becomes the subreaper of everything the server starts, and stays as
# the server's parent: when the server exits, or llamachat dies (even by SIGKILL:
# PR_SET_PDEATHSIG sends it SIGUSR1), it kills every process below it, so what the server
# started (`sleep &`, `sh -c ...`, `setsid ...`) ends with it.
LAUNCHER = """\
import ctypes, ctypes.util, os, signal, sys, time
parent = int(os.environ.pop("LLAMACHAT_MCP_PARENT", "0"))
if os.getpgid(0) != os.getpid():
    os.setpgid(0, 0)
def below():
    # Every live process under this one, found by parent pid in /proc.
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                state, ppid = stat.read().rsplit(b")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue
        children.setdefault(int(ppid), []).append((int(entry), state != b"Z"))
    found, todo = [], [os.getpid()]
    while todo:
        for pid, alive in children.get(todo.pop(), ()):
            todo.append(pid)
            if alive:
                found.append(pid)
    return found
def end_group(*_):
    for _ in range(50):
        found = below()
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGUSR1, end_group)
name = ctypes.util.find_library("c")
libc = ctypes.CDLL(name, use_errno=True) if name and sys.platform.startswith("linux") else None
if libc is not None:
    libc.prctl(1, signal.SIGUSR1, 0, 0, 0)
    libc.prctl(36, 1, 0, 0, 0)
if parent and os.getppid() != parent:
    end_group()
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    if libc is not None:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as exc:
        sys.stderr.write(f"cannot start {sys.argv[1]}: {exc.strerror or exc}\\n")
        os._exit(127)
# Orphans the server leaves are this process's children now: reaped as they end.
while os.waitpid(-1, 0)[0] != pid:
    pass
end_group()
"""

# Told the bytes around the first non-UTF-8 sequence of each decoded chunk of a server's
# stdout; set by the task that owns the server (the SDK's reader task inherits it).
BAD_OUTPUT: contextvars.ContextVar[Callable[[bytes], None]] = contextvars.ContextVar(
    "mcp_bad_output"
)
STDOUT_ERRORS = "llamachat-mcp-stdout"
# Bytes either side of a bad sequence that the callback is given.
_AROUND = 40


def _replace_and_tell(exc: UnicodeError) -> tuple[str, int]:
    """The codec error handler: U+FFFD for the bad bytes, and `BAD_OUTPUT` told of them."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    tell = BAD_OUTPUT.get(None)
    if tell is not None:
        tell(bytes(exc.object[max(0, exc.start - _AROUND) : exc.end + _AROUND]))
    return "\ufffd", exc.end


codecs.register_error(STDOUT_ERRORS, _replace_and_tell)


def stdio_client(cfg: McpServerConfig, errlog: Any, not_found: type[Exception]) -> Any:
    """The SDK's stdio client for `cfg`'s command, run through `LAUNCHER`; `not_found` is
    raised when the command is not on the server's PATH."""
    from mcp import StdioServerParameters
    from mcp.client import stdio

    env = {**cfg.environment(), "LLAMACHAT_MCP_PARENT": str(os.getpid())}
    path = env.get("PATH") or os.environ.get("PATH")
    if shutil.which(cfg.command, path=path) is None:
        raise not_found(f"the command '{cfg.command}' was not found")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-I", "-c", LAUNCHER, cfg.command, *cfg.args],
        env=env,
        cwd=cfg.cwd,
    )
    # The SDK's field admits the three standard handlers only, yet any registered one
    # works where it is used (bytes.decode's `errors`); model_copy does not validate.
    params = params.model_copy(update={"encoding_error_handler": STDOUT_ERRORS})
    return stdio.stdio_client(params, errlog=errlog)
