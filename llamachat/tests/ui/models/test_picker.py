"""The tests of `llamachat.ui.models.picker`."""

from __future__ import annotations

import httpx
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QToolButton

from llamachat.config import ProviderConfig
from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.router.models import parse_model
from llamachat.tests.support import (
    add_router_models,
    combo_ids,
    provider_registry,
    send_and_wait,
    visible_widget_named,
)
from llamachat.ui.models.picker import ModelPicker, model_tooltip


class TestPicker:
    """The model picker: every model the router and providers offer, with its status."""

    def test_router_picker_shows_load_progress_from_events_then_loaded(self, qtbot) -> None:
        with ScriptedRouter([Model("qwen", "loaded"), Model("smol")], load_delay=1.0) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2 and picker.watching())
            qtbot.waitUntil(lambda: any(q.path == "/models/sse" for q in r.requests))
            picker.load("smol")
            qtbot.waitUntil(lambda: picker.progress("smol") == 0.5, timeout=5000)
            picker.set_current("smol")
            assert picker.status_label.text() == "Loading… 50%"
            assert (picker.busy.maximum(), picker.busy.value()) == (100, 50)
            qtbot.waitUntil(lambda: picker.status("smol") == "loaded", timeout=5000)
            picker.shutdown()
            registry.close()

    def test_router_picker_model_event_listeners_see_the_status_it_brings(self, qtbot) -> None:
        """A model's "loaded" event is said once the picker shows it loaded: the warm-up,
        which asks `status()` then, warms at once rather than at the next poll."""
        with ScriptedRouter([Model("smol")], load_delay=0.2) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            seen: list[tuple[str, str]] = []
            picker.model_event.connect(lambda e: seen.append((e.status, picker.status(e.model))))
            qtbot.waitUntil(lambda: picker.combo.count() == 1 and picker.watching())
            qtbot.waitUntil(lambda: any(q.path == "/models/sse" for q in r.requests))
            picker.load("smol")
            qtbot.waitUntil(lambda: ("loaded", "loaded") in seen, timeout=5000)
            assert all(heard == shown for heard, shown in seen if heard == "loaded")
            picker.shutdown()
            registry.close()

    def test_router_picker_tooltip_says_a_model_fits_only_with_the_rpc_workers(self, qtbot) -> None:
        with ScriptedRouter([Model("big"), Model("smol")]) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2)
            picker.set_fit(
                lambda info: "Fits only with the RPC workers" if info.id == "big" else ""
            )
            tips = {
                picker.combo.itemData(i): picker.combo.itemData(i, Qt.ItemDataRole.ToolTipRole)
                for i in range(picker.combo.count())
            }
            assert "Fits only with the RPC workers" in tips["big"]
            assert "RPC workers" not in tips["smol"]
            picker.shutdown()
            registry.close()

    def test_router_picker_without_event_stream_falls_back_to_polling(self, qtbot) -> None:
        with ScriptedRouter([Model("smol")], load_delay=0.3, events=False) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry, poll_ms=100)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: any(q.path == "/models/sse" for q in r.requests))
            qtbot.waitUntil(
                lambda: picker.feed.watch is not None and not picker.feed.watch.supported
            )
            picker.choose("smol")
            qtbot.waitUntil(lambda: picker.status("smol") == "loaded", timeout=5000)
            assert not picker.watching()
            assert len([q for q in r.requests if q.path == "/models/sse"]) == 1
            picker.shutdown()
            registry.close()

    @pytest.mark.real_router
    def test_real_router_broken_gguf_shows_failed_with_the_logs_reason(
        self, qtbot, real_router
    ) -> None:
        registry = provider_registry(real_router.url)
        picker = ModelPicker(registry, poll_ms=500)
        qtbot.addWidget(picker)
        picker.set_failure_log(real_router.server.load_failure)
        qtbot.waitUntil(lambda: "broken" in combo_ids(picker.combo), timeout=10000)
        picker.choose("broken")
        qtbot.waitUntil(lambda: picker.status("broken") == "failed", timeout=30000)
        # The router may say "failed" a moment before its log holds the child's last lines.
        qtbot.waitUntil(
            lambda: "GGUF" in picker.error("broken") or "failed to read" in picker.error("broken"),
            timeout=5000,
        )
        error = picker.error("broken")
        assert "exit code 1" in error
        assert picker.combo.itemText(picker.combo.findData("broken")).startswith("⚠")
        assert "failed to load" in picker.status_label.toolTip()
        picker.shutdown()
        registry.close()

    def test_router_delete_model_asks_first_and_says_why_it_cannot(self, qtbot) -> None:
        from llamachat.ui.models.download import delete_model

        models = [Model("qwen", "loaded"), Model("cached", removable=True)]
        with ScriptedRouter(models) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: "cached" in combo_ids(picker.combo))
            asked: list[str] = []
            said: list[str] = []

            def no(question: str) -> bool:
                asked.append(question)
                return False

            assert not delete_model(picker, picker, registry, "cached", ask=no, said=said.append)
            assert "Delete cached from the router's cache?" in asked[0]
            assert not any(q.method == "DELETE" for q in r.requests)
            delete_model(picker, picker, registry, "cached", ask=lambda q: True, said=said.append)
            qtbot.waitUntil(lambda: said == ["Deleted cached."])
            qtbot.waitUntil(lambda: "cached" not in combo_ids(picker.combo))
            delete_model(picker, picker, registry, "qwen", ask=lambda q: True, said=said.append)
            qtbot.waitUntil(lambda: len(said) == 2)
            assert said[1] == (
                "Could not delete qwen: model name=qwen is not removable (not from cache)"
            )
            assert [q.query for q in r.requests if q.method == "DELETE"] == [
                {"model": "cached"},
                {"model": "qwen"},
            ]
            picker.shutdown()
            registry.close()

    def test_chrome_window_model_statuses_shown_and_load_driven_from_picker(
        self, chat_window, router, qtbot
    ) -> None:
        """The window's picker shows each model's status; choosing an unloaded one loads it."""

        add_router_models(router, Model("smol", "unloaded", modalities=("text", "image")))
        router.load_delay = 0.4
        window, history = chat_window()
        combo = window.model_picker.combo
        qtbot.waitUntil(lambda: combo_ids(combo) == ["test-model", "smol"])
        assert [combo.itemText(i) for i in range(2)] == ["● test-model", "○ smol"]
        assert window.current_model() == "test-model"
        assert not any(q.path == "/models/load" for q in router.requests)

        combo.setCurrentIndex(combo.findData("smol"))
        assert window.current_model() == "smol"
        assert window.meter.model() == "smol"
        assert window.model_picker.status("smol") == "loading"
        assert window.model_picker.status_label.text() == "Loading…"
        assert window.model_picker.status_label.toolTip() == "Loading smol…"
        qtbot.waitUntil(lambda: window.model_picker.status("smol") == "loaded", timeout=10_000)
        assert combo.itemText(combo.findData("smol")) == "● smol"
        # Counting the meter's tokens never loads a model: only the picker does.
        counting = ("/tokenize", "/apply-template")
        assert [
            (q.path, q.json)
            for q in router.requests
            if q.method == "POST" and q.path not in counting
        ] == [("/models/load", {"model": "smol"})]
        assert all(
            q.query.get("autoload") == "false" for q in router.requests if q.path in counting
        )
        send_and_wait(qtbot, window, "hello")
        assert router.chat_requests()[-1].json["model"] == "smol"
        assert history.get_session(window.session_id)["model"] == "smol"

    def test_chrome_window_failed_load_shows_servers_message_and_retry_loads(
        self, chat_window, router, qtbot
    ) -> None:
        """A load that fails shows the server's message beside the picker; Retry loads again."""

        add_router_models(router, Model("broken", fail_exit_code=1))
        window, _history = chat_window()
        picker = window.model_picker
        qtbot.waitUntil(lambda: "broken" in combo_ids(picker.combo))
        picker.combo.setCurrentIndex(picker.combo.findData("broken"))
        qtbot.waitUntil(lambda: picker.status("broken") == "failed", timeout=10_000)
        # The router's status event can say "failed" before the load request's own answer
        # (which names the model) arrives: the label shows the event's words until then.
        qtbot.waitUntil(
            lambda: (
                picker.status_label.text()
                == "broken failed to load: model 'broken' failed to load (exit code 1)"
            ),
            timeout=10_000,
        )
        assert picker.combo.itemText(picker.combo.findData("broken")) == "⚠ broken"
        retry = visible_widget_named(window, QToolButton, "Retry model")
        router.models["broken"].fail_exit_code = None
        qtbot.mouseClick(retry, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: picker.status("broken") == "loaded", timeout=10_000)
        assert picker.status_label.isHidden() and picker.retry_button.isHidden()

    def test_model_picker_shows_statuses_and_loads_a_chosen_model(self, qtbot) -> None:

        models = [Model("qwen", "loaded", modalities=("text", "image")), Model("smol")]
        with ScriptedRouter(models, load_delay=0.5) as r:
            registry = provider_registry(
                r.url, ProviderConfig("cloud", "http://127.0.0.1:9", models=("big",))
            )
            picker = ModelPicker(registry, poll_ms=100)
            qtbot.addWidget(picker)
            assert picker.combo.accessibleName() == "Model"
            qtbot.waitUntil(lambda: picker.combo.count() == 4)
            texts = [picker.combo.itemText(i) for i in range(picker.combo.count())]
            assert texts == ["● qwen", "○ smol", "", "cloud/big"]
            assert picker.current_model() == "qwen"
            assert picker.modalities("qwen") == ("text", "image")
            assert picker.unload_button.isVisibleTo(picker) and picker.busy.isHidden()
            qtbot.waitUntil(lambda: len([q for q in r.requests if q.path == "/v1/models"]) >= 3)
            assert r.status("smol") == "unloaded"
            with qtbot.waitSignal(picker.model_changed) as changed:
                picker.combo.setCurrentIndex(picker.combo.findData("smol"))
            assert changed.args == ["smol"]
            assert picker.status("smol") == "loading" and not picker.busy.isHidden()
            assert picker.status_label.text() == "Loading…"
            assert picker.combo.itemText(1) == "◐ smol"
            qtbot.waitUntil(lambda: r.status("smol") == "loading")
            qtbot.waitUntil(lambda: picker.status("smol") == "loaded", timeout=5000)
            assert picker.combo.itemText(1) == "● smol" and picker.busy.isHidden()
            assert picker.status_label.isHidden()
            qtbot.mouseClick(picker.unload_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: picker.combo.itemText(1) == "○ smol")
            assert [(q.path, q.json) for q in r.requests if q.method == "POST"] == [
                ("/models/load", {"model": "smol"}),
                ("/models/unload", {"model": "smol"}),
            ]
            assert {q.path for q in r.requests if q.method == "GET"} - {"/models/sse"} == {
                "/v1/models"
            }
            with qtbot.waitSignal(picker.default_changed) as starred:
                qtbot.mouseClick(picker.star, Qt.MouseButton.LeftButton)
            assert starred.args == ["smol"] and picker.star.text() == "★"
            picker.set_default("qwen")
            assert picker.default_model() == "qwen" and picker.star.text() == "☆"
            with qtbot.assertNotEmitted(picker.model_changed):
                picker.set_current("cloud/big")
            assert picker.combo.currentText() == "cloud/big" and picker.load_button.isHidden()
            picker.shutdown()
            registry.close()

    def test_model_picker_failed_load_shows_the_servers_message_and_retry(self, qtbot) -> None:

        models = [Model("qwen", "loaded"), Model("broken", fail_exit_code=1)]
        # This router answers a doomed load only when it has failed, 1.5 s later.
        with ScriptedRouter(models, load_delay=1.5) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry, poll_ms=100)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2)

            def listings() -> int:
                return len([q for q in r.requests if q.path == "/v1/models"])

            picker.combo.setCurrentIndex(picker.combo.findData("broken"))
            before = listings()
            qtbot.waitUntil(lambda: listings() >= before + 3)
            assert picker.status("broken") == "loading"  # statuses kept coming during the load
            qtbot.waitUntil(lambda: picker.status("broken") == "failed")
            # The model event may say "failed" first; the load request's own answer, which
            # says more, then takes its place.
            qtbot.waitUntil(
                lambda: (
                    picker.status_label.text()
                    == "broken failed to load: model 'broken' failed to load (exit code 1)"
                )
            )
            assert picker.retry_button.isVisibleTo(picker)
            assert picker.combo.itemText(1) == "⚠ broken"
            r.models["broken"].fail_exit_code = None
            qtbot.mouseClick(picker.retry_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: picker.status("broken") == "loaded", timeout=10_000)
            assert picker.retry_button.isHidden() and picker.status_label.isHidden()
            assert [q.path for q in r.requests if q.method == "POST"] == ["/models/load"] * 2
            picker.shutdown()
            registry.close()

    def test_model_picker_unreachable_router_says_so_with_retry(self, qtbot) -> None:

        registry = provider_registry("http://127.0.0.1:9")
        picker = ModelPicker(registry, current="qwen", poll_ms=60_000)
        qtbot.addWidget(picker)
        qtbot.waitUntil(lambda: "Could not list the models" in picker.status_label.text())
        assert "Cannot reach the server at http://127.0.0.1:9" in picker.status_label.text()
        assert picker.retry_button.isVisibleTo(picker)
        assert picker.combo.currentText() == "qwen"
        picker.shutdown()
        registry.close()


def test_the_tooltip_says_what_an_unloaded_model_reads_from_its_listing() -> None:
    """The router lists `architecture.input_modalities` without loading a model: the
    picker's tooltip says which models see images and hear audio."""

    with ScriptedRouter(
        [Model("eyes", modalities=("text", "image")), Model("ears", modalities=("text", "audio"))]
    ) as router:
        listed = httpx.get(router.url + "/v1/models").json()["data"]
    infos = {m.id: m for m in (parse_model(entry) for entry in listed) if m is not None}
    assert all(info.status == "unloaded" for info in infos.values())
    eyes = model_tooltip("eyes", "unloaded", "", infos["eyes"], default=False)
    ears = model_tooltip("ears", "unloaded", "", infos["ears"], default=False)
    assert "Reads images" in eyes and "Hears audio" not in eyes
    assert "Hears audio" in ears and "Reads images" not in ears
