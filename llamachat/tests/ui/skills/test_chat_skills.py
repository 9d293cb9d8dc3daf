"""The tests of `llamachat.ui.skills.chat_skills`."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import httpx
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton

from llamachat import config
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.skills import system_part
from llamachat.tests.support import (
    SKILL_WEATHER,
    offscreen_dialogs,
    offscreen_popup,
    quick_ask,
    quick_offscreen,
    run_llamachat,
    send_and_wait,
    skill_md,
    slash_completions,
    subprocess_config_file,
    visible_widget_named,
    write_pdf_skill,
    write_skill,
)
from llamachat.ui.chat import conversation as controller
from llamachat.ui.views import chips as skills_chips


class TestChatSkills:
    """The chat window's skills on screen: the skills panel, the chips, the composer's names."""

    @offscreen_popup
    def test_first_time_a_skills_folder_made_after_start_up_reaches_panel_and_completer(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Not even ~/.agents exists at start: the nearest existing parent is watched, so a
        skill created later, then edited and deleted, shows in the panel and the `/` list
        within 2 s, without a restart."""

        home = Path.home()  # the test's own, where ~/.agents does not exist
        root = home / ".agents" / "skills"
        assert not root.parent.exists()
        window, _history = chat_window(skills_dir=root)
        panel = window.skills.open_panel()
        assert panel is not None and panel.skill_names() == []
        assert str(home) in window.skills._watcher.watched()

        write_skill(root, "gardening", skill_md("gardening", "When to plant what."))
        qtbot.waitUntil(lambda: "gardening" in slash_completions(window), timeout=2000)
        qtbot.waitUntil(lambda: panel.skill_names() == ["gardening"], timeout=2000)
        (root / "gardening" / "SKILL.md").write_text(
            skill_md("gardening", "Edited."), encoding="utf-8"
        )
        qtbot.waitUntil(lambda: panel.rows()[0][1] == "Edited.", timeout=2000)
        shutil.rmtree(root / "gardening")
        qtbot.waitUntil(lambda: panel.skill_names() == [], timeout=2000)
        qtbot.waitUntil(lambda: "gardening" not in slash_completions(window), timeout=2000)

    @offscreen_popup
    def test_first_time_window_shows_the_file_read_like_a_search(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The model loads pdf, reads forms.md and answers: the reply shows the read, as a
        search is shown, with the file and its size."""

        write_pdf_skill(tmp_path / "skills")
        window, _history = chat_window()
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "pdf"}')]),
            Reply(tool_calls=[ToolCall("read_skill_file", '{"skill": "pdf", "path": "forms.md"}')]),
            Reply(content="Done."),
        )
        send_and_wait(qtbot, window, "fill my tax form")
        assert window.loaded_skills() == ["pdf"]
        # A label added to a shown view is shown by Qt on the next turn of the event loop.
        qtbot.waitUntil(
            lambda: any(
                label.isVisible() and label.accessibleName() == "Read skill file"
                for label in window.messages.findChildren(QLabel)
            )
        )
        label = visible_widget_named(window.messages, QLabel, "Read skill file")
        assert label.text() == "<b>Read skill file:</b> pdf/forms.md, 44 bytes"
        assert label.textFormat() == Qt.TextFormat.RichText

    @offscreen_popup
    def test_first_time_a_common_word_mention_is_a_one_click_suggestion(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """ "What does PDF stand for?" is sent without the skill; a chip offers it with its
        cost; one click loads it, one click on its chip unloads it."""

        write_pdf_skill(tmp_path / "skills")
        window, history = chat_window()
        send_and_wait(qtbot, window, "What does PDF stand for?")
        assert window.loaded_skills() == []
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]
        assert window.skill_suggestions.names() == ["pdf"]
        chip = visible_widget_named(window, QPushButton, "Load skill pdf")
        pdf = window.chat.store.load("pdf")
        # An estimate until the server counted the skill (the ratio learns as it counts).
        offered = re.fullmatch(r"Load pdf\? ~([\d,]+) tokens", chip.text())
        assert offered is not None and int(offered.group(1).replace(",", "")) > 10

        qtbot.mouseClick(chip, Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == ["pdf"]
        assert history.get_session(window.session_id)["skills"] == ["pdf"]
        assert not window.skill_suggestions.isVisible()
        assert re.search(
            r"Loaded skill pdf \(~[\d,]+ tokens\)", window.statusBar().currentMessage()
        )
        # Once the meter has the server's count of the skill, its chip says that figure.
        counted = httpx.post(
            f"{router.url}/tokenize",
            json={"model": "test-model", "content": system_part(pdf)},
        ).json()["tokens"]
        qtbot.waitUntil(
            lambda: (
                f"~{len(counted):,} tokens"
                in visible_widget_named(window, QPushButton, "Unload skill pdf").toolTip()
            )
        )
        assert skills_chips.skill_tokens(pdf, window.chat.context.quick_tokens) == len(counted)
        unload = visible_widget_named(window, QPushButton, "Unload skill pdf")
        qtbot.mouseClick(unload, Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == []

        send_and_wait(qtbot, window, "and finance-cli?")
        assert window.loaded_skills() == ["finance-cli"]
        assert not window.skill_suggestions.isVisible()
        send_and_wait(qtbot, window, "a pdf again")
        assert window.skill_suggestions.isVisible()
        window.new_session()
        assert not window.skill_suggestions.isVisible()

    @offscreen_dialogs
    def test_first_time_load_when_mentioned_is_saved_and_then_loads_at_once(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The panel's "Load when mentioned" writes skill_mentions to config.toml; after it a
        one-word mention loads the skill."""

        path = tmp_path / "config.toml"
        config.update_file(path, {"skills_dir": str(tmp_path / "skills")})
        window, _history = chat_window(path=path)
        panel = window.skills.open_panel()
        panel.tree.setCurrentItem(panel.tree.topLevelItem(1))
        assert panel.skill_names()[1] == "weather"
        qtbot.mouseClick(panel.mention_button, Qt.MouseButton.LeftButton)
        assert window.app.config.skill_mentions == ("weather",)
        saved = tomllib.loads(window.app.file_config.path.read_text(encoding="utf-8"))
        assert saved["skill_mentions"] == ["weather"]
        assert "loads when mentioned" in panel.rows()[1][3]
        panel.close()
        send_and_wait(qtbot, window, "what is the weather tomorrow")
        assert window.loaded_skills() == ["weather"]

    @quick_offscreen
    def test_first_time_quick_window_and_ask_print_say_a_mention_was_not_loaded(
        self, quick, router, qtbot, tmp_path: Path
    ) -> None:
        """Where no chip can be clicked, the one-word mention is named with the `/name` that
        loads it: in the quick window's notice, and on ask --print's stderr."""

        window, _history = quick(default_model="test-model")
        window.present()
        router.script(Reply(content=["Sunny."]))
        quick_ask(qtbot, window, "is the weather nice")
        assert router.chat_requests()[-1].json["messages"][0]["role"] == "system"
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]
        assert window.notice.text() == (
            "Mentioned, not loaded: skill weather (add /weather to the question to use it)."
        )

        done = run_llamachat(
            subprocess_config_file(tmp_path, router.url), "ask", "--print", "weather?"
        )
        assert done.returncode == 0, done.stderr
        assert "mentioned, not loaded: skill weather (add /weather to load it)" in done.stderr
        assert "[skill:" not in router.chat_requests()[-1].json["messages"][0]["content"]

    @offscreen_popup
    def test_first_time_a_whole_slash_name_and_one_enter_loads_it(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """`/weather` typed out, one Enter: loaded, nothing sent, the box empty. A partial
        name and Enter completes it first, as before."""

        window, _history = chat_window()
        editor = visible_widget_named(window, QPlainTextEdit, "Message")
        popup = window.composer.completer.popup()
        qtbot.keyClicks(editor, "/weather")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.loaded_skills() == ["weather"]
        assert window.composer.text() == ""
        assert router.chat_requests() == []

        qtbot.keyClicks(editor, "/fin")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.composer.text() == "/finance-cli "
        assert window.loaded_skills() == ["weather"]

        # A whole name that begins a longer one: the name picked with the arrows wins.
        write_skill(tmp_path / "skills", "weather-alerts", skill_md("weather-alerts"))
        window.composer.clear()
        window.skills.refresh_names()
        qtbot.keyClicks(editor, "/weather")
        qtbot.waitUntil(popup.isVisible, timeout=2000)
        qtbot.keyClick(popup, Qt.Key.Key_Down)
        qtbot.keyClick(popup, Qt.Key.Key_Return)
        assert window.composer.text() == "/weather-alerts "

    @offscreen_dialogs
    @offscreen_popup
    def test_first_time_slash_skills_opens_the_panel_where_enter_loads_nothing(
        self, chat_window, router, qtbot
    ) -> None:

        window, _history = chat_window()
        assert "skills" in slash_completions(window)
        editor = visible_widget_named(window, QPlainTextEdit, "Message")
        qtbot.keyClicks(editor, "/skills")
        qtbot.keyClick(window.composer.completer.popup(), Qt.Key.Key_Return)
        panel = window.skills._panel
        assert panel is not None and panel.isVisible()
        panel.tree.setFocus()
        panel.tree.setCurrentItem(panel.tree.topLevelItem(0))
        qtbot.keyClick(panel.tree, Qt.Key.Key_Return)
        assert window.loaded_skills() == []
        assert panel.isVisible()

    @offscreen_popup
    def test_first_time_a_loaded_skill_deleted_from_disk_is_listed_as_missing(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:

        window, _history = chat_window()
        send_and_wait(qtbot, window, "/weather hi")
        shutil.rmtree(tmp_path / "skills" / "weather")
        panel = window.skills.open_panel()
        panel.refresh()
        assert panel.rows()[-1] == [
            "weather",
            "Deleted from disk: the model no longer gets it.",
            "",
            "missing",
            "loaded",
        ]
        qtbot.waitUntil(lambda: window.skill_chips.missing() == ["weather"], timeout=2000)
        panel.tree.setCurrentItem(panel.tree.topLevelItem(panel.tree.topLevelItemCount() - 1))
        qtbot.mouseClick(panel.unload_button, Qt.MouseButton.LeftButton)
        assert window.loaded_skills() == []

    def test_send_rechecks_every_skill_file_once_the_request_left(
        self, conversation, router, qtbot, tmp_path
    ) -> None:
        """A description edited in place reaches the window's `/` completion after the next
        send, though that send itself only looked at the folders."""

        chat, _history = conversation()
        assert chat.store.descriptions()["weather"].startswith("Forecasts")
        edited = tmp_path / "skills" / "weather" / "SKILL.md"
        edited.write_text(SKILL_WEATHER.replace("Forecasts", "Rain"), encoding="utf-8")
        router.script(Reply(content="ok"))
        with qtbot.waitSignal(chat.store_changed, timeout=10000):
            assert chat.submit("Hi") == controller.SENT
        assert chat.store.descriptions()["weather"].startswith("Rain")
        qtbot.waitUntil(lambda: not chat.is_streaming(), timeout=10000)
