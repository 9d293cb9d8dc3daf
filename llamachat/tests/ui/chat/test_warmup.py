"""The tests of `llamachat.ui.chat.warmup`."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from llamachat.config import Config, ProviderConfig
from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.history.store import History
from llamachat.router.server import ManagedServer
from llamachat.tests.support import (
    SMOL_ID,
    make_app,
    make_llama_chat,
    real_assets,
    send_and_wait,
    smol_models_folder,
    type_message,
    warmups,
)
from llamachat.ui import ChatWindow, tasks

_READ_RE = re.compile(r"prompt eval time = +[\d.]+ ms / +(\d+) tokens")


class TestWarmup:
    """The prompt cache kept warm: the server reads a chat ahead of the next message."""

    def test_warm_cache_opening_a_chat_warms_it_and_send_reads_only_the_new_message(
        self, chat_window, router, qtbot
    ) -> None:
        """Opening a stored chat whose model is loaded has the server read it ahead: the
        request the next message makes up to an empty question, max_tokens 0, autoload=false.
        Send then reads only the new message, and the meter says what the server holds."""

        window, history = chat_window(warm_cache=True)
        session = make_llama_chat(history)
        window.open_session(session)
        expected = [*window.chat.next_turn().messages(), {"role": "user", "content": ""}]
        qtbot.waitUntil(lambda: any(w.json["messages"] == expected for w in warmups(router)))
        warm = warmups(router)[-1]
        assert warm.query == {"autoload": "false"}
        qtbot.waitUntil(lambda: not window.chat.warmer.busy())
        held = window.chat.warmer.in_cache()
        assert held is not None and held > 500
        qtbot.waitUntil(lambda: "in cache: " in window.meter.toolTip())

        send_and_wait(qtbot, window, "And alpacas?")
        assert warmups(router)[-1] is warm  # typing changed nothing the next request starts with
        timings = history.messages(session)[-1]["timings"]
        assert timings["cache_n"] >= held - 15 and timings["prompt_n"] < 15

    def test_warm_cache_warms_again_once_the_server_says_its_template_takes_no_tools(
        self, chat_window, qtbot
    ) -> None:
        """A warm-up sent before `/props` said the template takes no tools offered the
        skills' tool: once it says so the chat is warmed again without tools, so Send reads
        only the new message, not the whole chat again."""

        with ScriptedRouter([Model("test-model", "loaded", tools=False)], props_delay=1.0) as slow:
            window, history = chat_window(url=slow.url, warm_cache=True)
            session = make_llama_chat(history)
            window.open_session(session)
            qtbot.waitUntil(lambda: bool(warmups(slow)), timeout=10000)
            assert "tools" in warmups(slow)[0].json  # sent before the server said
            qtbot.waitUntil(lambda: "tools" not in warmups(slow)[-1].json, timeout=10000)
            qtbot.waitUntil(lambda: not window.chat.warmer.busy())

            send_and_wait(qtbot, window, "And alpacas?")
            assert "tools" not in slow.chat_requests()[-1].json
            assert history.messages(session)[-1]["timings"]["prompt_n"] < 15

    def test_warm_cache_stop_and_quit_cancel_it_and_typing_warms_once(
        self, chat_window, router, qtbot
    ) -> None:
        """Stop closes a warm-up's connection; the first keystroke warms again, and fast
        typing with pauses adds no request; closing the window cancels the one in flight."""

        router.prompt_ms_per_token = 3.0  # a 1,500-token chat: ~4 s to read
        window, history = chat_window(warm_cache=True)
        qtbot.waitUntil(lambda: len(warmups(router)) == 1 and not window.chat.warmer.busy())
        window.open_session(make_llama_chat(history))
        qtbot.waitUntil(lambda: len(warmups(router)) == 2)
        window.stop()
        assert not window.chat.warmer.busy()

        type_message(qtbot, window, "Tell me")
        qtbot.waitUntil(lambda: len(warmups(router)) == 3)
        type_message(qtbot, window, " more about alpacas")
        qtbot.waitUntil(lambda: not window.chat.warmer.busy(), timeout=20000)
        assert len(warmups(router)) == 3

        router.prompt_ms_per_token = 50.0
        window.load_skill("weather")  # the system message changed: all of it is read again
        qtbot.waitUntil(lambda: len(warmups(router)) == 4)
        window.close()
        assert not window.chat.warmer.busy()

    def test_warm_cache_follows_skill_chips_edits_and_version_switches(
        self, chat_window, router, qtbot
    ) -> None:
        """A skill loaded, a message being edited and another version shown each change
        what the next request starts with: each is warmed, up to where the next message goes."""

        window, history = chat_window(warm_cache=True)
        router.script(Reply(content="Dolly."))
        send_and_wait(qtbot, window, "Name a llama.")

        def warmed(test) -> bool:
            return any(test(w.json["messages"]) for w in warmups(router))

        first = [("user", "Name a llama."), ("assistant", "Dolly."), ("user", "")]
        qtbot.waitUntil(
            lambda: warmed(lambda m: [(x["role"], x["content"]) for x in m[1:]] == first)
        )
        window.load_skill("weather")  # what a suggestion chip does
        qtbot.waitUntil(lambda: warmed(lambda m: "weather" in m[0]["content"] and len(m) == 4))

        question = history.messages(window.session_id)[0]["id"]
        window.edit_message(question)
        qtbot.waitUntil(lambda: warmed(lambda m: [x["role"] for x in m] == ["system", "user"]))
        router.script(Reply(content="Alpaca."))
        window.composer.set_text("Name an alpaca.")
        window.send()
        qtbot.waitUntil(lambda: not window.is_streaming())
        shown = len(warmups(router))
        assert window.chat.show_version(question)
        qtbot.waitUntil(
            lambda: any(
                [(x["role"], x["content"]) for x in w.json["messages"][1:]] == first
                for w in warmups(router)[shown:]
            )
        )

    def test_warm_cache_never_loads_a_model_and_warms_it_once_loaded(
        self, chat_window, qtbot
    ) -> None:
        """An unloaded model is not warmed (nothing is sent); once it finished loading it is,
        with autoload=false on the wire."""

        with ScriptedRouter([Model("test-model", "unloaded")]) as cold:
            window, _history = chat_window(url=cold.url, warm_cache=True)
            window.chat.warmer.trigger(0)
            qtbot.waitUntil(lambda: not window.chat.warmer.busy())
            assert cold.chat_requests() == [] and cold.status("test-model") == "unloaded"
            window.model_picker.load("test-model")
            qtbot.waitUntil(lambda: len(warmups(cold)) == 1, timeout=10000)
            assert warmups(cold)[0].query == {"autoload": "false"}
            window.close()

    def test_warm_cache_skips_a_providers_model_unless_the_setting_says_so(
        self, conversation, router, qtbot
    ) -> None:
        """A provider bills for what it reads: its models are warmed only with
        warm_cache_providers (and without the router's autoload query)."""

        cloud = ProviderConfig("cloud", router.url + "/v1")
        chat, _history = conversation(cfg={"warm_cache": True, "providers": (cloud,)})
        chat.model = "cloud/test-model"
        qtbot.waitUntil(lambda: not chat.warmer.busy())
        assert router.chat_requests() == []

        settings = {"warm_cache": True, "warm_cache_providers": True, "providers": (cloud,)}
        billed, _history = conversation(cfg=settings)
        billed.model = "cloud/test-model"
        qtbot.waitUntil(lambda: len(warmups(router)) == 1 and not billed.warmer.busy())
        warm = warmups(router)[0]
        assert warm.json["model"] == "test-model" and warm.query == {}

    def test_warm_cache_send_during_a_warm_up_waits_for_it_and_reads_only_the_message(
        self, chat_window, router, qtbot
    ) -> None:
        """Send while the chat is being read ahead: the warm-up is not cancelled (the server
        would read it all the same) and the request goes once it ended, reading only the
        new message."""

        router.prompt_ms_per_token = 2.0
        window, history = chat_window(warm_cache=True)
        qtbot.waitUntil(lambda: len(warmups(router)) == 1 and not window.chat.warmer.busy())
        session = make_llama_chat(history)
        window.open_session(session)
        qtbot.waitUntil(lambda: len(warmups(router)) == 2)
        window.composer.set_text("And alpacas?")
        window.send()
        assert window.is_streaming() and window.chat.warmer.busy()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=20000)
        warm, sent = warmups(router)[1], router.chat_requests()[-1]
        assert sent.json.get("max_tokens") != 0 and sent.received >= warm.finished
        assert router.disconnects == 0
        assert history.messages(session)[-1]["timings"]["prompt_n"] < 15

    def test_warm_cache_on_our_server_saves_a_chat_when_left_not_after_each_reply(
        self, qtbot, tmp_path: Path, caplog
    ) -> None:
        """On llamachat's own server a chat's slot is not written after a warm-up or a
        reply (the running server keeps it in RAM), but when the chat is left; left again
        unchanged, it is not written twice."""

        caplog.set_level(logging.INFO, logger="llamachat.router.slot_cache")
        history, session, models = _stored_chat(tmp_path)
        window, server = _window_on_our_server(qtbot, tmp_path, history, session, models, "first")
        files = server.slot_files
        assert files is not None
        warmer = window.chat.warmer

        def warmed() -> bool:
            return warmer.in_cache() is not None and not warmer.busy()

        def saves() -> int:
            return sum("saved" in r.getMessage() for r in caplog.records)

        try:
            qtbot.waitUntil(warmed, timeout=120_000)
            send_and_wait(qtbot, window, "And alpacas?")
            qtbot.waitUntil(warmed, timeout=60_000)  # the reply read ahead too
            assert files.total_bytes() == 0, server.log_file.tail(4000)

            window.new_session()  # the chat is left: its slot saved, before the next warm-up
            qtbot.waitUntil(lambda: files.total_bytes() > 0, timeout=60_000)
            kept = sorted(p.name for p in files.folder.iterdir())
            assert len(kept) == 1 and kept[0].startswith(f"chat-{session}-"), kept

            assert window.open_session(session)
            qtbot.waitUntil(warmed, timeout=60_000)
            window.new_session()  # left again, unchanged: its file is there already
            qtbot.waitUntil(lambda: tasks.manager().running() == 0 and not warmer.busy())
            assert sorted(p.name for p in files.folder.iterdir()) == kept
            assert saves() == 1
        finally:
            window.close()
            window.app.close()
            server.stop()
            history.close()

    def test_warm_cache_on_our_server_restores_the_chat_read_before_a_restart(
        self, qtbot, tmp_path: Path
    ) -> None:
        """On llamachat's own server, what a warm-up read is saved to disk when llamachat
        quits (which waits for it); after the server restarted, reopening the chat restores
        it: the warm-up reads next to nothing (the real llama-server's own count) and Send
        only the new message."""

        history, session, models = _stored_chat(tmp_path)

        def read(server: ManagedServer) -> list[int]:
            return [int(n) for n in _READ_RE.findall(server.log_file.tail(200_000))]

        window, server = _window_on_our_server(qtbot, tmp_path, history, session, models, "first")
        files = server.slot_files
        assert files is not None
        try:
            # At start the chat's model is loaded and the chat read ahead, not saved yet.
            qtbot.waitUntil(lambda: window.chat.warmer.in_cache() is not None, timeout=120_000)
            assert read(server)[0] > 500, server.log_file.tail(4000)
            assert files.total_bytes() == 0
        finally:
            # Quitting: the window closes (the chat is left), the App waits for the save.
            window.close()
            window.app.close()
            server.stop()
        assert files.total_bytes() > 0, server.log_file.tail(4000)

        window, server = _window_on_our_server(qtbot, tmp_path, history, session, models, "second")
        try:
            qtbot.waitUntil(lambda: window.chat.warmer.in_cache() is not None, timeout=60_000)
            # Restored, not read again (the server's log says why not, if it was).
            assert read(server) and read(server)[0] < 30, server.log_file.tail(4000)
            send_and_wait(qtbot, window, "And alpacas?")
            timings = history.messages(session)[-1]["timings"]
            assert timings["prompt_n"] < 30 and timings["cache_n"] > 500
        finally:
            window.close()
            window.app.close()
            server.stop()
            history.close()


