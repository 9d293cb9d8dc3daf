"""Where each model lives: the router, or an external OpenAI-compatible provider.

The router (`router_url`, on this machine or another, its key in the environment
variable `router_api_key_env` names) serves every plain model id. Each `[[providers]]`
table adds a provider whose models appear as `<provider>/<model>`; its API key comes
from the environment variable its `api_key_env` names and is only ever sent in the
Authorization header, never stored, logged or put in a message.

A router model id can itself contain a slash (`ggml-org/gemma-3-4b-it-GGUF:Q4_K_M`); an id
only goes to a provider when the part before the first slash is a configured provider
name.

Errors: `models()` never raises; what failed per source is in `Registry.errors`.
`client_for()` raises nothing. Other failures are the backend's exceptions.
"""

from __future__ import annotations

import logging
import threading

from llamachat.config import Config, ProviderConfig
from llamachat.router import client as backend
from llamachat.router.models import ModelInfo, Models

log = logging.getLogger(__name__)

ROUTER = "router"


class Registry:
    """One Client per server (the router and each provider), and the merged model list."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.errors: dict[str, backend.BackendError] = {}
        self._providers = {p.name: p for p in cfg.providers}
        self._clients: dict[str, backend.Client] = {}
        # The window, the model picker and the context meter ask for clients from
        # different threads; without the lock two could each create one and leak one.
        self._lock = threading.Lock()

    def router(self) -> backend.Client:
        """The router's client."""
        return self._client(
            ROUTER, self.cfg.router_url, self.cfg.api_key(), self.cfg.router_api_key_env
        )

    def router_models(self) -> Models:
        """Model management for the router."""
        return Models(self.router())

    def provider_names(self) -> list[str]:
        """The configured provider names, in config order."""
        return list(self._providers)

    def client_for(self, model_id: str) -> tuple[backend.Client, str]:
        """The client serving `model_id` and the model name that server knows it by."""
        prefix, sep, rest = model_id.partition("/")
        provider = self._providers.get(prefix) if sep and rest else None
        if provider is None:
            return self.router(), model_id
        client = self._client(
            provider.name, provider.base_url, provider.api_key(), provider.api_key_env
        )
        return client, rest

    def models(self) -> list[ModelInfo]:
        """The router's models, then each provider's as `<provider>/<model>`.

        A source that fails is skipped and its error kept in `errors` (keyed "router"
        or the provider's name), so one dead provider never hides the others.
        """
        self.errors = {}
        found: list[ModelInfo] = []
        try:
            found.extend(self.router_models().list())
        except backend.BackendError as exc:
            log.info("router model list failed: %s", exc)
            self.errors[ROUTER] = exc
        for provider in self._providers.values():
            try:
                found.extend(self._provider_models(provider))
            except backend.BackendError as exc:
                log.info("provider %s model list failed: %s", provider.name, exc)
                self.errors[provider.name] = exc
        return found

    def _provider_models(self, provider: ProviderConfig) -> list[ModelInfo]:
        if provider.models:
            return [
                ModelInfo(f"{provider.name}/{m}", provider=provider.name) for m in provider.models
            ]
        if provider.api_key_env and provider.api_key() is None:
            raise backend.BackendError(
                f"provider {provider.name}: the environment variable {provider.api_key_env} "
                "that should hold its API key is not set",
                error_type="missing_api_key",
            )
        client, _ = self.client_for(f"{provider.name}/-")
        listed = Models(client).list()
        return [
            ModelInfo(
                f"{provider.name}/{m.id}",
                status="unknown",
                aliases=(),
                modalities=m.modalities,
                provider=provider.name,
            )
            for m in listed
        ]

    def _client(
        self, key: str, base_url: str, api_key: str | None, api_key_env: str
    ) -> backend.Client:
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = backend.Client(
                    base_url,
                    api_key=api_key,
                    api_key_env=api_key_env,
                    idle_timeout=self.cfg.idle_timeout,
                )
                self._clients[key] = client
            return client

    def close(self) -> None:
        """Close every client's connections."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()
