"""Getting a model from Hugging Face through the router, and deleting a downloaded one.

`GetModelDialog(registry, picker)` takes a reference (`user/repo` or `user/repo:QUANT`),
asks the router to download it (`POST /models`) and follows the download in the
router's events, which the picker reads (`ModelPicker.model_event`): progress, then
`download_finished` (the model is looked up in the list: llama-server also says
"finished" for a repository that does not exist) or `download_failed`. Cancel asks
the router to stop (`/models/unload` of the reference). Non-modal; every call runs on
the task runner, so the window never waits.

llamachat writes no file here: the router downloads into its own cache, to a
temporary name it renames only once the file is whole.

`delete_model(parent, picker, registry, model)` asks first, then `DELETE /models`.

Errors: none raised. A bad reference, a router that cannot download or delete, a
download that fails: each is said in the dialog (or a message box), in plain text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.router import client
from llamachat.router.models import ModelEvent, listed_as, parse_reference
from llamachat.ui import plain
from llamachat.ui.models.feed import ModelSource
from llamachat.ui.models.picker import ModelPicker
from llamachat.ui.tasks import call_in_background

log = logging.getLogger(__name__)

NO_DOWNLOADS = (
    "This router cannot download models (it has no POST /models; llama.cpp's llama-server "
    "has it since router mode gained downloads). Put GGUF files in its models folder instead."
)
NO_EVENTS = (
    "This router sends no model events (/models/sse), so llamachat cannot follow a "
    "download. Update llama.cpp's llama-server, or put GGUF files in its models folder."
)
NEEDS_INTERNET = (
    "The router downloads the model from huggingface.co: the machine it runs on needs "
    "internet access. The model is kept in the router's cache (LLAMA_CACHE)."
)


def _router_call(function: Callable[[], object], unsupported: str) -> Callable[[], object]:
    """`function`, with a router's "no such endpoint" answer turned into `unsupported`."""

    def call() -> object:
        try:
            return function()
        except client.ServerError as exc:
            if exc.status in (404, 405, 501):
                raise client.BackendError(unsupported) from None
            raise

    return call


