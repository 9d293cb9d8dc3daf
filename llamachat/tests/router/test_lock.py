"""The tests of `llamachat.router.lock`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.errors import ServerLocked
from llamachat.router.server import ManagedServer, free_port
from llamachat.tests.support import fake_llama_server, real_assets, smol_models_folder


class TestLock:
    """Which llamachat runs which server: the lock file, and the key of a server llamachat manages."""

    @pytest.mark.real_router
    def test_server_lock_lets_only_one_llamachat_start_a_server(self, tmp_path: Path) -> None:

        _binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        first = ManagedServer(Config(models_dir=models))
        first.start()
        try:
            assert first.wait_ready(60), first.log_file.tail()
            fake, marker = fake_llama_server(tmp_path / "bin")
            # A second llamachat process whose router_url does not answer would start a server;
            # the lock makes it use the first one's instead.
            script = (
                "import sys\n"
                "from pathlib import Path\n"
                "from llamachat.config import Config\n"
                "from llamachat.router.server import ensure_router\n"
                "cfg = Config(router_url=sys.argv[1], llama_server=sys.argv[2],"
                " models_dir=Path(sys.argv[3]))\n"
                "url, server = ensure_router(cfg)\n"
                "print(url, server)\n"
            )
            other = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    script,
                    f"http://127.0.0.1:{free_port()}",
                    str(fake),
                    str(models),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            assert other.stdout.split() == [first.url, "None"]
            assert not marker.exists()

            with pytest.raises(ServerLocked) as locked:
                ManagedServer(Config(models_dir=models, llama_server=str(fake))).start()
            assert locked.value.url == first.url
            assert not marker.exists()
        finally:
            first.stop()

        # Stopping releases the lock: the next llamachat may start its own server.
        after = ManagedServer(Config(models_dir=models))
        after.start()
        after.stop()
