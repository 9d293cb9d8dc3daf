"""The tests of `llamachat.router.rpc_workers`: real ggml-rpc-server workers on 127.0.0.1."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.errors import BackendError
from llamachat.router.client import Client
from llamachat.router.rpc_workers import (
    WorkerSet,
    available_mib,
    explain,
    parse_survey,
    split_arguments,
    survey,
)
from llamachat.router.server import ManagedServer, free_port
from llamachat.tests.support import (
    SMOL_ID,
    real_assets,
    smol_models_folder,
    stream_reply,
    turn_of,
    wait_for,
)

# The HELLO answer of a worker speaking RPC protocol 3.0.0: size, then major, minor,
# patch, flags and 24 bytes of connection capabilities (the pinned build speaks 4.x).
_OLD_HELLO = struct.pack("<Q", 28) + bytes([3, 0, 0, 0]) + bytes(24)


@pytest.fixture
def old_worker() -> Iterator[str]:
    """A worker of another llama.cpp version: it answers HELLO with protocol 3.0.0."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                if conn.recv(64):
                    conn.sendall(_OLD_HELLO)
                    conn.recv(64)
            except OSError:
                pass

    def serve() -> None:
        # Each connection on its own thread: llama-server's is answered at once, whatever
        # else (a reachability check) came first.
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(5)
    listener.close()


