"""The tests of `llamachat.ui.tray`."""

from __future__ import annotations

from llamachat.history.store import History
from llamachat.tests.support import instance_config, make_app, quick_offscreen
from llamachat.ui.instance import RunningInstance
from llamachat.ui.tray import Tray


class TestTray:
    """The tray icon: Quick ask, Open, Quit, where the desktop has a system tray."""

    def test_tray_menu_offers_quick_ask_open_and_quit(self, qtbot) -> None:
        """The tray menu has Quick ask, Open, Quit, each emitting its request; no tray offscreen."""

        tray = Tray()
        assert [action.text() for action in tray.actions()] == ["Quick ask", "Open", "Quit"]
        for action, signal in zip(
            tray.actions(),
            (tray.quick_requested, tray.open_requested, tray.quit_requested),
            strict=True,
        ):
            with qtbot.waitSignal(signal, timeout=1000):
                action.trigger()
        assert not tray.available() and tray.icon is None

    @quick_offscreen
    def test_tray_absent_the_instance_ends_when_its_last_window_closes(
        self, router, qtbot, tmp_path
    ) -> None:
        """Without a tray the running instance finishes once no window shows, not before."""

        cfg = instance_config(router, tmp_path)
        history = History(cfg.history_path)
        running = RunningInstance(make_app(cfg, history))
        ended: list[bool] = []
        running.finished.connect(lambda: ended.append(True))
        try:
            assert not running.has_tray()
            chat = running.show_chat()
            quick = running.ask("")
            quick.dismiss()
            qtbot.wait(50)
            assert ended == [] and running.chat_window() is chat
            chat.close()
            qtbot.waitUntil(lambda: ended == [True])
            assert running.chat_window() is None
        finally:
            running.shutdown()
            history.close()
