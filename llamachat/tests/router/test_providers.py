"""The tests of `llamachat.router.providers`."""

from __future__ import annotations

import socket

from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.router import client as backend
from llamachat.tests.support import turn_of, user_turn


class TestProviders:
    """Where each model lives: the router, or an external OpenAI-compatible provider."""

    def test_providers_route_prefixed_ids_with_their_key_and_list_models(self, monkeypatch) -> None:
        from llamachat import config
        from llamachat.router import providers

        monkeypatch.setenv("TEST_PROVIDER_KEY", "prov-secret-1")
        monkeypatch.setenv("TEST_ROUTER_KEY", "router-secret-2")
        with (
            ScriptedRouter([Model("ggml-org/gemma:Q4", "loaded")], api_key="router-secret-2") as r,
            ScriptedRouter(
                [Model("gpt-x", "loaded"), Model("gpt-y", "loaded")],
                router=False,
                api_key="prov-secret-1",
            ) as p,
        ):
            cfg = config.Config(
                router_url=r.url,
                router_api_key_env="TEST_ROUTER_KEY",
                providers=(
                    config.ProviderConfig("cloud", p.url + "/v1", "TEST_PROVIDER_KEY"),
                    config.ProviderConfig("fixed", "http://127.0.0.1:9/v1", "", ("m1",)),
                ),
            )
            reg = providers.Registry(cfg)
            assert [(m.id, m.provider) for m in reg.models()] == [
                ("ggml-org/gemma:Q4", ""),
                ("cloud/gpt-x", "cloud"),
                ("cloud/gpt-y", "cloud"),
                ("fixed/m1", "fixed"),
            ]
            assert reg.errors == {}
            client, model = reg.client_for("cloud/gpt-x")
            assert model == "gpt-x"
            events = list(client.stream_chat(turn_of(user_turn("yo"), model=model)))
            assert events[0] == ("content", "echo: ")
            assert p.chat_requests()[0].headers["authorization"] == "Bearer prov-secret-1"
            assert p.chat_requests()[0].json["model"] == "gpt-x"
            client, model = reg.client_for("ggml-org/gemma:Q4")
            assert model == "ggml-org/gemma:Q4" and client is reg.router()
            list(client.stream_chat(turn_of(user_turn(), model=model)))
            assert r.chat_requests()[0].headers["authorization"] == "Bearer router-secret-2"
            assert reg.client_for("cloud/gpt-y")[0] is reg.client_for("cloud/gpt-x")[0]
            reg.close()

    def test_providers_failures_are_kept_per_source_without_leaking_keys(self, monkeypatch) -> None:

        from llamachat import config
        from llamachat.router import providers

        monkeypatch.setenv("BAD_KEY", "wrong-secret-3")
        monkeypatch.delenv("MISSING_KEY", raising=False)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        with ScriptedRouter([Model("m", "loaded")], router=False, api_key="right") as p:
            cfg = config.Config(
                router_url=dead,
                providers=(
                    config.ProviderConfig("bad", p.url, "BAD_KEY"),
                    config.ProviderConfig("nokey", p.url, "MISSING_KEY"),
                    config.ProviderConfig("good", p.url + "/v1", "", ("m",)),
                ),
            )
            reg = providers.Registry(cfg)
            assert [m.id for m in reg.models()] == ["good/m"]
            assert isinstance(reg.errors["router"], backend.RouterUnreachable)
            assert reg.errors["bad"].status == 401
            assert "MISSING_KEY" in str(reg.errors["nokey"])
            assert all("wrong-secret-3" not in str(e) for e in reg.errors.values())
            reg.close()
