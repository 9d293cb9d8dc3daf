"""The tests of `llamachat.skills.parse`."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from llamachat import skills
from llamachat.dev.skill_corpus import CORPUS
from llamachat.skills import SkillStore
from llamachat.tests.support import problem_for, put_skill, skill_md


class TestParse:
    """Reading and validating one SKILL.md."""

    def test_skills_plain_quoted_and_folded_descriptions_give_the_same_text(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        want = "Summarise PDF files, tables and forms."
        forms = {
            "plain": f"description: {want}\n",
            "double": f'description: "{want}"\n',
            "single": f"description: '{want}'\n",
            "folded": "description: >-\n  Summarise PDF files,\n  tables and forms.\n",
            "wrapped": "description: Summarise PDF files,\n  tables and forms.\n",
        }
        for name, line in forms.items():
            put_skill(root, name, f"---\nname: {name}\n{line}---\nBody.\n")

        store = skills.SkillStore(root)

        assert store.problems() == []
        assert {name: store.load(name).description for name in forms} == dict.fromkeys(forms, want)

    def test_skills_values_with_colons_parse_and_a_body_with_dashes_stays_whole(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        body = "# Steps\n\n---\n\nname: not-frontmatter\n---\nThe end.\n"
        put_skill(
            root,
            "quoted",
            '---\nname: quoted\ndescription: "Use when: the user asks"\n'
            "homepage: https://example.org/x\n---\n" + body,
        )
        unquoted = put_skill(root, "unquoted", skill_md("unquoted", "Use when: the user asks"))

        store = skills.SkillStore(root)

        quoted = store.load("quoted")
        assert quoted.description == "Use when: the user asks"
        assert quoted.metadata["homepage"] == "https://example.org/x"
        assert quoted.text == body.strip()
        # YAML rejects the bare second colon; people write it anyway, so it is read
        # as text and the file gets a warning telling them to quote it.
        assert store.load("unquoted").description == "Use when: the user asks"
        warning = problem_for(store, unquoted)
        assert not warning.skipped
        assert "quotes" in warning.message

    def test_skills_crlf_line_endings_and_a_byte_order_mark_are_handled(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        text = skill_md("windows", "Saved on Windows.", "Line one.\nLine two.\n")
        put_skill(root, "windows", b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())

        store = skills.SkillStore(root)
        skill = store.load("windows")

        assert store.problems() == []
        assert skill.description == "Saved on Windows."
        assert skill.text == "Line one.\nLine two."

    def test_skills_undecodable_bytes_load_with_replacement_characters_and_are_reported(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        head = put_skill(
            root, "latin-head", b"---\nname: latin-head\ndescription: Caf\xe9 menu.\n---\nBody.\n"
        )
        body = put_skill(
            root,
            "latin-body",
            b"---\nname: latin-body\ndescription: Fine.\n---\nCaf\xe9 au lait.\n",
        )

        store = skills.SkillStore(root)

        assert store.load("latin-head").description == "Caf\ufffd menu."
        assert not problem_for(store, head).skipped
        # The body is read only when loaded, so its warning appears from then on.
        assert store.load("latin-body").text == "Caf\ufffd au lait."
        warning = problem_for(store, body)
        assert not warning.skipped
        assert "UTF-8" in warning.message

    def test_skills_unknown_and_optional_keys_are_kept_in_metadata(self, tmp_path: Path) -> None:

        root = tmp_path / "skills"
        put_skill(
            root,
            "full",
            skill_md(
                "full",
                extra="license: Apache-2.0\ncompatibility: Needs git and network access\n"
                "metadata:\n  author: example.org\n  version: '1.0'\n"
                "allowed-tools: Bash(git:*) Read\nx-harness-option: 7\n",
            ),
        )
        odd = put_skill(root, "odd", skill_md("odd", extra="metadata: just a string\n"))

        store = skills.SkillStore(root)
        full = store.load("full")

        assert full.metadata == {
            "license": "Apache-2.0",
            "compatibility": "Needs git and network access",
            "metadata": {"author": "example.org", "version": "1.0"},
            "allowed-tools": "Bash(git:*) Read",
            "x-harness-option": 7,
        }
        # A wrongly shaped optional key is a warning; the skill still loads.
        assert store.load("odd").metadata["metadata"] == "just a string"
        assert not problem_for(store, odd).skipped

    def test_skills_huge_skill_md_is_scanned_and_loaded_without_reading_it_whole(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        path = put_skill(root, "huge", skill_md("huge", "Fifty megabytes.", ""))
        with path.open("ab") as f:
            chunk = b"0123456789abcdef" * 65536
            for _ in range(50):
                f.write(chunk)
        assert path.stat().st_size > 50 * 1024 * 1024

        tracemalloc.start()
        try:
            store = skills.SkillStore(root)
            assert store.names() == ["huge"]
            assert len(store.load("huge").text) < skills.BODY_MAX + 200
            _current, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

        assert peak < 2 * 1024 * 1024

    @pytest.mark.parametrize(
        ("folder", "valid"),
        [
            ("a", True),
            ("pdf-tools", True),
            ("x2-y3", True),
            ("a" * 64, True),
            ("a" * 65, False),
            ("Pdf", False),
            ("pdf--tools", False),
            ("-pdf", False),
            ("pdf-", False),
            ("pdf_tools", False),
            ("pdf.tools", False),
            ("café", False),
        ],
    )
    def test_skills_name_must_be_a_lowercase_slug_of_at_most_64_characters(
        self, tmp_path: Path, folder: str, valid: bool
    ) -> None:

        path = put_skill(tmp_path / "skills", folder, skill_md(folder))

        store = skills.SkillStore(tmp_path / "skills")

        assert store.names() == ([folder] if valid else [])
        if not valid:
            assert "not a valid skill name" in problem_for(store, path).message

    def test_skills_description_must_hold_text_and_over_1024_characters_is_a_warning(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "longest", skill_md("longest", "d" * 1024))
        too_long = put_skill(root, "too-long", skill_md("too-long", "d" * 1025))
        empty = put_skill(root, "empty", skill_md("empty", '""'))
        number = put_skill(root, "number", skill_md("number", "42"))

        store = skills.SkillStore(root)

        assert store.names() == ["longest", "too-long"]
        assert len(store.load("longest").description) == 1024
        assert len(store.load("too-long").description) == 1025
        assert "1025" in problem_for(store, too_long).message
        assert not problem_for(store, too_long).skipped
        assert "no `description:`" in problem_for(store, empty).message
        assert "not text" in problem_for(store, number).message

    def test_skills_body_over_64_kb_is_cut_at_a_character_boundary_with_a_note(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        # One ASCII byte first, so the cap falls in the middle of a two-byte "é".
        path = put_skill(root, "long", skill_md("long", body="a" + "é" * 100_000 + "\nTHE END\n"))

        store = skills.SkillStore(root)
        text = store.load("long").text

        body, _, note = text.rpartition("\n\n")
        assert body == "a" + "é" * ((skills.BODY_MAX - 1) // 2)
        assert "THE END" not in text
        assert note.startswith("[Cut here") and "64 KB" in note
        assert "64 KB" in problem_for(store, path).message

    def test_skills_yaml_alias_bomb_loads_and_refreshes_without_expanding(
        self, tmp_path: Path
    ) -> None:

        lines = ["---", "name: bomb", "description: Nested aliases.", "a0: &a0 [x, x, x, x, x]"]
        for level in range(1, 16):
            lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 5) + "]")
        put_skill(tmp_path / "skills", "bomb", "\n".join([*lines, "---", "Body."]) + "\n")

        store = skills.SkillStore(tmp_path / "skills")

        assert store.load("bomb").text == "Body."
        # A fresh file is re-parsed on refresh; telling the two parses apart must
        # not walk 5**16 list items.
        assert store.refresh() is False

    def test_first_time_every_skill_of_the_published_shapes_loads_with_its_description(
        self, tmp_path: Path
    ) -> None:
        """A corpus of SKILL.md files in the shapes public collections use: every one loads,
        with its whole description; what breaks a rule is a warning, never a skip."""

        root = tmp_path / "skills"
        for entry in CORPUS:
            put_skill(root, entry.folder, entry.text.encode("utf-8"))

        store = SkillStore(root)

        assert store.names() == sorted(entry.name for entry in CORPUS)
        for entry in CORPUS:
            skill = store.load(entry.name)
            assert skill is not None, entry.name
            assert skill.description == entry.description, entry.name
        assert [problem for problem in store.problems() if problem.skipped] == []
        long = next(entry for entry in CORPUS if len(entry.description) > skills.DESCRIPTION_MAX)
        line = next(x for x in store.directory().splitlines() if x.startswith(f"- {long.name}:"))
        assert len(line) < skills.CATALOG_DESCRIPTION_CHARS + 40

    def test_first_time_lenient_parsing_warns_with_the_path_and_the_fix(
        self, tmp_path: Path
    ) -> None:
        """Over-long descriptions, unquoted `: `, unreadable flow values and a name unlike its
        folder load with a warning; no usable name or description is still an error."""

        root = tmp_path / "skills"
        long = put_skill(root, "long", skill_md("long", "word " * 300))
        colon = put_skill(
            root, "colon", "---\nname: colon\ndescription: Use when: a colon\n  and: more\n---\n"
        )
        flow = put_skill(root, "flow", skill_md("flow", "[never closed"))
        renamed = put_skill(root, "folder-name", skill_md("front-name"))
        invalid = put_skill(root, "fallback", skill_md("Fall Back"))
        hopeless = put_skill(root, "Bad Folder", skill_md("Also Bad"))
        nothing = put_skill(root, "nothing", "---\nname: nothing\n---\n")

        store = SkillStore(root)

        assert store.names() == ["colon", "fallback", "flow", "front-name", "long"]
        assert store.load("colon").description == "Use when: a colon and: more"
        assert store.load("flow").description == "[never closed"
        assert len(store.load("long").description) == len(("word " * 300).strip())
        expected = {
            long: "1499 characters",
            colon: "it was read as text, but put the value in quotes",
            flow: "`description:`",
            renamed: "loads as front-name. Rename the folder to `front-name`",
            invalid: "loads under its folder's name, fallback. Set `name: fallback`",
        }
        for path, words in expected.items():
            problem = problem_for(store, path)
            assert not problem.skipped and words in problem.message, problem
        assert problem_for(store, hopeless).skipped
        assert "no usable name" in problem_for(store, hopeless).message
        assert problem_for(store, nothing).skipped
