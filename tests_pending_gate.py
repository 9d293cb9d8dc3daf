"""Pending tests of the gate (h-gate): moved into llamachat/tests/ once the split lands."""

from __future__ import annotations

import functools
import io
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import platformdirs
import pytest

from llamachat import cli, outside
from llamachat.dev.messy_folder import NON_UTF8_NAME, SECRET, SPARSE_BYTES, messy_folder
from llamachat.dev.pytest_plugin import _llamachat, _quick_config_file
from llamachat.dev.scripted_router import Reply


def _at_once(action: Callable[[], object], seconds: float = 10) -> object:
    """What `action` returns or raises, run on a thread: a blocking open fails the test
    instead of hanging it."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(action())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{action} blocked for {seconds} s")
    return outcome[0]


# ---------------------------------------------------------------- the gate itself


class TestOutsideFiles:
    def test_walk_lists_the_regular_files_and_leaves_out_the_rest_saying_why(
        self, tmp_path: Path
    ) -> None:
        """Over the messy folder: the text files inside (the odd name kept as on disk), the
        sparse file by its size; a FIFO, socket, links out and broken links left out with
        their reason; nothing outside is reached."""
        messy = messy_folder(tmp_path / "docs")
        walked = {item.rel: item for item in outside.walk(messy.root)}
        for name in [*messy.readable, messy.large]:
            assert walked[name].reason == "" and walked[name].stat is not None, name
        assert walked[messy.large].stat.st_size == SPARSE_BYTES  # type: ignore[union-attr]
        for name, word in messy.left_out.items():
            assert word in walked[name].reason, (name, walked[name].reason)
        assert not any(rel.startswith("elsewhere/") for rel in walked)
        assert (messy.root / NON_UTF8_NAME).read_text().startswith("A file with an odd name")

    def test_open_refuses_a_fifo_socket_and_device_at_once(self, tmp_path: Path) -> None:
        """A FIFO with no writer, a socket and a link to /dev/zero are refused without
        blocking, each with what it is."""
        messy = messy_folder(tmp_path / "docs")
        for name, what in (
            ("fifo.txt", "pipe"),
            ("socket.txt", "socket"),
            ("zero.txt", "device"),
        ):
            refused = _at_once(functools.partial(outside.open_regular, messy.root / name))
            assert isinstance(refused, outside.NotRegular) and what in refused.reason, name

    def test_reads_are_bounded_by_the_bytes_read_not_by_stat(self, tmp_path: Path) -> None:
        """The 1 GB sparse file costs at most the limit: cut, refused as too large, or (a
        NUL in its first bytes) refused as not text without reading the rest."""
        messy = messy_folder(tmp_path / "docs")
        sparse = messy.root / messy.large
        data, more = outside.read_bytes(sparse, 4096, cut=True)
        assert (len(data), more) == (4096, True)
        with pytest.raises(outside.TooLarge):
            outside.read_text(sparse, 8 * 1024 * 1024)
        started = time.monotonic()
        with pytest.raises(outside.NotText):
            outside.read_text(sparse, 2 * SPARSE_BYTES)
        assert time.monotonic() - started < 1.0
        assert outside.read_text(messy.root / "normal.txt", 1000).startswith("Plain notes")

    def test_a_name_that_is_not_utf8_is_shown_with_a_replacement_character(
        self, tmp_path: Path
    ) -> None:
        """The path opens the file as it is on disk; `shown` is text anything can hold."""
        messy = messy_folder(tmp_path / "docs")
        path = messy.root / NON_UTF8_NAME
        assert outside.shown(path.name) == "caf\N{REPLACEMENT CHARACTER}.txt"
        outside.shown(path).encode("utf-8")  # no lone surrogate left
        assert "vicunas" in outside.read_text(path, 1000)


class TestOutsideTerminal:
    def test_escape_sequences_controls_and_bidi_overrides_are_neutralized(self) -> None:
        """OSC 0/52, CSI 2J, BEL, C1 and U+202E: dropped from our messages, shown as
        symbols in the model's text."""
        hostile = "a\x1b]0;title\x07b\x1b]52;c;Zm9v\x07c\x1b[2Jd\x9be\u202ef\u2066g\n"
        assert outside.terminal_safe(hostile) == "abcdefg\n"
        shown = outside.visible_controls(hostile)
        assert "\x1b" not in shown and "\u202e" not in shown and "\u2066" not in shown
        assert "\\u202e" in shown and "\u241b]0;title" in shown

    def test_log_lines_on_stderr_are_neutralized_and_file_only_records_stay_off_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A warning holding escapes reaches stderr clean; a FILE_ONLY record (an error
        page's body) reaches the log file only."""
        monkeypatch.setattr(logging.getLogger(), "handlers", [])
        err = io.StringIO()
        handlers = outside.configure_logging(
            logging.WARNING, log_path=tmp_path / "l.log", stream=err
        )
        try:
            log = logging.getLogger("llamachat.test")
            log.warning("name \x1b]0;pwned\x07 \u202eevil")
            log.warning(
                "the page:\n%s", "<html>BODY</html>", extra={outside.terminal.FILE_ONLY: True}
            )
        finally:
            for handler in handlers:
                handler.close()
        assert err.getvalue() == "WARNING llamachat.test: name  evil\n"
        logged = (tmp_path / "l.log").read_text()
        assert "BODY" in logged and "pwned" in logged


# ---------------------------------------------------------------- the surfaces


class TestAskPrintTerminal:
    def test_an_error_page_reaches_the_log_file_only_cut_and_never_the_terminal(
        self, router, tmp_path: Path
    ) -> None:
        """Issue 37 item 2: a 502 HTML page holding OSC 0, OSC 52 and CSI 2J: stderr has the
        short error only, without a control character; the log file has the page's start."""
        filler = "y" * 5000
        page = (
            "<html><head><title>Bad \x1b]0;pwned\x07Gateway</title></head><body>"
            f"\x1b]52;c;cm0gLXJm\x07\x1b[2J<p>{filler}</p><p>TAIL</p></body></html>"
        )
        router.script(Reply(status=502, body=page))
        config = _quick_config_file(tmp_path, router.url)
        done = _llamachat(config, "ask", "--print", "why?")
        assert done.returncode == 1
        assert "answered HTTP 502 with an error page: Bad Gateway" in done.stderr
        assert "\x1b" not in done.stderr and "\x07" not in done.stderr
        assert filler[:100] not in done.stderr
        logged = (Path(platformdirs.user_log_dir("llamachat")) / "llamachat.log").read_text()
        assert filler[:3000] in logged and "TAIL" not in logged

    def test_a_right_to_left_override_in_the_answer_reaches_a_terminal_as_a_symbol(
        self, router, tmp_path: Path
    ) -> None:
        """Issue 37 item 11: U+202E (and the other bidi overrides) from the model reach a
        terminal as visible text, never as the character that reorders the line."""

        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        router.script(Reply(content=["file\u202etxt.exe", " and \u2067x\u2069\n"]))
        config = _quick_config_file(tmp_path, router.url)
        from llamachat.__main__ import build_parser, load_or_create_config

        args = build_parser().parse_args(["--config", str(config), "ask", "--print", "hi"])
        out, err = Terminal(), Terminal()
        assert cli.run(args, load_or_create_config(config), stdout=out, stderr=err) == 0
        answer = out.getvalue()
        assert answer == "file\\u202etxt.exe and \\u2067x\\u2069\n"


class TestLibraryGate:
    def test_indexing_the_messy_folder_keeps_odd_names_skips_the_rest_and_sends_nothing_outside(
        self, tmp_path: Path
    ) -> None:
        """Issue 37 item 3: a name that is not UTF-8 is indexed (no UnicodeEncodeError); a
        FIFO, socket and /dev/zero are listed as skipped at once (read in the real child
        process); a link to a file outside is never indexed, so no search finds it."""
        from llamachat.library.child import ChildReader
        from llamachat.library.extract import extract
        from llamachat.library.store import LibraryStore

        messy = messy_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(1, messy.root)
        reader = ChildReader()
        store.close()

        def index() -> None:
            # On the test's thread-with-a-timeout: a store belongs to its thread.
            store = LibraryStore(tmp_path / "library.db")
            try:
                store.index(library, read=lambda p, s: extract(p, s, reader.read))
            finally:
                store.close()

        try:
            outcome = _at_once(index, 60)
            assert outcome is None, outcome
            os.mkfifo(messy.root / "later.txt")
            outcome = _at_once(index, 60)
            assert outcome is None, outcome
        finally:
            reader.close()
        store = LibraryStore(tmp_path / "library.db")
        rows = {row.path.relative_to(messy.root).as_posix(): row for row in store.files(library)}
        for name in messy.readable:
            assert rows[name].skipped == "" and rows[name].passages > 0, name
        for name, word in [*messy.left_out.items(), ("later.txt", "pipe")]:
            assert word in rows[name].skipped, (name, rows[name].skipped)
        assert "too large" in rows[messy.large].skipped
        assert store.search("vicunas", 1)[0].path == messy.root / NON_UTF8_NAME
        assert store.search(SECRET, 1) == [] and store.search("far away", 1) == []
        store.close()

    def test_the_panel_shows_a_name_that_is_not_utf8_with_a_replacement_character(
        self, tmp_path: Path
    ) -> None:
        """What the window and the model read of a file's name is text SQLite and Qt hold."""
        from llamachat.library.store import LibraryStore
        from llamachat.tools import documents

        messy = messy_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        store.index(store.attach(1, messy.root))
        hit = store.search("vicunas", 1)[0]
        store.close()
        assert "caf\N{REPLACEMENT CHARACTER}.txt" in documents.source(hit)


class TestLibraryPanelGate:
    def test_the_panel_lists_the_messy_folder_with_odd_names_shown_and_reasons(
        self, qtbot, tmp_path: Path
    ) -> None:
        """Issue 37 item 3 in the window: indexing ends (no bug dialog, no stuck progress),
        the name that is not UTF-8 is listed with a replacement character and indexed, and
        each file left out says why."""
        from llamachat.ui.library.host import LibraryHost
        from llamachat.ui.library.panel import LibrariesPanel

        messy = messy_folder(tmp_path / "docs")
        host = LibraryHost(tmp_path / "library.db")
        panel = LibrariesPanel(host, 3)
        qtbot.addWidget(panel)
        host.attach(3, messy.root)
        qtbot.waitUntil(lambda: not host.busy(), timeout=60000)
        panel.refresh()
        top = panel.tree.topLevelItem(0)
        rows = {
            top.child(i).text(0): (top.child(i).text(2), top.child(i).text(3))
            for i in range(top.childCount())
        }
        host.close()
        assert rows["caf\N{REPLACEMENT CHARACTER}.txt"][0] == "1"
        assert rows["fifo.txt"] == ("0", "a pipe (FIFO), not a regular file")
        assert "outside the folder" in rows["passwd.txt"][1]
        assert panel.progress.isHidden()


class TestImportGate:
    def test_an_import_refuses_dev_zero_a_fifo_and_a_sparse_gigabyte_at_once(
        self, tmp_path: Path
    ) -> None:
        """Issue 37 item 4: a link to /dev/zero, a FIFO and a 1 GB sparse file are refused
        promptly with the reason, never read until the memory runs out."""
        from llamachat.history import importers
        from llamachat.history.rows import HistoryError

        messy = messy_folder(tmp_path / "docs")
        for name, word in (
            ("zero.txt", "device"),
            ("fifo.txt", "pipe"),
            ("sparse.txt", "too large"),
        ):
            started = time.monotonic()
            refused = _at_once(functools.partial(importers.read_chats, messy.root / name))
            assert isinstance(refused, HistoryError) and word in str(refused), (name, refused)
            assert time.monotonic() - started < 2.0, name

    def test_a_20_mb_title_is_cut_at_import(self, tmp_path: Path) -> None:
        """Issue 37 item 4: an imported title is cut to MAX_TITLE_CHARS, so the list that
        draws it does not stall."""
        from llamachat.dev.chat_exports import chatgpt_export
        from llamachat.history import importers

        exported = chatgpt_export(1)
        exported[0]["title"] = "T" * 20_000_000
        source = tmp_path / "conversations.json"
        source.write_text(json.dumps(exported))
        [chat] = importers.read_chats(source)
        assert len(chat.session["title"]) == 500 and chat.session["title"].endswith("…")


class TestSkillsGate:
    def test_a_messy_skill_folder_lists_its_own_files_and_reads_none_outside(
        self, tmp_path: Path
    ) -> None:
        """A skill's folder with each fault: the file list holds its text files (the odd
        name shown), and read_skill_file refuses the FIFO, the socket and every link out."""
        from llamachat.skills import Skill, SkillFileError, read_skill_file, resource_files

        messy = messy_folder(tmp_path / "skills" / "messy")
        (messy.root / "SKILL.md").write_text("---\nname: messy\ndescription: d\n---\nbody\n")
        skill = Skill("messy", "d", "body", messy.root / "SKILL.md", messy.root)
        listed = resource_files(skill)
        odd = "caf\N{REPLACEMENT CHARACTER}.txt"
        assert listed == sorted([odd, "normal.txt", "sub/inner.md", messy.large])
        for name in ("fifo.txt", "socket.txt", "zero.txt", "passwd.txt", "elsewhere/far.txt"):
            refused = _at_once(functools.partial(read_skill_file, skill, name))
            assert isinstance(refused, SkillFileError), (name, refused)
            assert SECRET not in str(refused)
        text, _summary = read_skill_file(skill, odd)  # the name as listed reads the file
        assert "vicunas" in text
        with pytest.raises(SkillFileError, match="not a text file"):
            read_skill_file(skill, messy.large)  # NULs, found in its first bytes


class TestSkillImportGate:
    def test_importing_a_messy_skill_folder_copies_its_files_and_nothing_else(
        self, tmp_path: Path
    ) -> None:
        """The FIFO, socket, /dev/zero and the links out stay behind (a secret outside is never
        copied into a skill the model reads); the text files, odd name too, are copied."""
        from llamachat.skills import import_folder

        messy = messy_folder(tmp_path / "downloads" / "messy")
        (messy.root / "SKILL.md").write_text("---\nname: messy\ndescription: d\n---\nbody\n")
        os.remove(messy.root / messy.large)  # a skill of 1 GB is not this test's point
        dest = tmp_path / "skills"
        imported = _at_once(lambda: import_folder(messy.root, dest), 30)
        assert imported == [dest / "messy"]
        copied = sorted(item.rel for item in outside.walk(dest / "messy"))
        assert copied == sorted([*messy.readable, "SKILL.md"])
        assert not any(SECRET in (dest / "messy" / rel).read_text() for rel in copied)


class TestSmallSurfacesGate:
    def test_a_fifo_preset_or_mcp_file_is_refused_at_once(self, tmp_path: Path) -> None:
        """A prompt preset and an mcp.json that are FIFOs are refused, never waited on."""
        from llamachat import prompts
        from llamachat.config import ConfigError
        from llamachat.config.load import mcp_json_servers

        folder = tmp_path / "prompts"
        folder.mkdir()
        os.mkfifo(folder / "Piped.md")
        refused = _at_once(lambda: prompts.Prompts(folder).get("Piped"))
        assert isinstance(refused, prompts.PromptError) and "pipe" in str(refused)
        os.mkfifo(tmp_path / "mcp.json")
        refused = _at_once(lambda: mcp_json_servers(tmp_path / "mcp.json"))
        assert isinstance(refused, ConfigError) and "pipe" in str(refused)
