"""The tests of `llamachat.turn`."""

from __future__ import annotations

from pathlib import Path

from llamachat import turn
from llamachat.config import Config
from llamachat.history.store import History
from llamachat.library.index import LibraryStore
from llamachat.router.models import ModelInfo
from llamachat.skills import system_part
from llamachat.tests.support import make_zebra_folder, turn_skill_store
from llamachat.tools import LibraryConfig, Tool, ToolResult


class Remote(Tool):
    """A stand-in for an MCP server's tool: a kind of tool the turn's send brings."""

    def __init__(self, name: str, description: str = "") -> None:
        self.name = name
        self.schema = {"type": "function", "function": {"name": name, "description": description}}

    def run(self, arguments: str) -> ToolResult:
        return ToolResult(self.name)


class TestTurn:
    """One turn: everything a request to the model is built from, for every window and the CLI."""

    def test_turn_system_message_is_preset_date_then_skills_in_load_order_byte_stable(
        self,
        tmp_path,
    ) -> None:
        """Named system parts: preset, the date note only with search, skills as loaded."""
        from llamachat.tools import web_search

        store = turn_skill_store(tmp_path)
        parts = turn.system_parts(
            "Be brief.", search_on=True, store=store, names=["zeta", "missing", "alpha"]
        )
        assert [part.name for part in parts] == ["system", "date", "skill:zeta", "skill:alpha"]
        text = turn.join_system(parts)
        assert text == "\n\n".join(
            [
                "Be brief.",
                web_search.date_note(),
                system_part(store.load("zeta")),
                system_part(store.load("alpha")),
            ]
        )
        again = turn.system_parts("Be brief.", search_on=True, store=store, names=["zeta", "alpha"])
        assert turn.join_system(again).encode() == text.encode()
        assert turn.system_parts("", search_on=False, store=None, names=["zeta"]) == ()
        plain = turn.join_system(turn.system_parts("P", search_on=False, store=store))
        assert plain == "P" and web_search.date_note() not in plain

    def test_turn_replays_history_and_names_every_part_of_the_question(self, tmp_path) -> None:
        """History rows replay (answers only); the last question's text and files are named parts."""
        from llamachat.tools import web_search

        store = turn_skill_store(tmp_path)
        cfg = Config(
            search_url="http://127.0.0.1:9", max_searches=3, skills_dir=tmp_path / "skills"
        )
        image = {
            "kind": "image",
            "name": "cat.png",
            "mime": "image/png",
            "data": "data:image/png;base64,AA==",
        }
        notes = {"kind": "text", "name": "notes.py", "mime": "text/x-python", "data": "print(1)\n"}
        with History(tmp_path / "history.db") as history:
            session = history.create_session("chat", "m")
            history.add_message(session, "user", "look", attachments=[image])
            reply = history.add_message(session, "assistant", "A cat.", model="m")
            history.update_message(reply, reasoning="It has whiskers.")
            history.add_message(session, "assistant", "", model="m", status="error")
            history.add_message(session, "user", "and this?", attachments=[notes])
            stored = history.messages(session)

        system = turn.system_parts("Be brief.", search_on=True, store=store, names=["alpha"])
        request = turn.build_turn(cfg, model="m", system=system, messages=stored, store=store)
        assert [part.name for part in request.parts()] == [
            "system",
            "date",
            "skill:alpha",
            "history",
            "user",
            "attachment:notes.py",
            "tools",
        ]
        assert request.messages() == [
            {"role": "system", "content": request.system_message()},
            {
                "role": "user",
                "content": "look\n\n[image cat.png not sent: this model does not read images]",
            },
            {"role": "assistant", "content": "A cat."},
            {"role": "user", "content": "and this?\n\nnotes.py:\n```py\nprint(1)\n```"},
        ]
        assert request.max_rounds == 3
        assert [tool.name for tool in request.tools] == [
            web_search.TOOL_NAME,
            "load_skill",
            "read_skill_file",  # offered once a loaded skill has files
        ]
        assert request.offer == (web_search.TOOL_SCHEMA, store.tool_schema())

        seeing = turn.build_turn(
            cfg, model="m", system=(), messages=stored[:1], images=True, search_on=False
        )
        assert seeing.messages() == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": image["data"]}},
                ],
            }
        ]
        assert (seeing.tools, seeing.offer, seeing.max_rounds) == ((), (), 0)

    def test_turn_parse_question_takes_commands_then_mentions_of_known_skills(
        self, tmp_path
    ) -> None:
        """`/name` commands leave the text, mentions stay in it; unknown names are left alone.

        A one-word mention is only suggested, unless mentions are on for that skill."""

        store = turn_skill_store(tmp_path)
        question = turn.parse_question("/zeta compare with alpha and /nope", store)
        assert question == turn.Question(
            "compare with alpha and /nope", ("zeta",), ("zeta",), ("alpha",)
        )
        question = turn.parse_question("/zeta compare with alpha", store, always=["alpha"])
        assert question == turn.Question("compare with alpha", ("zeta", "alpha"), ("zeta",))
        assert turn.parse_question("/zeta hi", None) == turn.Question("/zeta hi")

    def test_turn_pick_model_prefers_configured_then_loaded_then_first_listed(self) -> None:
        """The one-shot model: config, else a model in memory, else the first listed, else ''."""

        listed = [ModelInfo(id="a", status="unloaded"), ModelInfo(id="b", status="loaded")]
        assert turn.pick_model(Config(oneshot_model="c", default_model="d"), listed) == "c"
        assert turn.pick_model(Config(default_model="d"), listed) == "d"
        assert turn.pick_model(Config(), listed) == "b"
        assert turn.pick_model(Config(), listed[:1]) == "a"
        assert turn.pick_model(Config(), []) == ""

    def test_turn_a_sends_mcp_tools_take_the_place_of_the_turns_by_one_rule(self) -> None:
        """`Turn.joined`: the send's tools replace every tool of their kind the turn was built
        with, after the built-in ones; a name a built-in tool has stays the built-in's; the
        round cap covers them; a model that takes no tools is offered none."""

        cfg = Config(search_url="http://127.0.0.1:9", max_searches=3)
        built = turn.build_turn(
            cfg, model="m", system=(), messages=[], extra_tools=[Remote("a", "as built")]
        )
        assert [t.name for t in built.tools] == ["web_search", "a"]
        late = [Remote("a", "the send's"), Remote("web_search"), Remote("b")]
        sent = built.joined(late, 3)
        assert [t.name for t in sent.tools] == ["web_search", "a", "b"]
        assert sent.tools[1] is late[0] and sent.offer[1]["function"]["description"] == "the send's"
        assert sent.body()["tools"] == list(sent.offer) and sent.max_rounds == 3
        assert built.joined([], 3) is built
        bare = turn.build_turn(Config(), model="m", system=(), messages=[])
        assert bare.max_rounds == 0 and bare.joined([Remote("b")], 2).max_rounds == 2
        mute = turn.build_turn(cfg, model="m", system=(), messages=[], takes_tools=False)
        assert mute.tools == () and mute.joined(late, 3) is mute

    def test_turn_for_a_model_without_tools_holds_the_passages_found_after_the_cached_prefix(
        self,
        tmp_path: Path,
    ) -> None:
        """build_turn for a model that cannot call tools puts the passages found for the
        question into the user message, marked as excerpts with their source, before its text;
        the system message stays byte for byte the same; a model with tools gets the tool;
        a small context keeps room for the rest."""
        root = make_zebra_folder(tmp_path / "docs")
        (root / "herd.md").write_text("# Herd\n\n" + "The division's herd grazes. " * 300)
        store = LibraryStore(tmp_path / "library.db")
        store.index(store.attach(7, root))
        store.close()
        library = LibraryConfig(tmp_path / "library.db", 7)
        cfg = Config(prompts_dir=tmp_path / "prompts")
        question = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": "How did the zebra division do?"},
        ]
        system = (turn.Part("system", "Be brief."),)
        args = dict(model="m", system=system, messages=question, library=library)

        toolless = turn.build_turn(cfg, takes_tools=False, **args)  # type: ignore[arg-type]
        tooled = turn.build_turn(cfg, **args)  # type: ignore[arg-type]

        names = [part.name for part in toolless.parts()]
        assert names == ["system", "history", "excerpts", "user"]
        assert toolless.tools == () and "tools" not in toolless.body()
        assert toolless.system_message() == tooled.system_message() == "Be brief."
        content = toolless.messages()[-1]["content"]
        assert content.startswith("[Excerpts from the user's attached documents, found by")
        assert "[1] zebra.md (Zebra) — " in content and "42 million" in content
        assert content.endswith("…\n\nHow did the zebra division do?")
        assert toolless.messages()[1] == {"role": "user", "content": "Hello"}
        assert toolless.found is not None
        source = toolless.found["results"][0]
        assert (source["title"], source["page"]) == ("zebra.md (Zebra)", None)
        # The passages take a quarter of a small context at most.
        small = turn.build_turn(
            cfg,
            takes_tools=False,
            n_ctx=1024,
            **args,  # type: ignore[arg-type]
        )
        [excerpts] = [part.text for part in small.question if part.name == "excerpts"]
        assert turn.excerpt_chars(1024) < 2000 and "42 million" in excerpts
        assert len(excerpts) < turn.excerpt_chars(1024) + 400 < len(toolless.question[0].text)
        assert [part.name for part in tooled.question] == ["user"]
        assert [t["function"]["name"] for t in tooled.offer] == ["search_documents"]


