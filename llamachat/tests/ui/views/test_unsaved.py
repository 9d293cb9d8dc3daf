"""The tests of `llamachat.ui.views.unsaved`."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from llamachat.dev.scripted_router import Reply
from llamachat.history.store import History
from llamachat.router.server import ManagedServer
from llamachat.tests.support import health_only_server, instance_config, make_app, wait_for
from llamachat.ui.instance import RunningInstance


class TestUnsaved:
    """Quitting with replies History could not save: try once more, then ask."""

    def test_window_quit_with_an_unsaved_reply_asks_and_saves_it_as_a_file(
        self, router, qtbot, tmp_path
    ) -> None:
        """History full: a reply marked "Not saved yet" is not lost by File > Quit. Quit
        tries once more, then asks: Cancel keeps llamachat running; Save as… writes the
        chat with the whole reply as Markdown, then quits (issue 29, item 2)."""

        router.models["test-model"].n_ctx = 32768
        history = History(tmp_path / "history.db")
        running = RunningInstance(make_app(instance_config(router, tmp_path), history), tray=False)
        ended: list[bool] = []
        running.finished.connect(lambda: ended.append(True))
        try:
            window = running.show_chat()
            qtbot.waitUntil(lambda: bool(window.models()), timeout=5000)
            tail = ["word " * 2000, "the very end."]
            router.script(Reply(content=["kept ", "early ", "then ", *tail], stall_after=3))
            window.composer.set_text("Write a lot")
            window.send()
            session = window.session_id
            qtbot.waitUntil(
                lambda: history.messages(session)[-1]["content"] == "kept early ", timeout=5000
            )
            pages = history._conn.execute("PRAGMA page_count").fetchone()[0]
            history._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full
            router.release()
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=10000)
            assert "Not saved" in window.messages.last_assistant().unsaved_text()

            said: list[str] = []

            def answer(*steps) -> None:
                def poll() -> None:
                    dialog = QApplication.activeModalWidget()
                    if dialog is None:
                        QTimer.singleShot(20, poll)
                        return
                    steps[0](dialog)
                    if len(steps) > 1:
                        answer(*steps[1:])

                QTimer.singleShot(0, poll)

            def click(text: str):
                def press(box) -> None:
                    said.append(box.text())
                    next(b for b in box.buttons() if b.text() == text).click()

                return press

            answer(click("Cancel"))
            window.quit_requested.emit()
            assert not ended and window.isVisible()
            assert "could not be saved" in said[0] and "Quitting loses it" in said[0]

            saved = tmp_path / "saved.md"

            def choose(dialog) -> None:
                dialog.selectFile(str(saved))
                dialog.accept()

            answer(click("Save as…"), choose)
            window.quit_requested.emit()
            assert ended == [True]
            text = saved.read_text(encoding="utf-8")
            assert "Write a lot" in text and "kept early then word " in text
            assert text.rstrip().endswith("the very end.")
        finally:
            history._conn.execute("PRAGMA max_page_count = 1073741823")  # room again
            running.shutdown()
        # The reply is kept till History takes it, even after the window went.
        qtbot.waitUntil(
            lambda: history.messages(session)[-1]["content"].endswith("the very end."),
            timeout=5000,
        )
        history.close()


class TestQuitWhileStreaming:
    """Quitting while a reply streams: "Stop it", or "Let it finish" (the server finishes it)."""

    def test_let_it_finish_leaves_the_reply_to_the_server_and_the_next_start_has_it_whole(
        self, router, qtbot, tmp_path
    ) -> None:

        pieces = [f"p{n:03d} " for n in range(300)]
        router.script(Reply(content=pieces, delay=0.01))
        history = History(tmp_path / "history.db")
        running = RunningInstance(make_app(instance_config(router, tmp_path), history), tray=False)
        ended: list[bool] = []
        running.finished.connect(lambda: ended.append(True))
        window = running.show_chat()
        qtbot.waitUntil(lambda: bool(window.models()), timeout=5000)
        window.composer.set_text("Write a lot")
        window.send()
        session = window.session_id
        qtbot.waitUntil(lambda: len(history.messages(session)[-1]["content"]) > 40, timeout=5000)
        said: list[str] = []

        def answer() -> None:
            box = QApplication.activeModalWidget()
            if box is None:
                QTimer.singleShot(20, answer)
                return
            said.append(box.text())
            next(b for b in box.buttons() if b.text() == "Let it finish").click()

        QTimer.singleShot(0, answer)
        window.quit_requested.emit()
        assert ended == [True] and "still being written" in said[0]
        assert history.messages(session)[-1]["status"] == "streaming"
        assert not [r for r in router.requests if r.method == "DELETE"]
        conversation = router.chat_requests()[-1].headers["x-conversation-id"]
        qtbot.waitUntil(lambda: router.session(conversation).done, timeout=10_000)
        history.close()

        # The next start: the chat reopens with the reply whole, read from the server.
        history = History(tmp_path / "history.db")
        again = RunningInstance(make_app(instance_config(router, tmp_path), history), tray=False)
        try:
            again.show_chat()
            qtbot.waitUntil(
                lambda: history.messages(session)[-1]["status"] == "complete", timeout=10_000
            )
            assert history.messages(session)[-1]["content"] == "".join(pieces)
            assert len(router.chat_requests()) == 1
        finally:
            again.shutdown()
            history.close()

    def test_a_server_llamachat_runs_is_left_to_finish_and_the_next_one_adopts_it(
        self, router, qtbot, tmp_path
    ) -> None:
        """Issue 40: "Let it finish" is offered for the managed server too (it outlives llamachat
        for server_grace), and the quit leaves it running for the next start to adopt."""
        router.script(Reply(content=[f"p{n:03d} " for n in range(300)], delay=0.01))
        cfg = instance_config(router, tmp_path, server_grace=60)
        fake = health_only_server(tmp_path / "bin")
        lock = tmp_path / "server.lock"
        server_cfg = instance_config(
            router, tmp_path, server_grace=60, llama_server=str(fake), models_dir=tmp_path / "m"
        )
        managed = ManagedServer(server_cfg, lock_path=lock, log_path=tmp_path / "server.log")
        managed.start()
        assert managed.wait_ready(30)
        pid = managed.pid
        assert pid is not None
        history = History(tmp_path / "history.db")
        app = make_app(cfg, history)
        # The chat's router is the scripted one; the managed server is the one quit decides for.
        app.use_router(router.url, server=managed)
        running = RunningInstance(app, tray=False)
        window = running.show_chat()
        qtbot.waitUntil(lambda: bool(window.models()), timeout=5000)
        window.composer.set_text("Write a lot")
        window.send()
        session = window.session_id
        qtbot.waitUntil(lambda: len(history.messages(session)[-1]["content"]) > 40, timeout=5000)
        said: list[str] = []

        def answer() -> None:
            box = QApplication.activeModalWidget()
            if box is None:
                QTimer.singleShot(20, answer)
                return
            said.append(box.text())
            next(b for b in box.buttons() if b.text() == "Let it finish").click()

        QTimer.singleShot(0, answer)
        window.quit_requested.emit()
        managed.stop()  # as llamachat's exit does
        history.close()
        assert said and "still being written" in said[0]
        assert _running(pid), "the server llamachat ran goes on to finish the reply"

        adopter = ManagedServer(server_cfg, lock_path=lock, log_path=tmp_path / "server.log")
        try:
            assert adopter.adopt()
            adopter.start()
            assert adopter.wait_ready(10) and adopter.pid == pid
        finally:
            adopter.stop()
        wait_for(lambda: not _running(pid), 10, "the adopter's stop to stop the server")


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie this process has not waited for does not)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"
