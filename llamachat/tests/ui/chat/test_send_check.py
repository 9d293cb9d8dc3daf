"""The tests of `llamachat.ui.chat.send_check`."""

from __future__ import annotations

import contextlib

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.router.client import Client, ServerError
from llamachat.router.models import Models
from llamachat.tests.support import SMOL_ID, make_wordy_chat
from llamachat.ui import tasks
from llamachat.ui.chat import context_watch


class TestSendCheck:
    """The check before a message leaves: counted first where only estimated, then the policy."""

    def test_send_counts_what_was_only_estimated_instead_of_refusing(
        self, chat_window, qtbot, monkeypatch
    ) -> None:
        """The estimate of a chat its model (not loaded) could not count says it does not
        fit; Send has the server count it first, loading the model, and sends it; counted,
        a message that does not fit is refused and put back (issue 38, item 3)."""
        monkeypatch.setattr(context_watch, "RETRIES", 0)
        with ScriptedRouter(
            [Model("test-model", "unloaded", n_ctx=2048, args=("--ctx-size", "2048"))]
        ) as cold:
            window, history = chat_window(url=cold.url)
            session = make_wordy_chat(history)
            window.open_session(session)
            qtbot.waitUntil(lambda: window.chat.context.context_size() == 2048)
            watch = window.chat.context
            qtbot.waitUntil(lambda: watch.request() is not None and tasks.manager().running() == 0)
            assert not watch.breakdown().exact
            assert watch.breakdown().total + watch.reserve() > 2048  # the estimate refuses
            cold.script(Reply(content="Fine."))
            window.composer.set_text("And then?")
            window.send()
            qtbot.waitUntil(lambda: len(cold.chat_requests()) == 1, timeout=5000)
            assert not window.overflow.isVisible()
            qtbot.waitUntil(lambda: not window.is_streaming())
            assert history.messages(session)[-1]["content"] == "Fine."

            long = "word " * 1500
            window.composer.set_text(long)
            window.send()
            qtbot.waitUntil(lambda: window.overflow.isVisible())
            assert "Not sent" in window.overflow.text.text()
            assert window.composer.text() == long and len(cold.chat_requests()) == 1

    def test_a_chat_estimated_while_smollm2_is_unloaded_is_counted_and_sent(
        self, chat_window, real_router, qtbot, monkeypatch
    ) -> None:
        """llama-server's router refuses counts (autoload=false) while SmolLM2 is not loaded
        and lists its --ctx-size 2048: a chat whose estimate is over is counted at Send
        (the model loads) and sent, not refused."""
        monkeypatch.setattr(context_watch, "RETRIES", 0)
        models = Models(Client(real_router.url))
        with contextlib.suppress(ServerError):  # "model is not running": as wanted
            models.unload(SMOL_ID)
        qtbot.waitUntil(lambda: models.get(SMOL_ID).status == "unloaded", timeout=30_000)
        window, history = chat_window(url=real_router.url, default_model=SMOL_ID)
        session = history.create_session("chat", SMOL_ID, prompt_name="Default")
        for n in range(6):
            history.add_message(session, "user", f"q{n} " + "internationalization " * 40)
            history.add_message(session, "assistant", f"a{n} " + "characterization " * 40)
        window.open_session(session)
        watch = window.chat.context
        qtbot.waitUntil(lambda: watch.context_size() == 2048, timeout=10_000)
        qtbot.waitUntil(lambda: watch.request() is not None and tasks.manager().running() == 0)
        assert not watch.breakdown().exact
        assert watch.breakdown().total + watch.reserve() > 2048  # the estimate would refuse
        window.chat.set_params({"max_tokens": 4})  # a few words are enough
        window.composer.set_text("Say yes.")
        window.send()
        qtbot.waitUntil(lambda: window.is_streaming(), timeout=60_000)
        assert not window.overflow.isVisible()
        qtbot.waitUntil(lambda: not window.is_streaming(), timeout=60_000)
        assert history.messages(session)[-1]["role"] == "assistant"
        assert history.messages(session)[-1]["content"]
        qtbot.waitUntil(lambda: watch.breakdown().exact, timeout=30_000)  # loaded: it counts
        # The session's router as the test found it: SmolLM2 not loaded.
        qtbot.waitUntil(lambda: _unloaded(models), timeout=30_000)


def _unloaded(models: Models) -> bool:
    """Unload SmolLM2 if it is loaded; True once it is not."""
    info = models.get(SMOL_ID)
    if info is not None and info.status == "loaded":
        with contextlib.suppress(ServerError):
            models.unload(SMOL_ID)
    info = models.get(SMOL_ID)
    return info is not None and info.status == "unloaded"
