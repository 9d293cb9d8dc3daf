"""The tests of `llamachat.ui.menus`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMenu

from llamachat.history.store import History
from llamachat.tests.support import instance_config, make_app, quick_offscreen
from llamachat.ui.instance import RunningInstance


class TestMenus:
    """The menu bar: File > Quit and Ctrl+Q end the running instance."""

    @quick_offscreen
    def test_file_quit_and_ctrl_q_end_the_instance_closing_every_window(
        self, router, qtbot, tmp_path
    ) -> None:
        """File > Quit and Ctrl+Q in the chat window end the running instance (not just hide
        the window into the tray) and close its windows."""

        cfg = instance_config(router, tmp_path)
        history = History(cfg.history_path)
        try:
            for how in ("menu", "keys"):
                running = RunningInstance(make_app(cfg, history))
                ended: list[bool] = []
                running.finished.connect(lambda ended=ended: ended.append(True))
                chat = running.show_chat()
                quick = running.ask("")
                if how == "menu":
                    [file_menu] = [
                        m for m in chat.menuBar().findChildren(QMenu) if m.title() == "&File"
                    ]
                    [quit_action] = [a for a in file_menu.actions() if a.text().startswith("Quit")]
                    assert quit_action.text() == "Quit\tCtrl+Q"
                    quit_action.trigger()
                else:
                    chat.activateWindow()
                    qtbot.waitUntil(lambda chat=chat: QApplication.activeWindow() is chat)
                    qtbot.keyClick(chat, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
                qtbot.waitUntil(lambda ended=ended: ended == [True])
                assert not chat.isVisible() and not quick.isVisible()
                running.shutdown()
        finally:
            history.close()
