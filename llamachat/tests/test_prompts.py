"""The tests of `llamachat.prompts`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamachat.prompts import DEFAULT_NAME, PromptError, Prompts
from llamachat.tests.support import returns_at_once


class TestPrompts:
    """System prompt presets: one `<name>.md` file each in the prompts folder."""

    def test_prompts_ensure_default_creates_one_default_preset_only_when_empty(
        self,
        tmp_path: Path,
    ) -> None:

        prompts = Prompts(tmp_path / "prompts")
        prompts.ensure_default()
        assert prompts.names() == [DEFAULT_NAME]
        assert prompts.get(DEFAULT_NAME).startswith("You are a helpful assistant")
        assert (tmp_path / "prompts" / "Default.md").is_file()
        prompts.save(DEFAULT_NAME, "Edited by the user.")
        prompts.ensure_default()
        assert prompts.get(DEFAULT_NAME) == "Edited by the user."
        prompts.delete(DEFAULT_NAME)
        prompts.save("Pirate", "Talk like a pirate.")
        prompts.ensure_default()
        assert prompts.names() == ["Pirate"]

    def test_prompts_save_list_get_rename_delete(self, tmp_path: Path) -> None:

        prompts = Prompts(tmp_path)
        prompts.save("writer", "Write well.\n")
        prompts.save("Coder", "Write code.")
        prompts.save("Ünïcode é", "ok")
        (tmp_path / ".writer.md.swp").write_text("editor junk")
        assert prompts.names() == ["Coder", "writer", "Ünïcode é"]
        assert prompts.get("writer") == "Write well.\n"
        prompts.save("writer", "Write better.")
        assert prompts.get("writer") == "Write better."
        prompts.rename("writer", "Writer 2")
        assert prompts.names() == ["Coder", "Writer 2", "Ünïcode é"]
        with pytest.raises(PromptError, match="already exists"):
            prompts.rename("Coder", "Writer 2")
        with pytest.raises(PromptError, match="no prompt preset named 'writer'"):
            prompts.get("writer")
        with pytest.raises(PromptError, match="no prompt preset"):
            prompts.rename("writer", "x")
        prompts.delete("Coder")
        with pytest.raises(PromptError, match="no prompt preset"):
            prompts.delete("Coder")
        assert prompts.names() == ["Writer 2", "Ünïcode é"]

    @pytest.mark.parametrize(
        "name", ["", "   ", "a/b", "../escape", "..", ".hidden", "a\\b", " padded", "x\ny", "c:d"]
    )
    def test_prompts_reject_names_that_are_not_safe_file_names(
        self, tmp_path: Path, name: str
    ) -> None:

        prompts = Prompts(tmp_path / "prompts")
        for action in (
            lambda: prompts.save(name, "text"),
            lambda: prompts.get(name),
            lambda: prompts.delete(name),
            lambda: prompts.rename("x", name),
        ):
            with pytest.raises(ValueError, match="preset"):
                action()
        assert not any(tmp_path.rglob("*.md"))

    def test_prompts_unwritable_folder_raises_prompt_error_naming_the_file(
        self, tmp_path: Path, make_unwritable
    ) -> None:

        (tmp_path / "prompts").mkdir()
        folder = make_unwritable(tmp_path / "prompts")
        with pytest.raises(PromptError) as caught:
            Prompts(folder).save("New", "text")
        assert str(folder / "New.md") in str(caught.value)

    def test_a_fifo_preset_is_refused_at_once(self, tmp_path: Path) -> None:
        """A preset file that is a FIFO is refused with the reason, never waited on."""
        folder = tmp_path / "prompts"
        folder.mkdir()
        os.mkfifo(folder / "Piped.md")
        refused = returns_at_once(lambda: Prompts(folder).get("Piped"))
        assert isinstance(refused, PromptError) and "pipe" in str(refused)
