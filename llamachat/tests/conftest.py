"""Fixtures of `llamachat/tests`: unwritable folders, the real llama-server, a SearXNG stand-in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.router.server import ManagedServer
from llamachat.tests.support import (
    SMOL_EMBED_ID,
    RealRouter,
    SearxStandIn,
    real_assets,
    smol_models_folder,
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
