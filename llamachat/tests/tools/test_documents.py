"""The tests of `llamachat.tools.documents`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat import tools, turn
from llamachat.config import Config
from llamachat.dev.scripted_router import Reply, ToolCall
from llamachat.router.client import Client
from llamachat.tests.support import library_sources, make_zebra_folder, messy_folder, send_and_wait


class TestDocuments:
    """`search_documents`: the model searches the libraries attached to its chat."""

    def test_search_documents_call_through_the_router_reads_passages_with_file_and_page(
        self, router, tmp_path: Path
    ) -> None:
        """A built Turn with a library offers search_documents; the model's call is answered
        with the best passages (file, page), bounded, and the sources come as file links."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_library_folder
        from llamachat.tools import documents

        root = make_library_folder(tmp_path / "docs")
        db = tmp_path / "library.db"
        store = LibraryStore(db)
        store.index(store.attach(5, root))
        store.close()
        library = tools.LibraryConfig(db, 5)
        request = turn.build_turn(
            Config(),
            model="test-model",
            system=(),
            messages=[{"role": "user", "content": "How did the zebra division do?"}],
            library=library,
        )
        assert [t.name for t in request.tools] == ["search_documents"]
        assert request.parts()[-1].name == "tools"  # the meter counts what it adds
        router.script(
            Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra revenue"}', id="d1")]),
            Reply(content="It rose to 42 million (report.pdf, page 2)."),
        )
        client = Client(router.url)
        try:
            events = list(client.stream_chat(request))
        finally:
            client.close()

        first, second = (r.json for r in router.chat_requests())
        assert first["tools"] == [documents.TOOL_SCHEMA]
        result = second["messages"][-1]
        assert result["tool_call_id"] == "d1"
        assert result["content"].startswith('Passages from the attached documents for "zebra')
        assert "[1] report.pdf, page 2 — " in result["content"]
        assert "42 million" in result["content"]
        [done] = [value for kind, value in events if kind == "search_done"]
        assert done["title"] == "Searched documents" and done["query"] == "zebra revenue"
        assert done["results"][0]["title"] == "report.pdf, page 2"
        assert done["results"][0]["url"] == (root / "report.pdf").as_uri()
        # Without a library the tool is not offered.
        plain = turn.build_turn(Config(), model="m", system=(), messages=[])
        assert plain.tools == ()

    def test_search_documents_result_is_bounded_and_says_when_nothing_matched(
        self, tmp_path: Path
    ) -> None:
        """Five long passages stay within RESULT_CHARS; no match is a sentence, not silence."""
        from llamachat.library.index import Hit
        from llamachat.tools import documents

        hits = [Hit(tmp_path / f"f{n}.txt", None, "", "long " * 5000, -1.0) for n in range(5)]
        text = documents.result_text("long", hits)
        assert len(text) <= documents.RESULT_CHARS + 200
        assert text.count("…") == 5
        assert "No passage" in documents.result_text("zebra", [])
        tool = documents.SearchDocuments(tools.LibraryConfig(tmp_path / "library.db", 1))
        with pytest.raises(tools.ToolError):
            tool.run('{"query": ""}')
        assert tool.run('{"query": "zebra"}').text.startswith("No passage")

    def test_a_file_name_that_is_not_utf8_reaches_the_model_with_a_replacement_character(
        self, tmp_path: Path
    ) -> None:
        """What the model reads of a file's name is text a JSON request can carry."""
        from llamachat.library.index import LibraryStore
        from llamachat.tools import documents

        messy = messy_folder(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        store.index(store.attach(1, messy.root))
        hit = store.search("vicunas", 1)[0]
        store.close()
        assert "caf\N{REPLACEMENT CHARACTER}.txt" in documents.source(hit)
        documents.result_text("vicunas", [hit]).encode("utf-8")

    def test_window_search_documents_waits_for_the_library_the_first_message_brought(
        self, chat_window, router, qtbot, tmp_path: Path
    ) -> None:
        """A folder added to a new chat is attached and read with the first message; the
        model's search_documents in that very reply waits for it and finds the passage."""
        root = make_zebra_folder(tmp_path / "docs")
        window, _history = chat_window()
        window.libraries.add_folders([root])
        router.script(
            Reply(tool_calls=[ToolCall("search_documents", '{"query": "zebra division"}')]),
            Reply(content="42 million."),
        )
        send_and_wait(qtbot, window, "How did the zebra division do?")
        result = router.chat_requests()[-1].json["messages"][-1]
        assert result["role"] == "tool" and "42 million" in result["content"], result
        assert ">zebra.md (Zebra)</a>" in library_sources(window)
