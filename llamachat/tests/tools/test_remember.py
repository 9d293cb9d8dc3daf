"""The tests of `llamachat.tools.remember`."""

from __future__ import annotations

from llamachat import turn
from llamachat.config import Config
from llamachat.tools import remember
from llamachat.tools.base import answer


class TestRemember:
    """The model's remember tool: offered only while the chat's memory is on; it never writes."""

    def test_remember_is_offered_only_while_the_chats_memory_is_on(self) -> None:
        """build_turn offers remember for a chat whose memory is on (config and chat), never
        by the config alone (the CLI, the quick window: nobody there keeps what it hands)."""

        question = [{"role": "user", "content": "hi"}]

        def names(cfg: Config, **options: bool) -> list[str]:
            built = turn.build_turn(cfg, model="m", system=(), messages=question, **options)
            return [schema["function"]["name"] for schema in built.offer]

        on = Config(memory_enabled=True)
        assert names(on, memory_on=True) == ["remember"]
        assert names(on) == []
        assert names(on, memory_on=True, takes_tools=False) == []

    def test_a_call_hands_the_fact_to_the_window_and_shows_it_in_the_reply(self) -> None:
        tools = [remember.Remember()]
        _announced, result = answer(tools, "remember", '{"fact": " Prefers\\nmetric units "}')
        assert result.text.startswith("Remembered: Prefers metric units.")
        assert ("remembered", "Prefers metric units") in result.events
        assert (
            "tool_done",
            {"title": "Remembered", "query": "Prefers metric units", "results": [], "error": ""},
        ) in result.events
        _announced, refused = answer(tools, "remember", '{"fact": ""}')
        assert refused.text.startswith("error: give the fact") and refused.events == []
