"""What counting the context costs: a keystroke in a long chat with skills loaded.

`run(n_messages, n_skills, keystrokes)` opens a `ChatWindow` on a session of
`n_messages` messages with `n_skills` skills loaded, against the scripted router (which
serves `/tokenize` and `/apply-template`), waits until the background has counted every
part, then types `keystrokes` characters into the composer one at a time and times each
keystroke on the GUI thread (everything it sets off synchronously: the editor, the draft's
estimate, the meter). It also reports how many requests the typing sent before the pause
(none are expected: the draft is counted once typing stops) and how long the first count
of the whole chat took in the background.

Errors: none of its own; a count that never completes raises TimeoutError.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

MODEL = "test-model"


def _fill(path: Path, n_messages: int, skills: list[str]) -> int:
    from llamachat.dev import bench_render
    from llamachat.history.store import History

    with History(path) as history:
        session = history.create_session("chat", MODEL, title="A long chat")
        history.set_skills(session, skills)
    tokens = bench_render.sample_tokens(n_messages * 60, seed=11)
    now = time.time()
    rows = [
        (
            n + 1,
            n or None,  # one path: each message follows the one before
            session,
            "user" if n % 2 == 0 else "assistant",
            "".join(tokens[n * 60 : (n + 1) * 60]),
            now + n,
        )
        for n in range(n_messages)
    ]
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO messages (id, parent_id, session_id, role, content, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("UPDATE sessions SET active_leaf = ? WHERE id = ?", (n_messages, session))
    return session


def _skills(root: Path, n_skills: int) -> list[str]:
    names = []
    for n in range(n_skills):
        name = f"bench-skill-{n:02}"
        folder = root / name
        folder.mkdir(parents=True)
        body = f"Instructions for task {n}. " * 60
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Helps with task {n}.\n---\n{body}\n",
            encoding="utf-8",
        )
        names.append(name)
    return names


def _wait(app, predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.002)


def run(n_messages: int, n_skills: int, keystrokes: int) -> dict:
    """Time `keystrokes` keystrokes in a chat of `n_messages` with `n_skills` skills loaded."""
    from PySide6.QtWidgets import QApplication

    from llamachat.config import Config
    from llamachat.dev.scripted_router import Model, ScriptedRouter
    from llamachat.history.store import History
    from llamachat.ui import ChatWindow
    from llamachat.ui.app import App

    app = QApplication.instance() or QApplication([])
    with (
        ScriptedRouter([Model(MODEL, "loaded", n_ctx=1_000_000)]) as router,
        tempfile.TemporaryDirectory(prefix="llamachat-bench-context-") as tmp,
    ):
        root = Path(tmp)
        names = _skills(root / "skills", n_skills)
        session = _fill(root / "history.db", n_messages, names)
        cfg = Config(
            router_url=router.url,
            default_model=MODEL,
            history_path=root / "history.db",
            prompts_dir=root / "prompts",
            skills_dir=root / "skills",
        )
        history = History(cfg.history_path)
        state = App(cfg, history)
        window = ChatWindow(state)
        window.show()
        try:
            _wait(app, lambda: window.models(), 30, "the model list")
            watch = window.chat.context
            started = time.perf_counter()
            window.open_session(session)
            _wait(
                app,
                lambda: watch.context_size() and watch.breakdown().exact,
                300,
                "the chat to be counted",
            )
            counted_s = time.perf_counter() - started
            assert window.loaded_skills() == names, window.loaded_skills()
            editor = window.composer.editor
            before = len(router.requests)
            times = []
            for n in range(keystrokes):
                began = time.perf_counter()
                editor.insertPlainText("ab "[n % 3])
                times.append((time.perf_counter() - began) * 1000)
            sent = len(router.requests) - before
            times.sort()
            return {
                "messages": n_messages,
                "skills": n_skills,
                "keystroke_ms": {
                    "median": statistics.median(times),
                    "p95": times[int(len(times) * 0.95) - 1],
                    "max": times[-1],
                },
                "requests_while_typing": sent,
                "first_count_s": counted_s,
                "total_tokens": watch.breakdown().total,
            }
        finally:
            window.close()
            state.close()
            history.close()
            app.processEvents()
