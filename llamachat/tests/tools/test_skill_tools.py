"""The tests of `llamachat.tools.skill_tools`."""

from __future__ import annotations

from pathlib import Path

from llamachat import tools
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.skills import SkillStore
from llamachat.tests.support import (
    finance_skill_store,
    put_skill,
    skill_md,
    skill_tools_of,
    stream_events,
    user_turn,
    write_pdf_skill,
)


class TestSkillTools:
    """The skill tools: `load_skill` and `read_skill_file` in the tool loop."""

    def test_first_time_read_skill_file_is_offered_once_a_skill_with_files_is_loaded(
        self, router, tmp_path: Path
    ) -> None:
        """Not offered before; offered in the round after load_skill loads a skill with
        files; its call is answered with the file and a tool_done event for the window."""

        root = tmp_path / "skills"
        write_pdf_skill(root)
        put_skill(root, "plain", skill_md("plain"))
        store = SkillStore(root)
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "pdf"}', id="k1")]),
            Reply(
                tool_calls=[
                    ToolCall("read_skill_file", '{"skill": "pdf", "path": "forms.md"}', id="r1")
                ]
            ),
            Reply(content="The fields are in the XFA."),
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": skill_tools_of(store), "rounds": 2}
        )

        first, second, third = (r.json for r in router.chat_requests())
        assert [t["function"]["name"] for t in first["tools"]] == ["load_skill"]
        assert [t["function"]["name"] for t in second["tools"]] == ["load_skill", "read_skill_file"]
        assert second["tools"][1]["function"]["parameters"]["properties"]["skill"]["enum"] == [
            "pdf"
        ]
        result = third["messages"][-1]
        assert result["tool_call_id"] == "r1"
        assert "Field names are in the form's XFA." in result["content"]
        done = [value for kind, value in events if kind == "tool_done"]
        assert done == [
            {
                "title": "Read skill file",
                "query": "pdf/forms.md, 44 bytes",
                "results": [],
                "error": "",
            }
        ]
        # Loaded in the system message already: offered from the first round; a skill
        # without files offers nothing to read.
        offer = skill_tools_of(store, loaded=["pdf"])
        assert [t.name for t in offer if t.schema] == ["load_skill", "read_skill_file"]
        offer = skill_tools_of(store, loaded=["plain"])
        assert [t.name for t in offer if t.schema] == ["load_skill"]

    def test_first_time_read_skill_file_refuses_skills_not_loaded_as_a_result(
        self, tmp_path: Path
    ) -> None:
        """A call for a skill that is not loaded, or with bad arguments, is a result the
        model reads, never an exception."""

        store = SkillStore(write_pdf_skill(tmp_path / "skills").parent)
        offer = skill_tools_of(store, loaded=["pdf"])
        _announced, result = tools.answer(offer, "read_skill_file", '{"skill": "x", "path": "a"}')
        assert result.text == (
            "error: the skill x is not loaded; files can be read from the loaded skills only (pdf)."
        )
        _announced, result = tools.answer(offer, "read_skill_file", '{"path": 3}')
        assert result.text.startswith("error: give the skill's name and a relative path")
        _announced, result = tools.answer(
            offer, "read_skill_file", '{"skill": "pdf", "path": "../../etc/passwd"}'
        )
        assert "outside the pdf folder" in result.text
        assert result.events[0][1]["error"] and result.events[0][1]["query"].startswith("pdf/")

    def test_first_time_loading_twice_answers_already_loaded_without_a_second_copy(
        self, router, tmp_path: Path
    ) -> None:
        """A skill in the system message, or one loaded earlier in the turn, is answered
        "already loaded" and its text is not sent again."""

        store = finance_skill_store(tmp_path)
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="a")]),
            Reply(content="ok"),
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="b")]),
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="c")]),
            Reply(content="ok"),
        )
        loaded = skill_tools_of(store, loaded=["finance-cli"])
        events = stream_events(router.url, {"messages": user_turn(), "tools": loaded})
        assert ("skill_loaded", "finance-cli") not in events
        answer = router.chat_requests()[1].json["messages"][-1]["content"]
        assert answer.startswith("The skill finance-cli is already loaded")
        assert "Run `finance auth test` first." not in answer

        fresh = skill_tools_of(store)
        events = stream_events(router.url, {"messages": user_turn(), "tools": fresh})
        assert events.count(("skill_loaded", "finance-cli")) == 1
        convo = router.chat_requests()[-1].json["messages"]
        results = [m["content"] for m in convo if m["role"] == "tool"]
        assert "Run `finance auth test` first." in results[0]
        assert results[1].startswith("The skill finance-cli is already loaded")

    def test_backend_load_skill_yields_skill_loaded_and_sends_the_body(
        self, router, tmp_path
    ) -> None:

        store = finance_skill_store(tmp_path)
        router.script(
            Reply(tool_calls=[ToolCall("load_skill", '{"name": "finance-cli"}', id="k1")]),
            Reply(content="Done."),
        )
        events = stream_events(
            router.url, {"messages": user_turn(), "tools": skill_tools_of(store), "rounds": 1}
        )
        assert events[0] == ("skill_loaded", "finance-cli")
        assert ("content", "Done.") in events
        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [store.tool_schema()]
        assert "tools" not in second
        tool = second["messages"][-1]
        assert tool["tool_call_id"] == "k1"
        assert "[skill: finance-cli]" in tool["content"]
        assert "Run `finance auth test` first." in tool["content"]

    def test_backend_unknown_skill_is_answered_with_an_error_and_no_event(
        self, router, tmp_path
    ) -> None:

        router.script(
            Reply(
                tool_calls=[
                    ToolCall("load_skill", '{"name": "notes-keeper"}', id="k2"),
                    ToolCall("load_skill", "{oops", id="k3"),
                ]
            ),
            Reply(content="ok"),
        )
        offer = skill_tools_of(finance_skill_store(tmp_path))
        events = stream_events(router.url, {"messages": user_turn(), "tools": offer})
        assert not any(k == "skill_loaded" for k, _ in events)
        unknown, malformed = router.chat_requests()[1].json["messages"][-2:]
        assert unknown["tool_call_id"] == "k2"
        assert unknown["content"].startswith("error: No such skill: notes-keeper.")
        assert "finance-cli" in unknown["content"]
        assert malformed["tool_call_id"] == "k3"
        assert malformed["content"].startswith("error: the load_skill arguments were not valid")

    def test_backend_skills_without_store_offer_nothing(self, router) -> None:

        assert skill_tools_of(None) == []
        stream_events(router.url, {"messages": user_turn(), "tools": skill_tools_of(None)})
        assert "tools" not in router.chat_requests()[0].json
