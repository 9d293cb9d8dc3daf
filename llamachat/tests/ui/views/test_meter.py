"""The tests of `llamachat.ui.views.meter`."""

from __future__ import annotations

from llamachat.dev.scripted_router import Model, Reply, ScriptedRouter
from llamachat.tests.support import provider_registry, send_and_wait
from llamachat.ui import tasks
from llamachat.ui.views.meter import ContextMeter


class TestMeter:
    """The context meter: how much of the model's context window the chat fills."""

    def test_chrome_window_meter_shows_context_use_after_a_reply(
        self, chat_window, router, qtbot
    ) -> None:
        """The meter shows the next request's tokens of the model's context (the chat so far,
        counted by the server); new and reopened chats show their own."""

        window, _history = chat_window()
        meter = window.meter
        qtbot.waitUntil(lambda: meter.context_size() == 4096)
        qtbot.waitUntil(lambda: window.chat.context.breakdown().exact)
        empty = meter.used()
        router.script(Reply(content="A short answer."))
        send_and_wait(qtbot, window, "measure me")
        first = window.session_id
        qtbot.waitUntil(lambda: window.chat.context.breakdown().exact)
        used = meter.used()
        assert used > empty
        assert meter.label.text() == f"{used:,} / 4,096"
        assert "test-model" in meter.toolTip() and "earlier messages" in meter.toolTip()
        window.composer.set_text("x " * 14_000)
        assert meter.will_overflow() and meter.state == "over"
        window.composer.clear()

        window.new_session()
        qtbot.waitUntil(lambda: meter.used() == empty)
        window.open_session(first)
        qtbot.waitUntil(lambda: meter.used() == used)

    def test_meter_shows_usage_of_the_models_context_and_warns_before_overflow(
        self,
        qtbot,
    ) -> None:

        with ScriptedRouter([Model("qwen", "loaded", n_ctx=4096), Model("smol", n_ctx=2048)]) as r:
            registry = provider_registry(r.url)
            meter = ContextMeter(registry)
            qtbot.addWidget(meter)
            assert meter.accessibleName() == "Context meter"
            meter.set_model("qwen")
            qtbot.waitUntil(lambda: meter.context_size() == 4096)
            meter.update_from_stats({"usage": {"total_tokens": 1000}, "timings": {}})
            assert meter.used() == 1000 and meter.label.text() == "1,000 / 4,096"
            assert "Context of qwen: 1,000 of 4,096 tokens used" in meter.toolTip()
            meter.set_draft("x" * 10_000)
            assert not meter.will_overflow() and meter.warning() == ""
            meter.set_draft("x" * 11_000)
            assert meter.will_overflow()
            assert "may not fit" in meter.label.text()
            assert meter.toolTip().startswith("The next message may not fit: qwen's context")
            meter.update_from_stats({"timings": {"cache_n": 100, "prompt_n": 20, "predicted_n": 5}})
            assert meter.used() == 125
            meter.set_model("smol")
            qtbot.waitUntil(lambda: tasks.manager().running() == 0)
            assert meter.context_size() is None and "smol" in meter.toolTip()
            props = [q for q in r.requests if q.path == "/props"]
            assert [q.query for q in props] == [
                {"model": "qwen", "autoload": "false"},
                {"model": "smol", "autoload": "false"},
            ]
            assert r.status("smol") == "unloaded"
            registry.close()
