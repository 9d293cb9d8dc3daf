"""The tests of `llamachat.ui.models.warm_start`."""

from __future__ import annotations

import pytest

from llamachat.config import Config
from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.history.store import History
from llamachat.router.server import ManagedServer
from llamachat.tests.support import make_app, make_llama_chat, warmups
from llamachat.ui import ChatWindow
from llamachat.ui.models.warm_start import WarmStart


@pytest.fixture
def start_window(qtbot, tmp_path):
    """Open a chat window at start-up on a stored chat, against a router whose model is not
    loaded, llamachat's own server (a ManagedServer standing for it) or someone else's."""
    opened: list = []

    def make(cold: ScriptedRouter, *, managed: bool, warm_cache: bool = True, stored: bool = True):
        cfg = Config(
            router_url=cold.url,
            default_model="test-model",
            history_path=tmp_path / "history.db",
            prompts_dir=tmp_path / "prompts",
            warm_cache=warm_cache,
        )
        history = History(cfg.history_path)
        session = make_llama_chat(history) if stored else None
        history.mark_opened(session)  # the chat shown last: the window reopens on it
        app = make_app(cfg, history)
        window = ChatWindow(app)
        qtbot.addWidget(window)
        window.show()
        server = None
        opened.append((window, history, server))
        assert window.session_id == session
        # As at start: the configured URL is listed first, then the router is had (started).
        qtbot.waitUntil(lambda: bool(window.models()), timeout=5000)
        if managed:
            server = ManagedServer(
                cfg, port=1, log_path=tmp_path / "server.log", lock_path=tmp_path / "lock"
            )
            opened[-1] = (window, history, server)
        app.use_router(cold.url, server=server)
        return window, window.findChild(WarmStart)

    yield make
    for window, history, server in opened:
        window.close()
        window.app.close()
        history.close()
        if server is not None:
            server.log_file.close()


def loads(router: ScriptedRouter) -> list:
    """The load requests the router received."""
    return [r for r in router.requests if r.path.endswith("/models/load")]


class TestWarmStart:
    """At start-up the shown chat's model is loaded on llamachat's own server, then warmed."""

    def test_at_start_the_shown_chats_model_is_loaded_on_our_server_then_warmed(
        self, start_window, qtbot
    ) -> None:
        """The window reopens on a chat whose model is not loaded, on the server llamachat
        runs: its model is loaded once, said in the status bar, and once loaded the chat's
        warm-up (up to an empty question) goes out without waiting for the chat to be used."""
        with ScriptedRouter([Model("test-model", "unloaded")]) as cold:
            window, warm_start = start_window(cold, managed=True)
            qtbot.waitUntil(lambda: warm_start.decided, timeout=5000)
            assert warm_start.asked == "test-model"
            expected = [*window.chat.next_turn().messages(), {"role": "user", "content": ""}]
            qtbot.waitUntil(
                lambda: any(w.json["messages"] == expected for w in warmups(cold)), timeout=10000
            )
            assert len(loads(cold)) == 1 and loads(cold)[0].json == {"model": "test-model"}
            assert loads(cold)[0].received <= warmups(cold)[0].received
            assert warmups(cold)[0].query == {"autoload": "false"}

    @pytest.mark.parametrize(
        "managed, warm_cache, stored",
        [(False, True, True), (True, False, True), (True, True, False)],
    )
    def test_at_start_no_load_on_someone_elses_router_without_warm_cache_or_for_a_new_chat(
        self, start_window, qtbot, managed, warm_cache, stored
    ) -> None:
        """A router llamachat does not run keeps its memory to itself, with warm_cache off
        nothing is read ahead, and a new chat has little to read: no load, no warm-up."""
        with ScriptedRouter([Model("test-model", "unloaded")]) as cold:
            window, warm_start = start_window(
                cold, managed=managed, warm_cache=warm_cache, stored=stored
            )
            qtbot.waitUntil(lambda: warm_start.decided, timeout=5000)
            qtbot.waitUntil(lambda: not window.chat.warmer.busy())
            assert warm_start.asked == "" and loads(cold) == [] and warmups(cold) == []
            assert cold.status("test-model") == "unloaded"
