"""System prompt presets: the picker beside the model, its editor, and a per-chat prompt.

`PresetPicker(prompts)` is a combo (accessible name "Prompt preset") of the presets
in the prompts folder, plus "Custom prompt for this chat…" for a prompt that
belongs to one session only. It emits `preset_changed(name, custom_text)` (what
`History.set_prompt` stores) and `system_text_changed(text)` (what the system
message now starts with). `PresetEditor` creates, edits, renames and deletes the
preset files through `prompts.Prompts`; closing it with unsaved edits asks whether to
save them, discard them or stay (switching to another preset saves them).

Errors: none raised. A preset that cannot be read or written (`prompts.PromptError`)
is said in the dialog or the picker's tooltip, and the last good text is kept.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QInputDialog,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.prompts import DEFAULT_NAME, PromptError, Prompts
from llamachat.ui import plain

log = logging.getLogger(__name__)

CUSTOM_LABEL = "Custom prompt (this chat)"
_CUSTOM = "\x00custom"  # item data of the custom entry: no preset file can have this name


class PresetPicker(QWidget):
    """Chooses the chat's system prompt: a named preset or a custom text for this chat."""

    preset_changed = Signal(str, str)
    system_text_changed = Signal(str)

    def __init__(self, prompts: Prompts, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.prompts = prompts
        self._name = DEFAULT_NAME
        self._custom = ""
        self._filling = False
        self._last_text = ""  # the system text last announced, to emit only real changes
        try:
            prompts.ensure_default()
        except PromptError as exc:
            log.warning("cannot create the default prompt preset: %s", exc)
        try:
            names = prompts.names()
        except PromptError:
            names = []
        if names and DEFAULT_NAME not in names:
            self._name = names[0]

        self.combo = QComboBox()
        self.combo.setAccessibleName("Prompt preset")
        self.combo.setToolTip("The system prompt this chat starts with")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.combo.currentIndexChanged.connect(self._on_chosen)

        self.menu_button = QToolButton()
        self.menu_button.setText("⋯")
        self.menu_button.setAccessibleName("Prompt actions")
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.menu_button)
        menu.addAction("Custom prompt for this chat…", self.edit_custom)
        self.clear_custom_action = menu.addAction("Use a preset again", lambda: self.set_custom(""))
        menu.addSeparator()
        menu.addAction("Edit presets…", self.edit_presets)
        self.menu_button.setMenu(menu)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.combo)
        layout.addWidget(self.menu_button)
        self._fill()
        self._last_text = self.system_text()

    # ------------------------------------------------------------------ public

    def names(self) -> list[str]:
        """The preset names offered."""
        return [
            str(self.combo.itemData(i))
            for i in range(self.combo.count())
            if self.combo.itemData(i) != _CUSTOM
        ]

    def current_name(self) -> str:
        """The chosen preset's name (kept while a custom prompt is in use)."""
        return self._name

    def custom_text(self) -> str:
        """This chat's custom prompt ('' when a preset is used)."""
        return self._custom

    def system_text(self) -> str:
        """The prompt the system message starts with: the custom text or the preset's."""
        if self._custom:
            return self._custom
        try:
            return self.prompts.get(self._name)
        except PromptError as exc:
            log.warning("cannot read prompt preset %r: %s", self._name, exc)
            return ""

    def select(self, name: str) -> None:
        """Use the preset `name` for this chat (drops a custom prompt); emits the change."""
        if name == self._name and not self._custom:
            return
        self._name, self._custom = name, ""
        self._fill()
        self._emit()

    def set_custom(self, text: str) -> None:
        """Give this chat its own prompt ('' goes back to the preset); emits the change."""
        text = text.strip()
        if text == self._custom:
            return
        self._custom = text
        self._fill()
        self._emit()

    def set_session_prompt(self, name: str, custom: str = "") -> None:
        """Show a stored chat's prompt choice without emitting (restoring a session)."""
        self._name = name or DEFAULT_NAME
        self._custom = custom
        self._fill()
        self._last_text = self.system_text()

    def reload(self) -> None:
        """Re-read the presets (after an edit); a deleted current preset falls back."""
        try:
            names = self.prompts.names()
        except PromptError as exc:
            log.warning("cannot list the prompt presets: %s", exc)
            names = []
        if self._name not in names:
            self._name = DEFAULT_NAME if DEFAULT_NAME in names or not names else names[0]
        self._fill()
        if self.system_text() != self._last_text:
            self._emit()

    def edit_presets(self) -> PresetEditor:
        """Open the preset editor (non-modal); the picker follows its changes."""
        editor = PresetEditor(self.prompts, current=self._name, parent=self)
        editor.renamed.connect(self._on_renamed)
        editor.finished.connect(lambda _: self.reload())
        editor.finished.connect(self._back_to_window)
        editor.open()
        return editor

    def edit_custom(self) -> CustomPromptDialog:
        """Open the editor of this chat's custom prompt."""
        dialog = CustomPromptDialog(self._custom or self.system_text(), parent=self)
        dialog.accepted.connect(lambda: self.set_custom(dialog.text()))
        dialog.finished.connect(self._back_to_window)
        dialog.open()
        return dialog

    # ------------------------------------------------------------------ internals

    @Slot()
    def _back_to_window(self) -> None:
        # A closed dialog leaves no window active without a window manager: keys went nowhere.
        self.window().activateWindow()

    def _emit(self) -> None:
        self._last_text = self.system_text()
        self.preset_changed.emit(self._name, self._custom)
        self.system_text_changed.emit(self._last_text)

    def _fill(self) -> None:
        try:
            names = self.prompts.names()
        except PromptError as exc:
            names = []
            self.combo.setToolTip(plain.tooltip(str(exc)))
        if self._name not in names:
            names.append(self._name)  # a stored chat's preset that was since deleted
        self._filling = True
        try:
            self.combo.clear()
            if self._custom:
                self.combo.addItem(CUSTOM_LABEL, _CUSTOM)
                self.combo.setItemData(
                    0, plain.tooltip(self._custom[:500]), Qt.ItemDataRole.ToolTipRole
                )
            for name in names:
                self.combo.addItem(name, name)
            self.combo.setCurrentIndex(self.combo.findData(_CUSTOM if self._custom else self._name))
        finally:
            self._filling = False
        self.clear_custom_action.setEnabled(bool(self._custom))

    @Slot(int)
    def _on_chosen(self, index: int) -> None:
        if self._filling or index < 0:
            return
        data = self.combo.itemData(index)
        if data != _CUSTOM:
            self.select(str(data))

    @Slot(str, str)
    def _on_renamed(self, old: str, new: str) -> None:
        if old == self._name:
            self._name = new
            self._fill()
            self._emit()


