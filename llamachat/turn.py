"""One turn: everything a request to the model is built from, for every window and the CLI.

The chat window, the quick window and `ask --print` all build their requests here,
so the three cannot drift apart. A `Turn` is made of named parts:

    system           the prompt preset's text
    date             today's date (only while web search is offered)
    skill:<name>     each loaded skill, in load order
    summary          a compacted chat's summary of its earlier messages (`compact`)
    history          the earlier messages, replayed (replies give their answer only)
    user             the question's typed text
    attachment:<f>   each file attached to the question, in order
    tools            the tools offered to the model: the built-in ones (web_search,
                     load_skill, read_skill_file, search_documents), then any extra (MCP) ones

`Turn.messages()` joins them into the wire messages: one system message (the first
four kinds, byte-identical from turn to turn for the same inputs, which is what lets
llama.cpp reuse its prompt cache), the history, then the user message. `Turn.parts()`
lists them one by one, so each can be measured on its own. `Turn.body()` is the whole
request as `Client.stream_chat` sends it (messages, tools, sampling and reasoning
parameters, and llama.cpp's progress fields for its router): the meter counts that same
`Turn`, and nothing is added to it on the way out but later tool rounds.

Also here, because all three callers need them: parsing a typed question (`/name`
commands and skill mentions), picking the model, the tool offers (`search_config`,
`skills_config`) and the skills store (`skill_store`).

Qt-free: nothing here imports PySide6.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamachat import params, prompts, skills, tools
from llamachat.config import Config
from llamachat.router import client as backend
from llamachat.router.models import ModelInfo
from llamachat.tokens import chars_for_tokens
from llamachat.tools import web_search
from llamachat.tools.documents import LibraryConfig
from llamachat.tools.skill_tools import SkillsConfig
from llamachat.tools.web_search import SearchConfig

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- parts and the turn


@dataclass(frozen=True)
class Part:
    """One named piece of a request: `text` it adds to its message, or whole `items`.

    `items` are the replayed messages of "history", the image content parts of an
    image attachment, or the tool schemas of "tools".
    """

    name: str
    text: str = ""
    items: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Turn:
    """The next request, whole: what `body()` gives is what is sent, as built."""

    model: str
    system: tuple[Part, ...] = ()
    history: tuple[dict, ...] = ()
    question: tuple[Part, ...] = ()
    search_cfg: SearchConfig | None = None
    skills_cfg: SkillsConfig | None = None
    library_cfg: LibraryConfig | None = None
    """The settings the built-in tools offered run with."""
    tools: tuple[dict, ...] = ()
    """The schemas of the tools offered: the built-in ones, then the extra (MCP) ones."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Request body fields besides the messages and tools: sampling and reasoning
    (`params.request_fields`), and llama.cpp's progress fields for its router."""
    max_rounds: int = 0
    """How many rounds may call tools (0: none is offered)."""
    takes_tools: bool = True
    """False: the model's chat template cannot take tools; none is offered, now or later."""

    def parts(self) -> list[Part]:
        """Every part of the request in wire order, each with its name."""
        out = list(self.system)
        if self.history:
            out.append(Part("history", items=self.history))
        out.extend(self.question)
        if self.tools:
            out.append(Part("tools", items=self.tools))
        return out

    def system_message(self) -> str:
        """The system message's text ('' when there is none)."""
        return join_system(self.system)

    def messages(self) -> list[dict]:
        """The wire messages: system message (if any), the history, then the question."""
        system = self.system_message()
        out: list[dict] = [{"role": "system", "content": system}] if system else []
        out.extend(dict(message) for message in self.history)
        if self.question:
            out.append({"role": "user", "content": _content(self.question)})
        return out

    def body(self, model: str | None = None) -> dict[str, Any]:
        """The request's JSON body as sent, naming `model` (default: the turn's; a
        provider knows its models by other names)."""
        return backend.request_body(
            self.model if model is None else model, self.messages(), self.tools, self.params
        )

    def offering(self, extra: Sequence[dict], rounds: int) -> Turn:
        """This turn with more extra tools (an MCP server that came up after it was built),
        callable for `rounds` rounds; the turn itself when it offers them already, or when
        its model cannot take tools."""
        tools = offered_schemas(self.tools, extra)
        if tools == self.tools or not self.takes_tools:
            return self
        return dataclasses.replace(self, tools=tools, max_rounds=max(self.max_rounds, rounds))


