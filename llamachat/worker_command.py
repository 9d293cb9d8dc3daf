"""`llamachat worker`: lend this machine's memory and compute to llama.cpp on another one.

    llamachat worker                          ggml-rpc-server on 127.0.0.1:50052
    llamachat worker --host 192.168.1.20      on that address of this machine
    llamachat worker --host 0.0.0.0           on every interface (only when asked)
    llamachat worker --autostart              the same at every login (--no-autostart: not)

Runs llama.cpp's ``ggml-rpc-server`` from the installed llama-server's folder (the
``server`` extra's wheel ships it), after printing the address the other machine puts in
its ``rpc_workers``, and a warning: the RPC protocol has no authentication, so a trusted
network only, or an SSH tunnel (the command is printed). Qt-free.

Exit codes of `run()`: 1 no ggml-rpc-server or the autostart entry cannot be written,
else the worker's own (it runs in this process's place).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import ipaddress
import os
import socket
import sys
from typing import TextIO

from llamachat.config import Config
from llamachat.router.binary import SERVER_EXTRA_HINT, find_binary, launch_environment
from llamachat.router.rpc_workers import (
    DEFAULT_PORT,
    NO_AUTH_WARNING,
    rpc_server_binary,
    worker_command,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `worker` subcommand's options."""
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default: 127.0.0.1, this machine only; "
        "0.0.0.0 is every interface)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="CPU threads to lend (default: llama.cpp's)"
    )
    parser.add_argument(
        "--cache",
        action="store_true",
        help="keep the tensors it was sent in a local file cache (faster next loads)",
    )
    parser.add_argument(
        "--autostart",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="start this worker, with these options, at every login (or no longer)",
    )


def _this_machine() -> str:
    """This machine's address on its network (the one a default route leaves by), or ''."""
    # A UDP connect sends nothing; it only picks the interface.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, contextlib.suppress(OSError):
        sock.connect(("192.0.2.1", 9))
        return str(sock.getsockname()[0])
    return ""


def addresses_to_give(host: str, port: int) -> list[str]:
    """The host:port lines another machine can reach this worker at, for `rpc_workers`."""
    try:
        every = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        every = False
    if every:
        found = _this_machine()
        names = [found] if found else []
        names.append(socket.gethostname())
    else:
        names = [host]
    return [f"[{name}]:{port}" if ":" in name else f"{name}:{port}" for name in names]


def describe(host: str, port: int, out: TextIO) -> None:
    """Print where the worker listens, what to give the other machine, and the warning."""
    given = addresses_to_give(host, port)
    print(f"llamachat worker: lending this machine at {host}:{port}", file=out)
    if host in ("127.0.0.1", "localhost", "::1"):
        user, name = getpass.getuser(), socket.gethostname()
        print(
            "Only this machine can reach it. From another machine, tunnel to it over SSH there:\n"
            f"    ssh -N -L {port}:127.0.0.1:{port} {user}@{name}\n"
            f'and give that machine rpc_workers = ["127.0.0.1:{port}"].',
            file=out,
        )
    else:
        print("Give the other machine:", file=out)
        for address in given:
            print(f'    rpc_workers = ["{address}"]', file=out)
    print(f"Warning: {NO_AUTH_WARNING}", file=out)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            "Anyone on this network can use it. Safer: `llamachat worker` (127.0.0.1 only) "
            "and an SSH tunnel.",
            file=out,
        )


def run(args: argparse.Namespace, cfg: Config, *, out: TextIO = sys.stdout) -> int:
    """`llamachat worker`: print the address and the warning, then become ggml-rpc-server."""
    binary = rpc_server_binary(find_binary(cfg))
    if binary is None:
        print(
            "llamachat: no ggml-rpc-server found. It comes with the bundled llama-server "
            f"(`{SERVER_EXTRA_HINT}`), or put llama.cpp's ggml-rpc-server on your PATH.",
            file=sys.stderr,
        )
        return 1
    if args.autostart is not None:
        from llamachat.ui.desktop import entry

        command = [*entry.launcher(cfg.path), "worker", "--host", args.host]
        command += ["--port", str(args.port)]
        command += ["--threads", str(args.threads)] if args.threads else []
        command += ["--cache"] if args.cache else []
        try:
            written = entry.set_worker_autostart(command, args.autostart)
        except OSError as exc:
            print(f"llamachat: cannot write the autostart entry: {exc}", file=sys.stderr)
            return 1
        print(f"starts at login: {written}" if written else "no longer starts at login", file=out)
        return 0
    describe(args.host, args.port, out)
    out.flush()
    cmd = worker_command(
        binary, host=args.host, port=args.port, threads=args.threads, cache=args.cache
    )
    # The worker takes this process's place: signals and the exit code are its own.
    os.execve(cmd[0], cmd, launch_environment(binary))
