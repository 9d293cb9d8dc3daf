"""The tests of `llamachat.qt_platform`."""

from __future__ import annotations

import os
import subprocess
import sys

from llamachat import qt_platform
from llamachat.tests.support import fake_pyside, subprocess_config_file


class TestQtPlatform:
    """Whether Qt's X11 platform plugin can load, asked before Qt starts."""

    def test_gui_start_without_the_xcb_libraries_says_what_to_install_and_exits_2(
        self, router, tmp_path
    ) -> None:
        """Under X11, libraries the xcb plugin cannot load are listed with what to do, exit 2,
        before Qt is imported; another platform, --version and ask --print skip the check."""

        site = fake_pyside(tmp_path)
        config = subprocess_config_file(tmp_path, router.url)
        env = {
            k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")
        }
        env.update(DISPLAY=":4321", PYTHONPATH=str(site))

        def run(*args: str, **extra: str):
            return subprocess.run(
                [sys.executable, "-m", "llamachat", "--config", str(config), *args],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                env={**env, **extra},
                timeout=60,
                check=False,
            )

        for args in ((), ("ask",)):
            done = run(*args)
            assert done.returncode == 2, done.stderr
            assert "xcb platform plugin) cannot start" in done.stderr
            assert "libQt6Gui.so.6" in done.stderr
            assert "pip install --force-reinstall PySide6" in done.stderr
        assert run(QT_QPA_PLATFORM="offscreen").returncode == 7
        assert run(QT_QPA_PLATFORM="wayland", WAYLAND_DISPLAY="wayland-0").returncode == 7
        assert run("--version").returncode == 0
        printed = run("ask", "--print", "hi")
        assert (printed.returncode, printed.stdout) == (0, "echo: hi\n")

    def test_gui_xcb_advice_names_the_packages_per_system_and_when_it_applies(self) -> None:
        """Missing xcb libraries map to Debian, Fedora and Arch packages; the check applies only
        where Qt would use xcb."""

        advice = qt_platform.install_advice(
            ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-xkb.so.1", "libxcb-randr.so.0"]
        )
        assert "sudo apt install libxcb-icccm4 libxcb-keysyms1 libxcb-xkb1 libxcb-randr0" in advice
        assert "sudo dnf install xcb-util-wm xcb-util-keysyms libxcb\n" in advice
        assert "sudo pacman -S xcb-util-wm xcb-util-keysyms libxcb\n" in advice
        assert "reinstall" not in advice
        assert "libfoo.so.1" in qt_platform.install_advice(["libfoo.so.1"])
        assert qt_platform.uses_xcb({"DISPLAY": ":0"})
        assert qt_platform.uses_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"})
        assert not qt_platform.uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"})
        assert qt_platform.uses_xcb(
            {"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "QT_QPA_PLATFORM": "xcb"}
        )
        assert not qt_platform.uses_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"})
        assert not qt_platform.uses_xcb({})
