"""The tests of `llamachat.ui.mcp.mcp_panel`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from llamachat.dev.scripted_router import Reply
from llamachat.tests.support import (
    HOSTILE,
    mcp_faulty_toml,
    mcp_time_toml,
    mcp_window,
    send_and_wait,
)


class TestMcpPanel:
    """The MCP panel: the servers, their states and tools, their log."""

    def test_mcp_panel_shows_states_toggles_tools_and_warns_on_budget(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The panel lists each server's state and tools with their token cost; a toggle is
        saved and leaves the tool out of the next request; over 10% of the context warns."""

        servers = mcp_time_toml() + "\n" + mcp_faulty_toml("stderr")
        window, _history = mcp_window(chat_window, router, tmp_path, servers)
        panel = window.open_mcp_panel()
        panel._context_size = lambda: 1000
        tree = panel.tree
        assert [tree.topLevelItem(i).text(1) for i in range(2)] == ["not started"] * 2
        for index in range(2):
            tree.setCurrentItem(tree.topLevelItem(index))
            panel.restart_button.click()

        def settled() -> bool:
            return [tree.topLevelItem(i).text(1) for i in range(2)] == ["ready", "failed"]

        qtbot.waitUntil(settled, timeout=30000)
        time_item, failed_item = tree.topLevelItem(0), tree.topLevelItem(1)
        stderr = [failed_item.child(i).text(2) for i in range(failed_item.childCount())]
        assert "fatal: the database is locked" in stderr
        tools = {time_item.child(i).text(0): time_item.child(i) for i in range(2)}
        assert tools["time_convert_time"].text(1).endswith(" tokens")
        assert int(tools["time_convert_time"].text(1).split()[0].replace(",", "")) > 50
        assert panel.over_budget() and "more than 10%" in panel.total.text()

        tools["time_convert_time"].setCheckState(0, Qt.CheckState.Unchecked)
        text = (tmp_path / "config.toml").read_text(encoding="utf-8")
        assert 'mcp_disabled_tools = ["time_convert_time"]' in text
        router.script(Reply(content="fine"))
        send_and_wait(qtbot, window, "hello")
        offered = [t["function"]["name"] for t in router.chat_requests()[-1].json["tools"]]
        assert "time_get_current_time" in offered and "time_convert_time" not in offered
        panel.close()

    def test_mcp_outside_text_is_shown_as_plain_text(self, qtbot) -> None:
        """A tool's name, arguments and result reach the view and the consent box as text."""

        from llamachat.ui.views.tool_call import ToolCallView

        call = {
            "function": {"name": HOSTILE, "arguments": json.dumps({"q": HOSTILE})},
            "result": HOSTILE,
            "status": "ok",
            "server": HOSTILE,
        }
        view = ToolCallView(call)
        qtbot.addWidget(view)
        view.button.click()
        assert view.body.textFormat() == Qt.TextFormat.PlainText
        assert view.details().count("<img") == 3
        assert view.button.text() == f"Ran {HOSTILE}"

    def test_mcp_secrets_a_server_prints_are_masked_in_the_panel_and_its_log(
        self, chat_window, router, qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A server printing its env_vars token and the router's key on stderr: the panel
        and mcp-<name>.log show *** for both, never the values."""

        from llamachat import config as config_module

        token, router_key = "mcp-tok-Qw3rTy9UiOp2", "rk-Zx8cVb7nMl6kJh5g"
        monkeypatch.setenv("TEST_MCP_TOKEN", token)
        monkeypatch.setenv("TEST_ROUTER_KEY", router_key)
        path = tmp_path / "config.toml"
        path.write_text(
            mcp_faulty_toml(
                "leak",
                env_vars='{ LEAK_TOKEN = "TEST_MCP_TOKEN" }',
                env=f'{{ LEAK_ROUTER = "{router_key}" }}',
            ),
            encoding="utf-8",
        )
        cfg = config_module.load(path)
        window, _history = chat_window(
            path=path, mcp_servers=cfg.mcp_servers, router_api_key_env="TEST_ROUTER_KEY"
        )
        panel = window.open_mcp_panel()
        item = panel.tree.topLevelItem(0)
        panel.tree.setCurrentItem(item)
        panel.restart_button.click()
        qtbot.waitUntil(lambda: panel.tree.topLevelItem(0).text(1) == "failed", timeout=30000)
        item = panel.tree.topLevelItem(0)
        shown = [item.text(2)] + [item.child(i).text(2) for i in range(item.childCount())]
        assert "auth failed: LEAK_TOKEN=*** was refused" in shown
        assert "auth failed: LEAK_ROUTER=*** was refused" in shown
        log_path = window.app.mcp.states()[0].log_path
        logged = log_path.read_text(encoding="utf-8")
        assert "LEAK_TOKEN=*** was refused" in logged
        assert token[:8] not in logged and router_key[:8] not in logged
        assert not any(token[:8] in text or router_key[:8] in text for text in shown)
        panel.close()

    def test_mcp_panel_says_a_non_utf8_server_failed_and_why(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The MCP panel shows the server as failed with the reason, not "starting"."""
        window, _history = mcp_window(chat_window, router, tmp_path, mcp_faulty_toml("latin1"))
        panel = window.open_mcp_panel()
        item = panel.tree.topLevelItem(0)
        panel.tree.setCurrentItem(item)
        panel.restart_button.click()
        qtbot.waitUntil(lambda: panel.tree.topLevelItem(0).text(1) == "failed", timeout=20000)
        assert "not UTF-8 on its stdout" in panel.tree.topLevelItem(0).text(2)
        panel.close()
