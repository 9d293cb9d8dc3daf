"""The tests of `llamachat.skills.files`."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from llamachat import skills
from llamachat.skills import SkillStore, system_part
from llamachat.tests.support import SECRET, messy_folder, returns_at_once, write_pdf_skill


class TestFiles:
    """The files of a skill's folder, which the model reads through ``read_skill_file``."""

    def test_first_time_read_skill_file_reads_text_inside_the_folder_only(
        self, tmp_path: Path
    ) -> None:
        """Relative paths only, resolved (symlinks too) and kept inside the folder; text only;
        the 256 KB cap said in the result; a miss answered with the closest paths."""

        folder = write_pdf_skill(tmp_path / "skills")
        (tmp_path / "secret.txt").write_text("secret\n")
        (folder / "out.md").symlink_to(tmp_path / "secret.txt")
        (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
        (folder / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
        (folder / "big.md").write_text("x" * (skills.FILE_MAX + 10))
        os.mkfifo(folder / "pipe")
        skill = SkillStore(tmp_path / "skills").load("pdf")

        text, summary = skills.read_skill_file(skill, "forms.md")
        assert text.startswith("[pdf/forms.md: 44 bytes, whole (files over 256 KB are cut)]\n\n")
        assert text.endswith("Field names are in the form's XFA.\n")
        assert summary == "pdf/forms.md, 44 bytes"
        assert skills.read_skill_file(skill, "./scripts/fill.py")[0].endswith("print('filled')\n")
        big, big_summary = skills.read_skill_file(skill, "big.md")
        assert "cut at 256 KB" in big.splitlines()[0] and big_summary.endswith("cut at 256 KB")
        assert len(big) < skills.FILE_MAX + 200
        refused = {
            "/etc/hostname": "relative",
            "../secret.txt": "outside",
            "scripts/../../secret.txt": "outside",
            "out.md": "outside",
            "logo.png": "not a text file",
            "latin1.txt": "not UTF-8",
            "pipe": "not a regular file",
            "scripts": "scripts/fill.py",
            "": "relative",
        }
        for path, words in refused.items():
            with pytest.raises(skills.SkillFileError, match=re.escape(words)):
                skills.read_skill_file(skill, path)
        with pytest.raises(skills.SkillFileError) as missed:
            skills.read_skill_file(skill, "form.md")
        assert "Closest existing files: forms.md" in str(missed.value)
        with pytest.raises(skills.SkillFileError, match="scripts/fill.py"):
            skills.read_skill_file(skill, "fill.py")

    def test_first_time_loaded_skill_text_names_its_files_and_the_tool(
        self, tmp_path: Path
    ) -> None:
        """The model is told which files the folder holds, in the system message and in the
        load_skill result; dot-files and links out of the folder are left out."""

        folder = write_pdf_skill(tmp_path / "skills")
        (folder / ".hidden").write_text("x")
        (tmp_path / "outside.md").write_text("x")
        (folder / "link.md").symlink_to(tmp_path / "outside.md")
        skill = SkillStore(tmp_path / "skills").load("pdf")

        assert skills.resource_files(skill) == ["forms.md", "scripts/fill.py"]
        line = "Files in its folder, read with read_skill_file: forms.md, scripts/fill.py"
        assert system_part(skill).splitlines()[:2] == ["[skill: pdf]", line]
        assert line in skills.tool_message("c1", skill)["content"].splitlines()

    def test_a_messy_skill_folder_lists_its_own_files_and_reads_none_outside(
        self, tmp_path: Path
    ) -> None:
        """A skill's folder with each fault: the file list holds its text files (the odd
        name shown, and read by that name), and read_skill_file refuses the FIFO, the socket
        and every link out at once."""
        from llamachat.skills import Skill, SkillFileError, read_skill_file, resource_files

        messy = messy_folder(tmp_path / "skills" / "messy")
        (messy.root / "SKILL.md").write_text("---\nname: messy\ndescription: d\n---\nbody\n")
        skill = Skill("messy", "d", "body", messy.root / "SKILL.md", messy.root)
        odd = "caf\N{REPLACEMENT CHARACTER}.txt"
        assert resource_files(skill) == sorted([odd, "normal.txt", "sub/inner.md", messy.large])
        for name in ("fifo.txt", "socket.txt", "zero.txt", "passwd.txt", "elsewhere/far.txt"):
            refused = returns_at_once(functools.partial(read_skill_file, skill, name))
            assert isinstance(refused, SkillFileError), (name, refused)
            assert SECRET not in str(refused)
        text, _summary = read_skill_file(skill, odd)
        assert "vicunas" in text
        with pytest.raises(SkillFileError, match="not a text file"):
            read_skill_file(skill, messy.large)  # NULs, found in its first bytes
