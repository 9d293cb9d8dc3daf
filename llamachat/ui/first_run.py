"""The chat window's getting-started panel: no router yet, none to be had, or no models.

`FirstRunPanel` sits above the conversation and shows one of three states, each
leaving the rest of the window usable (past chats can be read meanwhile):

- "pending": the router is being looked for, or llamachat's own llama-server is
  starting (a busy bar and what is going on);
- "failed": no router could be found or started, with the reason in full (a missing
  llama-server says exactly how to get one), Settings and, for a managed server, its log;
- "empty": the router answers but offers no models: where GGUF files go, with
  "Open models folder" and "Add GGUF file…" for llamachat's own server, and "Check
  again" to make the router re-scan its folder; for a router llamachat did not start,
  whose it is and "Start llamachat's own server" (on a free port, beside it).

The panel only shows and emits requests; the window acts on them. The blocking parts
(`add_model`, `rescan`) are plain functions for a worker thread. `PendingRouter` is the
model source the picker lists from while the router is not known yet, and
`event_text` words a managed server's events for the status bar.

Errors: none raised. `add_model` and `rescan` return the reason a file could not be
added or the router not re-scanned (model_files.ManagedServerError's message, or the OS
error), for the panel to show.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from PySide6.QtCore import Qt, Signal, SignalInstance
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from llamachat.router import client, model_files
from llamachat.router.models import ModelInfo
from llamachat.ui import plain

log = logging.getLogger(__name__)

PANEL_WIDTH = 620
NOT_READY = "the llama.cpp router is not ready yet"
_PORT_RE = re.compile(r"\s--port\s+(\d+)")


def event_text(kind: str, message: str) -> str:
    """One status-bar line for a managed server's event (`ManagedServer(on_event=...)`)."""
    if kind == "starting":
        # The event carries the command line; the port is what the user can act on.
        port = _PORT_RE.search(message)
        return f"Starting llama-server on port {port[1]}…" if port else "Starting llama-server…"
    # "exited" carries the log's tail after its first line: that belongs in the log view.
    first = message.split("\n", 1)[0].removesuffix("; last output:")
    return f"llama-server: {first}"


def add_model(src: Path, models_dir: Path, url: str, *, api_key: str | None = None) -> str:
    """Link (or copy) a GGUF into the models folder and make the router re-scan it.

    Blocking (a copy can take minutes): run it on a worker thread. Returns '' when the
    router now has the file, else the reason for the user.
    """
    try:
        model_files.add_model_file(src, models_dir, link=True)
    except model_files.ManagedServerError as exc:
        return exc.message
    except OSError as exc:
        return f"Could not put {src.name} in {models_dir}: {exc.strerror or exc}"
    return rescan(url, api_key=api_key)


def rescan(url: str, *, api_key: str | None = None) -> str:
    """Make the router at `url` re-scan its models folder; '' when it did, else why not."""
    try:
        model_files.reload_models(url, api_key=api_key)
    except model_files.ManagedServerError as exc:
        return exc.message
    return ""


class PendingRouter:
    """The picker's model source while the router is looked for or started.

    Every call fails with NOT_READY, so the picker says the router is not ready yet
    instead of showing a connection error for the configured URL; and since a failed
    listing lists nothing, no "no models" state is ever drawn from it.
    """

    def __init__(self) -> None:
        self.errors: dict[str, client.BackendError] = {}

    def models(self) -> list[ModelInfo]:
        """Fail: the router is not known yet."""
        raise client.RouterUnreachable(NOT_READY)

    def router_models(self) -> PendingRouter:
        """Itself: it answers the picker's polls, loads and unloads too."""
        return self

    def list(self) -> list[ModelInfo]:
        """Fail: the router is not known yet."""
        raise client.RouterUnreachable(NOT_READY)

    def load(self, model: str) -> None:
        """Fail: there is no router to load `model` yet."""
        raise client.RouterUnreachable(NOT_READY)

    def unload(self, model: str) -> None:
        """Fail: there is no router to unload `model` from yet."""
        raise client.RouterUnreachable(NOT_READY)


