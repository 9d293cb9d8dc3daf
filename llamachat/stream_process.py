"""Stream a reply in a helper process, so reading it never competes with the window.

Python runs one thread at a time. Reading a fast reply (HTTP chunks, SSE lines, one
JSON object per token) costs about as much as rendering it, and in a thread of the
window the two took turns: at full speed the window rendered at half speed. A helper
process reads the stream on another core and hands the text over in bursts, at most
one every `FRAME_INTERVAL` seconds, so the window only renders.

`Helpers` keeps one helper started ahead of need (a fresh interpreter with httpx takes
~0.2 s), so a reply never waits for one. A helper streams exactly one reply: the parent
sends one `Request` and reads events until the end. Stopping the reply kills the helper,
which closes the HTTP connection, so the server stops generating. A helper exits as
soon as its stdin closes, so it never outlives the app, even one killed by SIGKILL.

The pipe carries pickles between this module and itself: one `Request` down; up, frames
that are lists of `backend.StreamEvent`, the last ending with ("end", None) or
("error", exception).

Errors: `Helper.stream` raises what `backend.Client.stream_chat` raises, re-raised from
the helper; `HelperError` (a `backend.StreamError`) when the helper died without a word;
`Helpers.take` raises OSError when no helper can be started.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from . import backend, skills

log = logging.getLogger(__name__)

FRAME_INTERVAL = 0.004
TEXT_KINDS = frozenset({"content", "reasoning"})
COMMAND = (sys.executable, "-m", "llamachat.stream_process")


class HelperError(backend.StreamError):
    """The helper process ended in the middle of a reply without reporting an error."""


@dataclass
class Request:
    """Everything `backend.Client.stream_chat` needs, in a form that crosses a pipe."""

    client: dict
    model: str
    messages: list[dict]
    params: dict | None = None
    search_cfg: backend.SearchConfig | None = None
    skill_roots: list[str] = field(default_factory=list)
    max_searches: int = backend.SkillsConfig.max_searches

    @classmethod
    def of(
        cls,
        client: backend.Client,
        model: str,
        messages: list[dict],
        *,
        params: dict | None = None,
        search_cfg: backend.SearchConfig | None = None,
        skills_cfg: backend.SkillsConfig | None = None,
    ) -> Request:
        """The request for `client.stream_chat(model, messages, ...)` with these arguments."""
        store = skills_cfg.store if skills_cfg and skills_cfg.enabled else None
        return cls(
            client=dict(client.settings),
            model=model,
            messages=messages,
            params=params,
            search_cfg=search_cfg,
            skill_roots=[str(root) for root in store.roots()] if store else [],
            max_searches=skills_cfg.max_searches if skills_cfg else cls.max_searches,
        )

    def skills_cfg(self) -> backend.SkillsConfig | None:
        """The skills configuration, with a store over the same folders as the parent's."""
        if not self.skill_roots:
            return None
        return backend.SkillsConfig(
            enabled=True,
            store=skills.SkillStore(self.skill_roots),
            max_searches=self.max_searches,
        )


def merge_text(events: Iterable[backend.StreamEvent]) -> list[backend.StreamEvent]:
    """Join adjacent text events of one kind: a burst of tokens becomes one event."""
    merged: list[backend.StreamEvent] = []
    texts: list[str] = []
    text_kind = ""
    for kind, value in events:
        if kind == text_kind:
            texts.append(str(value))
            continue
        if texts:
            merged.append((text_kind, "".join(texts)))
            texts = []
        if kind in TEXT_KINDS:
            text_kind = kind
            texts.append(str(value))
        else:
            text_kind = ""
            merged.append((kind, value))
    if texts:
        merged.append((text_kind, "".join(texts)))
    return merged


