"""A fake XDG desktop portal offering GlobalShortcuts, on a D-Bus bus the tests start.

`FakePortal(address)` owns org.freedesktop.portal.Desktop on that bus and answers as a
desktop would: `version`, CreateSession, BindShortcuts (each through a Request's Response
signal) with the preferred trigger granted, unless it is in `taken` (another program's:
bound to nothing, as a desktop settling a conflict may). `press(id)` sends Activated.
`requests` records the (method, body) pairs it was called with. Runs on its own thread.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from jeepney import DBusAddress, HeaderFields, MessageType, message_bus, new_signal
from jeepney.io.blocking import DBusConnection, open_dbus_connection
from jeepney.low_level import Message
from jeepney.wrappers import new_error, new_method_return

NAME = "org.freedesktop.portal.Desktop"
PATH = "/org/freedesktop/portal/desktop"
SHORTCUTS = "org.freedesktop.portal.GlobalShortcuts"


class FakePortal:
    """The portal's GlobalShortcuts, as a desktop would answer; see the module's docstring."""

    def __init__(self, address: str, *, taken: tuple[str, ...] = ()) -> None:
        self.taken = set(taken)
        self.requests: list[tuple[str, tuple[Any, ...]]] = []
        self.sessions: list[str] = []
        self._presses: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._conn: DBusConnection = open_dbus_connection(bus=address)
        self._conn.send_and_get_reply(message_bus.RequestName(NAME), timeout=5)
        self._thread = threading.Thread(target=self._serve, name="fake-portal", daemon=True)
        self._thread.start()

    def press(self, shortcut_id: str) -> None:
        """The user presses the shortcut: Activated goes to every session."""
        self._presses.put(shortcut_id)

    def close(self) -> None:
        """Stop answering and leave the bus."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._conn.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            while not self._presses.empty():
                pressed = self._presses.get()
                for session in self.sessions:
                    self._signal(
                        PATH, SHORTCUTS, "Activated", "osta{sv}", (session, pressed, 0, {})
                    )
            try:
                message = self._conn.receive(timeout=0.05)
            except TimeoutError:
                continue
            if message.header.message_type == MessageType.method_call:
                self._answer(message)

    def _answer(self, call: Message) -> None:
        fields = call.header.fields
        member = fields.get(HeaderFields.member)
        self.requests.append((str(member), tuple(call.body)))
        if member == "Get" and tuple(call.body) == (SHORTCUTS, "version"):
            self._conn.send(new_method_return(call, "v", (("u", 1),)))
        elif member == "CreateSession":
            options = call.body[0]
            session = f"{PATH}/session/{_sender(call)}/{options['session_handle_token'][1]}"
            self.sessions.append(session)
            self._respond(call, options, {"session_handle": ("s", session)})
        elif member == "BindShortcuts":
            _session, shortcuts, _parent, options = call.body
            bound = [(sid, self._grant(props)) for sid, props in shortcuts]
            self._respond(call, options, {"shortcuts": ("a(sa{sv})", bound)})
        else:
            self._conn.send(
                new_error(call, "org.freedesktop.DBus.Error.UnknownMethod", "s", (str(member),))
            )

    def _grant(self, props: dict[str, Any]) -> dict[str, Any]:
        wanted = str(props.get("preferred_trigger", ("s", ""))[1])
        chosen = (
            "" if wanted in self.taken else wanted.replace("CTRL", "Ctrl").replace("ALT", "Alt")
        )
        return {"description": props["description"], "trigger_description": ("s", chosen)}

    def _respond(self, call: Message, options: dict[str, Any], results: dict[str, Any]) -> None:
        request = f"{PATH}/request/{_sender(call)}/{options['handle_token'][1]}"
        self._conn.send(new_method_return(call, "o", (request,)))
        self._signal(request, "org.freedesktop.portal.Request", "Response", "ua{sv}", (0, results))

    def _signal(self, path: str, interface: str, member: str, signature: str, body: tuple) -> None:
        self._conn.send(new_signal(DBusAddress(path, interface=interface), member, signature, body))


def _sender(call: Message) -> str:
    return str(call.header.fields[HeaderFields.sender]).lstrip(":").replace(".", "_")