def system_parts(
    preset: str, *, search_on: bool, store: skills.SkillStore | None, names: Sequence[str] = ()
) -> tuple[Part, ...]:
    """The system message's parts: the preset, today's date when web search is on, then
    each loaded skill in load order (names the store does not have are left out).

    The same inputs give the same bytes, and the date changes once a day.
    """
    parts = [Part("system", preset)] if preset else []
    if search_on:
        parts.append(Part("date", web_search.date_note()))
    loaded = [store.load(name) for name in names] if store is not None else []
    parts.extend(
        Part(f"skill:{skill.name}", skills.system_part(skill)) for skill in loaded if skill
    )
    return tuple(parts)


def join_system(parts: Iterable[Part]) -> str:
    """The system message's text made of its parts."""
    return "\n\n".join(part.text for part in parts if part.text)


def build_turn(
    cfg: Config,
    *,
    model: str,
    system: Sequence[Part],
    messages: Sequence[Mapping[str, Any]] = (),
    images: bool = False,
    store: skills.SkillStore | None = None,
    search_on: bool | None = None,
    preset: str = "",
    chat_params: Mapping[str, Any] | None = None,
    n_ctx: int | None = None,
    extra_tools: Sequence[dict] = (),
    router: bool = True,
    takes_tools: bool = True,
    library: LibraryConfig | None = None,
) -> Turn:
    """The turn that asks `model` about a conversation, as History stores it.

    `messages` are History rows (role, content, attachments), oldest first; a user
    message at the end is the question, the rest is replayed. `images` says whether
    the model reads images (else they are named, not sent). `search_on` offers web
    search (default: the configuration's `search_enabled`); `store` offers load_skill,
    its catalog within its share of the model's context `n_ctx` when that is known;
    `extra_tools` are the schemas of more tools (MCP's) offered after the built-in ones.
    The request parameters are the config's for `model` and `preset`, then `chat_params`,
    plus llama.cpp's progress fields when the request goes to its `router` (not a provider).
    A model whose template cannot take tools (`takes_tools` False) is offered none.
    `library` offers search_documents over the chat's attached libraries.
    """
    search_on = (cfg.search_enabled if search_on is None else search_on) and takes_tools
    rows = list(messages)
    if rows and rows[0].get("role") == "system":
        # A compacted chat starts with the summary of what came before (`compact`): the
        # end of the system message, a part of its own, so the roles still alternate.
        system = (*system, Part("summary", summary_text(rows.pop(0).get("content") or "")))
    question: tuple[Part, ...] = ()
    if rows and rows[-1].get("role") == "user":
        last = rows.pop()
        question = user_parts(
            last.get("content") or "", last.get("attachments") or [], images=images
        )
    search_cfg = search_config(cfg, on=search_on)
    loaded = tuple(p.name.removeprefix("skill:") for p in system if p.name.startswith("skill:"))
    skills_cfg = skills_config(cfg, store, loaded=loaded, n_ctx=n_ctx) if takes_tools else None
    tools = (
        offered_schemas(tool_schemas(search_cfg, skills_cfg, library), extra_tools)
        if takes_tools
        else ()
    )
    fields = request_params(cfg, model=model, preset=preset, chat=chat_params or {})
    return Turn(
        model=model,
        system=tuple(system),
        history=tuple(replay(rows, images=images)),
        question=question,
        search_cfg=search_cfg,
        skills_cfg=skills_cfg,
        library_cfg=library if takes_tools else None,
        tools=tools,
        params={**backend.LLAMA_PARAMS, **fields} if router else fields,
        max_rounds=cfg.max_searches if tools else 0,
        takes_tools=takes_tools,
    )


def summary_text(summary: str) -> str:
    """A compaction's summary as the model reads it, in the system message."""
    return f"Summary of the earlier conversation:\n\n{summary}"


