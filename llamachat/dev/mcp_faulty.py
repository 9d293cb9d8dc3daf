"""Small MCP servers that misbehave on purpose, written with the SDK, for the tests.

    python -m llamachat.dev.mcp_faulty MODE

MODE is one of:
    crash        `crash` exits the process in the middle of a call; `echo` answers
    hang         never answers `initialize` (a server stuck at start-up)
    slow         `sleep` takes `seconds` to answer (a call that times out)
    huge         `dump` answers `chars` characters of text
    badschema    `broken` has an input schema that is not an object schema; `echo` is fine
    listchange   `add_tool` adds a tool `extra` and sends tools/list_changed
    image        `picture` answers a small PNG and a line of text
    stderr       writes lines to stderr, then exits before answering anything
    garbage      writes lines that are not JSON-RPC to stdout before it serves
    latin1       writes a line in Latin-1, not UTF-8, to stdout before it serves
    spawner      starts `sleep 600 &` (orphaned at once) and `sh -c 'sleep 600'` (its
                 child), writes "spawned PID PID" to stderr, then serves
    setsid       starts two `sleep 600` in sessions of their own (out of the server's
                 process group, as a daemon puts itself): one orphaned at once, one its
                 child; writes "spawned PID PID" to stderr, then serves
    leak         writes the values of its LEAK_* variables to stderr (as a failing
                 auth does), then exits before answering anything
    http PORT    a Streamable HTTP server on 127.0.0.1:PORT/mcp; `header` answers the
                 value of the request header named

Each prints a line to stderr when it starts, so the tests can read it from the log.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

# A 1x1 PNG, red.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def build(mode: str) -> MCPServer:
    """The server for `mode`."""
    server = MCPServer(f"faulty-{mode}")

    @server.tool()
    def echo(text: str) -> str:
        """Answer the text given."""
        return text

    if mode == "crash":

        @server.tool()
        def crash() -> str:
            """Exit the process without answering."""
            sys.stderr.write("crashing now, as asked\n")
            sys.stderr.flush()
            os._exit(3)

    elif mode == "slow":

        @server.tool()
        async def sleep(seconds: float) -> str:
            """Answer after `seconds`."""
            import anyio

            await anyio.sleep(seconds)
            return "awake"

    elif mode == "huge":

        @server.tool()
        def dump(chars: int) -> str:
            """Answer `chars` characters."""
            return ("0123456789" * (chars // 10 + 1))[:chars]

    elif mode == "badschema":

        @server.tool()
        def broken(value: str) -> str:
            """A tool whose schema the client cannot use."""
            return value

        server._tool_manager._tools["broken"].parameters = {"type": "string"}
        # The SDK checks what a server sends; this server is meant to send garbage.
        import mcp_types.methods

        checked = mcp_types.methods.serialize_server_result

        def unchecked(method: str, version: str, data: Any, **kwargs: Any) -> Any:
            return data if method == "tools/list" else checked(method, version, data, **kwargs)

        mcp_types.methods.serialize_server_result = unchecked

    elif mode == "listchange":

        @server.tool()
        async def add_tool(ctx: Context) -> str:
            """Add the tool `extra` and tell the client."""

            def extra() -> str:
                """The tool added later."""
                return "extra here"

            server.add_tool(extra, name="extra")
            await ctx.session.send_tool_list_changed()
            return "added"

    elif mode == "http":

        @server.tool()
        def header(name: str, ctx: Context) -> str:
            """The value of request header `name` ('' when absent)."""
            headers = ctx.headers or {}
            return str(headers.get(name.lower(), headers.get(name, "")))

    elif mode == "image":
        from mcp.server.mcpserver import Image

        @server.tool()
        def picture() -> list:
            """A small image and a caption."""
            return [Image(data=PNG, format="png"), "a red dot"]

    return server


def main() -> None:
    """Run the server of argv[1] on stdio."""
    mode = sys.argv[1] if len(sys.argv) > 1 else "crash"
    sys.stderr.write(f"faulty server {mode} starting\n")
    sys.stderr.flush()
    if mode == "hang":
        while True:
            time.sleep(3600)
    if mode == "stderr":
        sys.stderr.write("fatal: the database is locked\n")
        sys.exit(2)
    if mode == "leak":
        for name, value in sorted(os.environ.items()):
            if name.startswith("LEAK_"):
                sys.stderr.write(f"auth failed: {name}={value} was refused\n")
        sys.exit(2)
    if mode == "garbage":
        os.write(1, b"Server starting... \x1b[32mOK\x1b[0m\n")
        os.write(1, b'{"jsonrpc": "2.0", "method": 5, "id": [1]}\n')
    if mode == "latin1":
        os.write(1, "Serveur démarré\n".encode("latin-1"))
    if mode == "spawner":
        import subprocess

        # Neither holds the server's stdio: they must not keep its pipes open.
        orphan = subprocess.run(
            ["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
        )
        child = subprocess.Popen(
            ["sh", "-c", "sleep 600"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        sys.stderr.write(f"spawned {int(orphan.stdout)} {child.pid}\n")
        sys.stderr.flush()
    if mode == "setsid":
        import subprocess

        quiet: dict[str, Any] = {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.DEVNULL,
            "stderr": subprocess.DEVNULL,
        }
        # A child that starts `sleep` in a session of its own and exits: the sleep is orphaned.
        starter = (
            "import subprocess as s; d = s.DEVNULL\n"
            "print(s.Popen(['sleep', '600'], start_new_session=True, stdin=d, stdout=d,"
            " stderr=d).pid)"
        )
        orphan = subprocess.run(
            [sys.executable, "-c", starter],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
        )
        child = subprocess.Popen(["sleep", "600"], start_new_session=True, **quiet)
        sys.stderr.write(f"spawned {int(orphan.stdout)} {child.pid}\n")
        sys.stderr.flush()
    if mode == "http":
        build(mode).run("streamable-http", port=int(sys.argv[2]))
        return
    build(mode).run("stdio")


if __name__ == "__main__":
    main()
