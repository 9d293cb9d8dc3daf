"""The tests of `llamachat.ui.chat.comparison`."""

from __future__ import annotations

import time

import pytest

from llamachat import turn
from llamachat.config import Config
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter, ToolCall
from llamachat.history.store import History
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.router.server import ManagedServer
from llamachat.tests.support import make_app, make_zebra_folder, real_assets
from llamachat.ui.chat import comparison as compare
from llamachat.ui.chat.compare_fit import CompareFit
from llamachat.ui.chat.conversation import Conversation

FOUR = ("alpha", "beta", "gamma", "delta")


@pytest.fixture
def router():
    """A scripted router with four loaded models and one it must load first."""

    models = [Model(name, "loaded") for name in FOUR] + [Model("smol", "unloaded")]
    with ScriptedRouter(models, load_delay=0.2) as scripted:
        yield scripted


class TestComparison:
    """One request sent to several models, each answer a version of one reply."""

    def test_two_models_answer_side_by_side_as_versions_of_one_reply(
        self, conversation, router, qtbot
    ) -> None:
        """The same request (but the model's name) goes to both; each answer is saved as a
        version of the reply to the question, and choosing one makes it the chat's."""

        chat, history = conversation()
        router.script_for("alpha", Reply(content=["From ", "alpha."]))
        router.script_for("beta", Reply(content=["From ", "beta."]))
        started: list = []
        chat.comparer.started.connect(started.append)
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Which is best?", ["alpha", "beta"]) == compare.SENT
            assert chat.is_streaming()
        comparison = started[0]
        assert comparison.statuses == ["complete", "complete"]
        assert not chat.is_streaming()

        bodies = [r.json for r in router.chat_requests()]
        assert sorted(b["model"] for b in bodies) == ["alpha", "beta"]
        assert bodies[0]["messages"] == bodies[1]["messages"]
        assert {k: v for k, v in bodies[0].items() if k != "model"} == {
            k: v for k, v in bodies[1].items() if k != "model"
        }

        alpha_id, beta_id = comparison.message_ids
        rows = history.messages(chat.session_id)
        question = rows[0]
        assert question["content"] == "Which is best?"
        reply = rows[-1]
        assert reply["parent_id"] == question["id"]
        assert sorted(reply["versions"]) == sorted([alpha_id, beta_id])

        path = comparison.choose(0)
        assert path is not None
        assert [(m["role"], m["content"], m["model"]) for m in path] == [
            ("user", "Which is best?", "test-model"),
            ("assistant", "From alpha.", "alpha"),
        ]
        assert history.messages(chat.session_id)[-1]["id"] == alpha_id
        assert comparison.choose(1)[-1]["content"] == "From beta."

    def test_each_model_gets_its_own_parameters_over_the_same_messages(
        self, conversation, router, qtbot
    ) -> None:
        """The messages are built once; each column's parameters are its model's config,
        then the chat's (which wins for every model)."""

        chat, _history = conversation(cfg={"model_params": {"beta": {"temperature": 0.1}}})
        chat.set_params({"top_k": 7})
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Q", ["alpha", "beta"]) == compare.SENT
        bodies = {r.json["model"]: r.json for r in router.chat_requests()}
        assert bodies["alpha"]["messages"] == bodies["beta"]["messages"]
        assert bodies["beta"]["temperature"] == 0.1 and "temperature" not in bodies["alpha"]
        assert bodies["alpha"]["top_k"] == bodies["beta"]["top_k"] == 7

    def test_compare_again_adds_versions_of_the_same_reply(
        self, conversation, router, qtbot
    ) -> None:
        """Regenerate of a compared reply: its models are known from its versions, and
        comparing again answers the same question (no new one), as more versions."""

        chat, history = conversation()
        started: list = []
        chat.comparer.started.connect(started.append)
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Q", ["alpha", "beta"]) == compare.SENT
        first = started[0]
        reply_id = first.message_ids[1]
        assert chat.comparer.compared_models(reply_id) == ["alpha", "beta"]
        question_id = history.messages(chat.session_id)[0]["id"]
        router.script_for("alpha", Reply(content="alpha again"))
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.again(reply_id, ["alpha", "beta"]) == compare.SENT
        second = started[1]
        assert second.question_id == question_id
        rows = history.messages(chat.session_id)
        assert [m["role"] for m in rows] == ["user", "assistant"]
        assert sorted(rows[-1]["versions"]) == sorted(first.message_ids + second.message_ids)
        bodies = [r.json for r in router.chat_requests()]
        assert bodies[2]["messages"] == bodies[0]["messages"]  # the same request again
        # A reply regenerated with another model is no comparison: a normal Regenerate.
        chat.model = "alpha"
        assert chat.submit("Next?") == compare.SENT
        qtbot.waitUntil(lambda: not chat.is_streaming(), timeout=10000)
        chat.model = "beta"
        with qtbot.waitSignal(chat.reply_ended, timeout=10000):
            assert chat.retry(history.messages(chat.session_id)[-1]["id"])
        last = history.messages(chat.session_id)[-1]
        assert len(last["versions"]) == 2
        assert chat.comparer.compared_models(last["id"]) == []

    def test_four_models_answer_at_once_and_stop_all_keeps_what_came(
        self, conversation, router, qtbot
    ) -> None:
        """Four loaded models stream at once (each request is out before any ended); Stop
        on the conversation stops every column, each keeping its text as "stopped"."""

        chat, history = conversation()
        for name in FOUR:
            router.script_for(name, Reply(content=[f"{name} ", "says ", "more"], stall_after=2))
        started: list = []
        chat.comparer.started.connect(started.append)
        assert chat.comparer.ask("Go", list(FOUR)) == compare.SENT
        comparison = started[0]
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 4, timeout=10000)
        assert comparison.statuses == ["streaming"] * 4
        assert chat.submit("Meanwhile?") == compare.BUSY  # one thing at a time
        assert chat.comparer.ask("Again?", ["alpha", "beta"]) == compare.BUSY
        qtbot.waitUntil(lambda: all(_texts(history, chat, comparison.message_ids)), timeout=10000)
        with qtbot.waitSignal(chat.comparer.ended, timeout=10000):
            assert chat.stop()
        router.release()
        assert comparison.statuses == ["stopped"] * 4
        stored = {r["id"]: r for r in _rows(history, chat)}
        for name, message_id in zip(FOUR, comparison.message_ids):
            assert stored[message_id]["status"] == "stopped"
            assert stored[message_id]["content"].startswith(name)

    def test_each_column_knows_when_its_request_was_written(
        self, conversation, router, qtbot
    ) -> None:
        """Every loaded model's request goes out at once, each stamped when the client wrote
        it to its socket (what the bench times), and each column's reply has its row."""

        chat, history = conversation()
        for name in FOUR:
            router.script_for(name, Reply(content=[f"{name} ", "more"], stall_after=1))
        started: list = []
        chat.comparer.started.connect(started.append)
        before = time.monotonic()
        assert chat.comparer.ask("Go", list(FOUR)) == compare.SENT
        comparison = started[0]
        replies = list(comparison.replies)
        assert all(reply is not None for reply in replies)
        qtbot.waitUntil(lambda: all(r.sent_at() is not None for r in replies), timeout=10000)
        assert all(before <= r.sent_at() <= time.monotonic() for r in replies)
        qtbot.waitUntil(lambda: len(router.chat_requests()) == 4, timeout=10000)
        assert sorted(r.json["model"] for r in router.chat_requests()) == sorted(FOUR)
        stored = {r["id"] for r in _rows(history, chat)}
        assert all(i in stored for i in comparison.message_ids)
        with qtbot.waitSignal(chat.comparer.ended, timeout=10000):
            assert chat.stop()
        router.release()

    def test_each_column_carries_what_a_normal_send_to_its_model_carries(
        self, conversation, router, qtbot, tmp_path
    ) -> None:
        """Skills installed (load_skill offered) and a library attached: the model that takes
        tools is offered them; the chat's own model, whose template takes none, gets the
        library's passages instead; a model not loaded, whose server has not said, is loaded
        first and then gets them too. Each column's request is the one a normal send to its
        model makes (the same question sent in a chat of that model)."""

        router.models["beta"].tools = False
        router.models["smol"].tools = False
        docs = make_zebra_folder(tmp_path / "docs")
        question = "How did the zebra division do?"
        chat = _chat_with_library(conversation, router, qtbot, "beta", docs)
        started: list = []
        chat.comparer.started.connect(started.append)
        with qtbot.waitSignal(chat.comparer.ended, timeout=20000):
            assert chat.comparer.ask(question, ["alpha", "beta", "smol"]) == compare.SENT
        assert started[0].statuses == ["complete"] * 3
        compared = {r.json["model"]: r.json for r in router.chat_requests()[-3:]}
        offered = [t["function"]["name"] for t in compared["alpha"]["tools"]]
        assert "load_skill" in offered and "search_documents" in offered
        for model in ("beta", "smol"):
            assert "tools" not in compared[model]
            assert "42 million" in compared[model]["messages"][-1]["content"]
        assert "42 million" not in str(compared["alpha"]["messages"])

        for model in ("alpha", "beta", "smol"):
            normal = _chat_with_library(conversation, router, qtbot, model, docs)
            with qtbot.waitSignal(normal.reply_ended, timeout=10000):
                assert normal.submit(question) == compare.SENT
            assert router.chat_requests()[-1].json == compared[model]

    def test_an_earlier_image_goes_to_the_model_that_reads_images_and_is_named_to_the_other(
        self, conversation, router, qtbot
    ) -> None:
        """An image sent earlier in the chat is replayed as an image to the column whose model
        reads images, and named as text to the one whose model does not, each as a normal
        send to that model replays it."""

        router.models["gamma"].modalities = ("text", "image")
        image = {"kind": "image", "name": "cat.png", "mime": "image/png", "data": PIXEL}

        def chat_on(model: str):
            chat, _history = conversation(images=lambda name: name == "gamma")
            chat.model = model
            router.script_for(model, Reply(content="A cat."))
            with qtbot.waitSignal(chat.reply_ended, timeout=10000):
                assert chat.submit("What is this?", [image]) == compare.SENT
            return chat

        chat = chat_on("alpha")
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("And its colour?", ["alpha", "gamma"]) == compare.SENT
        compared = {r.json["model"]: r.json["messages"] for r in router.chat_requests()[-2:]}
        seen = compared["gamma"][-3]["content"]
        assert isinstance(seen, list)
        assert {"type": "image_url", "image_url": {"url": PIXEL}} in seen
        named = compared["alpha"][-3]["content"]
        assert named == "What is this?\n\n[image cat.png not sent: this model does not read images]"

        for model in ("alpha", "gamma"):
            normal = chat_on(model)
            with qtbot.waitSignal(normal.reply_ended, timeout=10000):
                assert normal.submit("And its colour?") == compare.SENT
            assert router.chat_requests()[-1].json["messages"] == compared[model]

    def test_what_the_chooser_learned_sizes_each_request_as_a_send_to_its_model(
        self, conversation, router, qtbot, tmp_path
    ) -> None:
        """The chooser's count learns each pick's context size and whether its template
        takes tools: the small tool-less pick's request then leaves without tools and
        without asking again, its libraries' passages cut to its own context, as a send
        to it makes them."""

        router.models["beta"].tools = False
        router.models["beta"].n_ctx = 1024
        docs = tmp_path / "docs"
        docs.mkdir()
        for n in range(6):
            (docs / f"zebra{n}.md").write_text(
                f"# Zebra {n}\n\n" + f"The zebra division earned {n} million that year. " * 12
            )
        question = "How did the zebra division do?"
        chat = _chat_with_library(conversation, router, qtbot, "alpha", docs)
        fit = CompareFit(chat.builder, chat.context.context_size)
        with qtbot.waitSignal(fit.measured, timeout=15000):
            fit.measure(question, ["alpha", "beta"])
        assert chat.builder.tools_known("beta") and not chat.builder.takes_tools("beta")
        asked = len(router.requests)
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask(question, ["alpha", "beta"]) == compare.SENT
        compared = {r.json["model"]: r.json for r in router.chat_requests()[-2:]}
        props = [r for r in router.requests[asked:] if r.path == "/props"]
        assert props == [] and "tools" not in compared["beta"]
        passages = compared["beta"]["messages"][-1]["content"]
        assert "million" in passages and len(passages) < turn.excerpt_chars(4096)

        normal = _chat_with_library(conversation, router, qtbot, "beta", docs)
        qtbot.waitUntil(lambda: normal.context.context_size() == 1024, timeout=10000)
        with qtbot.waitSignal(normal.reply_ended, timeout=10000):
            assert normal.submit(question) == compare.SENT
        assert router.chat_requests()[-1].json == compared["beta"]

    def test_each_column_loads_a_skill_with_tools_of_its_own(
        self, conversation, router, qtbot
    ) -> None:
        """Both models load the same skill with load_skill: each gets its instructions (one
        column's load is not "already loaded" for the other)."""

        chat, _history = conversation()
        for model in ("alpha", "beta"):
            router.script_for(
                model,
                Reply(tool_calls=[ToolCall("load_skill", '{"name": "weather"}')]),
                Reply(content=f"{model} used it."),
            )
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Weather?", ["alpha", "beta"]) == compare.SENT
        results = {
            r.json["model"]: r.json["messages"][-1]["content"]
            for r in router.chat_requests()
            if r.json["messages"][-1]["role"] == "tool"
        }
        assert set(results) == {"alpha", "beta"}
        assert not any("already loaded" in text for text in results.values())

    def test_a_model_failing_mid_answer_leaves_the_others_going(
        self, conversation, router, qtbot
    ) -> None:
        """A column whose server errs after some text ends "error" with that text kept; the
        other columns complete, and the failed answer is a version too."""

        chat, history = conversation()
        router.script_for("alpha", Reply(content=["Fine ", "answer."]))
        router.script_for("beta", Reply(content=["Half ", "an ", "answer"], error_after=2))
        router.script_for("gamma", Reply(content=["Also ", "fine."]))
        started: list = []
        ended: list = []
        chat.comparer.started.connect(started.append)
        chat.comparer.started.connect(
            lambda c: c.column_ended.connect(lambda i, s, e: ended.append((i, s, e)))
        )
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Q", ["alpha", "beta", "gamma"]) == compare.SENT
        comparison = started[0]
        assert comparison.statuses == ["complete", "error", "complete"]
        error = next(e for i, s, e in ended if i == 1)
        assert error
        stored = {r["id"]: r for r in _rows(history, chat)}
        failed = stored[comparison.message_ids[1]]
        assert (failed["status"], failed["content"]) == ("error", "Half ")
        assert stored[comparison.message_ids[0]]["content"] == "Fine answer."
        assert stored[comparison.message_ids[2]]["content"] == "Also fine."

    def test_a_model_to_load_waits_for_the_others_and_runs_alone(
        self, conversation, router, qtbot
    ) -> None:
        """A model the router has not loaded is sent only once the loaded ones ended (a load
        must not push out a model another column answers with); its column says so."""

        chat, _history = conversation(model_status=router.status)
        router.script_for("alpha", Reply(content=["a ", "b"], rate=20))
        router.script_for("smol", Reply(content=["small ", "answer"]))
        seen: list = []
        at_start: list = []

        def follow(c) -> None:
            at_start.append((list(c.statuses), list(c.waiting)))
            c.column_started.connect(lambda i, _r: seen.append(("started", i)))
            c.column_ended.connect(lambda i, s, _e: seen.append(("ended", i, s)))

        chat.comparer.started.connect(follow)
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Hi", ["smol", "alpha"]) == compare.SENT
        assert at_start == [
            (["waiting", "streaming"], ["Waiting for alpha to finish: then smol loads.", ""])
        ]
        assert seen == [("ended", 1, "complete"), ("started", 0), ("ended", 0, "complete")]
        assert chat.comparer.current.loads == [True, False]
        assert router.status("smol") == "loaded"
        models = [r.json["model"] for r in router.chat_requests()]
        assert models == ["alpha", "smol"]
        assert chat.comparer.current.message_ids[0] is not None

    def test_blind_names_stay_hidden_until_a_pick_which_is_kept(
        self, conversation, router, qtbot
    ) -> None:
        """A blind comparison calls its columns "Model A", "Model B"... until one is chosen;
        that first pick is kept as a win over each model that answered (a failed one with
        no answer is not beaten), in the chat's project; choosing again counts no more."""

        chat, history = conversation()
        work = history.projects.create("Work")
        chat.new_session(history.projects.get(work))
        router.script_for("gamma", Reply(status=500))
        started: list = []
        chat.comparer.started.connect(started.append)
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Q", ["alpha", "beta", "gamma"], blind=True) == compare.SENT
        comparison = started[0]
        assert [comparison.label(i) for i in range(3)] == ["Model A", "Model B", "Model C"]
        assert comparison.choose(2) is None  # gamma failed before any answer: nothing to pick
        comparison.choose(1)
        assert [comparison.label(i) for i in range(3)] == ["alpha", "beta", "gamma"]
        assert history.picks.wins(work) == {("beta", "alpha"): 1}
        comparison.choose(0)
        assert history.picks.wins() == {("beta", "alpha"): 1}

    def test_a_comparison_not_blind_keeps_no_pick(self, conversation, router, qtbot) -> None:
        """Only blind picks count: with the names in sight, a pick says little."""

        chat, history = conversation()
        started: list = []
        chat.comparer.started.connect(started.append)
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("Q", ["alpha", "beta"]) == compare.SENT
        started[0].choose(0)
        assert history.picks.wins() == {}

    def test_a_comparison_needs_two_to_four_models(self, conversation, router, qtbot) -> None:
        """One model, or five, is not a comparison: nothing is saved or sent."""

        chat, _history = conversation()
        assert chat.comparer.ask("Q", ["alpha"]) == compare.NOT_SENT
        assert chat.comparer.ask("Q", [*FOUR, "smol"]) == compare.NOT_SENT
        assert chat.comparer.ask("  ", ["alpha", "beta"]) == compare.EMPTY
        assert chat.session_id is None and router.chat_requests() == []


