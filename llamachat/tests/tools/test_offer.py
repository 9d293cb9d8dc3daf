"""The tests of `llamachat.tools.offer`."""

from __future__ import annotations

import dataclasses

import httpx

from llamachat import context, turn
from llamachat.config import Config
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.router.client import Client
from llamachat.tools import BUILTIN, Builtin, Inputs, Tool, ToolResult, offer

CLOCK_SCHEMA = {
    "type": "function",
    "function": {
        "name": "clock",
        "description": "The time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


class Clock(Tool):
    """A throwaway built-in tool: the time in a city (always noon)."""

    name = "clock"
    schema = CLOCK_SCHEMA

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def run(self, arguments: str) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult("It is noon.", [("clock_read", arguments)])


@dataclasses.dataclass(frozen=True)
class ClockConfig(Config):
    """The config with the throwaway tool's own key, as config/definitions.py would add it."""

    clock_enabled: bool = True


class TestOffer:
    """The built-in tools, listed once, and a turn's offer of them."""

    def test_a_builtin_tool_is_its_module_one_line_and_its_key(self, monkeypatch, router) -> None:
        """A tool registered in BUILTIN with its config key is offered by build_turn, called
        by the tool loop, counted by the meter, and sent as the Turn's body; its key off, it
        is not offered."""

        calls: list[str] = []

        def make(_inputs: Inputs) -> list[Tool]:
            return [Clock(calls)]

        monkeypatch.setattr(offer, "BUILTIN", [*BUILTIN, Builtin("clock_enabled", make)])
        question = [{"role": "user", "content": "What time is it in Lima?"}]
        request = turn.build_turn(ClockConfig(), model="test-model", system=(), messages=question)
        assert request.offer == (CLOCK_SCHEMA,) and request.max_rounds == Config().max_searches
        router.script(
            Reply(tool_calls=[ToolCall("clock", '{"city": "Lima"}', id="c1")]),
            Reply(content="Noon."),
        )
        client = Client(router.url)
        try:
            events = list(client.stream_chat(request))
            counted = context.measure(request, context.Tokenizer(client, "test-model"), exact=True)
        finally:
            client.close()
        assert calls == ['{"city": "Lima"}'] and ("clock_read", '{"city": "Lima"}') in events
        assert ("content", "Noon.") in events
        first, second = router.chat_requests()
        assert first.body == httpx.Request("POST", router.url, json=request.body()).content
        assert second.json["messages"][-1]["content"].startswith("It is noon.")
        assert counted.get("tools") > 0
        off = turn.build_turn(
            ClockConfig(clock_enabled=False), model="test-model", system=(), messages=question
        )
        assert off.tools == () and off.max_rounds == 0

    def test_the_first_tool_of_a_name_is_offered_and_the_rest_left_out(self) -> None:
        """Built-in tools first: an extra (MCP) tool of a built-in's name is not offered."""

        cfg = Config(search_url="http://127.0.0.1:9")
        shadow = Clock([])
        shadow.name = "web_search"
        tools = offer.offered(Inputs(cfg), [shadow, Clock([])])
        assert [type(tool).__name__ for tool in tools] == ["WebSearch", "Clock"]
