"""Fixtures of `llamachat/tests`: unwritable folders, the real llama-server, its RPC workers,
a SearXNG stand-in."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.router.binary import launch_environment
from llamachat.router.rpc_workers import answers, rpc_server_binary, worker_command
from llamachat.router.server import ManagedServer, free_port
from llamachat.tests.support import (
    SMOL_EMBED_ID,
    RealRouter,
    SearxStandIn,
    real_assets,
    skip_or_fail,
    smol_models_folder,
    wait_for,
)


@pytest.fixture
def make_unwritable():
    """Make folders refuse new files, even for root (chattr +i), or skip; undone afterwards."""

    undo: list = []

    def make(folder: Path) -> Path:
        folder.chmod(0o555)
        undo.append(lambda: folder.chmod(0o755))
        probe = folder / ".probe"
        try:
            probe.touch()
        except OSError:
            return folder
        probe.unlink()
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(folder)], check=False).returncode:
            pytest.skip("cannot make a folder unwritable for this user")
        undo.append(lambda: subprocess.run([chattr, "-i", str(folder)], check=True))
        return folder

    yield make
    for step in reversed(undo):
        step()


@pytest.fixture(scope="session")
def real_router(tmp_path_factory: pytest.TempPathFactory):
    """The real llama-server in router mode, once per session, over SmolLM2 and a broken GGUF."""

    _binary, model = real_assets()
    root = tmp_path_factory.mktemp("real_router")
    models = smol_models_folder(root, model)
    # Right magic, garbage after it: listed by the router, fails when loaded.
    (models / "broken.gguf").write_bytes(b"GGUF" + b"\x03\x00garbage" * 4)
    # The same GGUF once more in embedding mode, under its own name (chats are unaffected).
    preset = root / "models-preset.ini"
    preset.write_text(
        f"[{SMOL_EMBED_ID}]\nmodel = {model}\nembeddings = true\npooling = mean\n",
        encoding="utf-8",
    )
    cfg = Config(
        models_dir=models, models_preset=preset, server_args=("--ctx-size", "2048", "-t", "2")
    )
    server = ManagedServer(cfg, log_path=root / "llama-server.log", lock_path=root / "server.lock")
    server.start()
    try:
        if not server.wait_ready(60):
            pytest.fail(f"llama-server did not start:\n{server.log_file.tail()}")
        yield RealRouter(server, models)
    finally:
        server.stop()


@pytest.fixture
def searx():
    """A started SearXNG-like JSON search server on 127.0.0.1."""
    server = SearxStandIn()
    yield server
    server.close()


@pytest.fixture
def file_size_limit():
    """`limit(n)`: files written from now on fail past n bytes (EFBIG, as a full disk
    fails a write: for real, by the kernel); the limit is lifted after the test."""
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, handler)


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
