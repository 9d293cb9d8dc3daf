"""The tests of `llamachat.ui.views.presets`."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QMessageBox

from llamachat.prompts import DEFAULT_NAME, DEFAULT_TEXT, Prompts
from llamachat.tests.support import offscreen_dialogs, offscreen_limits, send_and_wait
from llamachat.ui.views.presets import CUSTOM_LABEL, PresetPicker


class TestPresets:
    """System prompt presets: the picker beside the model, its editor, and a per-chat prompt."""

    def test_chrome_window_preset_switch_changes_the_system_message_sent(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Choosing a preset (or a custom prompt) changes the system message the router receives."""

        window, history = chat_window()
        Prompts(tmp_path / "prompts").save("Pirate", "Answer like a pirate.")
        window.preset_picker.reload()
        presets = window.preset_picker.combo
        assert presets.accessibleName() == "Prompt preset"
        send_and_wait(qtbot, window, "first")
        assert (
            router.chat_requests()[-1]
            .json["messages"][0]["content"]
            .startswith("You are a helpful assistant.")
        )

        presets.setCurrentIndex(presets.findData("Pirate"))
        send_and_wait(qtbot, window, "second")
        system = router.chat_requests()[-1].json["messages"][0]
        assert system == {"role": "system", "content": "Answer like a pirate."}
        assert history.get_session(window.session_id)["prompt_name"] == "Pirate"

        window.preset_picker.set_custom("Only answer in haiku.")
        send_and_wait(qtbot, window, "third")
        assert router.chat_requests()[-1].json["messages"][0]["content"] == "Only answer in haiku."
        session = history.get_session(window.session_id)
        assert (session["prompt_name"], session["prompt_custom"]) == (
            "Pirate",
            "Only answer in haiku.",
        )

        window.new_session()
        assert window.preset_picker.custom_text() == ""
        send_and_wait(qtbot, window, "fresh")
        assert router.chat_requests()[-1].json["messages"][0]["content"] == "Answer like a pirate."
        assert history.get_session(window.session_id)["prompt_name"] == "Pirate"

    def test_presets_switch_emits_the_new_system_text_and_custom_prompt(
        self, qtbot, tmp_path: Path
    ) -> None:

        store = Prompts(tmp_path / "prompts")
        store.ensure_default()
        store.save("Pirate", "Talk like a pirate.")
        picker = PresetPicker(store)
        qtbot.addWidget(picker)
        assert picker.combo.accessibleName() == "Prompt preset"
        assert picker.names() == [DEFAULT_NAME, "Pirate"]
        assert picker.system_text() == DEFAULT_TEXT
        got: list[tuple] = []
        picker.preset_changed.connect(lambda name, custom: got.append((name, custom)))
        picker.system_text_changed.connect(lambda text: got.append((text,)))
        picker.combo.setCurrentIndex(picker.combo.findData("Pirate"))
        assert got == [("Pirate", ""), ("Talk like a pirate.",)]
        with qtbot.waitSignal(picker.system_text_changed) as text:
            picker.set_custom("Answer only in haiku.")
        assert text.args == ["Answer only in haiku."]
        assert (picker.current_name(), picker.custom_text()) == ("Pirate", "Answer only in haiku.")
        assert picker.combo.currentText() == CUSTOM_LABEL
        with qtbot.waitSignal(picker.preset_changed) as back:
            picker.combo.setCurrentIndex(picker.combo.findData(DEFAULT_NAME))
        assert back.args == [DEFAULT_NAME, ""]
        with qtbot.assertNotEmitted(picker.preset_changed):
            picker.set_session_prompt("Pirate", "")
        assert picker.combo.currentText() == "Pirate"
        assert picker.system_text() == "Talk like a pirate."

    @offscreen_limits
    def test_presets_editor_creates_edits_renames_and_deletes(self, qtbot, tmp_path: Path) -> None:

        store = Prompts(tmp_path / "prompts")
        store.ensure_default()
        store.save("Pirate", "Talk like a pirate.")
        picker = PresetPicker(store)
        qtbot.addWidget(picker)
        picker.select("Pirate")
        editor = picker.edit_presets()
        assert editor.current() == "Pirate"
        editor.editor.setPlainText("Arr, matey.")
        with qtbot.waitSignal(picker.preset_changed) as renamed:
            assert editor.rename("Corsair") is True
        assert renamed.args == ["Corsair", ""]
        assert store.names() == ["Corsair", "Default"]
        assert store.get("Corsair") == "Arr, matey."
        assert editor.add("Terse", "Be terse.") is True and editor.current() == "Terse"
        assert editor.add("Terse") is False
        assert "already exists" in editor.message.text()
        assert editor.add("a/b") is False and "cannot contain" in editor.message.text()
        assert editor.delete() is True
        assert store.names() == ["Corsair", "Default"]
        editor.select("Corsair")
        editor.editor.selectAll()
        editor.editor.insertPlainText("Yo ho ho.")
        with qtbot.waitSignal(picker.system_text_changed) as changed:
            editor.reject()
            editor.unsaved.button(QMessageBox.StandardButton.Save).click()
        assert changed.args == ["Yo ho ho."]
        assert picker.names() == ["Corsair", "Default"]

    @offscreen_dialogs
    def test_presets_editor_asks_before_closing_with_unsaved_edits(
        self, qtbot, tmp_path: Path
    ) -> None:

        store = Prompts(tmp_path / "prompts")
        store.ensure_default()
        store.save("Pirate", "Talk like a pirate.")
        picker = PresetPicker(store)
        qtbot.addWidget(picker)
        editor = picker.edit_presets()
        editor.select("Pirate")
        editor.editor.selectAll()
        editor.editor.insertPlainText("Arr.")
        editor.reject()
        assert editor.isVisible() and editor.unsaved is not None
        assert editor.unsaved.text() == "The preset “Pirate” has changes that are not saved."
        editor.unsaved.button(QMessageBox.StandardButton.Cancel).click()
        assert editor.isVisible() and editor.unsaved is None
        assert store.get("Pirate") == "Talk like a pirate."
        assert editor.editor.toPlainText() == "Arr."
        editor.reject()
        editor.unsaved.button(QMessageBox.StandardButton.Discard).click()
        assert not editor.isVisible()
        assert store.get("Pirate") == "Talk like a pirate."

        editor = picker.edit_presets()
        editor.select("Pirate")
        editor.editor.selectAll()
        editor.editor.insertPlainText("Yo ho.")
        editor.reject()
        editor.unsaved.button(QMessageBox.StandardButton.Save).click()
        assert not editor.isVisible() and store.get("Pirate") == "Yo ho."

        editor = picker.edit_presets()
        editor.select("Pirate")
        editor.reject()
        assert editor.unsaved is None and not editor.isVisible()
