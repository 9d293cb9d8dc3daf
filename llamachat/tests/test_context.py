"""The tests of `llamachat.context`."""

from __future__ import annotations

import dataclasses

import pytest

from llamachat import context, turn
from llamachat.config import Config
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.skills import SkillStore
from llamachat.tests.support import (
    SMOL_ID,
    mcp_time_toml,
    mcp_window,
    model_status,
    quick_ask,
    run_llamachat,
    send_and_wait,
    skill_md,
    subprocess_config_file,
    write_skill,
)
from llamachat.tools import skill_tools
from llamachat.ui.skills.skills_panel import SkillsPanel
from llamachat.ui.views.composer import file_attachment


class TestContext:
    """How much of the context the next request takes: counted, checked and shown."""

    def test_context_meter_total_is_the_prompt_the_router_reads(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """Every part is counted (a skill, the history, the draft, an attachment, tools): the
        meter's total is the router's prompt_n + cache_n for the request that follows."""

        window, history = chat_window()
        watch, meter = window.chat.context, window.meter
        qtbot.waitUntil(lambda: meter.context_size() == 4096)
        send_and_wait(qtbot, window, "/weather hello")
        notes = tmp_path / "notes.txt"
        notes.write_text("Rain in Paris all week, 12 degrees.\n", encoding="utf-8")
        window.composer.add_attachment(file_attachment(notes, images=False))
        window.composer.set_text("What should I wear today?")
        qtbot.waitUntil(lambda: watch.breakdown().exact and watch.breakdown().get("user") > 0)

        parts = dict(watch.breakdown().parts)
        assert {"system", "skill:weather", "history", "user", "attachment:notes.txt"} <= set(parts)
        assert parts["tools"] > 0 and parts["template"] > 0
        tip = meter.toolTip()
        for label in ("skill weather", "earlier messages", "attachment notes.txt", "reply reserve"):
            assert label in tip, label
        counted = meter.used()
        assert meter.label.text() == f"{counted:,} / 4,096"

        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        timings = history.messages(window.session_id)[-1]["timings"]
        read = timings["prompt_n"] + timings["cache_n"]
        assert abs(counted - read) <= 0.02 * read, (counted, read, timings, watch.breakdown())
        assert timings["cache_n"] > 0  # the byte-stable prefix was reused

    def test_context_meter_counts_the_mcp_tools_a_reply_is_offered(
        self, chat_window, router, qtbot, tmp_path
    ) -> None:
        """An MCP server's tools are counted once it is up (its first turn starts it); the
        total is still the router's prompt for the request that follows."""

        window, history = mcp_window(chat_window, router, tmp_path, mcp_time_toml())
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 4096 and watch.breakdown().exact)
        without = watch.breakdown().get("tools")
        send_and_wait(qtbot, window, "hello")
        qtbot.waitUntil(
            lambda: watch.breakdown().exact and watch.breakdown().get("tools") > without,
            timeout=30_000,
        )
        window.composer.set_text("What time is it?")
        qtbot.waitUntil(lambda: watch.breakdown().exact and watch.breakdown().get("user") > 0)
        counted = window.meter.used()
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=30_000)
        sent = router.chat_requests()[-1].json
        assert "time_get_current_time" in [t["function"]["name"] for t in sent["tools"]]
        timings = history.messages(window.session_id)[-1]["timings"]
        assert counted == timings["prompt_n"] + timings["cache_n"]

    def test_context_quick_window_refuses_what_cannot_fit_and_keeps_the_question(
        self, quick, router, qtbot
    ) -> None:
        """The quick window checks before sending: it says why, the question stays; the
        answer before does not count against the next question."""

        router.models["test-model"].n_ctx = 1024
        window, _history = quick(default_model="test-model")
        window.present()
        qtbot.waitUntil(lambda: window.chat.context.context_size() == 1024)
        quick_ask(qtbot, window, "word " * 300)
        asked = len(router.chat_requests())
        long = "word " * 900
        window.composer.set_text(long)
        window.send()
        assert len(router.chat_requests()) == asked and window.composer.text() == long
        assert "Not sent" in window.notice.text() and "1,024" in window.notice.text()
        window.composer.set_text("word " * 300)
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        assert len(router.chat_requests()) == asked + 1

    def test_context_ask_print_refuses_what_cannot_fit_with_exit_2(self, router, tmp_path) -> None:
        """`ask --print` checks too: exit 2, the numbers on stderr, nothing sent."""

        router.models["test-model"].n_ctx = 512
        config = subprocess_config_file(tmp_path, router.url, 'default_model = "test-model"\n')
        done = run_llamachat(config, "ask", "--print", "word " * 600)
        assert done.returncode == 2, done.stderr
        assert "Not sent" in done.stderr and "512" in done.stderr and "message:" in done.stderr
        assert router.chat_requests() == [] and done.stdout == ""

    def test_context_skills_catalog_shortens_descriptions_then_leaves_skills_out(
        self, tmp_path, qtbot
    ) -> None:
        """The load_skill catalog keeps to its budget: shorter descriptions first, then skills
        left out (of the catalog and the enum), which the Skills panel lists."""

        root = tmp_path / "skills"
        for n in range(10):
            write_skill(root, f"skill-{n:02}", skill_md(f"skill-{n:02}", "Does things. " * 30))
        store = SkillStore(root)

        def catalog(max_chars: int | None) -> tuple[str, list[str]]:
            schema = store.tool_schema(max_chars=max_chars)
            function = schema["function"]
            return function["description"], function["parameters"]["properties"]["name"]["enum"]

        full, names = catalog(None)
        short, short_names = catalog(800)
        assert short_names == names and len(short) < len(full)
        assert "- skill-00: Does things." in short and store.left_out(800) == []
        tight, kept = catalog(60)
        left = store.left_out(60)
        assert kept and left and kept + left == names
        assert all(f"- {name}" in tight for name in kept) and left[0] not in tight

        cfg = Config(skills_dir=root)
        turned = turn.build_turn(cfg, model="m", system=(), n_ctx=2048, store=store)
        assert skill_tools.catalog_budget(cfg, 2048) == int(2048 * 0.02 / 0.3) == 136
        assert turned.offer == (store.tool_schema(max_chars=136),)
        panel = SkillsPanel(store, list, import_dir=root, catalog_budget=lambda: 60)
        qtbot.addWidget(panel)
        assert panel.left_out() == left and panel.left_out_label.isVisibleTo(panel)

    def test_context_without_a_tokenizer_estimates_and_learns_from_usage(self, router) -> None:
        """A server with no /tokenize is asked once; estimates follow the usage it reports."""

        client = Client(router.url + "/elsewhere")  # every llama.cpp endpoint answers 404
        tokenizer = context.Tokenizer(client, "test-model")
        assert tokenizer.count("one two three") == (round(13 * context.TOKENS_PER_CHAR), False)
        assert not tokenizer.can_count
        asked = len(router.requests)
        assert tokenizer.count("four five")[1] is False and len(router.requests) == asked
        tokenizer.learn(1000, 500)
        assert tokenizer.tokens_per_char == 0.5 and tokenizer.estimate("x" * 10) == 5
        client.close()

    @pytest.mark.real_router
    def test_context_real_router_counts_the_prompt_and_refuses_what_cannot_fit(
        self, chat_window, real_router, qtbot
    ) -> None:
        """SmolLM2 at --ctx-size 2048: the meter's total for a request is llama-server's
        prompt_n + cache_n within 2%; a message too long is refused and kept; the stream
        reports the prompt's progress."""

        client = Client(real_router.url)
        models = Models(client)
        # The session's router may hold SmolLM2 loaded by an earlier test: load it only if not.
        info = models.get(SMOL_ID)
        if info is None or info.status not in ("loaded", "loading"):
            models.load(SMOL_ID)
        assert models.wait_until_loaded(SMOL_ID, timeout=60).status == "loaded"
        window, history = chat_window(url=real_router.url, default_model=SMOL_ID)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048, timeout=10_000)
        window.chat.load_skill("weather")
        window.composer.set_text("Tell me about the history of Paris in three sentences.")
        # A busy machine may keep a count from the server: the watch counts it again.
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=60_000)
        counted = window.meter.used()

        request = dataclasses.replace(
            window.chat.next_turn(),
            question=turn.user_parts(window.composer.text(), [], images=False),
        )
        # Two tokens: the prompt is read whole, and no tool call can be finished.
        brief = dataclasses.replace(request, params={**request.params, "max_tokens": 2})
        events = list(client.stream_chat(brief))
        client.close()
        timings = next(value for kind, value in events if kind == "stats")["timings"]
        read = timings["prompt_n"] + timings["cache_n"]
        offered = [tool["function"]["name"] for tool in request.offer]
        assert abs(counted - read) <= 0.02 * read, (
            counted,
            read,
            timings,
            watch.breakdown(),
            offered,
        )
        progress = [value for kind, value in events if kind == "progress"]
        assert progress and progress[-1]["processed"] == progress[-1]["total"] == read

        long = "word " * 2500
        window.composer.set_text(long)
        qtbot.waitUntil(lambda: window.meter.state == "over", timeout=30_000)
        window.send()
        assert window.overflow.isVisible() and window.composer.text() == long
        assert window.session_id is None and history.list_sessions() == []

    @pytest.mark.real_router
    def test_context_real_router_smollm2_is_sent_no_tools(
        self, chat_window, real_router, qtbot
    ) -> None:
        """llama-server says SmolLM2's template takes no tools (chat_template_caps): once it
        is loaded the meter knows its size and the request offers no tools."""

        models = Models(Client(real_router.url))
        if model_status(real_router.url, SMOL_ID) != "loaded":
            models.load(SMOL_ID)
        assert models.wait_until_loaded(SMOL_ID, timeout=60).status == "loaded"
        assert models.takes_tools(SMOL_ID) is False
        window, _history = chat_window(url=real_router.url, default_model=SMOL_ID)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048 and not watch.takes_tools())
        assert window.chat.next_turn().tools == ()
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=30_000)
        assert watch.breakdown().get("tools") == 0
