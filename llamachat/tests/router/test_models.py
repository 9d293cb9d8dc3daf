"""The tests of `llamachat.router.models`."""

from __future__ import annotations

import socket

import pytest

from llamachat import context
from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.router import client as backend
from llamachat.router.client import Client, ServerError
from llamachat.router.models import Models
from llamachat.tests.support import (
    SMOL_ID,
    model_status,
    stream_reply,
    three_model_router,
    wait_for,
)


class TestModels:
    """The models a server offers, and model management on llama.cpp's router."""

    def test_models_lists_status_aliases_and_modalities(self) -> None:
        from llamachat.router import models

        with three_model_router() as r:
            client = backend.Client(r.url)
            listed = models.Models(client).list()
            assert [(m.id, m.status, m.aliases, m.accepts_images) for m in listed] == [
                ("qwen", "loaded", ("q",), True),
                ("smol", "unloaded", (), False),
                ("broken", "unloaded", (), False),
            ]
            assert models.Models(client).is_router()
            client.close()

    def test_models_parse_failed_sleeping_downloading_and_unknown_statuses(self) -> None:
        from llamachat.router import models

        def status(raw):
            return models.parse_model({"id": "m", "status": raw})

        failed = status({"value": "unloaded", "failed": True, "exit_code": 1})
        assert (failed.status, failed.error) == ("failed", "the model failed to load (exit code 1)")
        assert status({"value": "sleeping"}).status == "sleeping"
        assert status({"value": "downloading", "progress": {}}).status == "downloading"
        assert status({"value": "teleporting"}).status == "unknown"
        assert status("loaded").status == "loaded"
        assert models.parse_model({"id": "m"}).status == "unknown"
        assert models.parse_model({"object": "model"}) is None

    def test_models_parse_the_gguf_a_router_starts_a_model_from(self) -> None:
        from llamachat.router import models

        args = ["llama-server", "--port", "0", "--model", "/m/smol.gguf", "--ctx-size", "512"]
        listed = models.parse_model({"id": "m", "status": {"value": "unloaded", "args": args}})
        assert listed.file == "/m/smol.gguf"
        assert models.parse_model({"id": "m", "status": {"value": "loaded"}}).file == ""

    def test_models_load_polls_from_loading_to_loaded_and_unload(self) -> None:
        from llamachat.router import models

        with three_model_router(load_delay=0.3) as r:
            m = models.Models(backend.Client(r.url))
            assert m.load("smol") is True
            assert m.get("smol").status == "loading"
            assert m.wait_until_loaded("smol", timeout=10, interval=0.02).status == "loaded"
            assert m.unload("smol") is True
            assert m.get("smol").status == "unloaded"
            assert [q.path for q in r.requests if q.method == "POST"] == [
                "/models/load",
                "/models/unload",
            ]

    def test_models_failed_load_raises_the_servers_message_and_lists_failed(self) -> None:
        from llamachat.router import models

        with three_model_router() as r:
            m = models.Models(backend.Client(r.url))
            with pytest.raises(backend.ServerError, match=r"failed to load \(exit code 1\)"):
                m.load("broken")
            info = m.get("broken")
            assert (info.status, info.error) == ("failed", "the model failed to load (exit code 1)")

    def test_models_context_size_and_token_count_never_start_a_load(self) -> None:
        from llamachat.router import models

        with three_model_router() as r:
            m = models.Models(backend.Client(r.url))
            assert m.context_size("qwen") == 32768
            assert m.context_size("smol") is None
            assert context.Tokenizer(m.client, "qwen").count("Hello, world") == (3, True)
            assert context.Tokenizer(m.client, "smol").count("Hello")[1] is False
            assert r.status("smol") == "unloaded"
            assert {
                q.query.get("autoload") for q in r.requests if q.path in ("/props", "/tokenize")
            } == {"false"}

    def test_models_plain_llama_server_lists_without_status_and_never_loads(self) -> None:
        from llamachat.router import models

        with ScriptedRouter([Model("single.gguf", "loaded", n_ctx=4096)], router=False) as r:
            m = models.Models(backend.Client(r.url))
            listed = m.list()
            assert [(x.id, x.status) for x in listed] == [("single.gguf", "unknown")]
            assert not m.is_router()
            assert m.load("single.gguf") is False and m.unload("single.gguf") is False
            assert m.context_size("single.gguf") == 4096
            assert not any(q.path.startswith("/models/") for q in r.requests)

    def test_models_unreachable_server_raises_router_unreachable(self) -> None:

        from llamachat.router import models

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(backend.RouterUnreachable, match=url):
            models.Models(backend.Client(url)).list()

    @pytest.mark.real_router
    def test_models_max_instances_and_what_a_load_may_push_out(self) -> None:
        """The router's `--models-max` (`/props` max_instances); at that limit a load may
        unload any running model but those kept; under it, or with no limit, none."""

        from llamachat.router.models import ModelInfo, pushed_out

        with ScriptedRouter(models_max=2) as limited, ScriptedRouter() as unlimited:
            assert Models(Client(limited.url)).max_instances() == 2
            assert Models(Client(unlimited.url)).max_instances() is None
        infos = [
            ModelInfo("a", "loaded"),
            ModelInfo("b", "sleeping"),
            ModelInfo("c", "unloaded"),
            ModelInfo("d", "unloaded"),
            ModelInfo("cloud/x", "unknown", provider="cloud"),
        ]
        assert pushed_out(infos, ["c"], keep=["a", "c"], limit=2) == ["b"]
        assert pushed_out(infos, ["c"], keep=[], limit=2) == ["a", "b"]
        assert pushed_out(infos, ["c"], keep=[], limit=3) == []
        assert pushed_out(infos, ["c", "d"], keep=[], limit=3) == ["a", "b"]
        assert pushed_out(infos, ["a"], keep=[], limit=1) == []  # loaded already
        assert pushed_out(infos, ["c"], keep=[], limit=None) == []

    def test_real_router_says_how_many_models_it_holds(self, real_router) -> None:
        """llama-server's router says its `--models-max` (4 unless told) in /props."""

        client = Client(real_router.url)
        assert Models(client).max_instances() == 4
        client.close()

    def test_real_router_lists_models_with_status(self, real_router) -> None:

        client = Client(real_router.url)
        try:
            models = Models(client)
            listed = {m.id: m for m in models.list()}
            assert models.is_router()
        finally:
            client.close()
        assert {SMOL_ID, "broken"} <= set(listed)
        assert listed[SMOL_ID].status in {"loaded", "loading", "unloaded"}
        assert "text" in listed[SMOL_ID].modalities

    @pytest.mark.real_router
    def test_real_router_loads_model_on_demand_when_chatting(self, real_router) -> None:

        client = Client(real_router.url)
        try:
            if model_status(real_router.url, SMOL_ID) != "unloaded":
                Models(client).unload(SMOL_ID)
            wait_for(lambda: model_status(real_router.url, SMOL_ID) == "unloaded", 30, "the unload")
        finally:
            client.close()

        pieces, _stats = stream_reply(
            real_router.url, SMOL_ID, [{"role": "user", "content": "Say hello."}], max_tokens=8
        )

        assert "".join(pieces).strip()
        assert model_status(real_router.url, SMOL_ID) == "loaded"

    @pytest.mark.real_router
    def test_real_router_unloads_model(self, real_router) -> None:

        client = Client(real_router.url)
        try:
            models = Models(client)
            if model_status(real_router.url, SMOL_ID) == "unloaded":
                models.load(SMOL_ID)
            wait_for(lambda: model_status(real_router.url, SMOL_ID) == "loaded", 30, "the load")
            models.unload(SMOL_ID)
            wait_for(lambda: model_status(real_router.url, SMOL_ID) == "unloaded", 30, "the unload")
        finally:
            client.close()

    @pytest.mark.real_router
    def test_real_router_failed_load_gives_server_message(self, real_router) -> None:

        with pytest.raises(ServerError) as raised:
            stream_reply(
                real_router.url, "broken", [{"role": "user", "content": "hi"}], max_tokens=4
            )

        assert "failed to load" in raised.value.message
        assert raised.value.status == 500
        assert model_status(real_router.url, "broken") == "failed"
