"""The chat window's side of the router: getting it ready, its models folder, its log.

`RouterGuide` follows the App's router (looked for or started, failed, in use) and
shows it in the chat window: the getting-started panel (`first_run.FirstRunPanel`,
which the window lays out and the guide drives), the model picker's and the meter's
model source, and the status bar. It acts on the panel's requests: open the managed
server's models folder, add a GGUF file to it, make the router re-scan it, show the
server's log (`ServerLogDialog`); the models folder's actions are
`models.models_folder.ModelsFolder`'s. The window forwards the picker's listings to it
(`show_listing`) and shows what it says (`status`, `problem`); `router_replaced` tells
the window to stop a reply streaming from the router no longer in use.

Errors: none raised. A models-folder action that fails is explained on the panel
when it is shown, else as a problem; a router that cannot be had is the panel's
"failed" state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QAction, QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QMessageBox,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from llamachat import __version__
from llamachat.router import providers
from llamachat.router.models import ModelInfo
from llamachat.router.port_owner import router_owner
from llamachat.router.server import is_loopback
from llamachat.ui import first_run, plain
from llamachat.ui.app import FAILED, PENDING, READY, App, RouterState
from llamachat.ui.desktop.icon import app_icon
from llamachat.ui.models.download import GetModelDialog, delete_model
from llamachat.ui.models.models_folder import ModelsFolder
from llamachat.ui.models.options import ModelOptionsDialog
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.tasks import call_in_background
from llamachat.ui.views.meter import ContextMeter
from llamachat.ui.views.notice import STATUS_MS

if TYPE_CHECKING:
    from llamachat.router.server import ManagedServer

log = logging.getLogger(__name__)

SERVER_LOG_BYTES = 64 * 1024


class ServerLogDialog(QDialog):
    """The tail of the managed llama-server's log, read when opened or refreshed."""

    def __init__(self, server: ManagedServer, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.server = server
        self.setWindowTitle("llama-server log")
        self.setAccessibleName("Server log")
        self.resize(820, 480)
        self.path_label = plain.Label()
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit()
        self.text.setAccessibleName("Server log text")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        refresh = buttons.addButton("Refresh", QDialogButtonBox.ButtonRole.ActionRole)
        refresh.setAccessibleName("Refresh log")
        refresh.clicked.connect(self.refresh)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.path_label)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Read the log's last lines again and scroll to the newest."""
        # The log is capped and only its tail is read, so this is quick on the GUI thread.
        tail = self.server.log_file.tail(SERVER_LOG_BYTES)
        state = "running" if self.server.is_running() else "not running"
        version = self.server.version
        self.path_label.setText(
            f"{self.server.log_path} · llama-server {state} at {self.server.url}"
            + (f" · {version}" if version else "")
        )
        self.text.setPlainText(tail or "(the log is empty)")
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())