def _stored_chat(tmp_path: Path) -> tuple[History, int, Path]:
    """A history holding a SmolLM2 chat of ~800 tokens, opened last; the models folder."""

    _binary, model = real_assets()
    models = smol_models_folder(tmp_path, model)
    history = History(tmp_path / "history.db")
    session = make_llama_chat(history, exchanges=12)
    history.set_model(session, SMOL_ID)
    history.mark_opened(session)
    return history, session, models


def _window_on_our_server(
    qtbot, tmp_path: Path, history: History, session: int, models: Path, label: str
) -> tuple[ChatWindow, ManagedServer]:
    """A window reopened on the history's last chat, `session`, on a fresh server llamachat
    runs."""

    server_cfg = Config(models_dir=models, server_args=("--ctx-size", "4096", "-t", "2"))
    server = ManagedServer(
        server_cfg, log_path=tmp_path / f"{label}.log", lock_path=tmp_path / "lock"
    )
    server.start()
    assert server.wait_ready(60), server.log_file.tail()
    cfg = Config(
        router_url=server.url,
        default_model=SMOL_ID,
        history_path=tmp_path / "history.db",
        prompts_dir=tmp_path / "prompts",
        skills_dir=tmp_path / "skills",
        warm_cache=True,
        model_params={SMOL_ID: {"max_tokens": 4}},
    )
    app = make_app(cfg, history)
    app.use_router(server.url, server=server)
    window = ChatWindow(app)
    qtbot.addWidget(window)
    window.show()
    assert window.session_id == session
    return window, server


