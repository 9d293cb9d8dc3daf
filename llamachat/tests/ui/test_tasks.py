"""The tests of `llamachat.ui.tasks`."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject

from llamachat.ui import tasks


class TestTasks:
    """One background runner for the GUI: results and exceptions back on the GUI thread."""

    def test_tasks_result_and_exception_reach_on_done_on_the_gui_thread(self, qtbot) -> None:
        """run_in_background: the result, or the task's exception, reaches on_done on the GUI
        thread; a receiver deleted meanwhile is not called; run_on_main runs on the GUI thread."""

        gui = threading.get_ident()
        seen: list[tuple[str, object, int]] = []
        release = threading.Event()

        def on_done(future) -> None:
            try:
                seen.append(("result", future.result(), threading.get_ident()))
            except ValueError as exc:
                seen.append(("error", str(exc), threading.get_ident()))

        def fail() -> None:
            raise ValueError("disk on fire")

        runner = tasks.manager()
        runner.run_in_background(lambda: threading.get_ident(), on_done)
        runner.run_in_background(fail, on_done)
        qtbot.waitUntil(lambda: len(seen) == 2)
        by_kind = {kind: (value, thread) for kind, value, thread in seen}
        assert by_kind["result"][0] != gui  # the task ran off the GUI thread
        assert by_kind["result"][1] == gui and by_kind["error"] == ("disk on fire", gui)

        receiver = QObject()
        dead: list[object] = []
        runner.run_in_background(release.wait, dead.append, receiver=receiver)
        alive = QObject()
        runner.run_in_background(
            lambda: 7, lambda future: dead.append(future.result()), receiver=alive
        )
        receiver.deleteLater()
        qtbot.waitUntil(lambda: dead == [7])
        release.set()
        qtbot.waitUntil(lambda: runner.running() == 0)
        ran: list[int] = []
        runner.run_on_main(lambda: ran.append(threading.get_ident()))
        qtbot.waitUntil(lambda: bool(ran))
        assert dead == [7] and ran == [gui]

        daemon_threads: list[bool] = []
        runner.run_in_background(
            lambda: threading.current_thread().daemon,
            lambda future: daemon_threads.append(future.result()),
            daemon=True,
        )
        qtbot.waitUntil(lambda: bool(daemon_threads))
        assert daemon_threads == [True]
