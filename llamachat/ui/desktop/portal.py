"""The XDG desktop portal's GlobalShortcuts interface: a desktop-wide shortcut, asked for.

Where the desktop offers it (KDE Plasma, GNOME 48 and later, Hyprland), a program asks
the portal for a shortcut (`BindShortcuts`, with a preferred trigger) and the desktop
binds it, asking the user when it likes, and reports the trigger it chose (maybe another,
maybe none: the desktop settles conflicts). `PortalShortcut` does that on a thread of its
own with one D-Bus connection (jeepney: PySide6's QtDBus cannot send the `a(sa{sv})`
argument BindShortcuts takes), then emits `activated` on each press until `stop()`.

Signals (queued to the owner's thread): `bound(str)` the trigger the desktop reports
('' for none), `activated()`, `failed(str)` why no shortcut could be had ("no portal"
when the bus has no GlobalShortcuts: the caller then tries something else).

Lifetime: the thread may outlive `stop()` (a portal call waits up to CALL_TIMEOUT, a bind
longer) and emits from it to the end, so a `PortalShortcut` is owned by the application,
never by its asker, and `stop()` deletes it only once the thread has ended: deleted while
the thread emits, it took the process down (a segfault in the event loop).
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from typing import Any

from jeepney import (
    DBusAddress,
    DBusErrorResponse,
    MatchRule,
    Properties,
    message_bus,
    new_method_call,
)
from jeepney.io.blocking import DBusConnection, open_dbus_connection
from jeepney.low_level import HeaderFields, Message
from PySide6.QtCore import QCoreApplication, QObject, Signal

log = logging.getLogger(__name__)

PORTAL = DBusAddress(
    "/org/freedesktop/portal/desktop",
    bus_name="org.freedesktop.portal.Desktop",
    interface="org.freedesktop.portal.GlobalShortcuts",
)
REQUEST = "org.freedesktop.portal.Request"
SHORTCUT_ID = "quick-ask"
NO_PORTAL = "no portal"

# How long the portal may take to answer; the user may be asked, so binding waits longer.
CALL_TIMEOUT = 5.0
BIND_TIMEOUT = 120.0
# How often the listening thread looks at the stop flag.
POLL = 0.2

_QT_MODIFIERS = {"Ctrl": "CTRL", "Alt": "ALT", "Shift": "SHIFT", "Meta": "LOGO"}


def trigger(keys: str) -> str:
    """Qt's "Ctrl+Alt+Space" as the shortcuts specification writes it: "CTRL+ALT+space"."""
    *modifiers, key = keys.split("+")
    name = key.lower() if len(key) == 1 or key == "Space" else key
    return "+".join([*(_QT_MODIFIERS[m] for m in modifiers), name])


class PortalError(Exception):
    """The portal refused or failed a request; the message says how."""


