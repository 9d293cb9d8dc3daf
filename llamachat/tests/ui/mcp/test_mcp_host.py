"""The tests of `llamachat.ui.mcp.mcp_host`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.tests.support import (
    answer_mcp_consent,
    mcp_faulty_toml,
    mcp_time_toml,
    mcp_window,
    send_and_wait,
    type_message,
)


class TestMcpHost:
    """MCP in the running app: the host that owns the MCP hub, offers its tools, and asks consent."""

    def test_mcp_window_asks_runs_the_tool_and_shows_and_saves_the_call(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """The model calls an MCP tool: consent is asked, the result reaches the next round,
        the reply shows the call collapsed and History keeps it; the chat does not ask twice."""

        from llamachat.ui.views.message import MessageView

        window, history = mcp_window(chat_window, router, tmp_path, mcp_time_toml())
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}', id="t1")
        router.script(Reply(tool_calls=[call]), Reply(content="It is late."))
        type_message(qtbot, window, "What time is it?")
        window.send()
        asked = answer_mcp_consent(qtbot, window, "Allow once")
        assert "time_get_current_time" in asked and "Etc/UTC" in asked
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)

        first, second = router.chat_requests()[-2:]
        assert "time_get_current_time" in [t["function"]["name"] for t in first.json["tools"]]
        tool_message = second.json["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "t1"
        assert json.loads(tool_message["content"])["timezone"] == "Etc/UTC"

        view = window.messages.last_assistant()
        [shown] = view.tool_calls()
        assert shown.button.text() == "Ran time_get_current_time"
        assert not shown.body.isVisible()
        shown.button.click()
        assert shown.body.isVisible() and '"timezone": "Etc/UTC"' in shown.details()
        row = history.messages(window.session_id)[-1]
        assert row["content"] == "It is late."
        [saved] = row["tool_calls"]
        assert saved["function"] == {"name": "time_get_current_time", "arguments": call.arguments}
        assert saved["status"] == "ok" and "datetime" in saved["result"]
        reopened = MessageView(row)
        assert [v.name for v in reopened.tool_calls()] == ["time_get_current_time"]
        reopened.deleteLater()

        router.script(Reply(tool_calls=[call]), Reply(content="Still late."))
        send_and_wait(qtbot, window, "And now?")
        assert window.app.mcp.consent_box is None
        assert router.chat_requests()[-1].json["messages"][-1]["role"] == "tool"

    def test_mcp_window_deny_is_read_by_the_model_and_always_is_saved(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Deny becomes the tool result; "Always allow" lands in config.toml, comments kept,
        and a new chat runs the tool without asking."""

        window, _history = mcp_window(
            chat_window, router, tmp_path, mcp_time_toml(), extra="# my note\n"
        )
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}', id="d1")
        router.script(Reply(tool_calls=[call]), Reply(content="No time then."))
        type_message(qtbot, window, "time?")
        window.send()
        answer_mcp_consent(qtbot, window, "Deny")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        denied = router.chat_requests()[-1].json["messages"][-1]
        assert denied["role"] == "tool" and "did not allow" in denied["content"]
        [shown] = window.messages.last_assistant().tool_calls()
        assert shown.button.text() == "Denied: time_get_current_time"

        router.script(Reply(tool_calls=[call]), Reply(content="Now I know."))
        type_message(qtbot, window, "please, time?")
        window.send()
        answer_mcp_consent(qtbot, window, "Always allow this tool")
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
        text = (tmp_path / "config.toml").read_text(encoding="utf-8")
        assert 'mcp_allowed_tools = ["time_get_current_time"]' in text and "# my note" in text
        assert window.app.config.mcp_allowed_tools == ("time_get_current_time",)

        window.new_session()
        router.script(Reply(tool_calls=[call]), Reply(content="Known."))
        send_and_wait(qtbot, window, "time again")
        assert window.app.mcp.consent_box is None
        assert "datetime" in router.chat_requests()[-1].json["messages"][-1]["content"]

    def test_mcp_window_stop_withdraws_the_question(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """Stop while consent is asked closes the box; the tool never runs, no round follows."""

        window, _history = mcp_window(chat_window, router, tmp_path, mcp_time_toml())
        call = ToolCall("time_get_current_time", '{"timezone": "Etc/UTC"}')
        router.script(Reply(tool_calls=[call]), Reply(content="never"))
        type_message(qtbot, window, "time?")
        window.send()
        host = window.app.mcp
        qtbot.waitUntil(lambda: host.consent_box is not None, timeout=30000)
        window.stop()
        qtbot.waitUntil(lambda: host.consent_box is None, timeout=5000)
        qtbot.waitUntil(lambda: window.running_workers() == 0, timeout=10000)
        assert len(router.chat_requests()) == 1

    def test_mcp_window_says_it_waits_for_a_hung_server_skip_goes_on_and_no_second_wait(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A server that never answers `initialize`: the send shows "Waiting for MCP server
        hang…" with Skip; Skip sends at once; that chat does not wait for it again until
        it is restarted."""

        from PySide6.QtWidgets import QLabel, QPushButton

        window, _history = mcp_window(chat_window, router, tmp_path, mcp_faulty_toml("hang"))
        host = window.app.mcp

        def send_and_skip(text: str) -> None:
            type_message(qtbot, window, text)
            window.send()
            qtbot.waitUntil(lambda: host.wait_notice is not None, timeout=5000)
            notice = host.wait_notice
            assert "Waiting for MCP server hang…" in [x.text() for x in notice.findChildren(QLabel)]
            started = time.monotonic()
            notice.findChild(QPushButton).click()
            qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30000)
            assert time.monotonic() - started < 5 and host.wait_notice is None

        router.script(Reply(content="without it"))
        send_and_skip("hello")
        offered = router.chat_requests()[-1].json.get("tools", [])
        assert not any(t["function"]["name"].startswith("hang_") for t in offered)

        router.script(Reply(content="at once"))
        started = time.monotonic()
        send_and_wait(qtbot, window, "again")
        assert time.monotonic() - started < 5 and host.wait_notice is None

        host.restart("hang")
        router.script(Reply(content="waited again"))
        send_and_skip("after the restart")
