"""llama.cpp's RPC workers: other machines lending their memory and compute to the server.

A worker is llama.cpp's ``ggml-rpc-server`` (the ``server`` extra's wheel ships it beside
llama-server); ``llama-server --rpc host:port,...`` spreads a model's layers over the
workers. The router passes ``--rpc`` on to every model server it spawns (seen on the
pinned build: the child's arguments and its preset both carry it), so the managed router
gets it once on its command line.

`rpc_server_binary` finds the worker program, `worker_command` is what ``llamachat worker``
runs. `survey` asks the llama-server binary itself (``--rpc ... --list-devices``) for each
worker's devices and free memory, or why it cannot be used (unreachable, another llama.cpp
version). `WorkerSet` is the managed server's view: which workers its next start uses
(`WorkerSet.arguments`: the unusable ones are left out, with a notice, rather than the
server not starting) and which one was lost when a model server's output says a worker
went away (`WorkerSet.lost_in`); `explain` puts that worker's name into the message of
a reply that failed because of it, and `WorkerSet.fit` tells a model that fits on this
machine alone from one that fits only with the workers (`fit_note`, from the sizes known:
the GGUF's, this machine's free memory and GPUs, the workers' free memory).

The RPC protocol has no authentication: anyone who reaches a worker's port can use its
memory and compute and read what is in it. A worker binds to loopback unless told.

Errors: none raised; a worker that cannot be used is a `WorkerStatus` with a ``problem``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import shutil
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from llamachat.router.binary import launch_environment, launch_prefix

log = logging.getLogger(__name__)

RPC_SERVER = "ggml-rpc-server"
DEFAULT_PORT = 50052
# How long a worker may take to accept a TCP connection before it counts as unreachable.
CONNECT_TIMEOUT = 2.0
SURVEY_TIMEOUT = 30.0
# A reply that fails this long after a worker was lost failed because of it.
LOST_RECENTLY = 60.0

# "  RPC0: 127.0.0.1:50161 (24105 MiB, 24105 MiB free)" in `--list-devices`.
_DEVICE_RE = re.compile(
    r"^\s*(?P<name>RPC\d+):\s+(?P<address>\S+)\s+\((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)",
    re.MULTILINE,
)
# This machine's own devices too: "  Vulkan0: AMD Radeon RX (8176 MiB, 7900 MiB free)".
_LOCAL_DEVICE_RE = re.compile(
    r"^\s*(?P<name>\w+):\s+.*\((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$", re.MULTILINE
)
_FAILED_RE = re.compile(r"Failed to connect to (?P<address>\S+)")
_MISMATCH_RE = re.compile(r"RPC server version mismatch: (?P<version>[\d.]+)")
# What a model server prints when a worker stops answering mid-load or mid-reply; it
# does not say which worker, so the workers are asked (`WorkerSet.lost_in`).
_FAULT_RE = re.compile(
    rb"Remote RPC server crashed|recv failed \(bytes_recv|send failed \(bytes_sent"
)

NO_AUTH_WARNING = (
    "The RPC protocol has no authentication: whoever reaches this port can use this "
    "machine's memory and compute. Use it on a trusted network only, or through an SSH tunnel."
)


@dataclass(frozen=True)
class Device:
    """One device a worker lends (its CPU, or a GPU), as llama-server lists it."""

    name: str
    total_mib: int
    free_mib: int


@dataclass(frozen=True)
class WorkerStatus:
    """What a worker offers, or why it cannot be used (``problem``, a sentence)."""

    address: str
    devices: tuple[Device, ...] = ()
    problem: str = ""

    @property
    def usable(self) -> bool:
        """Whether llama-server can spread a model over this worker."""
        return not self.problem

    @property
    def free_mib(self) -> int:
        """The free memory of all its devices, in MiB."""
        return sum(device.free_mib for device in self.devices)

    def describe(self) -> str:
        """One line for people: the address and its free memory, or its problem."""
        if self.problem:
            return f"{self.address}: {self.problem}"
        free = ", ".join(f"{d.free_mib} MiB free of {d.total_mib} MiB" for d in self.devices)
        return f"{self.address}: {free or 'no device'}"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def answers(address: str, *, timeout: float = CONNECT_TIMEOUT) -> bool:
    """Whether something accepts a TCP connection at `address` (host:port) now."""
    try:
        with socket.create_connection(_split(address), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def rpc_server_binary(llama_server: Path | None) -> Path | None:
    """The ggml-rpc-server beside `llama_server` (the wheel ships both), else on PATH."""
    if llama_server is not None:
        beside = llama_server.parent / RPC_SERVER
        if beside.is_file():
            return beside
    found = shutil.which(RPC_SERVER) or shutil.which("rpc-server")
    return Path(found) if found else None


def worker_command(
    binary: Path, *, host: str, port: int, threads: int = 0, cache: bool = False
) -> list[str]:
    """The ggml-rpc-server command line lending this machine at host:port."""
    cmd = [str(binary), "--host", host, "--port", str(port)]
    if threads > 0:
        cmd += ["--threads", str(threads)]
    if cache:
        cmd.append("--cache")
    return cmd


def parse_survey(text: str, addresses: Sequence[str]) -> list[WorkerStatus]:
    """Each worker's status from what ``llama-server --rpc ... --list-devices`` printed."""
    devices: dict[str, list[Device]] = {}
    for match in _DEVICE_RE.finditer(text):
        device = Device(match["name"], int(match["total"]), int(match["free"]))
        # A worker with several devices lists them as address, address/1 ... or address#1.
        address = re.split(r"[/#]", match["address"])[0]
        devices.setdefault(address, []).append(device)
    problems: dict[str, str] = {}
    mismatch = ""
    for line in text.splitlines():
        if found := _MISMATCH_RE.search(line):
            mismatch = found["version"]
        elif found := _FAILED_RE.search(line):
            problems[found["address"]] = (
                f"it runs another llama.cpp version (RPC protocol {mismatch}); run the "
                "same llama.cpp build on both machines"
                if mismatch
                else "it does not answer"
            )
            mismatch = ""
    statuses = []
    for address in addresses:
        if address in devices:
            statuses.append(WorkerStatus(address, tuple(devices[address])))
        else:
            statuses.append(
                WorkerStatus(address, problem=problems.get(address, "it does not answer"))
            )
    return statuses