class TestWarmupForCompare:
    """The models picked in the Compare chooser: each loaded one reads the chat ahead too."""

    @pytest.fixture
    def router(self):
        """A scripted router with two loaded models and one it has not loaded."""

        models = [Model(name, "loaded") for name in ("test-model", "alpha")]
        with ScriptedRouter([*models, Model("smol", "unloaded")]) as scripted:
            yield scripted

    def test_warm_cache_warms_each_loaded_model_picked_to_compare(
        self, conversation, router, qtbot
    ) -> None:
        """Picked to compare, a loaded model is warmed after the chat's, once, and an
        unloaded one not at all (never a load); comparing then has each loaded model read
        only the question."""

        chat, history = conversation(cfg={"warm_cache": True}, model_status=router.status)
        chat.open_session(make_llama_chat(history))
        qtbot.waitUntil(lambda: len(warmups(router)) == 1 and not chat.warmer.busy())
        chat.warmer.also(["test-model", "alpha", "smol"])
        qtbot.waitUntil(lambda: len(warmups(router)) == 2 and not chat.warmer.busy())
        chat.warmer.also(["test-model", "alpha", "smol"])  # a tick more: nothing to warm
        chat.warmer.statuses_changed()
        qtbot.waitUntil(lambda: not chat.warmer.busy())
        assert [w.json["model"] for w in warmups(router)] == ["test-model", "alpha"]
        assert all(w.query == {"autoload": "false"} for w in warmups(router))
        assert router.status("smol") == "unloaded"

        chat.warmer.also(())
        with qtbot.waitSignal(chat.comparer.ended, timeout=15000):
            assert chat.comparer.ask("And alpacas?", ["test-model", "alpha"]) == "sent"
        for message_id in chat.comparer.current.message_ids:
            timings = next(m for m in _rows(history, chat) if m["id"] == message_id)["timings"]
            assert timings["cache_n"] > 500 and timings["prompt_n"] < 15


def _rows(history, chat) -> list[dict]:
    """Every message of the chat's session, on every branch."""

    return history.export_json(chat.session_id)["messages"]
