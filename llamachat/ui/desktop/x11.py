"""A desktop-wide key on X11: a passive grab of the key on the root window (Xlib, ctypes).

For X11 desktops without the GlobalShortcuts portal. `X11Grab(keys)` grabs the key
(also with Caps Lock and Num Lock on) on a connection of its own and emits `activated`
on each press; `close()` lets it go. Raises `GrabError` when there is no X display or
libX11, or another program holds the key ("taken by another program": a conflict).
"""

from __future__ import annotations

import ctypes
import ctypes.util

from PySide6.QtCore import QObject, QSocketNotifier, Signal

_MASKS = {"Shift": 1, "Ctrl": 4, "Alt": 8, "Meta": 64}
_LOCKS = (0, 2, 16, 18)  # none, Caps Lock, Num Lock, both
_KEY_PRESS = 2
_BAD_ACCESS = 10


class GrabError(Exception):
    """The key could not be grabbed; the message says why."""


class _ErrorEvent(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("display", ctypes.c_void_p),
        ("resourceid", ctypes.c_ulong),
        ("serial", ctypes.c_ulong),
        ("error_code", ctypes.c_ubyte),
        ("request_code", ctypes.c_ubyte),
        ("minor_code", ctypes.c_ubyte),
    ]


_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_ErrorEvent))


def _xlib() -> ctypes.CDLL:
    name = ctypes.util.find_library("X11")
    if not name:
        raise GrabError("libX11 is not installed")
    lib = ctypes.CDLL(name)
    lib.XOpenDisplay.restype = ctypes.c_void_p
    lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
    lib.XDefaultRootWindow.restype = ctypes.c_ulong
    lib.XStringToKeysym.restype = ctypes.c_ulong
    lib.XSetErrorHandler.restype = ctypes.c_void_p
    lib.XSetErrorHandler.argtypes = [ctypes.c_void_p]
    for name in ("XDefaultRootWindow", "XKeysymToKeycode", "XConnectionNumber", "XPending"):
        getattr(lib, name).argtypes = [ctypes.c_void_p] + (
            [ctypes.c_ulong] if "Keysym" in name else []
        )
    for name in ("XGrabKey", "XUngrabKey", "XSync", "XNextEvent", "XCloseDisplay"):
        getattr(lib, name).argtypes = None  # variadic enough: ctypes converts ints and pointers
    return lib


class X11Grab(QObject):
    """The key `keys` ("Ctrl+Alt+Space") grabbed on the X11 root window."""

    activated = Signal()

    def __init__(self, keys: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._x = _xlib()
        self._display = self._x.XOpenDisplay(None)
        if not self._display:
            raise GrabError("no X11 display")
        *modifiers, key = keys.split("+")
        name = key.lower() if len(key) == 1 or key == "Space" else key
        keysym = self._x.XStringToKeysym(name.encode())
        self._keycode = self._x.XKeysymToKeycode(ctypes.c_void_p(self._display), keysym)
        self._root = self._x.XDefaultRootWindow(ctypes.c_void_p(self._display))
        self._mask = sum(_MASKS[m] for m in modifiers)
        if not keysym or not self._keycode:
            self._close_display()
            raise GrabError(f"X11 has no key {key!r}")
        self._grab(keys)
        fd = self._x.XConnectionNumber(ctypes.c_void_p(self._display))
        self._notifier = QSocketNotifier(fd, QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._read)

    def _grab(self, keys: str) -> None:
        errors: list[int] = []

        def record(_display: int, event: ctypes._Pointer[_ErrorEvent]) -> int:
            errors.append(event.contents.error_code)
            return 0

        handler = _HANDLER(record)
        previous = self._x.XSetErrorHandler(ctypes.cast(handler, ctypes.c_void_p))
        display = ctypes.c_void_p(self._display)
        for lock in _LOCKS:
            # owner_events False, pointer and keyboard modes GrabModeAsync (1).
            self._x.XGrabKey(
                display, self._keycode, self._mask | lock, ctypes.c_ulong(self._root), 0, 1, 1
            )
        self._x.XSync(display, 0)
        self._x.XSetErrorHandler(ctypes.c_void_p(previous))
        if _BAD_ACCESS in errors:
            self._ungrab()
            self._close_display()
            raise GrabError(f"{keys} is taken by another program")

    def _read(self) -> None:
        event = (ctypes.c_long * 24)()
        display = ctypes.c_void_p(self._display)
        pressed = False
        while self._x.XPending(display):
            self._x.XNextEvent(display, ctypes.byref(event))
            pressed = pressed or ctypes.cast(event, ctypes.POINTER(ctypes.c_int))[0] == _KEY_PRESS
        if pressed:
            self.activated.emit()

    def close(self) -> None:
        """Let the key go and close the connection."""
        if self._display:
            self._notifier.setEnabled(False)
            self._ungrab()
            self._close_display()

    def _ungrab(self) -> None:
        display = ctypes.c_void_p(self._display)
        for lock in _LOCKS:
            self._x.XUngrabKey(
                display, self._keycode, self._mask | lock, ctypes.c_ulong(self._root)
            )
        self._x.XSync(display, 0)

    def _close_display(self) -> None:
        self._x.XCloseDisplay(ctypes.c_void_p(self._display))
        self._display = None
