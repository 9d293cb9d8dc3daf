"""Fixtures of the desktop tests: a private D-Bus session bus."""

from __future__ import annotations

import shutil
import subprocess

import pytest


@pytest.fixture
def session_bus():
    """The address of a private D-Bus session bus (Debian's dbus-daemon), stopped afterwards."""

    daemon = shutil.which("dbus-daemon")
    if daemon is None:
        pytest.skip("dbus-daemon is not installed (Debian: apt-get install dbus-daemon)")
    bus = subprocess.Popen(
        [daemon, "--session", "--nofork", "--print-address=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert bus.stdout is not None
        yield bus.stdout.readline().strip()
    finally:
        bus.terminate()
        bus.wait(timeout=10)
