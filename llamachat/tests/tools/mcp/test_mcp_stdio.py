"""The tests of `llamachat.tools.mcp.mcp_stdio`: the launcher, and a server's stdout."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from llamachat.tests.support import mcp_allow_all, mcp_faulty_toml, wait_for


def is_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def spawned_pids(log_path: Path) -> list[int]:
    """The pids a faulty MCP server said it spawned ("spawned PID PID" in its log)."""

    def found() -> list[int]:
        text = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
        lines = [line for line in text.splitlines() if line.startswith("spawned ")]
        return [int(pid) for pid in lines[-1].split()[1:]] if lines else []

    return wait_for(found, 30, "the server to say what it spawned")


class TestMcpStdio:
    """How an MCP server runs on stdio: what it starts ends with it; its stdout is UTF-8."""

    def test_mcp_server_writing_non_utf8_on_stdout_fails_saying_why(self, mcp_hub) -> None:
        """A server whose stdout is not UTF-8 is failed at once with the bytes it wrote, in its
        state (the panel's) and its log; a turn does not wait start_wait for it."""
        hub, _cfg = mcp_hub(mcp_faulty_toml("latin1"), start_wait=20)
        started = time.monotonic()
        assert hub.turn_tools(consent=mcp_allow_all) == []
        assert time.monotonic() - started < 10
        [state] = hub.states()
        assert state.status == "failed"
        assert "not UTF-8 on its stdout" in state.error and "d\\xe9marr\\xe9" in state.error
        logged = state.log_path.read_text(encoding="utf-8")
        assert "not UTF-8 on its stdout (b'Serveur d\\xe9marr\\xe9" in logged

    @pytest.mark.parametrize("mode", ["spawner", "setsid"])
    def test_mcp_server_children_end_on_close_and_on_sigkill_of_llamachat(
        self, mcp_hub, tmp_path: Path, mode: str
    ) -> None:
        """What a server starts ends when the hub closes, and when the process holding the
        hub is killed with SIGKILL: `sleep &` and `sh -c` (spawner), and what it starts in a
        session of its own (`setsid`, out of its process group; orphaned or its child)."""
        hub, _cfg = mcp_hub(mcp_faulty_toml(mode))
        assert hub.turn_tools(consent=mcp_allow_all)
        pids = spawned_pids(hub.states()[0].log_path)
        assert len(pids) == 2 and all(is_alive(pid) for pid in pids)
        hub.close()
        wait_for(lambda: not any(is_alive(pid) for pid in pids), 15, "the children to end on close")

        script = tmp_path / "host.py"
        script.write_text(
            "import sys, time\n"
            "from pathlib import Path\n"
            "from llamachat.config import McpServerConfig\n"
            "from llamachat.tools import mcp as mcp_tools\n"
            f"hub = mcp_tools.Hub([McpServerConfig('{mode}', command=sys.executable,"
            f" args=['-m', 'llamachat.dev.mcp_faulty', '{mode}'])], log_dir=Path(sys.argv[1]))\n"
            "assert hub.turn_tools(consent=lambda n, a: 'once')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
            encoding="utf-8",
        )
        host = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "host-logs")],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert host.stdout is not None and host.stdout.readline().strip() == "ready"
            pids = spawned_pids(tmp_path / "host-logs" / f"mcp-{mode}.log")
            assert all(is_alive(pid) for pid in pids)
            host.kill()
            host.wait(10)
            wait_for(lambda: not any(is_alive(pid) for pid in pids), 15, "the children to end")
        finally:
            host.kill()
            host.wait(10)
            if host.stdout is not None:
                host.stdout.close()