class FirstRunPanel(QFrame):
    """The router being found or started, why none could be had, or where models go."""

    open_folder_requested = Signal()
    add_file_requested = Signal()
    check_requested = Signal()
    settings_requested = Signal()
    log_requested = Signal()
    own_server_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("firstRun")
        self.setAccessibleName("Getting started")
        # The conversation's own background: the panel reads as part of it, not a toolbar.
        self.setBackgroundRole(QPalette.ColorRole.Base)
        self.setAutoFillBackground(True)
        self._state = "hidden"
        self._target: tuple[Path | None, str, str, bool] | None = None
        self._build()
        self.hide()

    def _build(self) -> None:
        self.title = plain.Label()
        self.title.setAccessibleName("Getting started title")
        font = QFont(self.title.font())
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.title.setFont(font)

        self.text = plain.Label()
        self.text.setAccessibleName("Getting started text")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.folder = plain.Label()
        self.folder.setAccessibleName("Models folder")
        self.folder.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.folder.setWordWrap(True)
        fixed = QFont("monospace")
        fixed.setStyleHint(QFont.StyleHint.TypeWriter)
        self.folder.setFont(fixed)

        self.busy = QProgressBar()
        self.busy.setAccessibleName("Getting started progress")
        self.busy.setRange(0, 0)  # a start or a copy has no percentage to tell
        self.busy.setTextVisible(False)
        self.busy.setMaximumHeight(10)

        self.note = plain.Label()
        self.note.setAccessibleName("Getting started progress text")

        self.problem = plain.Label()
        self.problem.setAccessibleName("Getting started problem")
        self.problem.setWordWrap(True)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.setStyleSheet("color: #c0392b;")

        self.open_button = self._button("Open models folder", self.open_folder_requested)
        self.add_button = self._button("Add GGUF file…", self.add_file_requested)
        self.check_button = self._button("Check again", self.check_requested)
        self.settings_button = self._button("Settings…", self.settings_requested)
        self.log_button = self._button("Server log…", self.log_requested)
        self.own_button = self._button("Start llamachat's own server", self.own_server_requested)
        self.add_button.setDefault(True)

        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        for button in (
            self.add_button,
            self.open_button,
            self.check_button,
            self.own_button,
            self.settings_button,
            self.log_button,
        ):
            buttons.addWidget(button)
        buttons.addStretch(1)

        card = QWidget()
        card.setMaximumWidth(PANEL_WIDTH)
        card.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        column = QVBoxLayout(card)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(10)
        column.addWidget(self.title)
        column.addWidget(self.text)
        column.addWidget(self.folder)
        column.addWidget(self.busy)
        column.addWidget(self.note)
        column.addWidget(self.problem)
        column.addLayout(buttons)

        outer = QHBoxLayout(self)
        outer.setContentsMargins(24, 28, 24, 20)
        outer.addStretch(1)
        outer.addWidget(card, 4)
        outer.addStretch(1)

    def _button(self, text: str, signal: SignalInstance) -> QPushButton:
        button = QPushButton(text)
        button.setAccessibleName(text.rstrip("…"))
        button.clicked.connect(signal)
        return button

    # ------------------------------------------------------------------ states

    def state(self) -> str:
        """What the panel shows: "hidden", "pending", "failed" or "empty"."""
        return self._state

    def show_pending(self, text: str) -> None:
        """The router is being looked for or started: `text` says which, with a busy bar."""
        self._show(
            "pending",
            title="Getting the llama.cpp router ready",
            text=f"{text}\nPast chats can be read meanwhile.",
            busy=True,
            buttons=(),
        )

    def show_failure(self, message: str, *, has_log: bool = False) -> None:
        """No router could be found or started: `message` says why and what to do."""
        self._show(
            "failed",
            title="No llama.cpp router",
            text=message,
            buttons=(self.settings_button, *((self.log_button,) if has_log else ())),
        )

    def show_empty(
        self, *, models_dir: Path | None, url: str, owner: str = "", offer_own: bool = False
    ) -> None:
        """The router at `url` offers no models; `models_dir` when llamachat runs the server.

        For a router llamachat did not start, `owner` says whose it is (`port_owner`), and
        `offer_own` offers to start llamachat's own server beside it. Showing the same
        state again keeps what the panel says meanwhile (a file being added, the last
        problem): the model list is polled every few seconds.
        """
        target = (models_dir, url, owner, offer_own)
        if self._state == "empty" and self._target == target:
            return
        self._target = target
        buttons: tuple[QPushButton, ...]
        if models_dir is not None:
            text = (
                "llamachat's llama-server finds models in GGUF format in the folder below. "
                "Download a GGUF model (a small one such as SmolLM2 or Qwen2.5 0.5B to try), "
                "then put it there or add it here; choosing it in the model picker loads it."
            )
            buttons = (self.add_button, self.open_button, self.check_button)
        else:
            whose = f" ({owner})" if owner else ""
            text = (
                f"The llama.cpp router at {url} lists no models{whose}. Put GGUF model files "
                "in the folder its --models-dir option names (or list them in its "
                "--models-preset file), then check again."
            )
            buttons = (self.check_button,)
            if offer_own:
                text += (
                    " Or start llamachat's own llama-server on a free port, beside it: it "
                    "serves llamachat's models folder."
                )
                buttons = (self.check_button, self.own_button)
        self._show(
            "empty",
            title="No models yet",
            text=text,
            folder=str(models_dir) if models_dir is not None else "",
            buttons=buttons,
        )

    def set_busy(self, text: str) -> None:
        """Show `text` with a busy bar while a file is added ('' ends it); actions wait."""
        self.busy.setVisible(bool(text))
        self.note.setText(text)
        self.note.setVisible(bool(text))
        for button in (self.add_button, self.check_button):
            button.setEnabled(not text)
        if text:
            self.set_problem("")

    def set_problem(self, text: str) -> None:
        """Say why the last action failed ('' clears it)."""
        self.problem.setText(text)
        self.problem.setVisible(bool(text))

    def dismiss(self) -> None:
        """Hide the panel: there is a router, and models to chat with."""
        self._state = "hidden"
        self._target = None
        self.hide()

    def _show(
        self,
        state: str,
        *,
        title: str,
        text: str,
        folder: str = "",
        busy: bool = False,
        buttons: tuple[QPushButton, ...],
    ) -> None:
        if state != "empty":
            self._target = None
        self._state = state
        self.title.setText(title)
        self.text.setText(text)
        self.folder.setText(folder)
        self.folder.setVisible(bool(folder))
        self.busy.setVisible(busy)
        self.note.hide()
        self.set_problem("")
        for button in (
            self.open_button,
            self.add_button,
            self.check_button,
            self.own_button,
            self.settings_button,
            self.log_button,
        ):
            button.setVisible(button in buttons)
            button.setEnabled(True)
        self.show()
