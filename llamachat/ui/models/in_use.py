"""Which model each open conversation answers with, across the App's windows.

The router unloads a model to make room for another (its `--models-max`) whatever
window uses it: before a load that may do so, a window asks `users` who else would
lose their model, and says so first. `App` holds the one `ModelsInUse`; each
`Conversation` says its model (`use`) and leaves when it closes (`leave`).
`UnloadGuard` is a window's check before a send: a send that makes the router load
its model, at the limit, where the load may unload a model another window uses, is
held once with what it would cost (`unload_notice`); sending the same again goes.

Threads: the router's limit is asked on `tasks.run_in_background`, once and after
each change of router. Errors: none raised; a limit not known says nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from concurrent.futures import Future

from PySide6.QtCore import QObject

from llamachat.router import providers
from llamachat.router.models import RUNNING, ModelInfo, Models, pushed_out
from llamachat.ui import tasks

log = logging.getLogger(__name__)


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


class UnloadGuard(QObject):
    """A window's check before a send: what loading its model may unload elsewhere."""

    def __init__(
        self,
        in_use: ModelsInUse,
        owner: Hashable,
        infos: Callable[[], list[ModelInfo]],
        registry: Callable[[], providers.Registry],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._in_use = in_use
        self._owner = owner
        self._infos = infos
        self._registry = registry
        self.limit: int | None = None
        """The router's `--models-max` as it said it last (None: no limit, or not known)."""
        self._said = ""  # the notice a send was held with: the same send again goes
        self.router_changed()

    def router_changed(self, _state: object = None) -> None:
        """Ask the router (another one, maybe) how many models it holds."""
        router = Models(self._registry().router())
        tasks.run_in_background(router.max_instances, self._on_limit, receiver=self)

    def _on_limit(self, future: Future) -> None:
        try:
            self.limit = future.result()
        except Exception as exc:  # noqa: BLE001 - no limit known: nothing is said
            log.info("the router's model limit is not known: %s", exc)

    def check(self, model: str) -> str:
        """'' when a send to `model` may go; else what its load may unload that another
        window uses (said once: the same send again goes)."""
        if self._registry().client_for(model)[1] != model:
            return ""  # a provider's model: nothing is loaded
        infos = self._infos()
        running = any(info.id == model and info.status in RUNNING for info in infos)
        candidates = [] if running else pushed_out(infos, [model], [model], self.limit)
        notice = unload_notice(
            [model], candidates, lambda m: self._in_use.users(m, besides=self._owner)
        )
        if not notice or notice == self._said:
            self._said = ""
            return ""
        self._said = notice
        return notice