def request_params(
    cfg: Config, *, model: str, preset: str = "", chat: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The request body fields for `model`: its config defaults, the preset's, then `chat`."""
    values = params.effective(
        cfg.model_params, cfg.preset_params, model=model, preset=preset, chat=chat or {}
    )
    return params.request_fields(values)


def oneshot_turn(
    cfg: Config,
    *,
    model: str,
    text: str,
    attachments: Sequence[dict] = (),
    names: Sequence[str] = (),
    store: skills.SkillStore | None = None,
    images: bool = False,
    n_ctx: int | None = None,
    extra_tools: Sequence[dict] = (),
    router: bool = True,
    takes_tools: bool = True,
) -> Turn:
    """A one-shot question (the quick window, `ask --print`): the Default preset, the
    configuration's web search, the skills `names` for this answer only, no history;
    the rest as `build_turn`."""
    search_on = cfg.search_enabled and takes_tools
    system = system_parts(preset_text(cfg), search_on=search_on, store=store, names=names)
    question = {"role": "user", "content": text, "attachments": list(attachments)}
    return build_turn(
        cfg,
        model=model,
        system=system,
        messages=[question],
        images=images,
        store=store,
        n_ctx=n_ctx,
        extra_tools=extra_tools,
        router=router,
        takes_tools=takes_tools,
    )


def replay(messages: Iterable[Mapping[str, Any]], *, images: bool) -> list[dict]:
    """Stored messages as wire messages: user messages with their attachments, replies
    with their answer only (reasoning and tool rounds stay out of the context, as
    llama.cpp's own web page does); anything else is left out."""
    out: list[dict] = []
    for message in messages:
        if message.get("role") == "user":
            content = user_content(
                message.get("content") or "", message.get("attachments") or [], images=images
            )
            out.append({"role": "user", "content": content})
        elif message.get("role") == "assistant" and message.get("content"):
            out.append({"role": "assistant", "content": message["content"]})
    return out


def preset_text(cfg: Config) -> str:
    """The Default preset's text (created when there is no preset yet); '' when unreadable."""
    store = prompts.Prompts(cfg.prompts_dir)
    try:
        store.ensure_default()
        return store.get(prompts.DEFAULT_NAME)
    except prompts.PromptError as exc:
        log.warning("cannot read the default prompt preset: %s", exc)
        return ""


# ---------------------------------------------------------------- the user's message


@dataclass(frozen=True)
class Attachment:
    """A file attached to a message: `kind` "image" (data is a data URI) or "text" (data is text)."""

    kind: str
    name: str
    mime: str
    data: str

    def to_dict(self) -> dict:
        """The form stored in History's `attachments` column."""
        return {"kind": self.kind, "name": self.name, "mime": self.mime, "data": self.data}

    @classmethod
    def from_dict(cls, data: dict) -> Attachment:
        """Rebuild an attachment stored by `to_dict`."""
        return cls(
            kind=str(data.get("kind", "text")),
            name=str(data.get("name", "")),
            mime=str(data.get("mime", "")),
            data=str(data.get("data", "")),
        )

    def label(self) -> str:
        """Short text for the attachment's chip."""
        if self.kind == "text" and self.name == "pasted text":
            lines = len(self.data.splitlines())
            return f"pasted text ({lines} line{'' if lines == 1 else 's'})"
        return self.name


def fence(text: str, info: str = "") -> str:
    """`text` in a fenced code block whose fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{marks}{info}\n{body}{marks}"


def fenced(name: str, text: str) -> str:
    """`text` as a fenced code block headed by its file name, tagged with its suffix."""
    language = Path(name).suffix.lstrip(".") if "." in name else ""
    return f"{name}:\n{fence(text, language)}"


def user_parts(text: str, attachments: Sequence[dict], *, images: bool) -> tuple[Part, ...]:
    """A user message's parts: "user" (the typed text), then one "attachment:<name>" each.

    A text file is inlined as a fenced block; an image is an image part for a model
    that reads images, else a line naming it.
    """
    parts = [Part("user", text)]
    for raw in attachments:
        item = Attachment.from_dict(raw)
        name = f"attachment:{item.name}"
        if item.kind != "image":
            parts.append(Part(name, fenced(item.name, item.data)))
        elif images:
            parts.append(
                Part(name, items=({"type": "image_url", "image_url": {"url": item.data}},))
            )
        else:
            parts.append(
                Part(name, f"[image {item.name} not sent: this model does not read images]")
            )
    return tuple(parts)


def user_content(text: str, attachments: Sequence[dict], *, images: bool) -> str | list[dict]:
    """The `content` of a user message: text with text files inlined, plus image parts.

    Without images the content stays a plain string, which every chat template
    accepts. Images for a model that cannot read them are named, not sent.
    """
    return _content(user_parts(text, attachments, images=images))


def _content(parts: Iterable[Part]) -> str | list[dict]:
    parts = list(parts)
    joined = "\n\n".join(part.text for part in parts if part.text)
    image_parts = [item for part in parts for item in part.items]
    if not image_parts:
        return joined
    return [{"type": "text", "text": joined}, *image_parts] if joined else image_parts


# ---------------------------------------------------------------- the question typed


@dataclass(frozen=True)
class Question:
    """A typed question with its skill commands taken out.

    `text` is what is sent (the typed text minus `/name` commands); `skills` are the
    skills to load, in load order (commands, then unambiguous mentions); `commands`
    the `/name`s typed; `suggested` the skills only mentioned by a word that may mean
    something else (`SkillStore.mentions`), to offer rather than load.
    """

    text: str
    skills: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    suggested: tuple[str, ...] = ()


def parse_question(
    text: str,
    store: skills.SkillStore | None,
    *,
    always: Iterable[str] = (),
    refresh: bool = True,
) -> Question:
    """Split `/name` commands and skill mentions out of a typed question.

    `always` are the skills the user turned mentions on for (`skill_mentions`). The
    store is refreshed first unless `refresh` is False (the caller did it).
    """
    if store is None:
        return Question(text)
    if refresh:
        store.refresh()
    rest, commands = skills.parse_commands(text, store.user_names())
    names = [name for name in commands if store.load(name) is not None]
    now, maybe = store.mentions(rest, always=always)
    for name in now:
        if name not in names and store.load(name) is not None:
            names.append(name)
    suggested = tuple(name for name in maybe if name not in names)
    return Question(rest, tuple(names), tuple(commands), suggested)


# ---------------------------------------------------------------- the model


def configured_model(cfg: Config) -> str:
    """The one-shot model the configuration names ('' when it leaves the choice open)."""
    return cfg.oneshot_model or cfg.default_model


def pick_model(cfg: Config, models: Sequence[ModelInfo]) -> str:
    """The configured one-shot model, else a loaded model, else the first listed; '' if none."""
    chosen = configured_model(cfg)
    if chosen:
        return chosen
    # A model already in memory answers at once; any other makes the router load one first.
    loaded = [info.id for info in models if info.status == "loaded"]
    listed = [info.id for info in models]
    return (loaded or listed or [""])[0]


def no_model_message(cfg: Config) -> str:
    """What to say when the router offers no model."""
    return (
        f"The router at {cfg.router_url} offers no models: add GGUF files to its models "
        "folder, or set oneshot_model or default_model in the configuration."
    )


# ---------------------------------------------------------------- skills and tools


def skill_store(cfg: Config) -> skills.SkillStore | None:
    """The skills of cfg's folders; None only when config.toml turned skills off.

    `skills_enabled` also reads False when no skills folder exists yet; the store is
    built then all the same, so a folder created later (by importing the first skill,
    or by hand) is found at the next refresh without a restart.
    """
    roots = cfg.skill_roots()
    if not cfg.skills_enabled and any(root.is_dir() for root in roots):
        return None
    return skills.SkillStore(list(roots))


def search_config(cfg: Config, *, on: bool | None = None) -> SearchConfig | None:
    """Web search for the tool loop, or None when it is off (`on`, default: the config's)."""
    if not (cfg.search_enabled if on is None else on):
        return None
    return SearchConfig(enabled=True, url=cfg.search_url, max_searches=cfg.max_searches)


def skills_config(
    cfg: Config,
    store: skills.SkillStore | None,
    *,
    loaded: Sequence[str] = (),
    n_ctx: int | None = None,
) -> SkillsConfig | None:
    """The model's skill tools (`load_skill`, and `read_skill_file` for the `loaded`
    skills' files), or None when they offer nothing.

    With the model's context size `n_ctx`, the catalog gets `skills_catalog_budget`.
    """
    if store is None or (store.tool_schema() is None and not loaded):
        return None
    return SkillsConfig(
        enabled=True,
        store=store,
        max_searches=cfg.max_searches,
        loaded=tuple(loaded),
        catalog_chars=skills_catalog_budget(cfg, n_ctx),
    )


def skills_catalog_budget(cfg: Config, n_ctx: int | None) -> int | None:
    """The skills catalog's characters: `skills_catalog_share` of the context (None: unknown)."""
    if not n_ctx:
        return None
    return chars_for_tokens(n_ctx * cfg.skills_catalog_share)


def tool_schemas(
    search_cfg: SearchConfig | None,
    skills_cfg: SkillsConfig | None,
    library_cfg: LibraryConfig | None = None,
) -> tuple[dict, ...]:
    """The tools these offers put in a request's first round, as the model reads them."""
    offer, _rounds = tools.offered(search_cfg, skills_cfg, library_cfg=library_cfg)
    return tuple(tool.schema for tool in offer if tool.schema)


def offered_schemas(builtin: Sequence[dict], extra: Sequence[dict]) -> tuple[dict, ...]:
    """The `builtin` tools' schemas, then those of `extra` not offered yet, in their order.

    A built-in tool wins a clash of names, as `tools.offered` decides when they run.
    """
    names = {schema.get("function", {}).get("name") for schema in builtin}
    out = list(builtin)
    for schema in extra:
        name = schema.get("function", {}).get("name")
        if name not in names:
            names.add(name)
            out.append(schema)
    return tuple(out)