def _list_devices(llama_server: Path, addresses: Sequence[str], timeout: float) -> str:
    """What ``llama-server --rpc <those that answer> --list-devices`` prints."""
    # A machine that is off would hold llama-server's own connect for minutes: a short
    # TCP check first, all workers at once, and only those that answer are asked.
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(addresses) or 1)) as pool:
        reachable = dict(zip(addresses, pool.map(answers, addresses), strict=True))
    asked = [a for a in addresses if reachable[a]]
    # --rpc first: llama-server lists the devices as soon as it reads --list-devices.
    cmd = [*launch_prefix(llama_server)] + (["--rpc", ",".join(asked)] if asked else [])
    cmd.append("--list-devices")
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            timeout=timeout,
            env=launch_environment(llama_server),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("could not ask %s about its devices: %s", llama_server, exc)
        return ""
    return (done.stdout + done.stderr).decode("utf-8", "replace")


def local_devices(text: str) -> tuple[Device, ...]:
    """This machine's own devices (GPUs) in what ``--list-devices`` printed."""
    return tuple(
        Device(m["name"], int(m["total"]), int(m["free"]))
        for m in _LOCAL_DEVICE_RE.finditer(text)
        if not m["name"].startswith("RPC")
    )


def survey(
    llama_server: Path, addresses: Sequence[str], *, timeout: float = SURVEY_TIMEOUT
) -> list[WorkerStatus]:
    """Each worker's devices and free memory, or why it cannot be used, asked of llama-server."""
    if not addresses:
        return []
    return parse_survey(_list_devices(llama_server, addresses, timeout), addresses)


