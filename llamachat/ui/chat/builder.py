"""One conversation's next request, built whole with `turn` for sending and for the meter.

`TurnBuilder(app, state, ...)` builds the `turn.Turn` the conversation's next send would
make (`next_turn`), from its saved messages and `ChatState`: the system message, the
history, the question, every tool offered (the built-in ones and the MCP tools of the
servers that are up), the parameters. The reply sends that Turn as built, and the
context meter counts the same Turn (`draft_turn`, with the draft for a question): the
two cannot drift apart. A comparison's requests (`next_turns`, one per model) are each
the one a send to that model makes, what they share read once. `warm_turn` is that request up to where the next message starts,
which the cache warm-up sends. In chat mode the system message is cached, byte-identical from
turn to turn (what lets llama.cpp reuse its prompt cache), until `forget_system` says
what goes into it changed. Its memory part is read from History at each build (a few
short rows) and its bytes change only when a memory does (`turn.memory_part`).

Qt-free but for the App's protocol; reads History, so it runs on the GUI thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from llamachat import params, turn
from llamachat.config import Config
from llamachat.history import memories
from llamachat.history.store import HistoryError
from llamachat.router import client as backend
from llamachat.tools import LibraryConfig
from llamachat.ui.chat.state import ONESHOT, AppState, ChatState


class TurnBuilder:
    """Builds a conversation's requests from its state; caches its system message."""

    def __init__(
        self,
        app: AppState,
        state: ChatState,
        *,
        preset: Callable[[], str],
        prompt: Callable[[], tuple[str, str]],
        images: Callable[[str], bool],
        hears: Callable[[str], bool] = lambda _model: False,
    ) -> None:
        self._app = app
        self.state = state
        self.preset = preset
        """The preset's text, as the window shows it."""
        self.prompt = prompt
        """The preset's name and custom text, as the window shows it."""
        self.images = images
        """Whether a model reads images."""
        self.hears = hears
        """Whether a model hears audio."""
        self._system_cache: tuple[turn.Part, ...] | None = None
        # The missing skills and the preset text the cached system message was built with.
        self._cached_missing: list[str] = []
        self._cached_preset = ""
        self._cached_instructions = ""
        # What the models' servers said of their chat templates: whether they take tools.
        self._takes: dict[str, bool] = {}
        # The context sizes of models other than the chat's (whose size its meter knows),
        # as the Compare chooser's meter learned them.
        self._sizes: dict[str, int] = {}
        self.memory = memories.Chosen((), ())
        """The memories the last request built carried, and those the budget left out."""

    def config(self) -> Config:
        """The configuration in effect (the App's)."""
        return self._app.config

    def client_for(self, model: str) -> tuple[backend.Client, str]:
        """The client serving `model` and the name that server knows it by."""
        return self._app.registry.client_for(model)

    def missing_skills(self) -> list[str]:
        """The loaded skills no longer on disk, in load order (the model does not get them)."""
        store = self.state.store
        return [n for n in self.state.loaded if store is None or store.load(n) is None]

    def takes_tools(self, model: str) -> bool:
        """Whether `model` is offered tools: unless its server said its template takes none."""
        return self._takes.get(model, True)

    def tools_known(self, model: str) -> bool:
        """Whether `model`'s server has said if its template takes tools (it says so only
        once the model is loaded)."""
        return model in self._takes

    def set_takes_tools(self, model: str, takes: bool) -> bool:
        """What `model`'s server says of tools (`Models.takes_tools`); True when it changed."""
        changed = takes != self.takes_tools(model)
        self._takes[model] = takes
        return changed

    def set_context_size(self, model: str, n_ctx: int) -> None:
        """What `model`'s server says of its context size (the Compare chooser asks)."""
        self._sizes[model] = n_ctx

    def context_sizes(self, models: Sequence[str], chat: int | None) -> dict[str, int | None]:
        """Each of `models`' context size as far as known (None: not yet): `chat` for the
        chat's model (its meter's), the others' as their servers said."""
        return {m: chat if m == self.state.model else self._sizes.get(m) for m in models}

    def default_params(self, model: str) -> dict:
        """The parameters the config gives `model` and the chat's preset."""
        cfg = self.config()
        return params.effective(
            cfg.model_params, cfg.preset_params, model=model, preset=self.prompt()[0], chat={}
        )

    def memory_allowed(self, model: str) -> bool:
        """Whether requests to `model` carry memories and offer remember: `memory_enabled`,
        the chat's switch, not a temporary chat, and the router's model or a provider's
        named in `memory_providers`. One-shot mode carries them and never offers remember."""
        cfg, state = self.config(), self.state
        if not (cfg.memory_enabled and state.memory_on) or state.temporary:
            return False
        router = self.client_for(model)[1] == model
        return memories.sent_to(model, router=router, providers=cfg.memory_providers)

    def memory_rows(self) -> list[memories.MemoryRow]:
        """The memories in the chat's scope: everywhere's and its project's."""
        try:
            return self._app.history.memories.listed(project_id=self.project_id())
        except HistoryError:
            return []

    def memory_choice(self, model: str) -> memories.Chosen:
        """The memories a request to `model` would carry now, and those the budget leaves out."""
        if not self.memory_allowed(model):
            return memories.Chosen((), ())
        return memories.chosen(self.memory_rows(), self.config().memory_tokens)

    def forget_system(self) -> None:
        """What goes into the system message changed: the next request builds it again."""
        self._system_cache = None

    def system_message(self) -> str:
        """The system message the next request starts with (chat mode's, cached)."""
        return turn.join_system(self._system_parts())

    def next_turn(
        self, model: str, *, before: int | None = None, n_ctx: int | None = None
    ) -> turn.Turn:
        """The next request to `model`, from the saved messages, whole as it is sent.

        `before` leaves out that message and those after it (a retry's earlier reply);
        `n_ctx`, the model's context size, bounds the skills catalog.
        """
        return self.next_turns((model,), before=before, sizes={model: n_ctx})[0]

    def next_turns(
        self,
        models: Sequence[str],
        *,
        before: int | None = None,
        sizes: Mapping[str, int | None] | None = None,
    ) -> list[turn.Turn]:
        """The next request to each of `models` (a comparison's), each the one a send to
        that model alone makes; `before` as `next_turn`'s, `sizes` each model's context
        size (`context_sizes`; one left out is not known).

        What every model shares is read and built once: the saved messages, the system
        message, the memories chosen, the MCP tools of the servers up. What depends on the
        model is built for each: the tools offered (none to a model whose template takes
        none, which gets the passages of the chat's libraries instead), images and sounds
        sent or named, the memories carried or not, the parameters. Each request has tools
        of its own: a tool keeps what its send's calls did (a skill loaded).
        """
        state, cfg = self.state, self.config()
        history = self._app.history
        stored = history.messages(state.session_id) if state.session_id is not None else []
        # Left out of the request, never out of the chat: the oldest messages, when trimmed.
        stored = stored[state.trimmed :] if state.mode != ONESHOT else stored
        if before is not None:
            stored = [row for row in stored if row["id"] < before]
        mcp = self._app.mcp.ready_tools(state.session_id)
        sizes = sizes or {}
        # Chosen once (a few History rows), carried by the models that may have them.
        chosen: list[memories.Chosen] = []

        def memory_for(model: str) -> memories.Chosen:
            if not self.memory_allowed(model):
                return memories.Chosen((), ())
            if not chosen:
                chosen.append(memories.chosen(self.memory_rows(), cfg.memory_tokens))
            return chosen[0]

        requests = []
        if state.mode == ONESHOT:
            question = next((row for row in stored if row["role"] == "user"), None)
            for model in models:
                memory = memory_for(model)  # a one-shot session has no project
                requests.append(
                    turn.oneshot_turn(
                        cfg,
                        model=model,
                        text=(question["content"] if question else "") or "",
                        attachments=(question["attachments"] if question else []) or [],
                        names=list(state.loaded),
                        store=state.store,
                        images=self.images(model),
                        audio=self.hears(model),
                        n_ctx=sizes.get(model),
                        extra_tools=mcp,
                        router=self.client_for(model)[1] == model,
                        takes_tools=self.takes_tools(model),
                        memories=memory.kept,
                    )
                )
            self.memory = memory_for(models[0])
            return requests
        system, preset, library = self._system_parts(), self.prompt()[0], self.library()
        for model in models:
            part = turn.memory_part(memory_for(model).kept)
            requests.append(
                turn.build_turn(
                    cfg,
                    model=model,
                    system=system if part is None else (*system, part),
                    messages=stored,
                    images=self.images(model),
                    audio=self.hears(model),
                    store=state.store,
                    search_on=state.search_on,
                    preset=preset,
                    chat_params=state.params,
                    n_ctx=sizes.get(model),
                    extra_tools=mcp,
                    # A provider's model is renamed on the way; only llama.cpp's router
                    # takes its fields.
                    router=self.client_for(model)[1] == model,
                    takes_tools=self.takes_tools(model),
                    library=library,
                    memory_on=self.memory_allowed(model),
                )
            )
        # What the memories' last use is marked from once the request left (`memory.sent`).
        self.memory = memory_for(models[0])
        return requests

    def library(self) -> LibraryConfig | None:
        """The chat's libraries and its project's, as searched (None: it has none)."""
        state = self.state
        if state.temporary:
            return None
        return self._app.libraries.config_for(state.session_id, self.project_id())

    def question_parts(
        self, model: str, text: str, attachments: list[dict], n_ctx: int | None
    ) -> tuple[turn.Part, ...]:
        """The parts a question `text` makes in a request to `model` (whose context is
        `n_ctx`): the passages found for it first when the model cannot call tools
        (`turn.excerpt_part`), then its own."""
        parts = turn.user_parts(
            text, attachments, images=self.images(model), audio=self.hears(model)
        )
        searched = None if self.takes_tools(model) else self.library()
        excerpts = turn.excerpt_part(searched, text, limit=turn.excerpt_chars(n_ctx))
        return parts if excerpts is None else (excerpts[0], *parts)

    def project_id(self) -> int | None:
        """The chat's project as the history has it now (it may have moved since opened)."""
        if self.state.session_id is None:
            return self.state.project_id
        session = self._app.history.get_session(self.state.session_id)
        return session["project_id"] if session is not None else None

    def draft_turn(self, model: str, n_ctx: int | None) -> turn.Turn:
        """What the next send makes but the draft, for the meter: one-shot, without the
        stored question (the last answer's; the next one is the draft)."""
        request = self.next_turn(model, n_ctx=n_ctx)
        if self.state.mode == ONESHOT:
            request = dataclasses.replace(request, question=())
        return request

    def warm_turn(self, model: str, n_ctx: int | None) -> turn.Turn:
        """The request the next message would make, up to where that message starts, for
        the server to read ahead (`warmup`): an empty question and `max_tokens` 0.

        While a message is edited, the next send replaces it and what follows it.
        """
        editing = self.state.editing
        if editing is None:
            request = self.draft_turn(model, n_ctx)
        else:
            request = self.next_turn(model, before=editing, n_ctx=n_ctx)
        history = request.history
        if request.question:
            # A question left unanswered (its reply failed): the next message follows it.
            history += (request.messages()[-1],)
        return dataclasses.replace(
            request,
            history=history,
            question=(turn.Part("user", ""),),
            params={**request.params, "max_tokens": 0},
        )

    def _system_parts(self) -> tuple[turn.Part, ...]:
        # Built once per preset, search toggle and set of loaded skills: the same bytes
        # turn after turn are what lets llama.cpp reuse its prompt cache. A skill that
        # left the disk or came back changes it too (the missing ones are left out).
        # The preset's text is compared too: the meter builds the request early (a new
        # chat, before its window has reset the preset), so a change must not go unseen.
        # The project's instructions are read each time: the project's dialog may have
        # changed them, or the chat moved to another project.
        missing = self.missing_skills()
        preset = self.preset()
        instructions = self.project_instructions()
        if (
            self._system_cache is None
            or missing != self._cached_missing
            or preset != self._cached_preset
            or instructions != self._cached_instructions
        ):
            self._cached_missing = missing
            self._cached_preset = preset
            self._cached_instructions = instructions
            state = self.state
            self._system_cache = turn.system_parts(
                preset,
                search_on=state.search_on,
                store=state.store,
                names=list(state.loaded),
                instructions=instructions,
            )
        return self._system_cache

    def project_instructions(self) -> str:
        """The instructions of the chat's project ('' in none; a temporary chat keeps those
        of the project it was started in)."""
        # A temporary chat's ids are those of its memory database, not of the history.
        project_id = self.state.project_id if self.state.temporary else self.project_id()
        project = self._app.history.projects.get(project_id) if project_id else None
        return project["instructions"] if project is not None else ""
