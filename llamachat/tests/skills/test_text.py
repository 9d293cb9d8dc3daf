"""The tests of `llamachat.skills.text`."""

from __future__ import annotations

from pathlib import Path

from llamachat import skills
from llamachat.tests.support import put_skill, skill_md


class TestText:
    """The text skills become for the model, and the skill commands the user types."""

    def test_skills_names_are_looked_up_never_joined_into_paths(self, tmp_path: Path) -> None:

        root = tmp_path / "skills"
        put_skill(root, "alpha", skill_md("alpha"))
        put_skill(tmp_path, "secret", skill_md("secret", body="Outside the root.\n"))

        store = skills.SkillStore(root)

        for name in (
            "../secret",
            str(tmp_path / "secret"),
            "alpha/../../secret",
            "alpha/SKILL.md",
            "",
            "ALPHA",
            skills.parse_name('{"name": "../secret"}'),
        ):
            assert store.load(name) is None, name
        assert store.load(None) is None
        assert store.load("alpha").name == "alpha"

    def test_skills_tool_schema_offers_a_load_skill_enum_and_none_without_skills(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "zeta", skill_md("zeta", "Last one."))
        put_skill(root, "alpha", skill_md("alpha", "First one."))

        store = skills.SkillStore(root)
        schema = store.tool_schema()

        assert schema["type"] == "function"
        function = schema["function"]
        assert function["name"] == skills.LOAD_SKILL_NAME == "load_skill"
        assert function["parameters"]["required"] == ["name"]
        assert function["parameters"]["properties"]["name"]["enum"] == ["alpha", "zeta"]
        assert function["description"].endswith("- alpha: First one.\n- zeta: Last one.")
        assert store.directory() == "- alpha: First one.\n- zeta: Last one."
        (tmp_path / "empty").mkdir()
        assert skills.SkillStore(tmp_path / "empty").tool_schema() is None
        assert skills.SkillStore(tmp_path / "missing").tool_schema() is None

    def test_skills_catalog_caps_each_description_and_counts_the_skills_left_out(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        total = 300
        for index in range(total):
            put_skill(root, f"skill-{index:03}", skill_md(f"skill-{index:03}", "word " * 180))

        store = skills.SkillStore(root)
        catalog = store.directory()
        lines = catalog.splitlines()
        listed = [line for line in lines if line.startswith("- skill-")]

        assert all(
            len(line) <= len("- skill-000: ") + skills.CATALOG_DESCRIPTION_CHARS for line in listed
        )
        assert all(line.endswith("\N{HORIZONTAL ELLIPSIS}") for line in listed)
        assert 0 < len(listed) < total
        assert sum(len(line) + 1 for line in listed) <= skills.CATALOG_CHARS
        assert lines[-1].startswith(f"({total - len(listed)} more skills not listed")
        enum = store.tool_schema()["function"]["parameters"]["properties"]["name"]["enum"]
        assert len(enum) == total

    def test_skills_tool_message_names_the_folder_and_the_files_in_it(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        folder = root / "tools"
        (folder / "scripts").mkdir(parents=True)
        (folder / "scripts" / "run.sh").write_text("echo\n")
        (folder / "reference.md").write_text("ref\n")
        (folder / "assets").mkdir()
        (tmp_path / "outside.txt").write_text("secret\n")
        (folder / "link-out.txt").symlink_to(tmp_path / "outside.txt")
        body = (
            "Run `scripts/run.sh` first, then read ./reference.md and the assets/ folder.\n"
            "Never ../outside.txt, link-out.txt, missing.md, /etc/hostname or "
            "https://example.org/reference.md. Again: scripts/run.sh.\n"
        )
        put_skill(root, "tools", skill_md("tools", body=body))

        content = skills.tool_message("call_9", skills.SkillStore(root).load("tools"))["content"]

        header, _, rest = content.partition("\n\n")
        assert header.splitlines() == [
            "[skill: tools]",
            f"Folder: {folder} (relative paths below are inside it)",
            "Files in its folder, read with read_skill_file: reference.md, scripts/run.sh",
        ]
        assert rest == body.strip()

    def test_skills_tool_message_carries_errors_and_the_last_round_note(self) -> None:

        skill = skills.Skill(name="finance-cli", description="d", text="body text")
        message = skills.tool_message("call_1", skill)
        assert message == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "[skill: finance-cli]\n\nbody text",
        }
        assert skills.tool_message("call_1", None, error="No such skill")["content"] == (
            "error: No such skill"
        )
        assert skills.tool_message("call_1", None)["content"].startswith("error:")
        last = skills.tool_message("call_1", skill, last=True)["content"]
        assert last.endswith("\n\n" + skills.NO_MORE_TOOLS)

        assert skills.parse_name('{"name": " finance-cli "}') == "finance-cli"
        assert skills.parse_name('"finance-cli"') == "finance-cli"
        for arguments in ("not json", '{"query": "x"}', '{"name": 3}', "[]", "", None):
            assert skills.parse_name(arguments) == "", arguments

    def test_skills_system_part_is_the_header_line_then_the_body(self) -> None:

        skill = skills.Skill(name="finance-cli", description="d", text="Run `finance auth test`.")

        assert skills.system_part(skill) == "[skill: finance-cli]\nRun `finance auth test`."

    def test_skills_parse_commands_removes_known_commands_and_keeps_the_rest_exactly(self) -> None:

        known = {"review", "finance-cli"}
        message = (
            "/review please check\n\n```python\ndef f():\n    return  1   # two spaces\n\n\n"
            "    /review\n```\nand `cd /review` too\n\t  indented /unknown\n"
        )

        assert skills.parse_commands(message, known) == (message[len("/review ") :], ["review"])
        cases = {
            "/finance-cli fix my budget /unknown stays": "fix my budget /unknown stays",
            "look at this /review\nline two": "look at this\nline two",
            "/review\nline one\n  indented": "line one\n  indented",
            "a\n/review\nb": "a\nb",
            "a\r\n/review\r\nb": "a\r\nb",
            "fix  /review  this": "fix   this",
            "tabs\t/review\tx": "tabs\tx",
            "/review /finance-cli /review": "",
        }
        for text, rest in cases.items():
            assert skills.parse_commands(text, known)[0] == rest, text
        assert skills.parse_commands("/review /finance-cli /review", known)[1] == [
            "review",
            "finance-cli",
        ]
        for unchanged in (
            "no commands here",
            "/nope",
            "/review.",
            "see https://example.org/review and /tmp/review",
            "x/review",
        ):
            assert skills.parse_commands(unchanged, known) == (unchanged, []), unchanged
        assert skills.parse_commands("/review go", ["review"]) == ("go", ["review"])