class Helper:
    """One helper process, started now; `stream` runs one reply through it."""

    def __init__(self, command: tuple[str, ...] = COMMAND) -> None:
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True
        )
        self._killed = threading.Event()
        self._ready = threading.Event()
        # The helper says "ready" once its imports are done; waiting for that on a thread
        # lets `wait_ready` time out portably (pipes cannot be polled on Windows).
        self._greeting = threading.Thread(target=self._read_greeting, daemon=True)
        self._greeting.start()

    def _read_greeting(self) -> None:
        assert self._process.stdout is not None
        try:
            pickle.load(self._process.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            pass  # `stream` finds the helper dead and says so
        self._ready.set()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the helper can take a request at once; False on timeout."""
        return self._ready.wait(timeout)

    def stream(self, request: Request) -> Iterator[backend.StreamEvent]:
        """Send `request` and yield the reply's events; kill() ends it quietly."""
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        try:
            try:
                pickle.dump(request, process.stdin, pickle.HIGHEST_PROTOCOL)
                process.stdin.flush()
            except OSError:
                pass  # it died already: reading says how
            self._greeting.join()
            while True:
                try:
                    frame = pickle.load(process.stdout)
                except (EOFError, OSError, pickle.UnpicklingError):
                    if self._killed.is_set():
                        return
                    raise HelperError(
                        "the process reading the reply ended unexpectedly "
                        f"(exit status {process.wait()})"
                    ) from None
                for kind, value in frame:
                    if kind == "end":
                        return
                    if kind == "error":
                        raise value
                    yield kind, value
        finally:
            self._reap()

    def kill(self) -> None:
        """End the helper now (safe from any thread); a stream in progress just stops."""
        self._killed.set()
        if self._process.poll() is None:
            self._process.kill()

    def wait(self) -> int:
        """Wait for the helper to end; its exit status."""
        return self._process.wait()

    def _reap(self) -> None:
        # Only from the thread that reads: closing a pipe another thread reads is a race.
        self.kill()
        self.wait()
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


class Helpers:
    """Hands out helper processes, keeping one started ahead of need."""

    def __init__(self, command: tuple[str, ...] = COMMAND) -> None:
        self.command = command
        self._lock = threading.Lock()
        self._spare: Helper | None = None

    def prepare(self) -> None:
        """Start the spare now if there is none (after a reply, so it starts off the clock)."""
        with self._lock:
            if self._spare is None:
                try:
                    self._spare = Helper(self.command)
                except OSError as exc:
                    log.warning("cannot start a stream helper: %s", exc)

    def take(self) -> Helper:
        """The spare helper, or a new one; raises OSError when none can start."""
        with self._lock:
            helper, self._spare = self._spare, None
        return helper if helper is not None else Helper(self.command)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the spare (started if need be) can take a request at once."""
        self.prepare()
        with self._lock:
            spare = self._spare
        return spare is not None and spare.wait_ready(timeout)

    def close(self) -> None:
        """Kill the spare."""
        with self._lock:
            helper, self._spare = self._spare, None
        if helper is not None:
            helper.kill()
            helper.wait()


# ---------------------------------------------------------------- the helper's side


class _Frames:
    """Writes events to the parent in frames, at most one per FRAME_INTERVAL."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._events: list[backend.StreamEvent] = []
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="frames", daemon=True)
        self._thread.start()

    def put(self, kind: str, value: object) -> None:
        with self._ready:
            self._events.append((kind, value))
            self._ready.notify()

    def close(self) -> None:
        """Write what is left and wait until it is written."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._events and not self._closed:
                    self._ready.wait()
                events, self._events = self._events, []
                closed = self._closed
            if events:
                frame = merge_text(events)
                try:
                    pickle.dump(frame, self._out, pickle.HIGHEST_PROTOCOL)
                    self._out.flush()
                except OSError:
                    os._exit(0)  # the parent is gone
            if closed:
                return
            # Batching by time, not size: a slow stream still sends each token at once.
            time.sleep(FRAME_INTERVAL)


def _exit_when_parent_closes(stdin: BinaryIO) -> None:
    # The parent sends nothing after the request: end of input means it stopped the
    # reply or died, and exiting closes the HTTP connection either way.
    stdin.read()
    os._exit(0)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any exception can fail to pickle, in any way
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def serve(stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Run one request from `stdin`, writing its frames to `stdout`; the helper's main."""
    backend.shared_ssl_context()  # the slowest part of making a client, done before the wait
    try:
        pickle.dump([("ready", None)], stdout, pickle.HIGHEST_PROTOCOL)
        stdout.flush()
        request: Request = pickle.load(stdin)
    except (EOFError, OSError):
        return 0  # the app ended before it needed this helper
    threading.Thread(target=_exit_when_parent_closes, args=(stdin,), daemon=True).start()
    frames = _Frames(stdout)
    client = backend.Client(**request.client)
    try:
        for kind, value in client.stream_chat(
            request.model,
            request.messages,
            search_cfg=request.search_cfg,
            skills_cfg=request.skills_cfg(),
            params=request.params,
        ):
            frames.put(kind, value)
        frames.put("end", None)
    except Exception as exc:
        if not isinstance(exc, backend.BackendError):
            log.exception("streaming a reply from %s failed", request.model)
        frames.put("error", _picklable(exc))
    finally:
        frames.close()
        client.close()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="llamachat stream helper: %(message)s")
    # Frames get the real stdout; a stray print from a library goes to stderr instead.
    frames_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    raise SystemExit(serve(sys.stdin.buffer, frames_out))
