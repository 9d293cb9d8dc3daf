"""The tests of `llamachat.worker_command`: `llamachat worker` runs a real ggml-rpc-server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from llamachat.router.rpc_workers import answers
from llamachat.router.server import free_port
from llamachat.tests.support import CHECKOUT, real_assets, wait_for


def _worker(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llamachat",
            "--config",
            str(tmp_path / "config.toml"),
            "worker",
            *args,
        ],
        cwd=CHECKOUT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class TestWorker:
    def test_worker_listens_on_loopback_and_says_how_to_reach_it(self, tmp_path: Path) -> None:
        real_assets()
        port = free_port()
        proc = _worker(tmp_path, "--port", str(port))
        try:
            assert proc.stdout is not None
            said = [proc.stdout.readline() for _ in range(5)]
            wait_for(lambda: answers(f"127.0.0.1:{port}"), 15, "the worker to listen")
        finally:
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        text = "".join(said)
        assert f"lending this machine at 127.0.0.1:{port}" in text
        assert f"ssh -N -L {port}:127.0.0.1:{port} " in text
        assert f'rpc_workers = ["127.0.0.1:{port}"]' in text
        assert "no authentication" in text

    def test_worker_autostart_entry_written_and_removed(self, tmp_path: Path) -> None:
        real_assets()
        on = _worker(tmp_path, "--host", "192.168.1.20", "--port", "50053", "--autostart")
        out, _ = on.communicate(timeout=60)
        entry = tmp_path / "xdg" / "autostart" / "llamachat-worker.desktop"
        assert on.returncode == 0, out
        assert "worker --host 192.168.1.20 --port 50053\n" in entry.read_text(encoding="utf-8")

        off = _worker(tmp_path, "--no-autostart")
        out, _ = off.communicate(timeout=60)
        assert off.returncode == 0, out
        assert not entry.exists()
