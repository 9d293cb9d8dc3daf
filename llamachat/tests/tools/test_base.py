"""The tests of `llamachat.tools.base`."""

from __future__ import annotations

from llamachat import skills
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.tests.support import clock_tool, stream_events_offering


class TestBase:
    """The tools a model can call: one small interface, and the tools the app offers."""

    def test_backend_third_tool_registered_without_touching_backend_is_offered_and_run(
        self,
        router,
    ) -> None:

        clock = clock_tool()
        router.script(
            Reply(tool_calls=[ToolCall("clock", '{"city": "Lima"}', id="c1")]),
            Reply(content=["Noon."]),
        )
        events = stream_events_offering(router.url, [clock], rounds=1)
        assert ("clock_read", "Lima") in events and ("content", "Noon.") in events
        assert clock.calls == ["Lima"]
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [clock.schema]
        assert "tools" not in second
        result = second["messages"][-1]
        assert result["tool_call_id"] == "c1"
        assert result["content"] == "It is noon in Lima.\n\n" + skills.NO_MORE_TOOLS

    def test_backend_exception_inside_a_tool_becomes_a_result_the_model_reads(self, router) -> None:

        clock = clock_tool(broken=True)
        router.script(
            Reply(
                tool_calls=[
                    ToolCall("clock", '{"city": "Oslo"}', id="boom"),
                    ToolCall("clock", "[1, 2]", id="bad"),
                ]
            ),
            Reply(content=["Sorry, no clock."]),
        )
        events = stream_events_offering(router.url, [clock], rounds=2)
        assert ("content", "Sorry, no clock.") in events
        assert clock.calls == ["Oslo"]
        broken, bad = router.chat_requests()[1].json["messages"][-2:]
        assert broken["tool_call_id"] == "boom"
        assert broken["content"].startswith("error: the clock tool failed (OSError: the clock is")
        assert bad["tool_call_id"] == "bad"
        assert bad["content"].startswith("error: the arguments were not a JSON object")
        # Round 2 still offers the tool: a failure is an answer, not the end of the turn.
        assert router.chat_requests()[1].json["tools"] == [clock.schema]
