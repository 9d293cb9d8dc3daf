"""The managed server's models folder: shown in the file manager, a GGUF added, re-scanned.

`ModelsFolder` acts on the getting-started panel's and the File menu's requests for the
folder of the llama-server llamachat runs: open it (made when missing), link or copy a
GGUF file into it on a worker thread, and make the router re-scan it; then the model
picker lists again. It says what happened through `status` (a status-bar line) and
`problem` (shown whole), which `router_guide.RouterGuide` passes on to the window.

Errors: none raised. An action that fails is explained on the panel when it is shown,
else as a problem; a router llamachat did not start has no folder of ours, and it says so.
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFileDialog, QWidget

from llamachat.ui import first_run, tasks
from llamachat.ui.app import App
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.views.notice import STATUS_MS

if TYPE_CHECKING:
    from llamachat.router.server import ManagedServer


class ModelsFolder(QObject):
    """The folder of the llama-server llamachat runs: opened, a GGUF added, re-scanned."""

    # A status-bar line (timeout in ms; 0 keeps it, '' clears the bar).
    status = Signal(str, int)
    # A problem the user must act on, shown whole until dismissed.
    problem = Signal(str)

    def __init__(
        self,
        app: App,
        *,
        panel: first_run.FirstRunPanel,
        picker: ModelPicker,
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._app = app
        self._window = parent
        self.panel = panel
        self._picker = picker
        self._adding_model = False

    @property
    def _server(self) -> ManagedServer | None:
        return self._app.managed_server()

    def _say(self, text: str, timeout: int = STATUS_MS) -> None:
        self.status.emit(text, timeout)

    def models_folder(self) -> Path | None:
        """The managed server's models folder (None for a router llamachat did not start)."""
        if self._server is None:
            return None
        return Path(self._server.cfg.models_dir).expanduser()

    def open_models_folder(self) -> Path | None:
        """Show the managed server's models folder in the file manager, creating it if missing."""
        folder = self.models_folder()
        if folder is None:
            self._say_problem(
                "llamachat did not start this router: its models are in the folder its "
                "--models-dir option names."
            )
            return None
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._say_problem(f"Cannot create the models folder {folder}: {exc.strerror or exc}")
            return None
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            self._say(f"No file manager could be opened; the models folder is {folder}.")
        return folder

    def choose_model_file(self) -> None:
        """Ask for a GGUF file and add it to the managed server's models folder."""
        path, _filter = QFileDialog.getOpenFileName(
            self._window,
            "Add a GGUF model",
            str(Path.home()),
            "GGUF models (*.gguf);;All files (*)",
        )
        if path:
            self.add_model_file(Path(path))

    def add_model_file(self, path: Path) -> None:
        """Link (or copy) a GGUF into the managed server's models folder, then list it.

        Runs on a worker thread (a copy can take minutes); the router re-scans its folder
        and the model picker lists the model. A file that is not a usable GGUF is
        explained in the window.
        """
        server = self._server
        folder = self.models_folder()
        if server is None or folder is None:
            self._say_problem(
                "llamachat did not start this router: put the file in the folder its "
                "--models-dir option names."
            )
            return
        if self._adding_model:
            self._say("A model file is being added already.")
            return
        self._adding_model = True
        path = Path(path)
        url, api_key = server.url, self._app.config.api_key()
        self.panel.set_busy(f"Adding {path.name}…")
        self._say(f"Adding {path.name} to {folder}…", 0)
        tasks.run_in_background(
            lambda: first_run.add_model(path, folder, url, api_key=api_key),
            lambda future: self._on_model_file_added(path.name, future),
            receiver=self,
        )

    def check_models(self) -> None:
        """Make the router re-scan its models folder, then list the models again."""
        cfg = self._app.config
        url = self._server.url if self._server is not None else cfg.router_url
        api_key = cfg.api_key()
        self.panel.set_problem("")
        tasks.run_in_background(
            lambda: first_run.rescan(url, api_key=api_key),
            lambda future: self._on_rescanned(str(future.result())),
            receiver=self,
        )

    def _on_model_file_added(self, name: str, future: Future) -> None:
        self._adding_model = False
        self.panel.set_busy("")
        error = future.result()
        if error:
            self._say("", 0)
            self._say_problem(error)
            return
        self._say(f"Added {name} to the models folder.")
        self._picker.refresh()

    def _on_rescanned(self, error: str) -> None:
        if error:
            self._say_problem(error)
        else:
            self._say("Asked the router to look for models again.")
        self._picker.refresh()

    def _say_problem(self, text: str) -> None:
        """Explain a failed models-folder action on the panel (when shown), else as a problem."""
        if self.panel.state() != "hidden":
            self.panel.set_problem(text)
        else:
            self.problem.emit(text)