class TestRpcWorkers:
    def test_rpc_workers_survey_lists_free_memory_and_names_the_unusable(
        self, rpc_worker, old_worker
    ) -> None:
        binary, _model = real_assets()
        first, _ = rpc_worker()
        second, _ = rpc_worker()
        gone = f"127.0.0.1:{free_port()}"

        statuses = survey(binary, [first, gone, second, old_worker])

        assert [s.address for s in statuses] == [first, gone, second, old_worker]
        assert [s.usable for s in statuses] == [True, False, True, False]
        assert statuses[0].devices and statuses[0].free_mib > 0
        assert "MiB free" in statuses[2].describe()
        assert statuses[1].problem == "it does not answer"
        assert "another llama.cpp version (RPC protocol 3.0.0)" in statuses[3].problem

    def test_rpc_workers_parse_survey_reads_list_devices(self) -> None:
        text = (
            "0.00.016.566 E RPC server version mismatch: 3.0.0\n"
            "0.00.016.582 E Failed to connect to 10.0.0.3:50052\n"
            "0.00.016.600 E Failed to connect to 10.0.0.4:50052\n"
            "Available devices:\n"
            "  RPC0: 10.0.0.2:50052 (24105 MiB, 20000 MiB free)\n"
            "  RPC1: 10.0.0.2:50052/1 (8000 MiB, 7000 MiB free)\n"
            "  Vulkan0: AMD Radeon (8000 MiB, 7000 MiB free)\n"
        )
        two, three, four = parse_survey(
            text, ["10.0.0.2:50052", "10.0.0.3:50052", "10.0.0.4:50052"]
        )
        assert two.free_mib == 27000 and len(two.devices) == 2
        assert "RPC protocol 3.0.0" in three.problem
        assert four.problem == "it does not answer"

    def test_rpc_workers_split_keeps_the_shares_of_the_workers_in_use(self) -> None:
        # Workers a, b, c with shares 3, 2, 1 and this machine's GPU 4; b is left out.
        assert split_arguments([3, 2, 1, 4], [0, 2], 3) == ["--tensor-split", "3,1,4"]
        assert split_arguments([], [0], 1) == []

    def test_rpc_workers_left_out_at_start_with_a_notice(self, rpc_worker, old_worker) -> None:
        binary, _model = real_assets()
        up, _ = rpc_worker()
        gone = f"127.0.0.1:{free_port()}"
        notices: list[tuple[str, str]] = []
        workers = WorkerSet([gone, up, old_worker], [1, 2, 3], notify=lambda *n: notices.append(n))

        assert workers.arguments(binary) == ["--rpc", up, "--tensor-split", "2"]
        assert workers.in_use == (up,)
        assert [kind for kind, _ in notices] == ["worker_left_out", "worker_left_out"]
        assert f"RPC worker {gone} is left out: it does not answer" in notices[0][1]
        assert old_worker in notices[1][1] and "another llama.cpp version" in notices[1][1]

    def test_rpc_workers_fit_tells_alone_from_only_with_the_workers(
        self, rpc_worker, tmp_path: Path
    ) -> None:
        binary, _model = real_assets()
        up, _ = rpc_worker()
        workers = WorkerSet([up])
        workers.arguments(binary)
        lent = workers.statuses[0].free_mib
        local = available_mib() + sum(d.free_mib for d in workers.local_devices)

        def gguf(name: str, mib: int) -> str:
            path = tmp_path / name
            with path.open("wb") as out:
                out.truncate(mib * 1024 * 1024)  # sparse: only its size is read
            return str(path)

        assert workers.fit(gguf("small.gguf", 1)) == "Fits on this machine alone"
        assert workers.fit(gguf("big.gguf", local + lent // 2)).startswith(
            "Fits only with the RPC workers"
        )
        assert workers.fit(gguf("huge.gguf", local + lent + 1024)).startswith("Too big even")
        assert WorkerSet([]).fit(gguf("none.gguf", 1)) == ""

    @pytest.mark.real_router
    def test_rpc_workers_managed_server_spreads_the_model_and_survives_a_lost_worker(
        self, rpc_worker, tmp_path: Path
    ) -> None:
        _binary, model = real_assets()
        first, _ = rpc_worker()
        second, second_proc = rpc_worker()
        gone = f"127.0.0.1:{free_port()}"
        cfg = Config(
            models_dir=smol_models_folder(tmp_path, model),
            rpc_workers=(first, gone, second),
            # Trace verbosity: the model servers say where each buffer went.
            server_args=("-lv", "4", "--ctx-size", "1024"),
        )
        events: list[tuple[str, str]] = []
        server = ManagedServer(cfg, on_event=lambda kind, message: events.append((kind, message)))
        server.start()
        try:
            assert server.wait_ready(60), server.log_file.tail()
            left_out = [m for k, m in events if k == "worker_left_out"]
            assert left_out == [
                f"RPC worker {gone} is left out: it does not answer. llama-server starts without it."
            ]
            hi = [{"role": "user", "content": "Say hello."}]
            assert "".join(stream_reply(server.url, SMOL_ID, hi, max_tokens=8)[0])
            log_text = server.log_file.tail(1024 * 1024)
            for address in (first, second):
                assert f"[{address}] model buffer size" in log_text, (
                    "the layers are on both workers"
                )

            # A worker killed mid-reply: the reply fails, the worker is named, the server
            # restarts without it and Retry answers.
            client = Client(server.url)
            story = [{"role": "user", "content": "Write a long story about a lighthouse."}]
            with pytest.raises(BackendError) as failed:
                long_turn = turn_of(story, model=SMOL_ID, params={"max_tokens": 300})
                for kind, _value in client.stream_chat(long_turn):
                    if kind == "content" and second_proc.poll() is None:
                        second_proc.kill()
            client.close()
            # What the reply says (the chat's stream worker asks `explain`).
            said = explain(server.url, failed.value.message)
            assert said.startswith(f"RPC worker {second} was lost during this reply"), said
            assert "Retry" in said
            lost = wait_for(
                lambda: [m for k, m in events if k == "worker_lost"], 20, "the lost worker's notice"
            )
            assert lost[0].startswith(f"RPC worker {second} was lost")
            wait_for(
                lambda: [k for k, _ in events].count("ready") == 2 and server.is_running(),
                30,
                "the server to restart without the lost worker",
            )
            assert server.workers.in_use == (first,)
            assert "".join(stream_reply(server.url, SMOL_ID, hi, max_tokens=8)[0])
        finally:
            server.stop()
