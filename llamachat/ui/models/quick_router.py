"""The quick window's view of the App's router: looked for, failed, or in use.

`QuickRouter(app, window)` follows `App.router_changed` and `App.server_event` for one
`quick.QuickWindow`. While the router is looked for or started (PENDING) the window
lists nothing, so no "cannot reach" replaces the notice saying why (`awaiting`); once
a router is in use, the window lists its models again, and an answer from a router
that was replaced is stopped. Only the notice this object put up is cleared when the
router is back, never one the window said since.

Threads: GUI thread only. Errors: none raised.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QLabel

from llamachat import turn
from llamachat.ui.app import FAILED, PENDING, READY, App, RouterState
from llamachat.ui.first_run import event_text


class RouterUser(Protocol):
    """What QuickRouter needs of its window."""

    @property
    def notice(self) -> QLabel: ...

    def show_notice(self, text: str) -> None: ...
    def stop(self) -> None: ...
    def refresh_models(self) -> None: ...
    def forget_listing(self) -> None: ...


class QuickRouter(QObject):
    """Follows the App's router for the quick window: what it says, and when it lists."""

    def __init__(self, app: App, window: RouterUser, parent: QObject) -> None:
        super().__init__(parent)
        self._app = app
        self._window = window
        # The registry last listed from, to see when the App's is another.
        self._seen_registry = app.registry
        self.awaiting = False
        """True while the router is looked for or started: nothing is listed meanwhile."""
        # What this object last said, so it only clears its own notice.
        self._said = ""
        app.router_changed.connect(self._on_router_changed)
        app.server_event.connect(self._on_server_event)
        if app.router.status in (PENDING, FAILED):
            self._on_router_changed(app.router)

    @Slot(object)
    def _on_router_changed(self, state: RouterState) -> None:
        """Waiting for the router, failed, or in use (maybe another one)."""
        if state.status == PENDING:
            self.awaiting = True
            # A listing under way asks a URL that may not be the router in the end: its
            # answer, or its failure, is no news.
            self._window.forget_listing()
            self._say(state.text)
        elif state.status == FAILED:
            self._say(state.text)
        else:
            self._use_router(ready=state.status == READY)

    def _use_router(self, *, ready: bool) -> None:
        """List the models of the router in use now (found, started, or configured again).

        The router already in use is kept as it is: an answer streaming from it goes on.
        """
        awaited, self.awaiting = self.awaiting, False
        changed = self._app.registry is not self._seen_registry
        self._seen_registry = self._app.registry
        window = self._window
        if changed and ready:
            window.stop()
        elif not changed and not awaited:
            self._clear()
            return
        window.show_notice("")
        self._said = ""
        if not turn.configured_model(self._app.config):
            window.refresh_models()

    def _say(self, text: str) -> None:
        self._said = text
        self._window.show_notice(text)

    def _clear(self) -> None:
        if self._said and self._window.notice.text() == self._said:
            self._window.show_notice("")
        self._said = ""

    @Slot(str, str)
    def _on_server_event(self, kind: str, message: str) -> None:
        if kind == "restarting":
            self._say(event_text(kind, message))
        elif kind == "ready":
            self._clear()
