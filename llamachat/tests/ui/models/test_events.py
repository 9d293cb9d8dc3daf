"""The tests of `llamachat.ui.models.events`."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.router.client import Client
from llamachat.router.models import Models
from llamachat.router.server import ManagedServer
from llamachat.tests.support import (
    SMOL_ID,
    model_status,
    provider_registry,
    real_assets,
    smol_models_folder,
    stream_reply,
    wait_for,
)
from llamachat.ui.models.picker import ModelPicker


class TestEvents:
    """The router's model events (`GET /models/sse`), read on a background thread."""

    def test_router_events_parse_documented_and_released_shapes(self) -> None:
        from llamachat.router.models import parse_event

        def event(name, data=None, model="m"):
            obj = {"model": model, "event": name}
            if data is not None:
                obj["data"] = data
            return parse_event(obj)

        loading = event(
            "status_change",
            {
                "status": "loading",
                "progress": {"stages": ["text_model"], "current": "text_model", "value": 0.5},
            },
        )
        assert (loading.kind, loading.status, loading.progress, loading.stage) == (
            "status",
            "loading",
            0.5,
            "text_model",
        )
        assert event("model_status", {"status": "sleeping"}).status == "sleeping"
        failed = event("status_change", {"status": "unloaded", "exit_code": 1})
        assert (failed.status, failed.error) == ("failed", "the model failed to load (exit code 1)")
        assert event("status_change", {"status": "unloaded", "exit_code": 0}).status == "unloaded"
        download = event(
            "download_progress",
            {
                "https://x/a.gguf": {"done": 25, "total": 100},
                "https://x/b.gguf": {"done": 25, "total": 100},
            },
        )
        assert (download.kind, download.progress) == ("download", 0.25)
        assert event("download_failed", {"message": "disk full"}).error == "disk full"
        assert event("model_remove").kind == "removed"
        assert event("models_reload", model="*").kind == "reload"
        assert event("something_new") is None and parse_event({"event": "x"}) is None

    def test_router_event_stream_stops_at_once_on_shutdown(self, qtbot) -> None:
        with ScriptedRouter([Model("smol")]) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: len(r._subscribers) == 1)
            picker.shutdown()
            qtbot.waitUntil(lambda: not r._subscribers, timeout=2000)
            registry.close()

    @pytest.mark.real_router
    def test_real_router_load_events_parsed(self, real_router) -> None:
        client = Client(real_router.url)
        models = Models(client)
        if model_status(real_router.url, SMOL_ID) != "unloaded":
            models.unload(SMOL_ID)
            wait_for(lambda: model_status(real_router.url, SMOL_ID) == "unloaded", 30, "the unload")
        events: list = []
        stop = threading.Event()
        reader = threading.Thread(target=models.watch, args=(events.append, stop), daemon=True)
        reader.start()
        try:
            time.sleep(0.3)  # the stream is open before the load starts
            models.load(SMOL_ID)
            wait_for(
                lambda: any(e.model == SMOL_ID and e.status == "loaded" for e in events),
                60,
                "the loaded event",
            )
        finally:
            stop.set()
            reader.join(5)
            client.close()
        assert not reader.is_alive()
        mine = [e for e in events if e.model == SMOL_ID]
        assert mine[0].status == "loading"
        assert any(e.progress is not None and e.stage == "text_model" for e in mine)

    def test_router_sleeping_event_shows_sleeping(self, qtbot) -> None:
        with ScriptedRouter([Model("qwen", "loaded")]) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 1 and len(r._subscribers) == 1)
            r.sleep("qwen")
            qtbot.waitUntil(lambda: picker.status("qwen") == "sleeping")
            assert picker.combo.itemText(0) == "◑ qwen"
            assert picker.unload_button.isVisibleTo(picker)
            picker.shutdown()
            registry.close()

    def test_router_idle_unload_for_routers_that_cannot_sleep(self, qtbot) -> None:
        with ScriptedRouter([Model("qwen", "loaded"), Model("smol")]) as r:
            registry = provider_registry(r.url)
            picker = ModelPicker(registry)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.combo.count() == 2)
            picker.idle.set_seconds(0.4)
            picker.idle.note_activity()
            qtbot.waitUntil(lambda: r.status("qwen") == "unloaded", timeout=5000)
            assert [q.json for q in r.requests if q.path == "/models/unload"] == [{"model": "qwen"}]
            picker.idle.set_seconds(0)
            picker.shutdown()
            registry.close()

    @pytest.mark.real_router
    def test_real_router_idle_sleep_shows_sleeping(self, qtbot, tmp_path: Path) -> None:
        _binary, model = real_assets()
        models = smol_models_folder(tmp_path, model)
        cfg = Config(models_dir=models, sleep_idle_seconds=1, server_args=("-t", "2", "-c", "512"))
        server = ManagedServer(cfg, log_path=tmp_path / "log", lock_path=tmp_path / "lock")
        server.start()
        try:
            assert server.wait_ready(60), server.log_file.tail()
            registry = provider_registry(server.url)
            picker = ModelPicker(registry, poll_ms=60000)
            qtbot.addWidget(picker)
            qtbot.waitUntil(lambda: picker.watching() and picker.combo.count() == 1, timeout=10000)
            stream_reply(server.url, SMOL_ID, [{"role": "user", "content": "Hi"}], max_tokens=2)
            qtbot.waitUntil(lambda: picker.status(SMOL_ID) == "sleeping", timeout=30000)
            assert picker.combo.itemText(0) == f"◑ {SMOL_ID}"
            picker.shutdown()
            registry.close()
        finally:
            server.stop()

    def test_a_failure_reason_not_in_the_log_yet_is_read_again(self) -> None:
        """The router reports a failure before its log holds the reason: the empty answer is
        not kept, and the reason shows once the log has it (then it is read no more)."""
        from llamachat.ui.models.events import FailureReasons

        log_lines: list[str] = []
        reads: list[str] = []

        def source(model_id: str) -> str:
            reads.append(model_id)
            return "\n".join(log_lines)

        reasons = FailureReasons(source)
        assert reasons.get("broken") == ""
        log_lines.append("failed to read GGUF header")
        assert reasons.get("broken") == "failed to read GGUF header"
        assert reasons.get("broken") == "failed to read GGUF header"
        assert reads == ["broken", "broken"]
