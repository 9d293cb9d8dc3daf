"""The tests of `llamachat.ui.skills.skills_panel`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QPushButton

from llamachat import skills
from llamachat.skills import SkillStore
from llamachat.tests.support import (
    offscreen_dialogs,
    put_skill,
    send_and_wait,
    skill_md,
    type_message,
    visible_widget_named,
    write_simple_skill,
    write_skill,
)
from llamachat.ui.skills.skills_panel import SkillsPanel, SkillsWatcher


class TestSkillsPanel:
    """The skills panel, and the file watcher that keeps the skill store current."""

    # Typing `/` pops the skill completer up, which the offscreen platform cannot raise.
    @pytest.mark.qt_log_ignore(r"This plugin does not support (raise\(\)|grabbing the keyboard)")
    def test_fault_broken_skills_folder_and_a_50_mb_skill_leave_the_window_working(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Every kind of broken skill plus a 50 MB SKILL.md: the window builds, good skills load,
        the huge one is cut to 64 KB in the prompt, and the panel lists each problem by path."""

        root = tmp_path / "broken-skills"
        put_skill(root, "good-one", skill_md("good-one", "A good skill.", "Be good.\n"))
        huge = put_skill(root, "huge", skill_md("huge", "Fifty megabytes.", "Start here.\n"))
        with huge.open("ab") as f:
            chunk = b"Reference material nobody should paste whole into a prompt.\n" * 16384
            while f.tell() < 50 * 1024 * 1024:
                f.write(chunk)
        broken = [
            put_skill(root, "no-frontmatter", "# Just markdown\n"),
            put_skill(root, "no-name", "---\ndescription: Nameless.\n---\nBody\n"),
            put_skill(root, "bad-yaml", skill_md("bad-yaml", extra="metadata:\n  a: 1\n b: 2\n")),
            put_skill(root, "mismatch", skill_md("other-name")),
            put_skill(root, "Bad_Slug", skill_md("Bad_Slug")),
            put_skill(root, "unclosed", "---\nname: unclosed\ndescription: Open.\n"),
            put_skill(root, "utf-sixteen", skill_md("utf-sixteen").encode("utf-16")),
            put_skill(root, "binary", os.urandom(4096)),
            put_skill(root, "empty", b""),
        ]
        as_folder = root / "is-a-folder" / "SKILL.md"
        as_folder.mkdir(parents=True)
        dangling = root / "dangling" / "SKILL.md"
        dangling.parent.mkdir()
        dangling.symlink_to(tmp_path / "nowhere.md")
        loop = root / "loop" / "SKILL.md"
        loop.parent.mkdir()
        loop.symlink_to(loop)
        broken += [as_folder, dangling, loop]

        # Room in the context for the 64 KB the huge skill is cut to.
        router.models["test-model"].n_ctx = 131072
        window, _history = chat_window(skills_dir=root)
        send_and_wait(qtbot, window, "/good-one hello")
        send_and_wait(qtbot, window, "/huge check this")
        assert window.loaded_skills() == ["good-one", "huge"]
        system = router.chat_requests()[-1].json["messages"][0]["content"]
        assert "[skill: good-one]\nBe good." in system
        assert "[skill: huge]\nStart here." in system
        assert len(system.encode()) < skills.BODY_MAX + 4096

        panel = SkillsPanel(skills.SkillStore(root), window.loaded_skills, import_dir=root)
        qtbot.addWidget(panel)
        # Without a name, and with a name its folder does not have: loaded, with a warning.
        assert sorted(panel.skill_names()) == ["good-one", "huge", "no-name", "other-name"]
        problems = "\n".join(panel.problem_texts())
        for path in broken:
            assert str(path) in problems, path

    def test_first_time_refresh_in_the_panel_reads_the_folders_at_once(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Refresh re-reads the folders there and then, without waiting for the watcher."""

        root = tmp_path / "skills"
        put_skill(root, "alpha", skill_md("alpha"))
        panel = SkillsPanel(SkillStore(root), list, import_dir=root)
        qtbot.addWidget(panel)
        put_skill(root, "beta", skill_md("beta"))
        assert panel.skill_names() == ["alpha"]
        qtbot.mouseClick(panel.refresh_button, Qt.MouseButton.LeftButton)
        assert panel.skill_names() == ["alpha", "beta"]

    def test_first_time_panel_shows_errors_and_warnings_and_the_whole_description(
        self, qtbot, tmp_path: Path
    ) -> None:
        """The panel says which problems kept a skill out (errors) and which did not
        (warnings), each with its path; a long description is whole there."""

        root = tmp_path / "skills"
        long = put_skill(root, "long", skill_md("long", "word " * 300))
        broken = put_skill(root, "broken", "no frontmatter\n")
        panel = SkillsPanel(SkillStore(root), list, import_dir=root)
        qtbot.addWidget(panel)

        assert panel.rows()[0][1] == ("word " * 300).strip()
        texts = panel.problem_texts()
        assert f"Error, not loaded: {broken}: does not start with frontmatter" in texts[0]
        assert texts[1].startswith(f"Warning, loaded: {long}: has a description of 1499")
        assert panel.problems_label.text() == "Problems (1 error, 1 warning)"

    def test_first_time_panel_shows_which_folder_wins_and_which_copy_is_hidden(
        self, qtbot, tmp_path: Path
    ) -> None:

        first, second = tmp_path / "agents", tmp_path / "claude"
        put_skill(first, "dup", skill_md("dup", "From the first folder."))
        hidden = put_skill(second, "dup", skill_md("dup", "From the second folder."))
        store = SkillStore([first, second])
        assert store.hidden() == {"dup": [hidden]}
        panel = SkillsPanel(store, list, import_dir=first)
        qtbot.addWidget(panel)

        assert panel.rows() == [
            ["dup", "From the first folder.", str(first), f"wins over {second}", ""],
            ["dup", "(hidden copy)", str(second), f"hidden by {first}", ""],
        ]
        assert panel.skill_names() == ["dup"]
        panel.tree.setCurrentItem(panel.tree.topLevelItem(1))
        assert not panel.load_button.isEnabled()

    @offscreen_dialogs
    def test_chrome_window_skills_panel_imports_good_and_bad_folders_into_a_new_skills_dir(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """With no skills folder yet, `/skills` opens the panel; a good folder imports and works at
        once, a bad one is refused with its reason."""

        fresh = tmp_path / "fresh-skills"
        window, _history = chat_window(skills_dir=fresh)
        assert not window.cfg.skills_enabled
        good = tmp_path / "incoming" / "haiku"
        good.mkdir(parents=True)
        (good / "SKILL.md").write_text(
            "---\nname: haiku\ndescription: Write answers as haiku.\n---\nThree lines: 5, 7, 5.\n",
            encoding="utf-8",
        )
        bad = tmp_path / "incoming-bad" / "Bad Name"
        bad.mkdir(parents=True)
        (bad / "SKILL.md").write_text("no front matter at all\n", encoding="utf-8")

        type_message(qtbot, window, "/skills")
        qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return)
        panel = visible_widget_named(window, QDialog, "Skills")
        assert router.chat_requests() == [] and window.composer.text() == ""
        assert panel.skill_names() == []

        assert panel.import_folder(good) == [fresh / "haiku"]
        assert panel.message_text().startswith("Imported: haiku")
        assert panel.skill_names() == ["haiku"]
        assert panel.import_folder(bad.parent) == []
        assert "Not imported:" in panel.message_text() and "Bad Name" in panel.message_text()
        assert sorted(p.name for p in fresh.iterdir()) == ["haiku"]
        assert panel.import_folder(good) == []
        assert "already" in panel.message_text()

        panel.tree.setCurrentItem(panel.tree.topLevelItem(0))
        qtbot.mouseClick(
            visible_widget_named(panel, QPushButton, "Load skill"), Qt.MouseButton.LeftButton
        )
        assert window.loaded_skills() == ["haiku"]
        assert panel.tree.topLevelItem(0).text(4) == "loaded"
        panel.close()
        send_and_wait(qtbot, window, "tell me about autumn")
        sent = router.chat_requests()[-1].json
        assert sent["messages"][0]["content"].endswith("[skill: haiku]\nThree lines: 5, 7, 5.")
        assert any(t["function"]["name"] == "load_skill" for t in sent.get("tools", []))

    @offscreen_dialogs
    def test_chrome_window_skill_written_to_disk_appears_without_restart(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """A SKILL.md written while the window is open reaches the `/` completion and the panel."""

        window, _history = chat_window()
        completions = window.composer.completer.model()

        def offered() -> list[str]:
            return [
                completions.index(row, 0).data(Qt.ItemDataRole.UserRole)
                for row in range(completions.rowCount())
            ]

        assert offered() == ["finance-cli", "skills", "weather"]
        panel = window.skills.open_panel()
        write_skill(
            tmp_path / "skills",
            "gardening",
            "---\nname: gardening\ndescription: When to plant what.\n---\nPlant after frost.\n",
        )
        qtbot.waitUntil(lambda: "gardening" in offered(), timeout=5000)
        qtbot.waitUntil(lambda: "gardening" in panel.skill_names(), timeout=5000)
        panel.close()
        send_and_wait(qtbot, window, "/gardening tomatoes?")
        assert window.loaded_skills() == ["gardening"]

    def test_skills_panel_lists_skills_problems_and_imports_a_good_and_a_bad_folder(
        self, qtbot, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        write_simple_skill(root, "alpha", "Alpha things.")
        write_simple_skill(root, "broken")
        loaded: list[str] = []
        panel = SkillsPanel(SkillStore(root), lambda: list(loaded), import_dir=root)
        qtbot.addWidget(panel)
        panel.load_requested.connect(loaded.append)
        assert panel.accessibleName() == "Skills"
        assert panel.skill_names() == ["alpha"]
        first = panel.tree.topLevelItem(0)
        assert [first.text(c) for c in range(5)] == ["alpha", "Alpha things.", str(root), "", ""]
        assert [t for t in panel.problem_texts() if "broken" in t] == [
            t for t in panel.problem_texts() if "has no `description:`" in t
        ]
        assert len(panel.problem_texts()) == 1
        panel.tree.setCurrentItem(first)
        qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
        assert loaded == ["alpha"] and panel.tree.topLevelItem(0).text(4) == "loaded"
        assert panel.unload_button.isEnabled() and not panel.load_button.isEnabled()

        incoming = tmp_path / "incoming"
        write_simple_skill(incoming, "beta", "Beta things.")
        write_simple_skill(incoming, "gamma")
        imported = panel.import_folder(incoming)
        assert imported == [root / "beta"]
        assert panel.skill_names() == ["alpha", "beta"]
        assert panel.message_text().startswith("Imported: beta\nNot imported:\n• ")
        assert "gamma" in panel.message_text() and "has no `description:`" in panel.message_text()
        assert not (root / "gamma").exists()
        (root / "beta" / "SKILL.md").write_text(
            "---\nname: beta\ndescription: Mine.\n---\nkeep\n", encoding="utf-8"
        )
        assert panel.import_folder(incoming / "beta") == []
        assert "already exists and is never overwritten" in panel.message_text()
        assert "Mine." in (root / "beta" / "SKILL.md").read_text(encoding="utf-8")

    def test_skills_panel_shows_a_skill_written_to_disk_without_restart(
        self, qtbot, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        write_simple_skill(root, "alpha", "Alpha things.")
        extra = tmp_path / "not-yet"
        store = SkillStore([root, extra])
        watcher = SkillsWatcher(store)
        panel = SkillsPanel(store, list, import_dir=root, watcher=watcher)
        qtbot.addWidget(panel)
        assert panel.skill_names() == ["alpha"]
        with qtbot.waitSignal(watcher.changed, timeout=5000):
            write_simple_skill(root, "delta", "Delta things.")
        qtbot.waitUntil(lambda: panel.skill_names() == ["alpha", "delta"], timeout=5000)
        (root / "delta" / "SKILL.md").write_text(
            "---\nname: delta\ndescription: Edited.\n---\nx\n", encoding="utf-8"
        )
        qtbot.waitUntil(lambda: panel.tree.topLevelItem(1).text(1) == "Edited.", timeout=5000)
        write_simple_skill(extra, "omega", "From a folder created later.")
        qtbot.waitUntil(lambda: "omega" in panel.skill_names(), timeout=5000)
        (root / "alpha" / "SKILL.md").unlink()
        qtbot.waitUntil(lambda: panel.skill_names() == ["delta", "omega"], timeout=5000)
