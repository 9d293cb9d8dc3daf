"""Fixtures of the router tests: real llama.cpp RPC workers on 127.0.0.1."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llamachat.router.binary import launch_environment
from llamachat.router.rpc_workers import answers, rpc_server_binary, worker_command
from llamachat.router.server import free_port
from llamachat.tests.support import real_assets, skip_or_fail, wait_for


@pytest.fixture
def rpc_worker(tmp_path: Path) -> Iterator[Callable[[], tuple[str, subprocess.Popen[bytes]]]]:
    """Start a real ggml-rpc-server on 127.0.0.1: its address and process (stopped after)."""
    binary, _model = real_assets()
    rpc_server = rpc_server_binary(binary)
    if rpc_server is None:
        skip_or_fail(f"no ggml-rpc-server beside {binary}")
    started: list[subprocess.Popen[bytes]] = []

    def start() -> tuple[str, subprocess.Popen[bytes]]:
        port = free_port()
        log = (tmp_path / f"worker-{port}.log").open("wb")
        proc = subprocess.Popen(
            worker_command(rpc_server, host="127.0.0.1", port=port, threads=1),
            env=launch_environment(rpc_server),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        started.append(proc)
        address = f"127.0.0.1:{port}"
        wait_for(lambda: answers(address) or proc.poll() is not None, 10, "the worker to listen")
        assert proc.poll() is None, (tmp_path / f"worker-{port}.log").read_text()
        return address, proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()