class PresetEditor(QDialog):
    """Creates, edits, renames and deletes the prompt preset files."""

    renamed = Signal(str, str)

    def __init__(
        self, prompts: Prompts, *, current: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.prompts = prompts
        self._shown = ""
        self.unsaved: QMessageBox | None = None
        """The question asked on closing with unsaved edits, while it is open."""
        self.setWindowTitle("Prompt presets")
        self.setAccessibleName("Prompt presets")
        self.resize(720, 460)

        self.list = QListWidget()
        self.list.setAccessibleName("Presets")
        self.list.currentItemChanged.connect(self._on_current_changed)
        self.editor = QPlainTextEdit()
        self.editor.setAccessibleName("Preset text")
        self.message = plain.Label()
        self.message.setAccessibleName("Presets message")
        self.message.setWordWrap(True)
        self.message.hide()

        buttons = QHBoxLayout()
        for text, slot in (
            ("New…", self._on_new),
            ("Rename…", self._on_rename),
            ("Delete", self.delete),
            ("Save", self.save),
        ):
            button = QPushButton(text)
            button.setAccessibleName(text.rstrip("…") + (" preset" if text != "Save" else ""))
            button.clicked.connect(slot)
            buttons.addWidget(button)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        buttons.addWidget(close)

        body = QHBoxLayout()
        body.addWidget(self.list, 1)
        body.addWidget(self.editor, 3)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(self.message)
        layout.addLayout(buttons)
        self._fill(current)

    def current(self) -> str:
        """The preset being edited ('' when none)."""
        return self._shown

    def select(self, name: str) -> None:
        """Show a preset's text for editing (saving the one shown before)."""
        for row in range(self.list.count()):
            if self.list.item(row).text() == name:
                self.list.setCurrentRow(row)
                return

    def add(self, name: str, text: str = "") -> bool:
        """Add a preset and show it; False (with the reason shown) when refused."""
        try:
            if name in self.prompts.names():
                raise PromptError(f"a prompt preset named {name!r} already exists")
            self.prompts.save(name, text)
        except PromptError as exc:
            return self._error(exc)
        self._fill(name)
        return True

    def save(self) -> bool:
        """Write the shown preset's text; False (with the reason shown) when it fails."""
        if not self._shown:
            return False
        try:
            self.prompts.save(self._shown, self.editor.toPlainText())
        except PromptError as exc:
            return self._error(exc)
        self.editor.document().setModified(False)
        self._say("")
        return True

    def rename(self, new: str) -> bool:
        """Rename the shown preset; False (with the reason shown) when refused."""
        old = self._shown
        if not old or not self.save():
            return False
        try:
            self.prompts.rename(old, new)
        except PromptError as exc:
            return self._error(exc)
        self._shown = ""
        self._fill(new)
        self.renamed.emit(old, new)
        return True

    def delete(self) -> bool:
        """Delete the shown preset; the last one cannot go (a chat needs a prompt)."""
        name = self._shown
        if not name:
            return False
        if self.list.count() <= 1:
            self._say("The last preset cannot be deleted; edit its text instead.")
            return False
        try:
            self.prompts.delete(name)
        except PromptError as exc:
            return self._error(exc)
        self._shown = ""
        self._fill("")
        return True

    def done(self, result: int) -> None:
        """Close, but first ask what to do with unsaved edits (Save, Discard or Cancel)."""
        if self._shown and self.editor.document().isModified():
            self._ask_unsaved(result)
            return
        super().done(result)

    # ------------------------------------------------------------------ internals

    def _ask_unsaved(self, result: int) -> None:
        """Open the Save / Discard / Cancel question; its answer closes the editor or not."""
        if self.unsaved is not None:
            return  # already asking
        buttons = QMessageBox.StandardButton
        box = plain.message_box(
            self,
            QMessageBox.Icon.Question,
            "Unsaved changes",
            f"The preset “{self._shown}” has changes that are not saved.",
            buttons.Save | buttons.Discard | buttons.Cancel,
        )
        box.setAccessibleName("Unsaved changes")
        box.setDefaultButton(buttons.Save)
        box.setEscapeButton(buttons.Cancel)
        box.finished.connect(lambda _: self._on_unsaved_answer(box, result))
        self.unsaved = box
        box.open()

    def _on_unsaved_answer(self, box: QMessageBox, result: int) -> None:
        self.unsaved = None
        box.deleteLater()
        answer = box.standardButton(box.clickedButton())
        if answer == QMessageBox.StandardButton.Save:
            if not self.save():
                return  # the reason is shown; the edits stay to be saved again or discarded
        elif answer == QMessageBox.StandardButton.Discard:
            self.editor.document().setModified(False)
        else:
            return
        super().done(result)

    def _fill(self, current: str) -> None:
        try:
            names = self.prompts.names()
        except PromptError as exc:
            names = []
            self._error(exc)
        self.list.blockSignals(True)
        self.list.clear()
        for name in names:
            QListWidgetItem(name, self.list)
        self.list.blockSignals(False)
        if names:
            self.list.setCurrentRow(names.index(current) if current in names else 0)

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def _error(self, exc: PromptError) -> bool:
        self._say(str(exc))
        return False

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_current_changed(
        self, item: QListWidgetItem | None, previous: QListWidgetItem | None
    ) -> None:
        if self._shown and self.editor.document().isModified():
            self.save()
        self._shown = item.text() if item is not None else ""
        text = ""
        if self._shown:
            try:
                text = self.prompts.get(self._shown)
            except PromptError as exc:
                self._error(exc)
        self.editor.setPlainText(text)
        self.editor.document().setModified(False)

    @Slot()
    def _on_new(self) -> None:
        name, ok = QInputDialog.getText(self, "New preset", "Name of the new preset:")
        if ok and name:
            self.add(name.strip())

    @Slot()
    def _on_rename(self) -> None:
        if not self._shown:
            return
        name, ok = QInputDialog.getText(self, "Rename preset", "New name:", text=self._shown)
        if ok and name and name.strip() != self._shown:
            self.rename(name.strip())


class CustomPromptDialog(QDialog):
    """Edits the system prompt of one chat."""

    def __init__(self, text: str, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Custom prompt for this chat")
        self.setAccessibleName("Custom prompt")
        self.resize(600, 360)
        label = plain.Label("This chat starts with this system prompt instead of a preset:")
        self.editor = QPlainTextEdit(text)
        self.editor.setAccessibleName("Custom prompt text")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(label)
        layout.addWidget(self.editor, 1)
        layout.addWidget(buttons)

    def text(self) -> str:
        """The prompt as edited."""
        return self.editor.toPlainText()