@pytest.fixture
def two_smol_router(tmp_path):
    """The real llama-server router with `-np 2`, SmolLM2 under two preset names, both loaded."""

    _binary, model = real_assets()
    models = tmp_path / "models"
    models.mkdir()
    preset = tmp_path / "models-preset.ini"
    preset.write_text(
        "".join(f"[{name}]\nmodel = {model}\n" for name in SMOL_NAMES), encoding="utf-8"
    )
    cfg = Config(
        models_dir=models,
        models_preset=preset,
        server_args=("--ctx-size", "2048", "-t", "1", "-np", "2"),
    )
    server = ManagedServer(cfg, log_path=tmp_path / "server.log", lock_path=tmp_path / "lock")
    server.start()
    try:
        if not server.wait_ready(60):
            pytest.fail(f"llama-server did not start:\n{server.log_file.tail()}")
        listed = Models(Client(server.url))
        for name in SMOL_NAMES:
            listed.load(name)
        for name in SMOL_NAMES:
            listed.wait_until_loaded(name, timeout=120)
        yield server.url
    finally:
        server.stop()


SMOL_NAMES = ("smol-a", "smol-b")


class TestComparisonRealRouter:
    """Two preset names for SmolLM2 answer one question at once on the real router."""

    def test_two_smol_presets_answer_concurrently_as_two_versions(
        self, two_smol_router, qtbot, tmp_path
    ) -> None:
        """Both loaded, both are sent at once: the second's first token comes before the
        first's answer ends, and both answers are versions of the one reply."""

        models = Models(Client(two_smol_router))
        cfg = Config(
            router_url=two_smol_router,
            default_model=SMOL_NAMES[0],
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            skills_dir=tmp_path / "skills",
            manage_server=False,
            warm_cache=False,
        )
        history = History(cfg.history_path)
        app = make_app(cfg, history)
        chat = Conversation(
            app, model=SMOL_NAMES[0], model_status=lambda name: models.get(name).status
        )
        try:
            self._compare_both(chat, history, qtbot)
        finally:
            chat.stop()
            assert chat.threads.wait_all(10_000)
            app.close()
            history.close()

    def _compare_both(self, chat, history, qtbot) -> None:
        chat.set_params({"max_tokens": 48, "temperature": 0})
        started: list = []
        ends: dict[int, float] = {}
        chat.comparer.started.connect(started.append)
        chat.comparer.started.connect(
            lambda c: c.column_ended.connect(lambda i, _s, _e: ends.setdefault(i, time.monotonic()))
        )
        sent = time.monotonic()
        with qtbot.waitSignal(chat.comparer.ended, timeout=120_000):
            assert chat.comparer.ask("Name three colours.", list(SMOL_NAMES)) == compare.SENT
        comparison = started[0]
        assert comparison.statuses == ["complete", "complete"]
        stored = {r["id"]: r for r in _rows(history, chat)}
        answers = [stored[i] for i in comparison.message_ids]
        assert [a["model"] for a in answers] == list(SMOL_NAMES)
        assert all(a["content"].strip() for a in answers)
        firsts = [sent + a["timings"]["ttft_ms"] / 1000 for a in answers]
        assert max(firsts) < min(ends.values())  # both were answering at the same time
        assert sorted(history.messages(chat.session_id)[-1]["versions"]) == sorted(
            comparison.message_ids
        )


PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


def _chat_with_library(conversation, router, qtbot, model: str, docs) -> Conversation:
    """A chat of `model` (its server asked whether it takes tools) that said Hello, with the
    folder `docs` attached as its library and read."""

    chat, _history = conversation(model_status=router.status)
    chat.model = model
    router.script_for(model, Reply(content="Hello."))
    with qtbot.waitSignal(chat.reply_ended, timeout=15000):
        assert chat.submit("Hello") == compare.SENT
    qtbot.waitUntil(lambda: chat.builder.tools_known(model), timeout=10000)
    chat.app.libraries.attach(chat.session_id, docs)
    qtbot.waitUntil(lambda: not chat.app.libraries.busy(), timeout=20000)
    return chat


def _texts(history, chat, ids) -> list[str]:
    """The text saved so far of each reply in `ids` ('' for one not added yet)."""

    stored = {r["id"]: r for r in _rows(history, chat)}
    return [stored[i]["content"] if i in stored else "" for i in ids]


def _rows(history, chat) -> list[dict]:
    """Every message of the chat's session, on every branch."""

    return history.export_json(chat.session_id)["messages"]
