"""The models a server offers, and model management on llama.cpp's router.

A router lists every model in its models folder with a status (`loaded`, `loading`,
`unloaded`, `sleeping`, or a failed load: `failed: true` + `exit_code`) and loads one
on demand. A plain llama-server or another OpenAI-compatible server lists models
without a status: they come back as status "unknown", and load/unload do nothing.

Nothing here ever starts a load by itself: listing, the context size and token counts
all ask with `autoload=false`, because a meter poll must never pull a multi-GB model
into memory.

Errors are the backend's (`backend.BackendError` and its subclasses); this module
adds none.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass

from . import backend

log = logging.getLogger(__name__)

STATUSES = ("loaded", "loading", "unloaded", "sleeping", "failed", "unknown")
# A download is the first part of a load as far as the user is concerned.
_STATUS_ALIASES = {"downloading": "loading"}


@dataclass
class ModelInfo:
    """One model as a server lists it."""

    id: str
    status: str = "unknown"
    aliases: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ("text",)
    error: str = ""
    provider: str = ""

    @property
    def accepts_images(self) -> bool:
        """Whether the model reads images (only when the server lists `image`)."""
        return "image" in self.modalities


def parse_model(entry: dict, *, provider: str = "") -> ModelInfo | None:
    """A ModelInfo from one `/v1/models` entry, or None when it has no id."""
    model_id = entry.get("id")
    if not isinstance(model_id, str) or not model_id:
        return None
    status, error = "unknown", ""
    raw = entry.get("status")
    value = raw.get("value") if isinstance(raw, dict) else raw
    if isinstance(value, str):
        value = _STATUS_ALIASES.get(value, value)
        status = value if value in STATUSES else "unknown"
    if isinstance(raw, dict) and raw.get("failed"):
        status = "failed"
        code = raw.get("exit_code")
        error = (
            f"the model failed to load (exit code {code})"
            if code is not None
            else "the model failed to load"
        )
    aliases = entry.get("aliases")
    arch = entry.get("architecture")
    inputs = arch.get("input_modalities") if isinstance(arch, dict) else None
    return ModelInfo(
        id=model_id,
        status=status,
        aliases=tuple(a for a in aliases if isinstance(a, str))
        if isinstance(aliases, list)
        else (),
        modalities=tuple(m for m in inputs if isinstance(m, str))
        if isinstance(inputs, list) and inputs
        else ("text",),
        error=error,
        provider=provider,
    )


class Models:
    """Model listing and management for one server (router or not)."""

    def __init__(self, client: backend.Client) -> None:
        self.client = client
        self._router: bool | None = None

    def list(self) -> list[ModelInfo]:
        """Every model the server lists, with status where the server reports one."""
        data = self.client.request_json("GET", "/models")
        entries = data.get("data") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise backend.StreamError(
                f"{self.client.base_url} listed no models (its /v1/models answer has no data list)"
            )
        found = [parse_model(e) for e in entries if isinstance(e, dict)]
        self._router = any(isinstance(e, dict) and "status" in e for e in entries)
        return [m for m in found if m is not None]

    def is_router(self) -> bool:
        """Whether the server is a llama.cpp router (lists statuses, loads on request)."""
        if self._router is None:
            self.list()
        return bool(self._router)

    def get(self, model: str) -> ModelInfo | None:
        """The listed model called `model` (by id or alias), or None."""
        for info in self.list():
            if model == info.id or model in info.aliases:
                return info
        return None

    def load(self, model: str) -> bool:
        """Ask the router to load `model`; False (nothing sent) when not a router."""
        if not self.is_router():
            return False
        self.client.request_json("POST", "/models/load", root=True, json={"model": model})
        return True

    def unload(self, model: str) -> bool:
        """Ask the router to unload `model`; False (nothing sent) when not a router."""
        if not self.is_router():
            return False
        self.client.request_json("POST", "/models/unload", root=True, json={"model": model})
        return True

    def wait_until_loaded(
        self,
        model: str,
        *,
        timeout: float = 600.0,
        interval: float = 0.25,
        cancel: threading.Event | None = None,
    ) -> ModelInfo:
        """Poll the list until `model` is loaded or failed (or timeout/cancel); its last info."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.get(model) or ModelInfo(model, error="the server no longer lists it")
            if info.status not in ("loading", "unloaded") or time.monotonic() >= deadline:
                return info
            if cancel is not None and cancel.wait(interval):
                return info
            if cancel is None:
                time.sleep(interval)

    def context_size(self, model: str) -> int | None:
        """The model's context size in tokens, or None when unknown or not loaded."""
        try:
            props = self.client.request_json(
                "GET", "/props", root=True, params={"model": model, "autoload": "false"}
            )
        except backend.ServerError as exc:
            log.debug("no context size for %s: %s", model, exc)
            return None
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None

    def context_limits(self, model: str) -> tuple[int | None, int | None]:
        """The model's context size and the size it was trained for (None each when unknown).

        The size comes from `/props` for a loaded model, else from the router's list: the
        `--ctx-size` a model not loaded will start with, and `meta.n_ctx_train`.
        """
        n_ctx = self.context_size(model)
        trained: int | None = None
        try:
            data = self.client.request_json("GET", "/models")
        except backend.BackendError as exc:
            log.debug("no model list for %s: %s", model, exc)
            return n_ctx, None
        entries = data.get("data") if isinstance(data, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, dict):
                continue
            if model != entry.get("id") and model not in (entry.get("aliases") or ()):
                continue
            meta = entry.get("meta")
            value = meta.get("n_ctx_train") if isinstance(meta, dict) else None
            trained = value if isinstance(value, int) and value > 0 else None
            if n_ctx is None:
                n_ctx = _listed_ctx(entry)
        return n_ctx, trained

    def count_tokens(self, model: str, text: str) -> int | None:
        """How many tokens `text` is for `model`, or None when the server cannot say now."""
        try:
            data = self.client.request_json(
                "POST",
                "/tokenize",
                root=True,
                params={"autoload": "false"},
                json={"model": model, "content": text},
            )
        except backend.ServerError as exc:
            log.debug("no token count for %s: %s", model, exc)
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None


def _listed_ctx(entry: dict) -> int | None:
    """The context size a listed model runs (or will start) with, from its meta or its args."""
    meta = entry.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("n_ctx"), int) and meta["n_ctx"] > 0:
        return meta["n_ctx"]
    status = entry.get("status")
    args = status.get("args") if isinstance(status, dict) else None
    if isinstance(args, list):
        for flag, value in itertools.pairwise(args):
            if flag in ("--ctx-size", "-c") and str(value).isdigit() and int(value) > 0:
                return int(value)
    return None