def available_mib() -> int:
    """This machine's memory free for a model (MemAvailable), in MiB; 0 when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def fit_note(model_mib: int, local_mib: int, workers_mib: int) -> str:
    """Whether a model of `model_mib` fits alone, only with the workers, or not at all."""
    if not model_mib or not local_mib:
        return ""
    if model_mib <= local_mib:
        return "Fits on this machine alone"
    have = f"{model_mib:,} MiB; this machine has {local_mib:,} MiB free"
    if model_mib <= local_mib + workers_mib:
        return f"Fits only with the RPC workers ({have}, the workers {workers_mib:,} MiB more)"
    return f"Too big even with the RPC workers ({have}, the workers {workers_mib:,} MiB more)"


def split_arguments(split: Sequence[float], used: Sequence[int], workers: int) -> list[str]:
    """``--tensor-split`` for the shares of the workers in use (by index) and this machine."""
    if not split:
        return []
    shares = [split[i] for i in used if i < len(split)] + list(split[workers:])
    if not shares or len(shares) < len(used):
        return []
    return ["--tensor-split", ",".join(f"{share:g}" for share in shares)]


class WorkerSet:
    """The workers of a managed server: which its next start uses, and which it lost.

    Thread-safe: the supervisor thread asks for `arguments` at each start, the log
    thread feeds the server's output to `lost_in`, a reply's thread asks `recently_lost`
    (`explain`).
    """

    def __init__(
        self,
        addresses: Sequence[str],
        split: Sequence[float] = (),
        *,
        url: str = "",
        notify: Callable[[str, str], None] | None = None,
    ) -> None:
        self.addresses = tuple(addresses)
        self.split = tuple(split)
        self._notify = notify
        self._lock = threading.Lock()
        self.in_use: tuple[str, ...] = ()
        """The workers the running server was started with."""
        self.left_out: dict[str, str] = {}
        """Workers the last start left out, with the reason."""
        self.lost: tuple[str, ...] = ()
        """The workers the last fault took away."""
        self.statuses: tuple[WorkerStatus, ...] = ()
        """What the last start found of each worker."""
        self.local_devices: tuple[Device, ...] = ()
        """This machine's own devices (GPUs) as the last start found them."""
        self._tail = b""
        self._fault_at = 0.0
        if url and self.addresses:
            with _SETS_LOCK:
                _SETS[url.rstrip("/")] = self

    def arguments(self, llama_server: Path) -> list[str]:
        """``--rpc`` (and ``--tensor-split``) for the workers that can be used now."""
        if not self.addresses:
            return []
        text = _list_devices(llama_server, self.addresses, SURVEY_TIMEOUT)
        statuses = parse_survey(text, self.addresses)
        with self._lock:
            self.statuses = tuple(statuses)
            self.local_devices = local_devices(text)
            self.in_use = tuple(s.address for s in statuses if s.usable)
            self.left_out = {s.address: s.problem for s in statuses if not s.usable}
            self._tail = b""
        for address, problem in self.left_out.items():
            self._say(
                "worker_left_out",
                f"RPC worker {address} is left out: {problem}. llama-server starts without it.",
            )
        if not self.in_use:
            return []
        used = [self.addresses.index(a) for a in self.in_use]
        return ["--rpc", ",".join(self.in_use)] + split_arguments(
            self.split, used, len(self.addresses)
        )

    def lost_in(self, output: bytes) -> list[str]:
        """The workers in use that no longer answer, when `output` says one went away."""
        with self._lock:
            if not self.in_use:
                return []
            # A fault line may be cut between two reads of the server's output.
            text, self._tail = self._tail + output, output[-200:]
            in_use = self.in_use
        if not _FAULT_RE.search(text):
            return []
        lost = [address for address in in_use if not answers(address)]
        with self._lock:
            # The last words of one fault come in several reads: only a loss counts.
            if lost:
                self._fault_at = time.monotonic()
                self.in_use = tuple(a for a in self.in_use if a not in lost)
                self.lost = tuple(lost)
        for address in lost:
            self._say(
                "worker_lost",
                f"RPC worker {address} was lost (it stopped answering); llama-server "
                "restarts without it. Retry the reply.",
            )
        return lost

    def fit(self, model_file: str) -> str:
        """Whether the GGUF `model_file` fits alone or only with the workers ('' if unknown)."""
        if not self.addresses or not model_file:
            return ""
        try:
            model_mib = Path(model_file).stat().st_size // (1024 * 1024)
        except OSError:
            return ""
        with self._lock:
            workers = sum(s.free_mib for s in self.statuses if s.address in self.in_use)
            local = available_mib() + sum(d.free_mib for d in self.local_devices)
        return fit_note(model_mib, local, workers)

    def recently_lost(self) -> tuple[str, ...]:
        """The workers a fault of the last minute took away, and those in use that no longer
        answer: the server's output may not have told yet (the router relays it late)."""
        with self._lock:
            recent = self.lost if time.monotonic() - self._fault_at <= LOST_RECENTLY else ()
            in_use = self.in_use
        return recent + tuple(a for a in in_use if a not in recent and not answers(a))

    def _say(self, kind: str, message: str) -> None:
        log.warning("%s", message)
        if self._notify is not None:
            self._notify(kind, message)


# The worker sets of this process's managed servers, by URL, for `explain`.
_SETS: weakref.WeakValueDictionary[str, WorkerSet] = weakref.WeakValueDictionary()
_SETS_LOCK = threading.Lock()


def explain(url: str, message: str) -> str:
    """`message` of a reply from `url` that failed, naming the RPC worker lost meanwhile."""
    with _SETS_LOCK:
        workers = _SETS.get(url.rstrip("/"))
    lost = workers.recently_lost() if workers is not None else ()
    if not lost:
        return message
    names = ", ".join(lost)
    return (
        f"RPC worker {names} was lost during this reply (it stopped answering). "
        f"llama-server restarts without it: Retry the reply. Details: {message}"
    )