class TestAudioAttachments:
    """A sound attached to a message: an `input_audio` part for a model that hears."""

    def test_a_sound_is_an_input_audio_part_for_a_model_that_hears_else_named(self) -> None:
        """The part carries the base64 data and llama.cpp's format (wav, mp3); for a model
        that does not hear, a line names the file instead (replayed turns too), and the
        stored form keeps the sound's length for its chip."""
        wav = turn.Attachment(
            "audio", "hi.wav", "audio/wav", "data:audio/wav;base64,UklGRg==", 62.4
        )
        mp3 = turn.Attachment("audio", "song.mp3", "audio/mpeg", "data:audio/mpeg;base64,SUQz")
        stored = [wav.to_dict(), mp3.to_dict()]
        assert turn.Attachment.from_dict(stored[0]) == wav
        assert (wav.label(), mp3.label()) == ("hi.wav (1:02)", "song.mp3")
        content = turn.user_content("Listen", stored, images=False, audio=True)
        assert content == [
            {"type": "text", "text": "Listen"},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
        ]
        deaf = turn.user_content("Listen", stored[:1], images=True, audio=False)
        assert deaf == "Listen\n\n[audio hi.wav not sent: this model does not hear audio]"
        rows = [
            {"role": "user", "content": "Listen", "attachments": stored[:1]},
            {"role": "assistant", "content": "A greeting."},
        ]
        assert turn.replay(rows, images=False, audio=True)[0]["content"][1]["type"] == "input_audio"
        assert turn.replay(rows, images=False)[0]["content"] == deaf
