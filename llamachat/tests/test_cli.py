"""The tests of `llamachat.cli`."""

from __future__ import annotations

import argparse
import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import platformdirs

from llamachat import cli, compact, config, turn
from llamachat.__main__ import build_parser, load_or_create_config
from llamachat.config import Config
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.history.store import History
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.tests.support import prompt_tokens, run_llamachat, subprocess_config_file


class TestCli:
    """One-shot questions: `llamachat ask --print` in the terminal."""

    def test_cli_print_no_reasoning_hides_it_and_uses_the_model_asked_for(
        self, router, tmp_path
    ) -> None:
        """--no-reasoning leaves stderr empty; --model picks the model the request names."""

        router.models["other-model"] = Model("other-model", "loaded")
        config = subprocess_config_file(tmp_path, router.url, 'oneshot_model = "test-model"\n')
        router.script(Reply(reasoning=["hidden"], content=["shown"]))
        done = run_llamachat(
            config, "ask", "--print", "--no-reasoning", "--model", "other-model", "hi"
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "shown\n", "")
        assert router.chat_requests()[-1].json["model"] == "other-model"

    def test_cli_print_reads_on_after_a_dropped_connection(self, router, tmp_path) -> None:
        """The connection drops mid-answer: `ask --print` reads the rest from the server's
        copy of the stream, and prints the whole answer once."""

        words = [f"w{i} " for i in range(40)]
        config = subprocess_config_file(tmp_path, router.url)
        router.script(Reply(content=words, drop_after=6))
        done = run_llamachat(config, "ask", "--print", "--no-reasoning", "hi")
        assert (done.returncode, done.stdout) == (0, "".join(words) + "\n"), done.stderr
        conversation = router.chat_requests()[-1].headers["x-conversation-id"]
        assert [r.path for r in router.requests if r.method == "GET" and "stream/" in r.path] == [
            f"/v1/stream/{conversation}"
        ]

    def test_cli_print_appends_piped_stdin_in_a_fenced_block(self, router, tmp_path) -> None:
        """`git diff | llamachat ask --print "review this"`: the question, then stdin fenced."""
        config = subprocess_config_file(tmp_path, router.url)
        diff = "diff --git a/x b/x\n+```\n+added\n"
        done = run_llamachat(config, "ask", "--print", "review this", stdin=diff)
        assert done.returncode == 0, done.stderr
        expected = "review this\n\n````\n" + diff + "````"
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == expected
        assert done.stdout == "echo: " + expected + "\n"

    def test_cli_print_unreachable_router_exits_1_with_the_message(self, tmp_path) -> None:
        """No router: exit code 1, nothing on stdout, stderr says where it looked and what to do."""

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
        config = subprocess_config_file(tmp_path, dead, 'default_model = "m"\n')
        done = run_llamachat(config, "ask", "--print", "hello")
        assert done.returncode == 1
        assert done.stdout == ""
        assert "Cannot reach the server at " + dead in done.stderr

    def test_cli_print_router_without_models_exits_1_saying_so(self, tmp_path) -> None:
        """A router listing no model: exit 1 and a message naming the router."""

        with ScriptedRouter(models=[]) as empty:
            config = subprocess_config_file(tmp_path, empty.url)
            done = run_llamachat(config, "ask", "--print", "hello")
        assert done.returncode == 1
        assert f"The router at {empty.url} offers no models" in done.stderr

    def test_cli_print_error_mid_stream_keeps_the_partial_answer_and_exits_1(
        self, router, tmp_path
    ) -> None:
        """An error chunk mid-reply: what arrived is on stdout, the error on stderr, exit 1."""

        config = subprocess_config_file(tmp_path, router.url)
        router.script(
            Reply(
                content=["Part ", "one ", "two"],
                error_after=3,
                error={"type": "server_error", "message": "the GPU fell over"},
            )
        )
        done = run_llamachat(config, "ask", "--print", "go")
        assert done.returncode == 1
        assert done.stdout == "Part one \n"
        assert "the GPU fell over" in done.stderr
        with History(tmp_path / "history.db") as history:
            (session,) = history.list_sessions()
            reply = history.messages(session["id"])[-1]
            assert (reply["content"], reply["status"]) == ("Part one ", "error")
            assert "the GPU fell over" in reply["error"]

    def test_cli_print_history_that_cannot_be_saved_still_prints_the_answer(
        self, router, tmp_path
    ) -> None:
        """A history that cannot be opened costs a warning, never the answer. (A history_path
        under a file is a config error; a link to such a place fails only at opening.)"""

        blocker = tmp_path / "not-a-folder"
        blocker.write_text("a file where the history's folder should be")
        config = subprocess_config_file(tmp_path, router.url)
        (tmp_path / "history.db").symlink_to(blocker / "history.db")
        router.script(Reply(content=["still ", "here"]))
        done = run_llamachat(config, "ask", "--print", "hello")
        assert (done.returncode, done.stdout) == (0, "still here\n")
        assert "not saved in the history" in done.stderr

    def test_cli_print_tells_skill_problems_once_per_change(self, router, tmp_path) -> None:
        """A broken skill is warned about on the first `ask --print`, not again while the
        problems stay the same; a new problem is told; --debug shows them every time."""
        config = subprocess_config_file(tmp_path, router.url)
        broken = tmp_path / "skills" / "broken"
        broken.mkdir()
        (broken / "SKILL.md").write_text("no frontmatter here\n", encoding="utf-8")
        first = run_llamachat(config, "ask", "--print", "hi")
        assert first.returncode == 0, first.stderr
        assert "skill problem" in first.stderr and str(broken) in first.stderr
        again = run_llamachat(config, "ask", "--print", "hi")
        assert (again.returncode, again.stdout, again.stderr) == (0, "echo: hi\n", "")
        debug = run_llamachat(config, "--debug", "ask", "--print", "hi")
        assert str(broken) in debug.stderr
        other = tmp_path / "skills" / "other"
        other.mkdir()
        (other / "SKILL.md").write_text("---\nname: other\n---\nno description\n", encoding="utf-8")
        changed = run_llamachat(config, "ask", "--print", "hi")
        assert changed.returncode == 0 and str(other) in changed.stderr

    def test_cli_print_with_nothing_to_ask_exits_2(self, router, tmp_path) -> None:
        """No question and no stdin: exit 2 with a hint; a lone `/skill` is not a question either."""
        config = subprocess_config_file(tmp_path, router.url)
        empty = run_llamachat(config, "ask", "--print")
        assert empty.returncode == 2 and "Nothing to ask" in empty.stderr
        lone = run_llamachat(config, "ask", "--print", "/weather")
        assert lone.returncode == 2 and "weather" in lone.stderr
        assert router.chat_requests() == []

    def test_cli_print_never_imports_qt(self, router, tmp_path) -> None:
        """The terminal path answers without loading PySide6 (it runs with no display)."""

        config = subprocess_config_file(tmp_path, router.url)
        code = (
            "import sys\n"
            "from llamachat.__main__ import main\n"
            f"rc = main(['--config', {str(config)!r}, 'ask', '--print', 'hi'])\n"
            "qt = sorted(m for m in sys.modules if m.startswith(('PySide6', 'shiboken6')))\n"
            "sys.stderr.write('QT=' + ','.join(qt))\n"
            "sys.exit(rc)\n"
        )
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == "echo: hi\n"
        assert done.stderr.endswith("QT=")

    def test_cli_print_sends_the_turn_the_builder_makes_byte_for_byte(
        self, router, tmp_path
    ) -> None:
        """`ask --print` sends the one builder's Turn as built: skills, tools, parameters and
        llama.cpp's progress fields, byte for byte."""

        path = subprocess_config_file(tmp_path, router.url)
        done = run_llamachat(path, "ask", "--print", "/weather will it rain?")
        assert done.returncode == 0, done.stderr
        sent = router.chat_requests()[-1]
        cfg = config.load(path)
        client = Client(router.url)
        n_ctx, _trained = Models(client).context_limits(sent.json["model"])
        client.close()
        expected = turn.oneshot_turn(
            cfg,
            model=sent.json["model"],
            text="will it rain?",
            names=["weather"],
            store=turn.skill_store(cfg),
            n_ctx=n_ctx,
        )
        assert expected.params["return_progress"] is True and expected.tools
        assert sent.body == httpx.Request("POST", router.url, json=expected.body()).content

    def test_cli_print_carries_the_memories_kept_everywhere_and_offers_no_remember(
        self, router, tmp_path
    ) -> None:
        """With memory on, the question's system message ends with the memories kept
        everywhere (not a project's), as a chat's would; `remember` is never offered.
        With memory off, none."""

        history = History(tmp_path / "history.db")
        history.memories.add("Prefers answers in metric units")
        work = history.projects.create("Work")
        history.memories.add("The project's API is FastAPI", project_id=work)
        history.close()
        off = subprocess_config_file(tmp_path, router.url)
        assert run_llamachat(off, "ask", "--print", "how far?").returncode == 0
        assert turn.MEMORY_HEADING not in router.chat_requests()[-1].json["messages"][0]["content"]

        on = subprocess_config_file(tmp_path, router.url, "memory_enabled = true\n")
        done = run_llamachat(on, "ask", "--print", "how far?")
        assert done.returncode == 0, done.stderr
        sent = router.chat_requests()[-1].json
        system = sent["messages"][0]["content"]
        assert system.endswith(f"{turn.MEMORY_HEADING}\n- Prefers answers in metric units")
        assert "remember" not in [tool["function"]["name"] for tool in sent.get("tools") or []]

    def test_cli_print_to_a_terminal_shows_control_characters_and_raw_keeps_them(
        self, router, tmp_path
    ) -> None:
        """OSC 52, OSC 0, CSI 2J, BEL and NUL from the model, even cut between pieces, reach
        a terminal as visible symbols (answer and reasoning); --raw and a pipe get them as sent."""

        import pty
        import tty

        from llamachat.cli import visible_controls

        config = subprocess_config_file(tmp_path, router.url)
        answer = ["Done \x1b]52;c;cm0gLXJmIH4=", "\x07 \x1b]0;pwned\x07", "\x1b[2J\x00\tok\n"]
        thought = ["think \x1b]0;t", "itle\x07\x1b[2J\x00"]
        hostile = "".join(answer)

        def on_terminal(*args: str) -> tuple[bytes, bytes]:
            masters, slaves = zip(*(pty.openpty() for _ in range(2)), strict=True)
            for slave in slaves:
                tty.setraw(slave)  # no \n -> \r\n: the bytes as the program wrote them
            router.script(Reply(reasoning=thought, content=answer))
            process = subprocess.Popen(
                [sys.executable, "-m", "llamachat", "--config", str(config), "ask", "--print"]
                + list(args),
                stdin=subprocess.DEVNULL,
                stdout=slaves[0],
                stderr=slaves[1],
                env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
            )
            for slave in slaves:
                os.close(slave)
            assert process.wait(60) == 0
            read = []
            for master in masters:
                chunks = []
                while True:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # EIO: the terminal's other end is closed and drained
                        break
                    if not chunk:
                        break
                    chunks.append(chunk)
                os.close(master)
                read.append(b"".join(chunks))
            return read[0], read[1]

        out, err = on_terminal("why?")
        assert out.decode() == visible_controls(hostile)
        assert err.decode().startswith(visible_controls("".join(thought)))
        for control in (b"\x1b", b"\x07", b"\x00"):
            assert control not in out and control not in err
        assert "\t" in out.decode() and "\u241b]52;c;" in out.decode()

        out, err = on_terminal("--raw", "why?")
        assert out.decode() == hostile and err.decode().startswith("".join(thought))

        router.script(Reply(reasoning=thought, content=answer))
        piped = run_llamachat(config, "ask", "--print", "why?")
        assert (piped.returncode, piped.stdout) == (0, hostile), piped.stderr
        assert piped.stderr == "".join(thought)

    def test_cli_print_overflow_compacts_or_trims_the_input_or_refuses(
        self, router, tmp_path
    ) -> None:
        """`ask --print --overflow`: a piped input too long for the context is summarized in
        pieces (the question its focus) or loses its first lines (said on stderr), and the
        request fits; refuse (and the default "ask": nobody to ask) sends nothing, exit 2."""

        router.models["test-model"].n_ctx = 2048
        cfg = Config(
            router_url=router.url,
            default_model="test-model",
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            skills_dir=tmp_path / "skills",
            search_enabled=False,
        )
        piped = tmp_path / "input.txt"
        piped.write_text("".join(f"line {n} " + "word " * 20 + "\n" for n in range(300)))
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)

        def ask(*flags: str) -> tuple[int, str, str]:
            out, err = io.StringIO(), io.StringIO()
            with piped.open(encoding="utf-8") as stdin:
                args = parser.parse_args(["--print", *flags, "what", "is", "this?"])
                code = cli.run(args, cfg, stdin=stdin, stdout=out, stderr=err)
            return code, out.getvalue(), err.getvalue()

        for flags in ((), ("--overflow", "refuse")):
            code, _out, err = ask(*flags)
            assert code == 2 and "Not sent" in err and not router.chat_requests()

        code, _out, err = ask("--overflow", "trim")
        assert code == 0, err
        sent = router.chat_requests()[-1].json
        question = sent["messages"][-1]["content"]
        assert "earlier lines not sent]" in question and "line 299 " in question
        assert "line 0 " not in question and "of the input not sent" in err
        assert prompt_tokens(sent) <= 2048 - 512

        before = len(router.chat_requests())
        router.script(*[Reply(content="Lines about words.") for _ in range(20)])
        code, _out, err = ask("--overflow", "compact")
        assert code == 0, err
        requests = [r.json for r in router.chat_requests()[before:]]
        assert len(requests) > 2 and "compacting the input: part 2 of" in err
        summarizing, asked = requests[:-1], requests[-1]
        assert all(
            r["messages"][0]["content"].startswith(compact.SUMMARY_PROMPT) for r in summarizing
        )
        assert all(r["messages"][0]["content"].endswith("what is this?") for r in summarizing)
        assert asked["messages"][-1]["content"].startswith("what is this?")
        assert "Lines about words." in asked["messages"][-1]["content"]
        assert all(prompt_tokens(r) + r.get("max_tokens", 512) <= 2048 for r in requests)

    def test_fault_ask_print_strips_terminal_escapes_from_server_errors(
        self, router, tmp_path
    ) -> None:
        """A server error carrying OSC/CSI escape sequences and control characters reaches the
        terminal as plain text; the model's own answer is still written byte for byte (then the
        line break every answer ends with)."""

        config = subprocess_config_file(tmp_path, router.url)
        hostile = "\x1b]0;owned\x07\x1b]52;c;cm0gLXJm\x07\x1b[2J\x1b[31mboom\x1b[0m\rover\x9b2J\x00"
        router.script(Reply(status=500, error={"message": hostile}))
        done = run_llamachat(config, "ask", "--print", "hi")
        assert done.returncode == 1, done.stderr
        assert "boom" in done.stderr and "over" in done.stderr
        assert not any(c in done.stderr for c in "\x1b\x07\r\x00\x9b"), repr(done.stderr)

        router.script(Reply(content=["\x1b[1mbold\x1b[0m"]))
        done = run_llamachat(config, "ask", "--print", "hi")
        assert (done.returncode, done.stdout) == (0, "\x1b[1mbold\x1b[0m\n")

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
        done = run_llamachat(subprocess_config_file(tmp_path, router.url), "ask", "--print", "why?")
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
        path = subprocess_config_file(tmp_path, router.url)
        args = build_parser().parse_args(["--config", str(path), "ask", "--print", "hi"])
        out, err = Terminal(), Terminal()
        assert cli.run(args, load_or_create_config(path), stdout=out, stderr=err) == 0
        assert out.getvalue() == "file\\u202etxt.exe and \\u2067x\\u2069\n"

    def test_cli_print_overflow_trim_on_one_long_line_says_trimming_goes_by_lines(
        self, router, tmp_path
    ) -> None:
        """`ask --print --overflow trim` with a one-line input too long for the context says
        that trimming leaves out lines and points to compact; nothing is sent, exit 2."""
        import argparse
        import io

        from llamachat import cli
        from llamachat.config import Config

        router.models["test-model"].n_ctx = 2048
        cfg = Config(
            router_url=router.url,
            default_model="test-model",
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            skills_dir=tmp_path / "skills",
            search_enabled=False,
        )
        piped = tmp_path / "input.txt"
        piped.write_text("word " * 6000)
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        out, err = io.StringIO(), io.StringIO()
        with piped.open(encoding="utf-8") as stdin:
            args = parser.parse_args(["--print", "--overflow", "trim", "what", "is", "this?"])
            code = cli.run(args, cfg, stdin=stdin, stdout=out, stderr=err)
        assert code == 2 and not router.chat_requests()
        assert "its one line is too long" in err.getvalue()
        assert "--overflow compact summarizes it instead" in err.getvalue()

    def test_cli_print_reply_broken_by_a_lost_rpc_worker_names_it(self, router, tmp_path) -> None:
        """A reply that breaks while the server's output says a worker went away names it."""
        from llamachat.router.rpc_workers import WorkerSet
        from llamachat.router.server import free_port

        gone = f"127.0.0.1:{free_port()}"
        # The worker set of the server at router.url, as a managed server's would be, that
        # saw the model server's last words about a worker (which no longer answers).
        workers = WorkerSet([gone], url=router.url)
        workers.in_use = (gone,)
        assert workers.lost_in(b"[4242] Remote RPC server crashed or returned malformed") == [gone]
        router.script(
            Reply(
                content=["Part ", "one"],
                error_after=1,
                error={"type": "server_error", "message": "the model server exited"},
            )
        )
        cfg = Config(
            router_url=router.url,
            default_model="test-model",
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            skills_dir=tmp_path / "skills",
            search_enabled=False,
        )
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(parser.parse_args(["--print", "go"]), cfg, stdout=out, stderr=err)

        assert code == 1
        assert f"RPC worker {gone} was lost during this reply" in err.getvalue()
        assert "the model server exited" in err.getvalue()
        with History(tmp_path / "history.db") as history:
            (session,) = history.list_sessions()
            assert history.messages(session["id"])[-1]["error"].startswith(f"RPC worker {gone}")
