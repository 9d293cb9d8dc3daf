"""The tests of `llamachat.ui.chat.outbox`."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QToolButton

from llamachat.config import Config
from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History
from llamachat.router.server import free_port
from llamachat.tests.support import (
    SIGKILL_CHILD_SCRIPT,
    make_app,
    send_and_wait,
    visible_widget_named,
)
from llamachat.ui import ChatWindow
from llamachat.ui.app import PENDING
from llamachat.ui.chat import conversation as controller
from llamachat.ui.chat import outbox


class TestOutbox:
    """What a conversation sends: its questions saved, each request sent, the reply streaming back."""

    def test_length_cut_reply_is_marked_and_continue_goes_on_in_the_same_reply(
        self, chat_window, router, qtbot
    ) -> None:
        """finish_reason "length": the reply says it was cut and offers Continue, which sends
        the chat with the reply last (a prefill) and adds what comes to the same reply and
        row; llama.cpp's echo of the prefilled text is dropped."""

        window, history = chat_window()
        router.script(Reply(content=["One, two,"], finish_reason="length"))
        send_and_wait(qtbot, window, "Count to five.")
        view = window.messages.last_assistant()
        assert view.is_cut()
        status = visible_widget_named(view, QLabel, "Status")
        assert status.text() == "Cut at the length limit"
        cont = visible_widget_named(view, QToolButton, "Continue reply")
        row = history.messages(window.session_id)[-1]
        assert row["timings"]["finish_reason"] == "length"

        # llama.cpp streams the prefilled text back first, then the new text.
        router.script(Reply(content=["One, two, ", "three, four, five."]))
        qtbot.mouseClick(cont, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10_000)
        sent = router.chat_requests()[-1].json["messages"]
        assert sent[-1] == {"role": "assistant", "content": "One, two,"}
        rows = history.messages(window.session_id)
        assert [r["role"] for r in rows] == ["user", "assistant"]
        assert rows[-1]["id"] == row["id"]
        assert rows[-1]["content"] == "One, two, three, four, five."
        assert rows[-1]["status"] == "complete"
        assert "finish_reason" not in rows[-1]["timings"]
        view = window.messages.last_assistant()
        assert view.content() == "One, two, three, four, five." and not view.is_cut()
        shown = [label.text() for label in view.findChildren(QLabel) if label.isVisible()]
        assert "Cut at the length limit" not in shown

    def test_send_starts_the_reply_before_the_window_is_shown_the_message(
        self, conversation, router, qtbot
    ) -> None:
        """The request leaves before the views are built: when the window hears of the
        message, the reply is already streaming, and its view attaches before any text."""

        chat, _history = conversation()
        streaming_when_shown: list[bool] = []
        chat.message_added.connect(lambda _row: streaming_when_shown.append(chat.is_streaming()))
        router.script(Reply(content=["Hello", " there."]))
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.submit("Hi") == controller.SENT
        assert streaming_when_shown == [True]
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "Hi"


class TestReattach:
    """A reply a crash left streaming is picked up where it stopped, from the server's stream."""

    def test_kill_9_mid_reply_then_restart_completes_the_reply_with_nothing_lost(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """llamachat SIGKILLed mid-reply, the server alive: the next start reads the reply on
        from its saved place; it completes with exactly the text the server generated."""

        pieces = [f"w{n:03d} " for n in range(500)]
        router.script(Reply(content=pieces, delay=0.01))
        db = tmp_path / "history.db"
        _killed_mid_reply(router, tmp_path, db)

        with History(db) as saved:
            [session] = saved.list_sessions()
            before = saved.messages(session["id"])[-1]["content"]
        # The next start: the window reopens the chat it showed last, and its reply goes on.
        opened = time.monotonic()
        window, history = chat_window()

        def moving() -> bool:
            view = window.messages.last_assistant()
            return view is not None and len(view.content()) > len(before)

        qtbot.waitUntil(moving, timeout=10_000)
        moving_again_ms = (time.monotonic() - opened) * 1000
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30_000)
        reply = history.messages(session["id"])[-1]
        assert (reply["status"], reply["content"]) == ("complete", "".join(pieces))
        assert window.messages.last_assistant().content() == "".join(pieces)
        # One request generated it: nothing was asked twice.
        assert len(router.chat_requests()) == 1
        print(
            f"\nreattach: {len(before)} chars saved at the kill, 0 lost; "
            f"reply moving again {moving_again_ms:.0f} ms after the window opened it"
        )
        assert moving_again_ms < 1000

    def test_a_reply_left_streaming_waits_for_the_router_being_looked_for_then_reads_on(
        self, router, qtbot, tmp_path
    ) -> None:
        """At a start the router is still being looked for when the chat reopens (a server a
        killed llamachat left is adopted, maybe at another address than router_url, which its
        first start found taken): the reply reads on from the router found, not from
        router_url, and completes whole."""
        pieces = [f"w{n:03d} " for n in range(300)]
        router.script(Reply(content=pieces, delay=0.01))
        db = tmp_path / "history.db"
        _killed_mid_reply(router, tmp_path, db)

        cfg = Config(
            router_url=f"http://127.0.0.1:{free_port()}",  # nothing answers there
            default_model="test-model",
            history_path=db,
            prompts_dir=tmp_path / "prompts",
            skills_dir=tmp_path / "skills",
            warm_cache=False,
        )
        history = History(db)
        app = make_app(cfg, history)
        app.router_pending("Looking for the llama.cpp router…")  # as `__main__` does first
        window = ChatWindow(app)
        qtbot.addWidget(window)
        window.show()
        try:
            # The window reopened the chat; what it queued for then (the reattach) runs
            # before a timer queued now, while the router is still being looked for.
            queued: list[bool] = []
            QTimer.singleShot(0, lambda: queued.append(True))
            qtbot.waitUntil(lambda: bool(queued))
            app.use_router(router.url)  # found: the adopted server's address
            [session] = history.list_sessions()
            qtbot.waitUntil(
                lambda: history.messages(session["id"])[-1]["status"] != "streaming",
                timeout=20_000,
            )
            reply = history.messages(session["id"])[-1]
            assert (reply["status"], reply["content"]) == ("complete", "".join(pieces))
            assert len(router.chat_requests()) == 1
            assert outbox.ROUTER_PENDING == PENDING  # the state the outbox waits out
        finally:
            window.close()
            app.close()
            history.close()


def _killed_mid_reply(router, tmp_path, db) -> None:
    """A llamachat (a child process) asks `router` for a reply and is SIGKILLed once the
    reply's place in the server's stream is saved in `db`."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    with (tmp_path / "child.log").open("wb") as log:
        child = subprocess.Popen(
            [sys.executable, "-c", SIGKILL_CHILD_SCRIPT, router.url, str(tmp_path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None and not _saved_place(db):
            time.sleep(0.05)
        assert _saved_place(db), (tmp_path / "child.log").read_text()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _saved_place(db) -> bool:
    """Whether a reply's place in its stream is saved in `db` (with text before it)."""
    if not db.exists():
        return False
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return bool(conn.execute("SELECT 1 FROM reply_streams WHERE content_chars > 0").fetchall())
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
