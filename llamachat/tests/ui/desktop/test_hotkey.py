"""The tests of `llamachat.ui.desktop.hotkey`."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from PySide6.QtGui import QKeySequence

from llamachat import config
from llamachat.ui.settings import SettingsDialog


class TestHotkey:
    """The quick ask shortcut, desktop-wide: the portal where there is one, else X11, else a note."""

    def test_quick_ask_shortcut_through_the_portal_binds_activates_and_reports_conflicts(
        self, qtbot, session_bus, tmp_path
    ) -> None:
        """On a bus with the GlobalShortcuts portal, quick_ask_shortcut is asked for as the
        preferred trigger and a press activates quick ask; a key the desktop gives away, or one
        of the chat window's keys, is reported; with no portal (offscreen) Settings' note says
        how to bind `llamachat ask` by hand."""
        from llamachat.dev.fake_portal import FakePortal
        from llamachat.ui.desktop.hotkey import QuickAskShortcut

        portal = FakePortal(session_bus, taken=("CTRL+ALT+k",))
        shortcut = QuickAskShortcut(bus=session_bus)
        try:
            shortcut.apply("Ctrl+Alt+Space")
            qtbot.waitUntil(lambda: shortcut.status.startswith("Quick ask: "))
            assert shortcut.status.startswith("Quick ask: Ctrl+Alt+space (the desktop's")
            [(_session, [(shortcut_id, wanted)], _parent, _options)] = [
                body for method, body in portal.requests if method == "BindShortcuts"
            ]
            assert shortcut_id == "quick-ask"
            assert wanted["preferred_trigger"] == ("s", "CTRL+ALT+space")
            with qtbot.waitSignal(shortcut.activated, timeout=5000):
                portal.press("quick-ask")

            shortcut.apply("Ctrl+Alt+K")
            qtbot.waitUntil(lambda: shortcut.status.startswith("The desktop did not bind"))
            assert "Ctrl+Alt+K (another shortcut has it" in shortcut.status

            shortcut.apply("Ctrl+N")
            assert shortcut.status == (
                "Ctrl+N is the chat window's key for “Start a new chat”: choose another."
            )
        finally:
            shortcut.release()
            portal.close()
        nowhere = QuickAskShortcut(bus=f"unix:path={tmp_path / 'no-bus'}")
        nowhere.apply("Ctrl+Alt+J")
        qtbot.waitUntil(lambda: nowhere.status.startswith("This desktop offers no global"))
        assert "`llamachat ask`" in nowhere.status
        nowhere.release()

    def test_quick_ask_shortcut_x11_grab_fires_on_the_key_and_reports_a_taken_key(
        self, qtbot, monkeypatch
    ) -> None:
        """Without a portal on X11 the key is grabbed on the root window: a press (sent through
        XTest) activates it, and a key another client holds is reported as taken."""
        import ctypes
        import ctypes.util

        from llamachat.ui.desktop.x11 import GrabError, X11Grab

        xvfb, xtst = shutil.which("Xvfb"), ctypes.util.find_library("Xtst")
        if xvfb is None or xtst is None:
            pytest.skip("needs Xvfb and libXtst (Debian: xvfb, libxtst6)")
        read, write = os.pipe()
        server = subprocess.Popen(
            [xvfb, "-displayfd", str(write), "-nolisten", "tcp"],
            pass_fds=(write,),
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        try:
            with os.fdopen(read) as number:
                monkeypatch.setenv("DISPLAY", f":{number.readline().strip()}")
            grab = X11Grab("Ctrl+Alt+Space")
            with pytest.raises(GrabError, match="Ctrl.Alt.Space is taken by another program"):
                X11Grab("Ctrl+Alt+Space")
            x, test = ctypes.CDLL(ctypes.util.find_library("X11")), ctypes.CDLL(xtst)
            x.XOpenDisplay.restype = ctypes.c_void_p
            display = ctypes.c_void_p(x.XOpenDisplay(None))

            def key(name: bytes, down: int) -> None:
                code = x.XKeysymToKeycode(display, ctypes.c_ulong(x.XStringToKeysym(name)))
                test.XTestFakeKeyEvent(display, code, down, 0)

            with qtbot.waitSignal(grab.activated, timeout=5000):
                for down, names in (
                    (1, (b"Control_L", b"Alt_L", b"space")),
                    (0, (b"space", b"Alt_L", b"Control_L")),
                ):
                    for name in names:
                        key(name, down)
                x.XFlush(display)
            grab.close()
            x.XCloseDisplay(display)
        finally:
            server.terminate()
            server.wait(timeout=10)

    def test_settings_shows_how_the_quick_ask_shortcut_stands_and_saves_it(
        self, qtbot, tmp_path
    ) -> None:
        """Settings shows the shortcut's note and saves a new key and autostart to the file."""
        path = tmp_path / "config.toml"
        path.write_text("")
        dialog = SettingsDialog(config.load(path), shortcut_note="Ctrl+N is taken")
        qtbot.addWidget(dialog)
        assert dialog.shortcut_note.text() == "Ctrl+N is taken"
        assert dialog.quick_ask_shortcut.keySequence() == QKeySequence("Ctrl+Alt+Space")
        dialog.quick_ask_shortcut.setKeySequence(QKeySequence("Meta+Shift+A"))
        dialog.autostart.setChecked(True)
        assert dialog.save() is True
        assert path.read_text() == 'quick_ask_shortcut = "Meta+Shift+A"\nautostart = true\n'
