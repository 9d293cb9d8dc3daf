"""The models a server offers, and model management on llama.cpp's router.

A router lists every model in its models folder with a status (`loaded`, `loading`,
`unloaded`, `sleeping`, `downloading`, or a failed load: `failed: true` + `exit_code`)
and loads one on demand. Newer routers also push every change on `GET /models/sse`
(`watch()`, parsed by `parse_event`): load stages and progress, download progress,
a model removed, the list reloaded. Routers without it answer 404 there, and the
caller falls back to polling `list()`. A plain llama-server or another OpenAI-compatible server lists models
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
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llamachat.router import client as backend

log = logging.getLogger(__name__)

STATUSES = ("loaded", "loading", "unloaded", "sleeping", "downloading", "failed", "unknown")
# Statuses during which a model is on its way to being usable.
IN_PROGRESS = ("loading", "downloading")
# The states in which a model holds its place among the router's `--models-max`.
RUNNING = frozenset({"loaded", "loading", "sleeping"})


@dataclass
class ModelInfo:
    """One model as a server lists it."""

    id: str
    status: str = "unknown"
    aliases: tuple[str, ...] = ()
    modalities: tuple[str, ...] = ("text",)
    error: str = ""
    provider: str = ""
    progress: float | None = None
    """0..1 of a load or download in progress, when the router says; None otherwise."""
    stage: str = ""
    """The load stage the router reports (e.g. "text_model"), while loading."""
    file: str = ""
    """The GGUF the router starts the model from (its ``--model`` argument), when it says."""

    @property
    def accepts_images(self) -> bool:
        """Whether the model reads images (only when the server lists `image`)."""
        return "image" in self.modalities

    @property
    def hears_audio(self) -> bool:
        """Whether the model takes sounds (only when the server lists `audio`)."""
        return "audio" in self.modalities


def parse_model(entry: dict, *, provider: str = "") -> ModelInfo | None:
    """A ModelInfo from one `/v1/models` entry, or None when it has no id."""
    model_id = entry.get("id")
    if not isinstance(model_id, str) or not model_id:
        return None
    status, error = "unknown", ""
    raw = entry.get("status")
    value = raw.get("value") if isinstance(raw, dict) else raw
    if isinstance(value, str):
        status = value if value in STATUSES else "unknown"
    if isinstance(raw, dict) and raw.get("failed"):
        status = "failed"
        error = failure_text(raw.get("exit_code"))
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
        progress=_progress(raw.get("progress")) if isinstance(raw, dict) else None,
        file=_model_file(raw.get("args")) if isinstance(raw, dict) else "",
    )


def _model_file(args: object) -> str:
    """The value of ``--model`` (or ``-m``) in a router's list of a model's arguments."""
    if not isinstance(args, list):
        return ""
    for flag, value in itertools.pairwise(args):
        if flag in ("--model", "-m") and isinstance(value, str):
            return value
    return ""


def failure_text(exit_code: object) -> str:
    """What a failed load is called, with the exit code the router gives."""
    if isinstance(exit_code, int):
        return f"the model failed to load (exit code {exit_code})"
    return "the model failed to load"


def _progress(raw: object) -> float | None:
    """0..1 from a load progress (`{"value": 0.5}`) or downloads (`{url: {done, total}}`)."""
    if not isinstance(raw, dict):
        return None
    value = raw.get("value")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return min(max(float(value), 0.0), 1.0)
    files = [f for f in raw.values() if isinstance(f, dict)]
    done = sum(f.get("done") or 0 for f in files if isinstance(f.get("done"), (int, float)))
    total = sum(f.get("total") or 0 for f in files if isinstance(f.get("total"), (int, float)))
    return min(done / total, 1.0) if total > 0 else None


@dataclass(frozen=True)
class ModelEvent:
    """One event of a router's `/models/sse` stream.

    `kind`: "status" (`status`, maybe `progress`/`stage`; a failed load is status
    "failed" with `error`), "download" (`progress`), "download_finished",
    "download_failed" (`error`), "removed", or "reload" (the whole list changed;
    `model` is "*").
    """

    model: str
    kind: str
    status: str = ""
    progress: float | None = None
    stage: str = ""
    error: str = ""


_REFERENCE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(:[\w.-]+)?$")


def parse_reference(text: str) -> str:
    """A Hugging Face model reference (`user/repo` or `user/repo:QUANT`) from what was typed.

    A pasted https://huggingface.co/user/repo link is taken as `user/repo`. Raises
    ValueError saying what a reference looks like.
    """
    ref = text.strip()
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "hf.co/"):
        if ref.startswith(prefix):
            ref = "/".join(ref[len(prefix) :].split("/")[:2])
    if not _REFERENCE.match(ref):
        raise ValueError(
            f"'{text.strip()}' is not a Hugging Face model reference: write user/repo "
            "(e.g. ggml-org/gemma-3-1b-it-GGUF) or user/repo:QUANT (…-GGUF:Q4_K_M)"
        )
    return ref


def listed_as(reference: str, ids: list[str]) -> str | None:
    """The listed id a downloaded `reference` became, or None (without a quant: any quant)."""
    wanted = reference.lower()
    for model_id in ids:
        if model_id.lower() == wanted or model_id.lower().startswith(wanted + ":"):
            return model_id
    return None


def parse_event(obj: dict) -> ModelEvent | None:
    """A ModelEvent from one `/models/sse` JSON object, or None for one we do not know."""
    model = obj.get("model")
    event = obj.get("event")
    raw = obj.get("data")
    data: dict = raw if isinstance(raw, dict) else {}
    if not isinstance(model, str) or not isinstance(event, str):
        return None
    # The documented name is model_status; the routers released so far also send
    # status_change for every update after the first.
    if event in ("model_status", "status_change"):
        status = data.get("status")
        if not isinstance(status, str):
            return None
        code = data.get("exit_code")
        if data.get("failed") or (isinstance(code, int) and code != 0):
            return ModelEvent(model, "status", "failed", error=failure_text(code))
        progress = data.get("progress")
        stage = progress.get("current") if isinstance(progress, dict) else ""
        return ModelEvent(
            model,
            "status",
            status if status in STATUSES else "unknown",
            progress=_progress(progress),
            stage=stage if isinstance(stage, str) else "",
        )
    if event == "download_progress":
        return ModelEvent(model, "download", "downloading", progress=_progress(data))
    if event == "download_finished":
        return ModelEvent(model, "download_finished")
    if event == "download_failed":
        message = data.get("message") or data.get("error") or obj.get("message")
        return ModelEvent(
            model, "download_failed", error=str(message) if message else "the download failed"
        )
    if event == "model_remove":
        return ModelEvent(model, "removed")
    if event == "models_reload":
        return ModelEvent(model, "reload")
    return None


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
            if info.status not in (*IN_PROGRESS, "unloaded") or time.monotonic() >= deadline:
                return info
            if cancel is not None and cancel.wait(interval):
                return info
            if cancel is None:
                time.sleep(interval)

    def watch(
        self,
        on_event: Callable[[ModelEvent], None],
        cancel: threading.Event,
        *,
        on_open: Callable[[], None] | None = None,
    ) -> None:
        """Call `on_event` for each event of `/models/sse` until the stream ends or `cancel`
        (and `on_open()` once the router accepted the stream).

        Raises ServerError with status 404 on a router without the stream (poll instead),
        and any BackendError when the connection fails.
        """
        events = self.client.stream_events("/models/sse", root=True, cancel=cancel, on_open=on_open)
        for obj in events:
            event = parse_event(obj)
            if event is not None:
                on_event(event)

    def server_version(self) -> str:
        """The server's build as its `/props` says ("b1-571d0d5"), or '' when it does not."""
        try:
            props = self.client.request_json("GET", "/props", root=True, timeout=5.0)
        except backend.BackendError as exc:
            log.debug("no version from %s: %s", self.client.base_url, exc)
            return ""
        build = props.get("build_info") if isinstance(props, dict) else None
        return build if isinstance(build, str) else ""

    def max_instances(self) -> int | None:
        """How many models the router holds at once (its `--models-max`, `/props`
        `max_instances`); None when it sets no limit, says nothing, or is no router."""
        try:
            props = self.client.request_json("GET", "/props", root=True, timeout=5.0)
        except backend.BackendError as exc:
            log.debug("no model limit from %s: %s", self.client.base_url, exc)
            return None
        limit = props.get("max_instances") if isinstance(props, dict) else None
        return (
            limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
        )

    def download(self, reference: str) -> None:
        """Ask the router to download a Hugging Face model (`POST /models`); returns at once.

        Its progress arrives as events (`watch`). Raises ServerError: 404 on a router
        that cannot download, 400 with the router's reason for a reference it refuses.
        """
        self.client.request_json("POST", "/models", root=True, json={"model": reference})

    def cancel_download(self, reference: str) -> None:
        """Stop a download under way (the router's way: unload the model being fetched)."""
        self.client.request_json("POST", "/models/unload", root=True, json={"model": reference})

    def delete(self, model: str) -> None:
        """Delete a downloaded model from the router's cache (`DELETE /models`).

        Raises ServerError with the router's reason for a model it cannot delete (one in
        its models folder or preset, or unknown).
        """
        self.client.request_json("DELETE", "/models", root=True, params={"model": model})

    def context_size(self, model: str) -> int | None:
        """The model's context size in tokens, or None when unknown or not loaded."""
        settings = self._props(model).get("default_generation_settings")
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None

    def takes_tools(self, model: str) -> bool | None:
        """Whether the model's chat template takes tools (`chat_template_caps.supports_tools`);
        None when the server does not say (not loaded, or not llama.cpp)."""
        caps = self._props(model).get("chat_template_caps")
        takes = caps.get("supports_tools") if isinstance(caps, dict) else None
        return takes if isinstance(takes, bool) else None

    def _props(self, model: str) -> dict:
        """The loaded model's `/props` ({} when it is not loaded or the server has none)."""
        try:
            props = self.client.request_json(
                "GET", "/props", root=True, params={"model": model, "autoload": "false"}
            )
        except backend.ServerError as exc:
            log.debug("no properties for %s: %s", model, exc)
            return {}
        return props if isinstance(props, dict) else {}

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


def pushed_out(
    infos: Sequence[ModelInfo], loads: Sequence[str], keep: Sequence[str], limit: int | None
) -> list[str]:
    """The running models the router may unload to load `loads` (at its limit of `limit`
    models, llama.cpp's router unloads the one used longest ago for each load): those
    running but `keep`, in the listed order; [] when the loads fit (or there is no limit)."""
    running = [info.id for info in infos if info.status in RUNNING and not info.provider]
    loading = [model for model in dict.fromkeys(loads) if model not in running]
    if limit is None or not loading or len(running) + len(loading) <= limit:
        return []
    return [model for model in running if model not in keep]