class PortalShortcut(QObject):
    """One global shortcut (quick ask) through the portal, on a thread of its own."""

    bound = Signal(str)
    activated = Signal()
    failed = Signal(str)
    # The thread has ended: emitted last from it, for `stop` to delete this object then.
    _ended = Signal()

    def __init__(self, keys: str, *, bus: str = "SESSION") -> None:
        # The application's: a parent deleted while the thread runs would take it along.
        super().__init__(QCoreApplication.instance())
        self._keys = keys
        self._bus = bus
        self._stop = threading.Event()
        self._tokens = itertools.count()
        self._thread = threading.Thread(target=self._run, name="portal-shortcut", daemon=True)

    def start(self) -> None:
        """Ask the portal for the shortcut, then listen for it (in the background)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop listening, and delete this object once the thread has ended (at once when it
        has); the desktop keeps the binding for the next start."""
        self._stop.set()
        # Queued from the thread: the deletion runs in this object's own thread.
        self._ended.connect(self.deleteLater)
        if self._thread.is_alive():
            self._thread.join(timeout=2 * POLL + 1)
        if not self._thread.is_alive():
            self.deleteLater()

    def _run(self) -> None:
        try:
            with open_dbus_connection(bus=self._bus) as conn:
                session = self._bind(conn)
                self._listen(conn, session)
        except PortalError as exc:
            self.failed.emit(str(exc))
        except (OSError, KeyError, ValueError, TimeoutError) as exc:
            # No session bus (KeyError: no address), or it went away.
            log.info("the desktop portal cannot be reached: %s", exc)
            self.failed.emit(NO_PORTAL)
        finally:
            self._ended.emit()

    def _bind(self, conn: DBusConnection) -> str:
        """Check the interface, create a session and bind; returns the session's handle."""
        try:
            conn.send_and_get_reply(Properties(PORTAL).get("version"), timeout=CALL_TIMEOUT)
        except DBusErrorResponse as exc:
            log.info("no GlobalShortcuts portal: %s", exc)
            raise PortalError(NO_PORTAL) from None
        for member in ("Activated", "ShortcutsChanged"):
            rule = MatchRule(type="signal", interface=PORTAL.interface, member=member)
            conn.send_and_get_reply(message_bus.AddMatch(rule), timeout=CALL_TIMEOUT)
        token = f"llamachat_{secrets.token_hex(4)}"
        results = self._request(
            conn,
            "CreateSession",
            "a{sv}",
            lambda handle: ({"handle_token": ("s", handle), "session_handle_token": ("s", token)},),
            CALL_TIMEOUT,
        )
        session = str(results["session_handle"][1])
        shortcut = (
            SHORTCUT_ID,
            {
                "description": ("s", "Quick ask (llamachat)"),
                "preferred_trigger": ("s", trigger(self._keys)),
            },
        )
        results = self._request(
            conn,
            "BindShortcuts",
            "oa(sa{sv})sa{sv}",
            lambda handle: (session, [shortcut], "", {"handle_token": ("s", handle)}),
            BIND_TIMEOUT,
        )
        self.bound.emit(_described(results.get("shortcuts", ("", []))[1]))
        return session

    def _request(
        self, conn: DBusConnection, method: str, signature: str, body: Any, timeout: float
    ) -> dict[str, Any]:
        """Call a portal method that answers through a Request object's Response signal."""
        handle = f"llamachat{next(self._tokens)}_{secrets.token_hex(4)}"
        sender = (conn.unique_name or "").lstrip(":").replace(".", "_")
        path = f"/org/freedesktop/portal/desktop/request/{sender}/{handle}"
        # Listened for before the call: the answer may come before the call's reply.
        rule = MatchRule(type="signal", interface=REQUEST, member="Response", path=path)
        conn.send_and_get_reply(message_bus.AddMatch(rule), timeout=CALL_TIMEOUT)
        with conn.filter(rule) as answers:
            call = new_method_call(PORTAL, method, signature, body(handle))
            try:
                conn.send_and_get_reply(call, timeout=CALL_TIMEOUT)
            except DBusErrorResponse as exc:
                raise PortalError(f"the portal refused {method}: {exc}") from None
            response = conn.recv_until_filtered(answers, timeout=timeout)
        code, results = response.body
        if code == 1:
            raise PortalError("the shortcut was declined in the desktop's dialog")
        if code != 0:
            raise PortalError(f"the desktop could not bind the shortcut ({method} ended {code})")
        return dict(results)

    def _listen(self, conn: DBusConnection, session: str) -> None:
        while not self._stop.is_set():
            try:
                message = conn.receive(timeout=POLL)
            except TimeoutError:
                continue
            self._dispatch(message, session)

    def _dispatch(self, message: Message, session: str) -> None:
        fields = message.header.fields
        if fields.get(HeaderFields.interface) != PORTAL.interface:
            return
        member, body = fields.get(HeaderFields.member), message.body
        if body[0] != session:
            return
        if member == "Activated" and body[1] == SHORTCUT_ID:
            self.activated.emit()
        elif member == "ShortcutsChanged":
            self.bound.emit(_described(body[1]))


def _described(shortcuts: list[tuple[str, dict[str, Any]]]) -> str:
    """The trigger the desktop reports for quick ask ('' when it bound none)."""
    for shortcut_id, properties in shortcuts:
        if shortcut_id == SHORTCUT_ID:
            return str(properties.get("trigger_description", ("s", ""))[1])
    return ""
