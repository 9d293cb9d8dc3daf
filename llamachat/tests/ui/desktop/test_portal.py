"""The tests of `llamachat.ui.desktop.portal`."""

from __future__ import annotations

import threading


class TestPortalShortcutLifetime:
    """`llamachat.ui.desktop.portal`: the listening thread outlives a release."""

    def test_portal_released_while_its_call_waits_is_deleted_only_after_its_thread(
        self, qtbot, session_bus, monkeypatch
    ) -> None:
        """A portal that takes the call and does not answer keeps the thread waiting past
        release(): the shortcut object is deleted only once that thread has ended, and its
        last emits reach a live object (deleted under them, it crashed the event loop)."""
        import shiboken6
        from jeepney import message_bus
        from jeepney.io.blocking import open_dbus_connection

        from llamachat.ui.desktop import portal as portal_module
        from llamachat.ui.desktop.hotkey import QuickAskShortcut

        monkeypatch.setattr(portal_module, "CALL_TIMEOUT", 3.0)
        failures: list[BaseException | None] = []
        monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
        mute = open_dbus_connection(bus=session_bus)
        try:
            mute.send_and_get_reply(
                message_bus.RequestName(portal_module.PORTAL.bus_name), timeout=5
            )
            shortcut = QuickAskShortcut(bus=session_bus)
            shortcut.apply("Ctrl+Alt+J")
            portal = shortcut._portal
            assert portal is not None
            thread = portal._thread
            shortcut.release()
            assert thread.is_alive(), "the call should still be waiting"
            del shortcut
            qtbot.wait(10)  # deferred deletions run
            assert shiboken6.isValid(portal)
            qtbot.waitUntil(lambda: not thread.is_alive(), timeout=10000)
            qtbot.waitUntil(lambda: not shiboken6.isValid(portal), timeout=5000)
        finally:
            mute.close()
        assert failures == []
