"""The tests of `llamachat.skills.importing`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamachat import skills
from llamachat.tests.support import SECRET, messy_folder, put_skill, returns_at_once, skill_md


class TestImporting:
    """Importing skill folders into a skills folder, validated, never overwriting."""

    def test_skills_import_folder_copies_a_skill_or_a_folder_of_skills(
        self, tmp_path: Path
    ) -> None:

        dest = tmp_path / "home" / ".agents" / "skills"
        downloaded = tmp_path / "downloads" / "pdf-skill-main"
        put_skill(downloaded.parent, downloaded.name, skill_md("pdf", body="See forms.md.\n"))
        (downloaded / "shared").mkdir()
        (downloaded / "shared" / "forms.md").write_text("Form notes.\n")
        (downloaded / "forms.md").symlink_to(downloaded / "shared" / "forms.md")
        (tmp_path / "secret.txt").write_text("a secret\n")
        (downloaded / "leak.md").symlink_to(tmp_path / "secret.txt")

        assert skills.import_folder(downloaded, dest) == [dest / "pdf"]
        copied = dest / "pdf" / "forms.md"
        assert copied.read_text() == "Form notes." + "\n"
        assert not copied.is_symlink()
        # A link out of the chosen folder is left behind: the model never reads it.
        assert not os.path.lexists(dest / "pdf" / "leak.md")
        assert skills.SkillStore(dest).load("pdf").text == "See forms.md."

        collection = tmp_path / "claude-skills"
        put_skill(collection, "alpha", skill_md("alpha"))
        put_skill(collection, "beta", skill_md("beta"))
        (collection / "not-a-skill").mkdir()
        assert skills.import_folder(collection, dest) == [dest / "alpha", dest / "beta"]
        assert skills.SkillStore(dest).names() == ["alpha", "beta", "pdf"]

    def test_skills_import_folder_refuses_invalid_and_existing_skills_and_copies_the_rest(
        self,
        tmp_path: Path,
    ) -> None:

        dest = tmp_path / "skills"
        existing = put_skill(dest, "dup", skill_md("dup", "Mine, keep me."))
        source = tmp_path / "incoming"
        put_skill(source, "good", skill_md("good"))
        broken = put_skill(source, "broken", "---\nname: broken\n---\nNo description.\n")
        put_skill(source, "dup", skill_md("dup", "Theirs."))

        with pytest.raises(skills.SkillImportError) as caught:
            skills.import_folder(source, dest)

        error = caught.value
        assert isinstance(error, skills.SkillError)
        assert error.imported == [dest / "good"]
        assert {problem.path for problem in error.problems} == {broken, source / "dup"}
        assert "never overwritten" in str(error)
        assert "description" in str(error)
        assert "Mine, keep me." in existing.read_text()
        assert not (dest / "broken").exists()
        assert sorted(path.name for path in dest.iterdir()) == ["dup", "good"]

        (tmp_path / "nothing").mkdir()
        with pytest.raises(skills.SkillImportError, match="holds no SKILL.md"):
            skills.import_folder(tmp_path / "nothing", dest)

    def test_importing_a_messy_skill_folder_copies_its_files_and_nothing_else(
        self, tmp_path: Path
    ) -> None:
        """The FIFO, socket, /dev/zero and the links out stay behind (a secret outside is never
        copied into a skill the model reads); the text files, odd name too, are copied."""
        from llamachat import outside

        messy = messy_folder(tmp_path / "downloads" / "messy")
        (messy.root / "SKILL.md").write_text("---\nname: messy\ndescription: d\n---\nbody\n")
        os.remove(messy.root / messy.large)  # a skill of 1 GB is not this test's point
        dest = tmp_path / "skills"
        imported = returns_at_once(lambda: skills.import_folder(messy.root, dest), 30)
        assert imported == [dest / "messy"]
        copied = sorted(item.rel for item in outside.walk(dest / "messy"))
        assert copied == sorted([*messy.readable, "SKILL.md"])
        assert not any(SECRET in (dest / "messy" / rel).read_text() for rel in copied)
