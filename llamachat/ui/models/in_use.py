"""Which model each open conversation answers with, across the App's windows.

The router unloads a model to make room for another (its `--models-max`) whatever
window uses it: before a load that may do so, a window asks `users` who else would
lose their model, and says so first. `App` holds the one `ModelsInUse`; each
`Conversation` says its model (`use`) and leaves when it closes (`leave`).

Errors: none raised.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable


class ModelsInUse:
    """The model each conversation uses, and where it is shown ("the quick window")."""

    def __init__(self) -> None:
        self._used: dict[Hashable, tuple[str, str]] = {}

    def use(self, owner: Hashable, model: str, where: str) -> None:
        """`owner` (a conversation, shown in `where`) answers with `model` from now on."""
        self._used[owner] = (model, where)

    def leave(self, owner: Hashable) -> None:
        """`owner` closed: it uses no model any more."""
        self._used.pop(owner, None)

    def users(self, model: str, *, besides: Hashable | None = None) -> list[str]:
        """Where `model` is used, but by `besides` (in the order they began to use it)."""
        return list(
            dict.fromkeys(w for o, (m, w) in self._used.items() if m == model and o is not besides)
        )


def unload_notice(
    loads: list[str], candidates: list[str], users: Callable[[str], list[str]]
) -> str:
    """What loading `loads` may cost another window, before it is done: "Loading smol will
    unload test-model, used by the quick window." ('' when no model in use is at stake).
    `candidates` are the models the router may unload (`router.models.pushed_out`)."""
    used = {model: where for model in candidates if (where := users(model))}
    if not used:
        return ""
    names = " and ".join(loads)
    if len(candidates) == 1:
        model = candidates[0]
        return f"Loading {names} will unload {model}, used by {' and '.join(used[model])}."
    said = "; ".join(f"{model} is used by {' and '.join(where)}" for model, where in used.items())
    return (
        f"Loading {names} will unload one of {', '.join(candidates)} (the router unloads "
        f"the one used longest ago): {said}."
    )
