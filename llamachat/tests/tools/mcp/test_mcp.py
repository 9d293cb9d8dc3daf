"""The tests of `llamachat.tools.mcp`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.router.client import Client
from llamachat.router.server import free_port
from llamachat.tests.support import (
    mcp_allow_all,
    mcp_bin,
    mcp_faulty_toml,
    mcp_time_toml,
    refuses_connections,
    run_llamachat,
    subprocess_config_file,
    turn_of,
    user_turn,
    wait_for,
    write_config_file,
)


class TestMcp:
    """MCP servers' tools in the tool loop: one hub owning every session, and its `Tool` entries."""

    def test_mcp_servers_config_errors_name_file_line_and_key(self, tmp_path: Path) -> None:
        """A bad [[mcp_servers]] table is refused with the file, the line and the key."""

        from llamachat import config as config_module

        cases = {
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\ntimout = 3\n': (
                4,
                "unknown key 'mcp_servers[1].timout' (did you mean 'timeout'?)",
            ),
            '[[mcp_servers]]\nname = "t"\n': (1, "needs either a command"),
            '[[mcp_servers]]\nname = "a b"\ncommand = "x"\n': (2, "1 to 32 letters"),
            '[[mcp_servers]]\nname = "t"\nurl = "ftp://h"\n': (3, "url must start with http"),
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\nenv = { A = 1 }\n': (
                4,
                "env must be a table of strings",
            ),
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\n\n[[mcp_servers]]\nname = "t"\n'
            'command = "y"\n': (6, "two MCP servers are named 't'"),
            '[[mcp_servers]]\nname = "t"\ncommand = "x"\ntimeout = 0\n': (
                4,
                "timeout must be more than 0",
            ),
        }
        for text, (line, message) in cases.items():
            path = write_config_file(tmp_path, text)
            with pytest.raises(config_module.ConfigError) as caught:
                config_module.load(path)
            assert caught.value.path == path and caught.value.line == line, text
            assert message in str(caught.value), text

    def test_mcp_json_imports_without_secrets_and_reads_in_place(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An mcp.json is imported with its secrets named, not copied; mcp_config reads it whole."""

        from llamachat import config as config_module

        mcp_json = tmp_path / "mcp.json"
        mcp_json.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "files": {
                            "command": "npx",
                            "args": ["-y", "files-server"],
                            "env": {"GITHUB_TOKEN": "ghp_secret", "MODE": "fast"},
                        },
                        "remote": {
                            "url": "https://h.example/mcp",
                            "headers": {"Authorization": "Bearer zz-secret"},
                        },
                    }
                }
            ),
            encoding="utf-8",
        )
        path = write_config_file(tmp_path, '# mine\ntheme = "dark"\n')
        tables, notes = config_module.mcp_json_servers(mcp_json, for_import=True)
        config_module.append_tables(path, "mcp_servers", tables)
        text = path.read_text(encoding="utf-8")
        assert "ghp_secret" not in text and "zz-secret" not in text
        assert text.startswith("# mine\n")
        assert any("GITHUB_TOKEN" in note for note in notes)
        cfg = config_module.load(path)
        files, remote = cfg.mcp_servers
        assert (files.command, files.args, dict(files.env)) == (
            "npx",
            ("-y", "files-server"),
            {"MODE": "fast"},
        )
        monkeypatch.setenv("GITHUB_TOKEN", "from-env")
        assert files.environment() == {"MODE": "fast", "GITHUB_TOKEN": "from-env"}
        monkeypatch.setenv("MCP_REMOTE_AUTHORIZATION", "Bearer from-env")
        assert remote.headers() == {"Authorization": "Bearer from-env"}

        # Read in place: the user's own file keeps its values; config.toml's names win.
        path = write_config_file(tmp_path, 'mcp_config = "mcp.json"\n')
        assert [s.name for s in config_module.load(path).mcp_servers] == ["files", "remote"]
        assert dict(config_module.load(path).mcp_servers[0].env)["GITHUB_TOKEN"] == "ghp_secret"
        mcp_json.write_text('{"mcpServers": {"x": [}', encoding="utf-8")
        with pytest.raises(config_module.ConfigError) as caught:
            config_module.load(path)
        assert caught.value.path == mcp_json and "invalid JSON" in str(caught.value)

    def test_mcp_time_server_from_config_lists_and_answers(self, mcp_hub) -> None:
        """mcp-server-time, started as a user's config says, is offered and answers calls."""

        hub, _cfg = mcp_hub(
            f'[[mcp_servers]]\nname = "time"\ncommand = {json.dumps(mcp_bin("mcp-server-time"))}\n'
        )
        tools = {tool.name: tool for tool in hub.turn_tools(consent=mcp_allow_all)}
        assert set(tools) == {"time_get_current_time", "time_convert_time"}
        schema = tools["time_get_current_time"].schema["function"]
        assert schema["parameters"]["required"] == ["timezone"]
        result = tools["time_get_current_time"].run('{"timezone": "Etc/UTC"}')
        assert json.loads(result.text)["timezone"] == "Etc/UTC"
        [(kind, record)] = result.events
        assert kind == "mcp_done" and record["status"] == "ok"
        # A tool error is a result the model reads, and the server keeps working.
        bad = tools["time_get_current_time"].run('{"timezone": "Nowhere/Land"}')
        assert bad.text.startswith("error:") and "Nowhere/Land" in bad.text
        assert hub.states()[0].status == "ready"

    def test_mcp_git_server_reads_a_temporary_repository(self, mcp_hub, tmp_path: Path) -> None:
        """mcp-server-git on a temp repository answers git_status and git_log."""

        repo = tmp_path / "repo"
        repo.mkdir()
        git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        (repo / "a.txt").write_text("one\n", encoding="utf-8")
        subprocess.run([*git, "add", "a.txt"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "first commit here"], check=True)
        (repo / "b.txt").write_text("new\n", encoding="utf-8")
        hub, _cfg = mcp_hub(
            f'[[mcp_servers]]\nname = "git"\ncommand = {json.dumps(mcp_bin("mcp-server-git"))}\n'
            f'args = ["--repository", {json.dumps(str(repo))}]\n'
        )
        tools = {tool.name: tool for tool in hub.turn_tools(consent=mcp_allow_all)}
        assert "git_git_status" in tools and "git_git_log" in tools
        status = tools["git_git_status"].run(json.dumps({"repo_path": str(repo)}))
        assert "b.txt" in status.text
        log_text = tools["git_git_log"].run(json.dumps({"repo_path": str(repo)})).text
        assert "first commit here" in log_text

    def test_mcp_faulty_servers_become_results_and_failures_shown(self, mcp_hub) -> None:
        """Crash, hang, timeout, huge output, a bad schema, a list change: each handled."""

        from llamachat.tools import mcp

        hub, _cfg = mcp_hub(
            mcp_faulty_toml("crash", "hang", "huge", "badschema", "listchange", "image")
            + mcp_faulty_toml("slow", timeout="1"),
            start_timeout=20,
            start_wait=20,
        )
        started = time.monotonic()
        tools = {tool.name: tool for tool in hub.turn_tools(consent=mcp_allow_all)}
        # The hung server costs the turn the wait, never more; the others are offered.
        assert time.monotonic() - started < 25
        assert {"crash_crash", "huge_dump", "slow_sleep", "image_picture"} <= set(tools)
        assert not any(name.startswith(("hang_", "badschema_")) for name in tools)
        states = {s.name: s for s in hub.states()}
        assert states["badschema"].status == "failed"
        assert "inputSchema" in states["badschema"].error

        # Crash mid-call: a result for the model; the server is failed with its stderr.
        crashed = tools["crash_crash"].run("{}")
        assert "stopped while answering" in crashed.text
        state = next(s for s in hub.states() if s.name == "crash")
        assert state.status == "failed"
        assert any("crashing now" in line for line in state.stderr)
        assert "crashing now" in (state.log_path.read_text(encoding="utf-8"))
        # Within the backoff the call is refused at once; after it the server starts again.
        assert "started again in" in tools["crash_echo"].run('{"text": "x"}').text
        time.sleep(mcp.BACKOFF_FIRST + 0.2)
        assert tools["crash_echo"].run('{"text": "back"}').text == "back"

        timed_out = tools["slow_sleep"].run('{"seconds": 30}')
        assert "did not answer within 1 s" in timed_out.text
        assert timed_out.events[0][1]["status"] == "timeout"
        assert tools["slow_sleep"].run('{"seconds": 0}').text == "awake"

        huge = tools["huge_dump"].run('{"chars": 100000}')
        assert len(huge.text) < mcp.RESULT_CAP + 300
        assert "100,000 characters" in huge.text and "20,000" in huge.text

        picture = tools["image_picture"].run("{}")
        assert "image/png" in picture.text and "a red dot" in picture.text
        assert mcp.decode_image(picture.events[0][1]["images"][0]).startswith(b"\x89PNG")

        assert tools["listchange_add_tool"].run("{}").text == "added"
        wait_for(
            lambda: any(
                t.name == "listchange_extra"
                for s in hub.states()
                if s.name == "listchange"
                for t in s.tools
            ),
            10,
            "the changed tools list",
        )
        wait_for(
            lambda: next(s for s in hub.states() if s.name == "hang").status == "failed",
            25,
            "the hung server to fail",
        )

    def test_mcp_server_process_dies_with_a_sigkilled_llamachat(self, tmp_path: Path) -> None:
        """No MCP server outlives the process that started it, even one killed with SIGKILL."""

        script = tmp_path / "host.py"
        script.write_text(
            "import sys, os, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import McpServerConfig\n"
            "from llamachat.tools import mcp as mcp_tools\n"
            "hub = mcp_tools.Hub([McpServerConfig('echo', command=sys.executable,"
            " args=['-m', 'llamachat.dev.mcp_faulty', 'crash'])], log_dir=Path(sys.argv[1]))\n"
            "assert hub.turn_tools(consent=lambda n, a: 'once')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
            encoding="utf-8",
        )
        host = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "logs")], stdout=subprocess.PIPE, text=True
        )
        try:
            assert host.stdout.readline().strip() == "ready"
            children = []
            for task in Path(f"/proc/{host.pid}/task").iterdir():
                children += (task / "children").read_text().split()
            [server_pid] = [int(pid) for pid in children]
            assert "mcp_faulty" in Path(f"/proc/{server_pid}/cmdline").read_text()
            host.kill()
            host.wait(10)

            def gone() -> bool:
                try:
                    return Path(f"/proc/{server_pid}/stat").read_text().split()[2] == "Z"
                except FileNotFoundError:
                    return True

            wait_for(gone, 10, "the MCP server to die with its parent")
        finally:
            host.kill()
            host.wait(10)

    def test_mcp_timeout_and_denial_reach_the_model_through_the_tool_loop(
        self, mcp_hub, router
    ) -> None:
        """A call that outlives its server's timeout is a tool result in the next request."""

        hub, _cfg = mcp_hub(mcp_faulty_toml("slow", timeout="1"))
        tools = hub.turn_tools(consent=mcp_allow_all)
        router.script(
            Reply(tool_calls=[ToolCall("slow_sleep", '{"seconds": 30}', id="s1")]),
            Reply(content="It took too long."),
        )
        client = Client(router.url)
        started = time.monotonic()
        events = list(client.stream_chat(turn_of(user_turn("sleep"), tools=tools)))
        client.close()
        assert time.monotonic() - started < 10
        assert "".join(v for k, v in events if k == "content") == "It took too long."
        result = router.chat_requests()[-1].json["messages"][-1]
        assert result["tool_call_id"] == "s1" and "did not answer within 1 s" in result["content"]
        [done] = [v for k, v in events if k == "mcp_done"]
        assert done["status"] == "timeout"

    def test_mcp_ask_print_runs_tools_only_when_allowed(self, router, tmp_path: Path) -> None:
        """`ask --print` denies MCP calls (and says so) unless --allow-tools is given."""

        config = subprocess_config_file(tmp_path, router.url, mcp_time_toml())
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}')
        router.script(Reply(tool_calls=[call]), Reply(content="denied"))
        done = run_llamachat(config, "ask", "--print", "--no-reasoning", "time?")
        assert done.returncode == 0, done.stderr
        assert "not run: time_get_current_time" in done.stderr
        assert "did not allow" in router.chat_requests()[-1].json["messages"][-1]["content"]

        router.script(Reply(tool_calls=[call]), Reply(content="allowed"))
        done = run_llamachat(config, "ask", "--print", "--allow-tools", "time?")
        assert (done.returncode, done.stdout) == (0, "allowed\n"), done.stderr
        assert "datetime" in router.chat_requests()[-1].json["messages"][-1]["content"]

    def test_mcp_streamable_http_server_gets_its_header_from_the_environment(
        self, mcp_hub, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A `url` server is reached over Streamable HTTP with the header headers_env names."""

        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "llamachat.dev.mcp_faulty", "http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: not refuses_connections(port), 20, "the HTTP MCP server")
            monkeypatch.setenv("TEST_MCP_AUTH", "Bearer t0k3n")
            hub, _cfg = mcp_hub(
                f'[[mcp_servers]]\nname = "web"\nurl = "http://127.0.0.1:{port}/mcp"\n'
                'headers_env = { Authorization = "TEST_MCP_AUTH" }\n'
            )
            tools = {tool.name: tool for tool in hub.turn_tools(consent=mcp_allow_all)}
            assert tools["web_header"].run('{"name": "authorization"}').text == "Bearer t0k3n"
            assert "t0k3n" not in (Path(_cfg.path).read_text(encoding="utf-8"))
        finally:
            process.kill()
            process.wait(10)

    def test_mcp_autostart_starts_at_once_and_disabled_never_starts(self, mcp_hub) -> None:
        """`autostart` starts a server before any turn; `enabled = false` keeps one off."""

        hub, _cfg = mcp_hub(
            mcp_faulty_toml("image", autostart="true")
            + "\n"
            + mcp_faulty_toml("huge", enabled="false")
        )
        assert [s.status for s in hub.states()] == ["not started", "off"]
        hub.start()
        wait_for(lambda: hub.states()[0].status == "ready", 20, "the autostarted server")
        assert hub.states()[1].status == "off"
        assert [t.name for t in hub.turn_tools(consent=mcp_allow_all)] == [
            "image_echo",
            "image_picture",
        ]
        assert hub.states()[1].status == "off"

    def test_mcp_garbage_on_a_servers_stdout_is_one_line_in_its_log_not_a_traceback(
        self, router, tmp_path: Path
    ) -> None:
        """A server writing non-JSON and invalid JSON-RPC on stdout: `ask --print` still runs
        its tool, stderr has no traceback, and the server's log has one line for each."""

        config = subprocess_config_file(tmp_path, router.url, mcp_faulty_toml("garbage"))
        call = ToolCall("garbage_echo", '{"text": "still works"}')
        router.script(Reply(tool_calls=[call]), Reply(content="fine"))
        done = run_llamachat(config, "ask", "--print", "--allow-tools", "--no-reasoning", "echo?")
        assert (done.returncode, done.stdout) == (0, "fine\n"), done.stderr
        assert done.stderr == ""
        assert router.chat_requests()[-1].json["messages"][-1]["content"] == "still works"
        log_path = tmp_path / "home/.local/state/llamachat/log/mcp-garbage.log"
        notes = [line for line in log_path.read_text().splitlines() if "Failed to parse" in line]
        assert len(notes) == 2
        assert "Invalid JSON" in notes[0] and "Server starting..." in notes[0]
        assert "JSONRPCRequest.id" in notes[1]
