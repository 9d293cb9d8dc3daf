"""Sampling parameters sent with each request: defaults per model and preset, overrides per chat.

Each parameter is described once in `PARAMS` (its name in config.toml and in the
request body, its type, its range); the config check, the per-chat panel and the
request all read that table. The values of one request are layered (`effective`):
the config's `model_params` for the model, then `preset_params` for the chat's
prompt preset, then the chat's own overrides (kept with the chat in the history).
A parameter none of them sets is not sent, so the server's default applies.

None of these reloads a model: llama-server takes them per request.

Qt-free. Errors: `problem()` returns what is wrong with a set of values in words;
nothing here raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EFFORTS = ("low", "medium", "high")


@dataclass(frozen=True)
class Param:
    """One request parameter: its name, type ("float", "int" or "choice"), range, label."""

    name: str
    kind: str
    label: str
    low: float = 0.0
    high: float = 0.0
    step: float = 0.05
    choices: tuple[str, ...] = ()
    tip: str = ""


PARAMS: tuple[Param, ...] = (
    Param("temperature", "float", "Temperature", 0.0, 5.0, 0.05, tip="Randomness; 0 is greedy"),
    Param("top_p", "float", "Top P", 0.0, 1.0, 0.01, tip="Nucleus sampling; 1 is off"),
    Param("top_k", "int", "Top K", 0, 1000, 1, tip="Sample from the K likeliest; 0 is off"),
    Param(
        "min_p", "float", "Min P", 0.0, 1.0, 0.01, tip="Drop tokens below this share of the top one"
    ),
    Param("repeat_penalty", "float", "Repeat penalty", 0.0, 5.0, 0.05, tip="1 is off"),
    Param("max_tokens", "int", "Max tokens", 1, 1_000_000, 1, tip="Longest reply, in tokens"),
    Param("seed", "int", "Seed", -1, 2**31 - 1, 1, tip="-1: a random seed each time"),
    Param(
        "reasoning_effort",
        "choice",
        "Reasoning effort",
        choices=EFFORTS,
        tip="For models that reason (gpt-oss and others); others ignore it",
    ),
    Param(
        "reasoning_budget",
        "int",
        "Reasoning budget",
        -1,
        1_000_000,
        1,
        tip="Most tokens of thinking; -1 unlimited, 0 none",
    ),
)
BY_NAME = {param.name: param for param in PARAMS}


def problem(values: object, where: str) -> str | None:
    """What is wrong with one table of parameter values (`where` names it), or None."""
    if not isinstance(values, Mapping):
        return f"{where} must be a table of parameters, got {type(values).__name__}"
    for name, value in values.items():
        param = BY_NAME.get(name)
        if param is None:
            known = ", ".join(BY_NAME)
            return f"unknown parameter '{where}.{name}' (known: {known})"
        if param.kind == "choice":
            if value not in param.choices:
                return f"{where}.{name} must be one of {', '.join(param.choices)}, got {value!r}"
            continue
        types = (int,) if param.kind == "int" else (int, float)
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = "an integer" if param.kind == "int" else "a number"
            return f"{where}.{name} must be {wanted}, got {value!r}"
        if not param.low <= value <= param.high:
            return f"{where}.{name} must be from {param.low:g} to {param.high:g}, got {value}"
    return None


def effective(
    model_params: Mapping[str, Mapping[str, Any]],
    preset_params: Mapping[str, Mapping[str, Any]],
    *,
    model: str,
    preset: str,
    chat: Mapping[str, Any],
) -> dict[str, Any]:
    """The values one request is sent: the model's defaults, the preset's, then the chat's."""
    merged: dict[str, Any] = {}
    for layer in (model_params.get(model) or {}, preset_params.get(preset) or {}, chat):
        merged.update({k: v for k, v in layer.items() if k in BY_NAME and v is not None})
    return merged


def request_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The request body fields for `values` (llama-server's names)."""
    body = {k: v for k, v in values.items() if k in BY_NAME}
    budget = body.pop("reasoning_budget", None)
    if budget is not None:
        # The name llama-server's chat endpoint reads (server-common.cpp), in every version
        # that has a per-request budget; it applies when the server has no --reasoning-budget.
        body["thinking_budget_tokens"] = budget
    effort = body.get("reasoning_effort")
    if effort:
        # Chat templates read the effort as a template variable (gpt-oss does).
        body["chat_template_kwargs"] = {"reasoning_effort": effort}
    return body