class RouterGuide(QObject):
    """Shows the App's router in the chat window and acts on the getting-started panel."""

    # A status-bar line (timeout in ms; 0 keeps it, '' clears the bar).
    status = Signal(str, int)
    # A problem the user must act on, shown whole until dismissed.
    problem = Signal(str)
    # The App now talks to another router: a reply streaming from the old one must stop.
    router_replaced = Signal()

    def __init__(
        self,
        app: App,
        *,
        panel: first_run.FirstRunPanel,
        picker: ModelPicker,
        meter: ContextMeter,
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._window = parent
        self.panel = panel
        self._picker = picker
        self._meter = meter
        # The registry the picker and meter were given: the App's, until it replaces it.
        self._registry = app.registry
        self._shown_server: ManagedServer | None = None
        # While the router is looked for or started, the picker lists from a stand-in.
        self._pending = False
        self._said_no_models = False
        # The models folder's actions, and what they say, passed on to the window.
        self.folder = ModelsFolder(app, panel=panel, picker=picker, parent=parent)
        self.folder.status.connect(self.status)
        self.folder.problem.connect(self.problem)

        panel.open_folder_requested.connect(self.folder.open_models_folder)
        panel.add_file_requested.connect(self.folder.choose_model_file)
        panel.check_requested.connect(self.folder.check_models)
        panel.log_requested.connect(self.show_server_log)
        panel.own_server_requested.connect(self.start_own_server)
        # Whose the router at a URL llamachat did not start is (port_owner), once asked.
        self._owners: dict[str, str] = {}
        # Offered in the File menu once llamachat runs the server itself.
        self.server_log_action = QAction("Server log…", self)
        self.server_log_action.triggered.connect(self.show_server_log)
        self.server_log_action.setVisible(False)
        self.add_model_action = QAction("Add GGUF model…", self)
        self.add_model_action.triggered.connect(self.folder.choose_model_file)
        self.add_model_action.setVisible(False)
        self.get_model_action = QAction("Get model from Hugging Face…", self)
        self.get_model_action.triggered.connect(self.open_get_model)
        self.delete_model_action = QAction("Delete model…", self)
        self.delete_model_action.triggered.connect(self.delete_current_model)
        self.get_model_dialog: GetModelDialog | None = None
        self.model_options_action = QAction("Model options…", self)
        self.model_options_action.setToolTip(
            "Context size, GPU layers and load at startup of the chosen model"
        )
        self.model_options_action.triggered.connect(self.open_model_options)
        self.model_options_action.setVisible(False)
        self.about_action = QAction("About llamachat", self)
        self.about_action.triggered.connect(self.show_about)
        self.about_box: QMessageBox | None = None

    def start(self) -> None:
        """Follow the App's router and its server's events from now on, from the state now."""
        app = self._app
        app.router_changed.connect(self._on_router_changed)
        app.server_event.connect(self._on_server_event)
        app.config_changed.connect(self._apply_idle_unload)
        self._apply_idle_unload()
        if app.router.status in (PENDING, FAILED) or app.router.server is not None:
            self._on_router_changed(app.router)

    @property
    def _server(self) -> ManagedServer | None:
        return self._app.managed_server()

    def _say(self, text: str, timeout: int = STATUS_MS) -> None:
        self.status.emit(text, timeout)

    # ------------------------------------------------------------------ getting models

    def open_get_model(self) -> GetModelDialog:
        """Show the Get model dialog (made again when the window talks to another router)."""
        dialog = self.get_model_dialog
        if dialog is None or (not dialog.downloading() and dialog.registry is not self._registry):
            if dialog is not None:
                dialog.deleteLater()
            dialog = GetModelDialog(self._registry, self._picker, self._window)
            self.get_model_dialog = dialog
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        dialog.reference.setFocus()
        return dialog

    def show_about(self) -> None:
        """Help > About: llamachat's version and the llama.cpp server's, asked in the background."""
        registry, server = self._registry, self._server

        def versions() -> str:
            managed = server.version if server is not None else ""
            built = registry.router_models().server_version()
            lines = [f"llamachat {__version__}", f"Router: {self._app.router.url}"]
            if managed:
                lines.append(f"llama-server (started by llamachat): {managed}")
            lines.append(f"Server build: {built}" if built else "Server build: not reported")
            return "\n".join(lines)

        def show(text: str) -> None:
            box = plain.message_box(self._window, QMessageBox.Icon.Information, "About", text)
            box.setIconPixmap(app_icon().pixmap(64, 64))
            self.about_box = box
            box.show()

        call_in_background(self, versions, show, show)

    def open_model_options(self) -> ModelOptionsDialog | None:
        """Per-model options of the chosen model (the server llamachat runs only)."""
        model, managed = self._picker.current_model(), self._server
        if managed is None or not model:
            self._say("Model options are for the llama-server llamachat runs, and a model.")
            return None
        dialog = ModelOptionsDialog(managed, self._registry, model, self._window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.saved.connect(lambda _model: self._picker.refresh())
        dialog.open()
        return dialog

    def delete_current_model(self) -> None:
        """Delete the chosen model from the router's cache, after asking."""
        model = self._picker.current_model()
        if model:
            delete_model(self._window, self._picker, self._registry, model)

    # ------------------------------------------------------------------ the router's state

    @Slot(object)
    def _on_router_changed(self, state: RouterState) -> None:
        """Follow the App's router: waiting for it, failed, or in use (maybe another one)."""
        if state.server is not None and state.server is not self._shown_server:
            self._show_managed_server(state.server)
        if state.status == PENDING:
            self._show_router_pending(state.text)
        elif state.status == FAILED:
            self._show_router_failed(state.text)
        else:
            self._use_registry(ready=state.status == READY)
            self._apply_idle_unload()
            if state.status == READY:
                self._say(f"Using the llama.cpp router at {state.url}.")

    @Slot()
    def _apply_idle_unload(self, *_news: object) -> None:
        """Unload idle models from here unless the server puts them to sleep itself."""
        seconds = self._app.config.sleep_idle_seconds
        server = self._server
        if server is not None and server.sleeps_when_idle():
            seconds = 0
        self._picker.idle.set_seconds(seconds)

    def _use_registry(self, *, ready: bool) -> None:
        """List from the App's registry: a new one (other servers), or the same after a wait.

        A router found at the URL already in use is kept as it is: a reply streaming
        from it goes on.
        """
        pending = self._leave_pending()
        if self._app.registry is not self._registry:
            if ready:
                self.router_replaced.emit()
            self._registry = self._app.registry
            self._picker.set_registry(self._registry)
            self._meter.set_registry(self._registry)
        elif pending:
            self._picker.set_registry(self._registry)
        elif ready:
            self._picker.refresh()

    def _show_router_pending(self, text: str) -> None:
        """Say that the router is being looked for or started, until it is in use or failed.

        The window stays usable; the model picker waits instead of reporting the
        configured URL as unreachable.
        """
        if not self._pending:
            self._pending = True
            self._picker.set_registry(first_run.PendingRouter())
            self._picker.setEnabled(False)
        self.panel.show_pending(text)
        self._say(text, 0)

    def _show_router_failed(self, message: str) -> None:
        """Show in the window why no router could be found or started (`message`, in full)."""
        if self._leave_pending():
            self._picker.set_registry(self._registry)
        self.panel.show_failure(message, has_log=self._server is not None)
        self._say(message.split("\n", 1)[0], 0)

    def _leave_pending(self) -> bool:
        """End the waiting state; True when it was on (the caller gives the picker its source)."""
        if not self._pending:
            return False
        self._pending = False
        self._picker.setEnabled(True)
        if self.panel.state() == "pending":
            self.panel.dismiss()
        return True

    def _show_managed_server(self, server: ManagedServer) -> None:
        """Offer the log and the models folder of the llama-server llamachat started."""
        self._shown_server = server
        # A model that fails to load says why in the server's log: the picker shows it.
        self._picker.set_failure_log(server.load_failure)
        # With RPC workers, a model that fits only with them says so.
        self._picker.set_fit(lambda info: server.workers.fit(info.file))
        self.server_log_action.setVisible(True)
        self.add_model_action.setVisible(True)
        self.model_options_action.setVisible(True)
        if self.panel.state() == "empty":
            self._show_empty()

    @Slot(str, str)
    def _on_server_event(self, kind: str, message: str) -> None:
        if kind == "gave_up":
            return  # the App marked the router failed: _on_router_changed said why
        text = first_run.event_text(kind, message)
        if kind == "starting" and self._pending:
            self.panel.show_pending(text)
        # A start can take a minute and a restart follows an exit: each stays until the next.
        self._say(text, STATUS_MS if kind in ("ready", "stopped") else 0)

    def show_listing(self, infos: list[ModelInfo]) -> None:
        """Say what the picker's new listing means: no models yet, or step aside."""
        if self._pending:
            # A listing asked for before the wait began: the router it reached is not yet
            # known to be the one llamachat will use, so it is no news about models.
            return
        # Said once per empty spell, not at every poll; a source that failed is shown by
        # the picker with its own message instead.
        said, self._said_no_models = self._said_no_models, not infos
        if not infos and not said and not self._registry.errors:
            self._say(
                f"The router at {self._app.config.router_url} offers no models: add GGUF "
                "files to its models folder.",
                0,
            )
        self._update_first_run(infos)

    def _update_first_run(self, infos: list[ModelInfo]) -> None:
        """Say where models go while there is nothing to chat with; step aside once there is.

        Only for a router on this machine: for a remote one llamachat can neither tell
        where its models live nor put any there.
        """
        if infos:
            if self.panel.state() != "hidden":
                self.panel.dismiss()
        elif providers.ROUTER not in self._registry.errors and (
            self._server is not None or is_loopback(self._app.config.router_url)
        ):
            self._show_empty()

    def _show_empty(self) -> None:
        url = self._app.config.router_url
        if self._server is not None:
            self.panel.show_empty(models_dir=self.folder.models_folder(), url=url)
            return
        if url not in self._owners:
            # Read from /proc (some milliseconds): asked once, off the GUI thread.
            self._owners[url] = ""
            call_in_background(self, lambda: router_owner(url), self._on_owner_found(url))
        self.panel.show_empty(
            models_dir=None,
            url=url,
            owner=self._owners[url],
            offer_own=self._app.config.manage_server,
        )

    def _on_owner_found(self, url: str) -> Callable[[str], None]:
        def found(owner: str) -> None:
            self._owners[url] = owner
            if self.panel.state() == "empty" and self._server is None:
                self._show_empty()

        return found

    def start_own_server(self) -> None:
        """Start llamachat's own llama-server on a free port and use it (the panel's offer)."""
        self._app.router_pending("Starting llamachat's own llama-server on a free port…")
        self._app.find_router(beside=True)

    # ------------------------------------------------------------------ the models folder

    def add_model_file(self, path: Path) -> None:
        """Link (or copy) a GGUF into the managed server's models folder, then list it."""
        self.folder.add_model_file(path)

    def show_server_log(self) -> ServerLogDialog | None:
        """Open the tail of the managed server's log (None when llamachat started no server)."""
        if self._server is None:
            self._say("llamachat did not start a llama-server: it has no log to show.")
            return None
        dialog = ServerLogDialog(self._server, parent=self._window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog
