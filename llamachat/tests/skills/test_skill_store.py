"""The tests of `llamachat.skills.skill_store`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from llamachat import skills, turn
from llamachat.config import Config
from llamachat.skills import SkillStore
from llamachat.tests.support import (
    CHECKOUT,
    SKILL_WEATHER,
    TURN_SKILL_ZETA,
    problem_for,
    put_skill,
    skill_md,
    write_skill,
)


class TestSkillsStore:
    """`SkillStore`: skills found, loaded and refreshed; mentions; problems told once."""

    def test_turn_skill_store_sees_a_skills_folder_created_after_start_up(self, tmp_path) -> None:
        """No skills folder yet: a store all the same, which finds the folder once it exists."""

        cfg = Config(skills_dir=tmp_path / "later")
        assert not cfg.skills_enabled
        store = turn.skill_store(cfg)

        def offered() -> list[str]:
            request = turn.build_turn(cfg, model="m", system=(), store=store)
            return [schema["function"]["name"] for schema in request.offer]

        assert store is not None and offered() == []
        (tmp_path / "later" / "zeta").mkdir(parents=True)
        (tmp_path / "later" / "zeta" / "SKILL.md").write_text(TURN_SKILL_ZETA, encoding="utf-8")
        assert turn.parse_question("/zeta hi", store).skills == ("zeta",)
        assert offered() == ["load_skill"]
        off = Config(skills_dir=tmp_path / "later", skills_enabled=False)
        assert turn.skill_store(off) is None

    def test_skills_are_found_one_level_deep_and_plain_folders_are_not_problems(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "alpha", skill_md("alpha"))
        put_skill(root / "outer", "inner", skill_md("inner"))
        (root / "empty").mkdir()
        (root / "notes.md").write_text("not a skill\n")
        put_skill(root, ".git", skill_md("git"))

        store = skills.SkillStore(root)

        assert store.names() == ["alpha"]
        assert store.problems() == []
        assert store.load("inner") is None
        assert store.roots() == [root]

    def test_skills_symlinked_skill_folder_is_followed(self, tmp_path: Path) -> None:

        real = tmp_path / "elsewhere" / "linked"
        put_skill(real.parent, "linked", skill_md("linked", body="Linked body.\n"))
        root = tmp_path / "skills"
        root.mkdir()
        (root / "linked").symlink_to(real, target_is_directory=True)

        skill = skills.SkillStore(root).load("linked")

        assert skill is not None
        assert skill.text == "Linked body."
        assert skill.folder == root / "linked"
        assert skill.path == root / "linked" / "SKILL.md"

    def test_skills_earlier_root_wins_a_name_clash_and_the_hidden_copy_is_a_problem(
        self,
        tmp_path: Path,
    ) -> None:

        first, second = tmp_path / "agents", tmp_path / "claude"
        put_skill(first, "dup", skill_md("dup", "From the first root."))
        shadowed = put_skill(second, "dup", skill_md("dup", "From the second root."))
        put_skill(second, "only-second", skill_md("only-second"))
        # A broken skill claims no name: the later root's good copy is used.
        put_skill(first, "fixme", "no frontmatter\n")
        put_skill(second, "fixme", skill_md("fixme", "The working copy."))

        store = skills.SkillStore([first, second])

        assert store.names() == ["dup", "fixme", "only-second"]
        assert store.load("dup").description == "From the first root."
        assert store.load("fixme").description == "The working copy."
        problem = problem_for(store, shadowed)
        assert str(first / "dup" / "SKILL.md") in problem.message
        assert problem.skipped
        # The same folder given twice (skills_dir also in skills_dirs) shadows nothing.
        twice = skills.SkillStore([first, first])
        assert twice.problems() == skills.SkillStore(first).problems()
        assert len(twice.roots()) == 1

    def test_skills_broken_folder_reports_each_bad_skill_by_path_and_loads_the_good_ones(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        good = {
            "good-one": put_skill(root, "good-one", skill_md("good-one", body="One.\n")),
            "good-two": put_skill(root, "good-two", skill_md("good-two", body="Two.\n")),
        }
        undecodable = put_skill(
            root, "undecodable", b"---\nname: undecodable\ndescription: Bad \xff byte.\n---\nOk.\n"
        )
        huge = put_skill(root, "huge", skill_md("huge", "A very long skill.", "Start.\n"))
        with huge.open("ab") as f:
            chunk = b"Reference material that nobody should paste into a prompt whole.\n" * 16384
            for _ in range(50 * 1024 * 1024 // len(chunk) + 1):
                f.write(chunk)
        folder_as_file = root / "is-a-folder" / "SKILL.md"
        folder_as_file.mkdir(parents=True)
        dangling = root / "dangling" / "SKILL.md"
        dangling.parent.mkdir()
        dangling.symlink_to(tmp_path / "nowhere.md")
        bad = {  # path -> a word the diagnosis must contain
            put_skill(root, "no-frontmatter", "# Just markdown\n"): "frontmatter",
            put_skill(root, "no-description", "---\nname: no-description\n---\nBody\n"): (
                "description"
            ),
            put_skill(
                root, "bad-yaml", skill_md("bad-yaml", extra="metadata:\n  a: 1\n b: 2\n")
            ): "YAML",
            put_skill(root, "Bad_Slug", skill_md("Bad_Slug")): "not a valid skill name",
            put_skill(
                root, "unclosed", "---\nname: unclosed\ndescription: Open.\n"
            ): "never closed",
            put_skill(root, "utf-sixteen", skill_md("utf-sixteen").encode("utf-16")): "UTF-16",
            put_skill(root, "a-list", "---\n- name\n- description\n---\n"): "key: value",
            folder_as_file: "not a regular file",
            dangling: "does not exist",
        }

        # Loaded all the same, with a warning saying what to fix (lenient as other harnesses).
        warned = {
            put_skill(root, "no-name", "---\ndescription: Nameless.\n---\nBody\n"): "`name:`",
            put_skill(root, "mismatch", skill_md("other-name")): "`name: other-name`",
            put_skill(root, "too-long", skill_md("too-long", "x" * 1025)): "1025",
        }

        store = skills.SkillStore(root)

        assert store.names() == [
            "good-one",
            "good-two",
            "huge",
            "no-name",
            "other-name",
            "too-long",
            "undecodable",
        ]
        for path, word in warned.items():
            assert not problem_for(store, path).skipped
            assert word in problem_for(store, path).message
        assert store.load("good-one").text == "One."
        assert store.load("good-two").text == "Two."
        assert store.load("undecodable").description == "Bad \ufffd byte."
        loaded_huge = store.load("huge")
        assert loaded_huge.text.startswith("Start.\nReference material")
        assert "only the first 64 KB are loaded" in loaded_huge.text
        assert len(loaded_huge.text.encode()) < skills.BODY_MAX + 200
        for path, word in bad.items():
            problem = problem_for(store, path)
            assert problem.skipped, problem
            assert word in problem.message, problem
            assert str(path) in str(problem)
        for path in (undecodable, huge):
            assert not problem_for(store, path).skipped
        assert not any(problem.path in good.values() for problem in store.problems())
        messages = [problem.message for problem in store.problems()]
        assert len(set(messages)) == len(messages)

    def test_skills_disable_model_invocation_keeps_a_skill_from_the_model_but_slash_loads_it(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "auto", skill_md("auto", "Anyone may load me."))
        put_skill(
            root,
            "manual",
            skill_md("manual", "Only the user.", extra="disable-model-invocation: true\n"),
        )

        store = skills.SkillStore(root)
        function = store.tool_schema()["function"]

        assert function["parameters"]["properties"]["name"]["enum"] == ["auto"]
        assert "manual" not in function["description"]
        assert "manual" not in store.directory()
        assert store.user_names() == ["auto", "manual"]
        assert skills.parse_commands("/manual go", store.user_names()) == ("go", ["manual"])
        manual = store.load("manual")
        assert manual is not None and not manual.model_invocable
        refused = skills.tool_message("call_1", manual)["content"]
        assert refused.startswith("error:") and "/manual" in refused
        assert "Do it." not in refused

        only_manual = tmp_path / "only-manual"
        put_skill(
            only_manual, "manual", skill_md("manual", extra="disable-model-invocation: true\n")
        )
        assert skills.SkillStore(only_manual).tool_schema() is None

    def test_skills_user_invocable_false_blocks_slash_and_mentions_but_not_the_model(
        self,
        tmp_path: Path,
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "hidden", skill_md("hidden", extra="user-invocable: false\n"))
        put_skill(root, "open", skill_md("open"))

        store = skills.SkillStore(root)

        assert store.names() == ["hidden", "open"]
        assert store.user_names() == ["open"]
        assert skills.parse_commands("/hidden now", store.user_names()) == ("/hidden now", [])
        assert store.match_mentions("use hidden and open") == ["open"]
        assert store.tool_schema()["function"]["parameters"]["properties"]["name"]["enum"] == [
            "hidden",
            "open",
        ]
        assert not store.load("hidden").user_invocable

    def test_skills_mentions_match_whole_words_in_any_case_in_store_order(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        for name in ("zeta", "pdf-tools", "pdf", "finance-cli"):
            put_skill(root, name, skill_md(name))

        store = skills.SkillStore(root)

        assert store.match_mentions("Use ZETA, then PDF-Tools and (finance-cli).") == [
            "finance-cli",
            "pdf-tools",
            "zeta",
        ]
        assert store.match_mentions("the pdf, twice: pdf") == ["pdf"]
        for text in ("finance-cli2", "xpdf", "pdf_tools", "pdfs", "pdf-toolsy", "zetas", ""):
            assert store.match_mentions(text) == [], text

    def test_skills_refresh_picks_up_new_edited_deleted_and_fixed_skills(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "alpha", skill_md("alpha", "First.", "Old body.\n"))
        store = skills.SkillStore(root)
        assert store.names() == ["alpha"]
        assert store.refresh() is False

        put_skill(root, "beta", skill_md("beta"))
        assert store.refresh() is True
        assert store.names() == ["alpha", "beta"]

        put_skill(root, "alpha", skill_md("alpha", "First, edited.", "New, longer body.\n"))
        assert store.refresh() is True
        assert store.load("alpha").description == "First, edited."
        assert store.load("alpha").text == "New, longer body."

        shutil.rmtree(root / "beta")
        assert store.refresh() is True
        assert store.names() == ["alpha"]

        broken = put_skill(root, "gamma", "---\nname: gamma\n---\n")
        assert store.refresh() is True
        assert problem_for(store, broken).skipped
        put_skill(root, "gamma", skill_md("gamma", "Fixed."))
        assert store.refresh() is True
        assert store.problems() == []
        assert store.names() == ["alpha", "gamma"]
        assert store.refresh() is False

        later = tmp_path / "later"
        late_store = skills.SkillStore([root, later])
        assert late_store.names() == ["alpha", "gamma"]
        put_skill(later, "delta", skill_md("delta"))
        assert late_store.refresh() is True
        assert late_store.names() == ["alpha", "delta", "gamma"]

    def test_skills_load_rereads_a_skill_edited_since_the_last_scan(self, tmp_path: Path) -> None:

        root = tmp_path / "skills"
        put_skill(root, "alpha", skill_md("alpha", body="Version one.\n"))
        store = skills.SkillStore(root)
        assert store.load("alpha").text == "Version one."

        put_skill(root, "alpha", skill_md("alpha", body="Version two, longer.\n"))

        assert store.load("alpha").text == "Version two, longer."

    def test_skills_are_read_once_and_an_unchanged_refresh_only_stats(self, tmp_path: Path) -> None:
        """Counts real file opens and folder listings with an audit hook in a fresh interpreter."""

        root = tmp_path / "skills"
        for name in ("alpha", "beta", "gamma"):
            put_skill(root, name, skill_md(name, body=f"{name} body\n"))
        # Installed skills are older than the two seconds during which a fresh mtime
        # is distrusted (and re-checked) because of coarse filesystem clocks.
        past = time.time() - 3600
        for path in [root, *root.rglob("*")]:
            os.utime(path, (past, past))
        code = (
            "import json, sys\n"
            "from pathlib import Path\n"
            "from llamachat import skills\n"
            "root = Path(sys.argv[1])\n"
            "events = []\n"
            "recording = [False]\n"
            "def hook(event, args):\n"
            "    if recording[0] and event in ('open', 'os.scandir', 'os.listdir'):\n"
            "        events.append([event, str(args[0])])\n"
            "sys.addaudithook(hook)\n"
            "store = skills.SkillStore(root)\n"
            "store.names(); store.load('alpha')\n"
            "recording[0] = True\n"
            "store.names(); store.user_names(); store.match_mentions('use alpha and beta')\n"
            "store.tool_schema(); store.load('alpha'); store.directory()\n"
            "described = store.descriptions()\n"
            "changes = [store.refresh(), store.refresh()]\n"
            "recording[0] = False\n"
            "quiet = list(events); events.clear()\n"
            "(root / 'beta' / 'SKILL.md').write_text("
            "'---\\nname: beta\\ndescription: Edited.\\n---\\nbeta body, edited\\n')\n"
            "recording[0] = True\n"
            "changes.append(store.refresh())\n"
            "recording[0] = False\n"
            "print(json.dumps({'quiet': quiet, 'changes': changes, 'after_edit': events,\n"
            "                  'beta': store.load('beta').description, 'described': described}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(root)],
            capture_output=True,
            text=True,
            check=True,
            cwd=CHECKOUT,
        ).stdout
        result = json.loads(out)

        assert result["quiet"] == []
        assert result["described"] == dict.fromkeys(
            ["alpha", "beta", "gamma"], "Does one thing well."
        )
        assert result["changes"] == [False, False, True]
        # The gate opens by path, then wraps the descriptor (an "open" of its number).
        opened = [
            path for event, path in result["after_edit"] if event == "open" and not path.isdigit()
        ]
        assert opened == [str(root / "beta" / "SKILL.md")]
        assert result["beta"] == "Edited."

    def test_skills_missing_root_is_quiet_and_a_file_as_root_is_a_problem(
        self, tmp_path: Path
    ) -> None:

        missing = skills.SkillStore(tmp_path / "nope")
        assert missing.names() == [] and missing.problems() == []
        assert missing.refresh() is False

        not_a_folder = tmp_path / "skills.txt"
        not_a_folder.write_text("oops\n")
        store = skills.SkillStore(not_a_folder)
        assert store.names() == []
        assert "not a folder" in problem_for(store, not_a_folder).message

    def test_skills_problems_warn_once_per_change_across_stores(
        self, tmp_path: Path, caplog
    ) -> None:
        """The first store to see a set of problems warns; later stores (later runs) with the
        same set log them at info level; fixed then broken again, they warn again."""

        root = tmp_path / "skills"
        reported = tmp_path / "state" / "skill-problems"
        put_skill(root, "broken", "no frontmatter\n")
        caplog.set_level(logging.INFO, logger="llamachat.skills")

        def levels() -> list[str]:
            store = skills.SkillStore(root, reported=reported)
            caplog.clear()
            store.names()
            return [r.levelname for r in caplog.records if "skill problem" in r.getMessage()]

        assert levels() == ["WARNING"] and reported.exists()
        assert levels() == ["INFO"]
        assert skills.reported_problems_path().parent.name == "llamachat"
        (root / "broken" / "SKILL.md").unlink()
        assert levels() == [] and not reported.exists()
        put_skill(root, "broken", "no frontmatter\n")
        assert levels() == ["WARNING"]

        store = skills.SkillStore(root, reported=reported)
        store.names()
        put_skill(root, "worse", "---\nname: worse\n---\n")
        caplog.clear()
        assert store.refresh()
        assert [(r.levelname, "worse" in r.getMessage()) for r in caplog.records] == [
            ("WARNING", True)
        ]

    def test_skills_watch_paths_name_roots_skill_folders_and_skill_files(
        self, tmp_path: Path
    ) -> None:

        root = tmp_path / "skills"
        put_skill(root, "alpha", skill_md("alpha"))
        (root / "empty").mkdir()

        store = skills.SkillStore([root, tmp_path / "missing"])

        assert store.watch_paths() == [
            root,
            root / "alpha",
            root / "alpha" / "SKILL.md",
            root / "empty",
        ]

    def test_first_time_mention_rule_loads_only_unambiguous_names(self, tmp_path: Path) -> None:
        """A hyphenated name as written loads; a one-word name, or another case, is only
        suggested, unless mentions are on for that skill."""

        root = tmp_path / "skills"
        for name in ("pdf", "pdf-tools", "zeta"):
            put_skill(root, name, skill_md(name))
        store = SkillStore(root)

        assert store.mentions("What does PDF stand for?") == ([], ["pdf"])
        assert store.mentions("use pdf-tools and zeta") == (["pdf-tools"], ["zeta"])
        assert store.mentions("use PDF-Tools") == ([], ["pdf-tools"])
        assert store.mentions("what does pdf mean", always=["pdf"]) == (["pdf"], [])
        assert store.mentions("nothing here") == ([], [])

    def test_skills_folder_check_sees_added_skills_and_the_full_check_sees_edits(
        self, tmp_path: Path
    ) -> None:
        """Before a request leaves only the folders are stat'ed: a new skill is seen, a
        SKILL.md edited in place waits for the full check made after the request left."""

        root = tmp_path / "skills"
        write_skill(root, "weather", SKILL_WEATHER)
        store = SkillStore(root)
        assert store.user_names() == ["weather"]
        old = time.time() - 3600  # settled files: their timestamps prove them unchanged
        for path in [root, root / "weather", root / "weather" / "SKILL.md"]:
            os.utime(path, (old, old))
        store.refresh()
        write_skill(root, "gardening", skill_md("gardening", "When to plant what."))
        assert store.refresh(files=False) is True
        assert store.user_names() == ["gardening", "weather"]
        for path in [root, root / "gardening", root / "gardening" / "SKILL.md"]:
            os.utime(path, (old, old))
        store.refresh()
        edited = root / "weather" / "SKILL.md"
        edited.write_text(SKILL_WEATHER.replace("Forecasts", "Rain"), encoding="utf-8")
        assert store.refresh(files=False) is False
        assert store.descriptions()["weather"].startswith("Forecasts")
        assert store.refresh() is True
        assert store.descriptions()["weather"].startswith("Rain")
