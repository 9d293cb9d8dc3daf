"""The Settings dialog: the common keys of config.toml, saved in place.

`SettingsDialog(cfg)` (accessible name "Settings") edits the router URL, the name
of the API key's environment variable, the search URL, the skills folders, the
default model, the theme, the quick ask shortcut (`shortcut_note`: how it stands),
autostart and the RPC workers (`models.worker_list.WorkerList`: add, remove, test).
Save writes only the keys the user changed, through `store` (the App's `save_settings`, which applies them in every window; by default
`config.update_file` alone), which keeps the user's comments and layout and refuses
a file that would not load; the refusal's message is shown in the dialog and
nothing is written. A successful save emits `saved(Config)` with the file as
re-read.

Errors: none raised; `config.ConfigError` is shown in the dialog.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QKeySequenceEdit,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llamachat import config
from llamachat.config import Config, ConfigError
from llamachat.router.binary import find_binary
from llamachat.ui import plain
from llamachat.ui.desktop import entry, hotkey
from llamachat.ui.models.worker_list import WorkerList

log = logging.getLogger(__name__)

THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


def _shown_path(path: Path) -> str:
    """A path as the user would type it: under home as ~/..."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class SettingsDialog(QDialog):
    """Edits the common settings and writes them to config.toml, comments kept."""

    saved = Signal(object)

    def __init__(
        self,
        cfg: Config,
        *,
        models: list[str] | None = None,
        store: Callable[[dict[str, object]], Config] | None = None,
        shortcut_note: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.cfg = cfg
        self._store = store if store is not None else self._write
        self.path = cfg.path if cfg.path is not None else config.default_path()
        self.setWindowTitle("Settings")
        self.setAccessibleName("Settings")
        self.resize(620, 500)

        self.router_url = QLineEdit(cfg.router_url)
        self.router_url.setAccessibleName("Router URL")
        self.api_key_env = QLineEdit(cfg.router_api_key_env)
        self.api_key_env.setAccessibleName("API key environment variable")
        self.api_key_env.setPlaceholderText("e.g. LLAMA_API_KEY (the key itself is never stored)")
        self.search_url = QLineEdit(cfg.search_url)
        self.search_url.setAccessibleName("Search URL")
        self.search_url.setPlaceholderText("SearXNG base URL; empty turns web search off")
        self.skills_dir = QLineEdit(_shown_path(cfg.skills_dir))
        self.skills_dir.setAccessibleName("Skills folder")
        self.skills_dirs = QPlainTextEdit("\n".join(_shown_path(p) for p in cfg.skills_dirs))
        self.skills_dirs.setAccessibleName("More skills folders")
        self.skills_dirs.setPlaceholderText("One folder per line")
        self.skills_dirs.setMaximumHeight(80)
        self.default_model = QComboBox()
        self.default_model.setEditable(True)
        self.default_model.setAccessibleName("Default model")
        self.default_model.addItems([""] + [m for m in models or [] if m])
        self.default_model.setCurrentText(cfg.default_model)
        self.theme = QComboBox()
        self.theme.setAccessibleName("Theme")
        for value, label in THEME_LABELS.items():
            self.theme.addItem(label, value)
        self.theme.setCurrentIndex(max(0, self.theme.findData(cfg.theme)))
        self.quick_ask_shortcut = QKeySequenceEdit(QKeySequence(cfg.quick_ask_shortcut))
        self.quick_ask_shortcut.setAccessibleName("Quick ask shortcut")
        self.quick_ask_shortcut.setMaximumSequenceLength(1)
        self.quick_ask_shortcut.setClearButtonEnabled(True)
        # How the desktop-wide key stands (bound, in conflict, or how to bind it by hand).
        self.shortcut_note = plain.Label(shortcut_note or hotkey.NOTE)
        self.shortcut_note.setAccessibleName("Quick ask shortcut note")
        self.shortcut_note.setWordWrap(True)
        self.autostart = QCheckBox("Start in the background at login (tray and quick ask)")
        self.autostart.setAccessibleName("Start at login")
        # Ticked only while the login entry is there: --uninstall-desktop (or the user) may
        # have removed it since this config was read.
        self.autostart.setChecked(cfg.autostart and entry.autostart_path().is_file())
        self.dictation_sends = QCheckBox("Send a dictated message when I stop talking")
        self.dictation_sends.setAccessibleName("Send when I stop talking")
        self.dictation_sends.setChecked(cfg.dictation_sends)
        self.voice_model = QLineEdit(_shown_path(cfg.voice_model) if cfg.voice_model else "")
        self.voice_model.setAccessibleName("Voice model")
        self.voice_model.setPlaceholderText(
            "A Piper voice (.onnx, its .onnx.json beside it); empty: espeak-ng"
        )
        self.choose_voice = QPushButton("Choose…")
        self.choose_voice.setAccessibleName("Choose a voice model")
        self.choose_voice.clicked.connect(self._choose_voice)
        voice_row = QHBoxLayout()
        voice_row.addWidget(self.voice_model, 1)
        voice_row.addWidget(self.choose_voice)
        self.rpc_workers = WorkerList(cfg.rpc_workers, find_binary(cfg))

        form = QFormLayout()
        form.addRow("&Router URL:", self.router_url)
        form.addRow("API &key variable:", self.api_key_env)
        form.addRow("&Search URL:", self.search_url)
        form.addRow("S&kills folder:", self.skills_dir)
        form.addRow("&More skills folders:", self.skills_dirs)
        form.addRow("&Default model:", self.default_model)
        form.addRow("&Theme:", self.theme)
        form.addRow("&Quick ask shortcut:", self.quick_ask_shortcut)
        form.addRow("", self.shortcut_note)
        form.addRow("", self.autostart)
        form.addRow("", self.dictation_sends)
        # A row of two widgets gives the form no buddy for the mnemonic: the label names one.
        voice_label = QLabel("Read-aloud &voice:")
        voice_label.setBuddy(self.voice_model)
        form.addRow(voice_label, voice_row)
        form.addRow("RPC &workers:", self.rpc_workers)

        where = plain.Label(f"Saved to {self.path}; comments in the file are kept.")
        where.setWordWrap(True)
        self.error_label = plain.Label()
        self.error_label.setAccessibleName("Settings error")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c0392b")
        self.error_label.hide()

        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(where)
        layout.addWidget(self.error_label)
        layout.addStretch(1)
        layout.addWidget(buttons)

    @Slot()
    def _choose_voice(self) -> None:
        """Pick a Piper voice file (its .onnx.json must sit beside it, as Piper ships them)."""
        start = self.voice_model.text().strip() or str(Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a Piper voice", str(Path(start).expanduser()), "Piper voices (*.onnx)"
        )
        if path:
            self.voice_model.setText(_shown_path(Path(path)))

    def values(self) -> dict[str, object]:
        """The edited keys as config.toml would hold them."""
        extra = [line.strip() for line in self.skills_dirs.toPlainText().splitlines()]
        return {
            "router_url": self.router_url.text().strip(),
            "router_api_key_env": self.api_key_env.text().strip(),
            "search_url": self.search_url.text().strip(),
            "skills_dir": self.skills_dir.text().strip(),
            "skills_dirs": [line for line in extra if line],
            "default_model": self.default_model.currentText().strip(),
            "theme": str(self.theme.currentData()),
            "quick_ask_shortcut": self.quick_ask_shortcut.keySequence().toString(
                QKeySequence.SequenceFormat.PortableText
            ),
            "autostart": self.autostart.isChecked(),
            "dictation_sends": self.dictation_sends.isChecked(),
            "voice_model": self.voice_model.text().strip(),
            "rpc_workers": self.rpc_workers.addresses(),
        }

    def error(self) -> str:
        """Why the last save was refused ('' when it was not)."""
        return self.error_label.text()

    @Slot()
    def save(self) -> bool:
        """Write the settings; on success emit `saved` and close, else show why and stay."""
        changed = {key: value for key, value in self.values().items() if self._differs(key, value)}
        try:
            new = self._store(changed)
        except ConfigError as exc:
            self.error_label.setText(exc.message)
            self.error_label.show()
            return False
        self.error_label.hide()
        self.error_label.clear()
        self.cfg = new
        self.saved.emit(new)
        self.accept()
        return True

    def done(self, result: int) -> None:
        """Close, and make the window that opened the dialog active again.

        Without a window manager nothing else would: the keys (Ctrl+N) went nowhere.
        """
        super().done(result)
        parent = self.parentWidget()
        if parent is not None:
            parent.window().activateWindow()

    def _write(self, changed: dict[str, object]) -> Config:
        if changed or not self.path.exists():
            config.update_file(self.path, changed)
        return config.load(self.path)

    def _differs(self, key: str, value: object) -> bool:
        # Only keys the user changed are written, so an untouched default stays a comment.
        current: object = getattr(self.cfg, key)
        if key == "skills_dir":
            return value != _shown_path(self.cfg.skills_dir)
        if key == "voice_model":
            voice = self.cfg.voice_model
            return value != (_shown_path(voice) if voice is not None else "")
        if key == "rpc_workers":
            return value != list(self.cfg.rpc_workers)
        if key == "skills_dirs":
            return value != [_shown_path(p) for p in self.cfg.skills_dirs]
        return value != current