class GetModelDialog(QDialog):
    """Download a Hugging Face model through the router, with progress and Cancel."""

    downloaded = Signal(str)  # the model id the router lists it as

    def __init__(
        self, registry: ModelSource, picker: ModelPicker, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Get a model")
        self.registry = registry
        """The router and providers this dialog downloads through."""
        self._picker = picker
        self._ref = ""
        self._cancelled = False
        self.reference = QLineEdit()
        self.reference.setAccessibleName("Model reference")
        self.reference.setPlaceholderText("user/repo or user/repo:Q4_K_M")
        self.reference.returnPressed.connect(self.start)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        for button in (self.download_button, self.cancel_button, close):
            button.setAutoDefault(False)
        self.progress = QProgressBar()
        self.progress.setAccessibleName("Download progress")
        self.progress.hide()
        self.status = plain.Label()
        self.status.setAccessibleName("Download status")
        self.status.setWordWrap(True)
        note = plain.Label(NEEDS_INTERNET)
        note.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.reference, 1)
        row.addWidget(self.download_button)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(plain.Label("A model on Hugging Face, as user/repo or user/repo:QUANT:"))
        layout.addLayout(row)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(note)
        layout.addLayout(buttons)
        self.resize(520, self.sizeHint().height())
        picker.model_event.connect(self._on_event)

    def downloading(self) -> bool:
        """Whether a download is under way."""
        return bool(self._ref)

    @Slot()
    def start(self) -> None:
        """Start downloading the reference typed (or say what is wrong with it)."""
        if self._ref:
            return
        try:
            ref = parse_reference(self.reference.text())
        except ValueError as exc:
            return self._say(str(exc))
        if not self._picker.watching():
            return self._say(NO_EVENTS)
        self._ref, self._cancelled = ref, False
        self.download_button.setEnabled(False)
        self.reference.setEnabled(False)
        self.cancel_button.show()
        self.progress.setRange(0, 0)
        self.progress.show()
        asking = f"Asking the router to download {ref}…"
        self._say(asking)
        models = self.registry.router_models()
        call_in_background(
            self,
            _router_call(lambda: models.download(ref), NO_DOWNLOADS),  # type: ignore[attr-defined]
            lambda _: self._on_accepted(ref, asking),
            lambda message: self._finish(f"Could not download {ref}: {message}"),
        )

    def _on_accepted(self, ref: str, asking: str) -> None:
        # The router's events may have overtaken its answer (progress, or even the end):
        # their news stays.
        if self._ref == ref and self.status.text() == asking:
            self._say(f"Downloading {ref}…")

    @Slot()
    def cancel(self) -> None:
        """Ask the router to stop the download under way."""
        if not self._ref:
            return
        ref = self._ref
        self._cancelled = True
        self.cancel_button.setEnabled(False)
        self._say(f"Cancelling the download of {ref}…")
        models = self.registry.router_models()
        call_in_background(
            self,
            lambda: models.cancel_download(ref),  # type: ignore[attr-defined]
            lambda _: None,
            lambda message: self._finish(f"Could not cancel the download of {ref}: {message}"),
        )

    @Slot(object)
    def _on_event(self, event: ModelEvent) -> None:
        if not self._ref or event.model != self._ref:
            return
        if event.kind == "download" and event.progress is not None:
            percent = round(event.progress * 100)
            self.progress.setRange(0, 100)
            self.progress.setValue(percent)
            self._say(f"Downloading {self._ref}… {percent}%")
        elif event.kind == "download_failed":
            if self._cancelled:
                self._finish(f"The download of {self._ref} was cancelled.")
            else:
                self._finish(f"The download of {self._ref} failed: {event.error}")
        elif event.kind == "download_finished":
            self._say(f"Downloaded {self._ref}; looking for it in the router's list…")
            ref, registry = self._ref, self.registry
            call_in_background(
                self,
                lambda: [m.id for m in registry.router_models().list()],
                lambda ids: self._on_listed(ref, ids),
                lambda message: self._finish(f"Downloaded {ref}, but {message}"),
            )

    def _on_listed(self, ref: str, ids: list[str]) -> None:
        found = listed_as(ref, ids)
        if found is None:
            self._finish(
                f"The router finished without a model {ref}: the repository or the quant may "
                "not exist, or the download failed. Check the reference, and the server log."
            )
            return
        self._finish(f"{found} is ready: it is in the model list.")
        self._picker.refresh()
        self.downloaded.emit(found)

    def _finish(self, text: str) -> None:
        self._ref = ""
        self.download_button.setEnabled(True)
        self.reference.setEnabled(True)
        self.cancel_button.hide()
        self.cancel_button.setEnabled(True)
        self.progress.hide()
        self._say(text)

    def _say(self, text: str) -> None:
        plain.set_text(self.status, text)


def delete_model(
    parent: QWidget,
    picker: ModelPicker,
    registry: ModelSource,
    model: str,
    *,
    ask: Callable[[str], bool] | None = None,
    said: Callable[[str], None] | None = None,
) -> bool:
    """Delete `model` from the router's cache after the user agrees; False when not asked to.

    `ask(question)` (default: a message box) and `said(outcome)` (default: a message
    box on failure only) are there so a test can answer and read them.
    """
    question = (
        f"Delete {model} from the router's cache? Its file is removed from the disk; "
        "a model in the router's models folder or preset cannot be deleted this way."
    )
    if ask is None:

        def ask(text: str) -> bool:
            box = plain.message_box(parent, QMessageBox.Icon.Question, "Delete model", text)
            box.setStandardButtons(
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel
            )
            box.setDefaultButton(QMessageBox.StandardButton.Cancel)
            return box.exec() == QMessageBox.StandardButton.Yes

    if not ask(question):
        return False
    if said is None:

        def said(text: str) -> None:
            if not text.startswith("Deleted"):
                plain.message_box(parent, QMessageBox.Icon.Warning, "Delete model", text).show()

    models = registry.router_models()
    report = said

    def done(_: object) -> None:
        picker.refresh()
        report(f"Deleted {model}.")

    call_in_background(
        picker,
        _router_call(
            lambda: models.delete(model),  # type: ignore[attr-defined]
            "This router cannot delete models (it has no DELETE /models).",
        ),
        done,
        lambda message: report(f"Could not delete {model}: {message}"),
    )
    return True
