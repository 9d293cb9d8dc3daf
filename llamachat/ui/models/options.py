"""Per-model load options for the llama-server llamachat runs: context size, GPU layers, startup.

`ModelOptionsDialog(server, registry, model)` shows what the server's models preset
(`ManagedServer.preset_path`) sets for `model`, and the context it was trained for
(`Models.context_limits`, asked in the background). Save writes the options with
`model_files.set_preset_context`, makes the router read its preset again and unloads that
model only, so its next message loads it with them; other models are left as they are.

Errors: none raised. A value the preset cannot take, a preset file that cannot be
written or a router that does not answer is said in the dialog.
"""

from __future__ import annotations

import logging
import re

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from llamachat.router import client as backend
from llamachat.router import model_files, server
from llamachat.ui import plain
from llamachat.ui.models.feed import ModelSource
from llamachat.ui.tasks import call_in_background

log = logging.getLogger(__name__)

MAX_CTX = 1 << 24
_GPU_LAYERS = re.compile(r"^(auto|all|\d+)$")
# Options on the server's own command line win over the preset's per-model ones.
_GLOBAL_FLAGS = {
    "ctx-size": ("--ctx-size", "-c"),
    "n-gpu-layers": ("--n-gpu-layers", "-ngl", "--gpu-layers"),
}


class ModelOptionsDialog(QDialog):
    """Context size, GPU layers and load-at-startup of one model, written to the preset."""

    saved = Signal(str)  # the model, once the preset is written and the router told

    def __init__(
        self,
        managed: server.ManagedServer,
        registry: ModelSource,
        model: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Model options: {model}")
        self._server = managed
        self._registry = registry
        self.model = model
        current = model_files.preset_options(managed.preset_path, model)
        self.ctx_size = QSpinBox()
        self.ctx_size.setAccessibleName("Context size")
        self.ctx_size.setRange(0, MAX_CTX)
        self.ctx_size.setSingleStep(1024)
        self.ctx_size.setSpecialValueText("the model's default")
        self.ctx_size.setValue(int(current.get("ctx-size", "0") or 0))
        self.trained = plain.Label("Trained for: asking the server…")
        self.trained.setAccessibleName("Trained context")
        self.gpu_layers = QLineEdit(current.get("n-gpu-layers", ""))
        self.gpu_layers.setAccessibleName("GPU layers")
        self.gpu_layers.setPlaceholderText("auto")
        self.on_startup = QCheckBox("Load when the server starts")
        self.on_startup.setChecked(current.get("load-on-startup", "").lower() == "true")
        self.status = plain.Label()
        self.status.setAccessibleName("Model options status")
        self.status.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Context size (tokens)", self.ctx_size)
        form.addRow("", self.trained)
        form.addRow("GPU layers", self.gpu_layers)
        form.addRow("", self.on_startup)
        note = plain.Label(_overridden(managed.cfg.server_args) or "")
        note.setWordWrap(True)
        note.setVisible(bool(note.text()))
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Close
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(plain.Label(f"Written to {managed.preset_path} for {model}."))
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        client = registry.router_models()
        call_in_background(
            self,
            lambda: client.context_limits(model),  # type: ignore[attr-defined]
            self._on_limits,
            lambda message: plain.set_text(self.trained, f"Trained for: unknown ({message})"),
        )

    def _on_limits(self, limits: tuple[int | None, int | None]) -> None:
        _n_ctx, trained = limits
        if trained:
            plain.set_text(self.trained, f"Trained for up to {trained:,} tokens")
            self.ctx_size.setMaximum(trained)
        else:
            # The router lists a model's metadata only while it is loaded.
            plain.set_text(self.trained, "Trained for: known once the model has been loaded")

    @Slot()
    def save(self) -> None:
        """Write the options into the preset and reload only this model with them."""
        layers = self.gpu_layers.text().strip().lower()
        if layers and not _GPU_LAYERS.match(layers):
            plain.set_text(
                self.status, f"GPU layers must be auto, all or a number, not {layers!r}."
            )
            return
        try:
            model_files.set_preset_context(
                self._server.preset_path,
                self.model,
                self.ctx_size.value(),
                options={
                    "n-gpu-layers": layers or None,
                    "load-on-startup": "true" if self.on_startup.isChecked() else None,
                },
            )
        except model_files.ManagedServerError as exc:
            plain.set_text(self.status, exc.message)
            return
        url, model, registry = self._server.url, self.model, self._registry
        plain.set_text(self.status, f"Saved; reloading {model}…")
        call_in_background(
            self,
            lambda: _reload_one(url, registry, model),
            lambda _: self._on_reloaded(),
            lambda message: plain.set_text(
                self.status, f"Saved, but {model} was not reloaded: {message}"
            ),
        )

    def _on_reloaded(self) -> None:
        plain.set_text(self.status, f"Saved: {self.model} loads with these options from now on.")
        self.saved.emit(self.model)


def _reload_one(url: str, registry: ModelSource, model: str) -> None:
    """Make the router read its preset again, and unload `model` (only it) if it runs."""
    model_files.reload_models(url)
    models = registry.router_models()
    try:
        models.unload(model)
    except backend.ServerError as exc:
        log.debug("%s was not running: %s", model, exc.message)


def _overridden(server_args: tuple[str, ...]) -> str:
    """What server_args sets for every model, which wins over these options."""
    found = [key for key, flags in _GLOBAL_FLAGS.items() if any(a in flags for a in server_args)]
    if not found:
        return ""
    return (
        f"server_args in the config sets {', '.join(found)} for every model, and the "
        "server's command line wins over these per-model options: remove it there first."
    )
