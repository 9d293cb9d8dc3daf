"""The tests of `llamachat.router.binary`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.errors import ServerNotFound
from llamachat.router.binary import find_binary, launch_environment, wheel_binary
from llamachat.router.server import ManagedServer, ensure_router, free_port
from llamachat.tests.support import fake_llama_server


class TestBinary:
    """Which llama-server to run and how: finding the binary, asking its version and options."""

    def test_router_finds_the_single_llama_binary_and_passes_host_and_port(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from llamachat.router.binary import binary_version

        folder = tmp_path / "bin"
        folder.mkdir()
        llama = folder / "llama"
        llama.write_text(
            "#!/bin/sh\n"
            'case "$2" in --help) echo "  --models-dir PATH";; --version) echo "version: 42 (abc)";;'
            " esac\n"
        )
        llama.chmod(0o755)
        monkeypatch.setenv("PATH", str(folder))
        assert find_binary(Config()) == llama
        assert binary_version(llama) == "version: 42 (abc)"
        server = ManagedServer(Config(models_dir=tmp_path / "m"), port=18123)
        assert server.command()[:6] == [
            str(llama),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "18123",
        ]
        # Another program called llama is not taken for llama.cpp's.
        llama.write_text("#!/bin/sh\necho 'a llama game'\n")
        other = folder / "sub"
        other.mkdir()
        (other / "llama").write_text(llama.read_text())
        (other / "llama").chmod(0o755)
        monkeypatch.setenv("PATH", str(other))
        assert find_binary(Config()) == wheel_binary()

    def test_server_find_binary_prefers_config_then_path_then_wheel(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:

        configured, _ = fake_llama_server(tmp_path / "configured")
        on_path, _ = fake_llama_server(tmp_path / "on_path")
        monkeypatch.setenv("PATH", str(on_path.parent))

        assert find_binary(Config(llama_server=str(configured))) == configured
        assert find_binary(Config()) == on_path

        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        assert find_binary(Config()) == wheel_binary()
        assert find_binary(Config(llama_server=str(tmp_path / "missing"))) is None

    def test_server_bundled_binary_runs_with_its_folder_on_the_library_path(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:

        monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/elsewhere")
        bundled, _ = fake_llama_server(tmp_path / "bundle")
        (bundled.parent / "libggml-base.so.0").write_bytes(b"")
        system, _ = fake_llama_server(tmp_path / "system")

        assert launch_environment(bundled)["LD_LIBRARY_PATH"] == f"{bundled.parent}:/opt/elsewhere"
        assert launch_environment(system)["LD_LIBRARY_PATH"] == "/opt/elsewhere"

    def test_server_missing_binary_says_how_to_get_one(self, tmp_path: Path) -> None:

        missing = tmp_path / "no-such-llama-server"
        cfg = Config(
            router_url=f"http://127.0.0.1:{free_port()}",
            llama_server=str(missing),
            models_dir=tmp_path / "models",
        )

        with pytest.raises(ServerNotFound) as raised:
            ensure_router(cfg)

        assert "pip install 'llamachat[server]'" in raised.value.message
        assert str(missing) in raised.value.message
