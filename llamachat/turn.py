"""One turn: everything a request to the model is built from, for every window and the CLI.

The chat window, the quick window and `ask --print` all build their requests here,
so the three cannot drift apart. A `Turn` is made of named parts:

    system           the prompt preset's text
    project          the instructions of the chat's project
    date             today's date (only while web search is offered)
    skill:<name>     each loaded skill, in load order
    memory           the person's memories in the chat's scope (`memory_part`)
    summary          a compacted chat's summary of its earlier messages (`compact`)
    history          the earlier messages, replayed (replies give their answer only)
    excerpts         the passages of the chat's libraries found for the question, when
                     its model cannot call tools (`excerpt_part`: llamachat searches)
    user             the question's typed text
    attachment:<f>   each file attached to the question, in order
    tools            the tools offered to the model, as objects that run their calls: the
                     built-in ones (`tools.offer.BUILTIN`), then any extra (MCP) ones

`Turn.messages()` joins them into the wire messages: one system message (the first
five kinds, byte-identical from turn to turn for the same inputs, which is what lets
llama.cpp reuse its prompt cache), the history, then the user message (the excerpts
go there, after everything the cache keeps, and are not replayed later, as a tool's
results are not). `Turn.parts()` lists them one by one, so each can be measured on its
own. `Turn.body()` is the whole request as `Client.stream_chat` sends it (messages,
tools, sampling and reasoning parameters, and llama.cpp's progress fields for its
router): the meter counts that same `Turn`, and nothing is added to it on the way out but
later tool rounds. The changes a built turn may see before it is sent, in its reply's
worker: `joined`, the MCP tools of its send (below); `without_tools`, when the model
turns out to take none (its server says so only once it is loaded); `read_libraries`,
when a library was still being read.

Also here, because all three callers need them: parsing a typed question (`/name`
commands and skill mentions), picking the model and the skills store (`skill_store`).

Qt-free: nothing here imports PySide6.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamachat import params, prompts, skills
from llamachat.config import Config
from llamachat.library.index import STORE_ERRORS
from llamachat.router import client as backend
from llamachat.router.models import ModelInfo
from llamachat.tokens import chars_for_tokens
from llamachat.tools import Inputs, LibraryConfig, Tool, documents, web_search
from llamachat.tools.offer import joined as join_tools
from llamachat.tools.offer import offered

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- parts and the turn


@dataclass(frozen=True)
class Part:
    """One named piece of a request: `text` it adds to its message, or whole `items`.

    `items` are the replayed messages of "history", the image or audio content part of
    an attachment, or the tool schemas of "tools".
    """

    name: str
    text: str = ""
    items: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Turn:
    """The next request, whole: what `body()` gives is what is sent, as built.

    A turn is sent once: its tools keep what that send's calls did (a skill loaded). What
    its first round offers (`offer`) is taken from them when the turn is made.
    """

    model: str
    system: tuple[Part, ...] = ()
    history: tuple[dict, ...] = ()
    question: tuple[Part, ...] = ()
    tools: tuple[Tool, ...] = field(default=(), compare=False)
    """The tools the model may call, looked up by name: the built-in ones, then the extra
    (MCP) ones. One with an empty schema is not offered yet (read_skill_file)."""
    offer: tuple[dict, ...] = field(init=False)
    """The schemas the first round offers: those of `tools`, as the turn was made."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Request body fields besides the messages and tools: sampling and reasoning
    (`params.request_fields`), and llama.cpp's progress fields for its router."""
    max_rounds: int = 0
    """How many rounds may call tools (0: none is offered)."""
    takes_tools: bool = True
    """False: the model's chat template cannot take tools; none is offered, now or later."""
    library: LibraryConfig | None = None
    """The chat's libraries (and its project's): the model searches them, or, when it
    cannot call tools, llamachat does for the question (`excerpt_part`)."""
    found: dict | None = None
    """What llamachat found for the question, as a ``search_done`` event: the sources
    listed under the reply (None: it searched nothing)."""
    excerpt_chars: int = documents.RESULT_CHARS
    """The most characters those passages may take (`excerpt_chars`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "offer", tuple(t.schema for t in self.tools if t.schema))

    def parts(self) -> list[Part]:
        """Every part of the request in wire order, each with its name."""
        out = list(self.system)
        if self.history:
            out.append(Part("history", items=self.history))
        out.extend(self.question)
        if self.offer:
            out.append(Part("tools", items=self.offer))
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
            self.model if model is None else model, self.messages(), self.offer, self.params
        )

    def joined(self, extra: Sequence[Tool], rounds: int) -> Turn:
        """This turn with the MCP tools of its send, called for up to `rounds` rounds.

        The one rule for MCP tools: a turn is built with those of the servers up then (for
        the meter); its send (a reply's worker, before the request leaves) gets those of
        every server, the ones still starting waited for, bound to that send (its consent,
        its Stop), and they take the place of every tool of their kind here, after the
        built-in ones (which keep their names). The turn itself when there is nothing to
        join or its model cannot take tools.
        """
        if not self.takes_tools or not extra:
            return self
        kinds = {type(tool) for tool in extra}
        tools = join_tools([t for t in self.tools if type(t) not in kinds], extra)
        return dataclasses.replace(self, tools=tools, max_rounds=max(self.max_rounds, rounds))


def system_parts(
    preset: str,
    *,
    search_on: bool,
    store: skills.SkillStore | None,
    names: Sequence[str] = (),
    instructions: str = "",
) -> tuple[Part, ...]:
    """The system message's parts: the preset, the project's instructions, today's date
    when web search is on, then each loaded skill in load order (names the store does not
    have are left out).

    The same inputs give the same bytes, and the date changes once a day.
    """
    parts = [Part("system", preset)] if preset else []
    if instructions.strip():
        parts.append(Part("project", instructions.strip()))
    if search_on:
        parts.append(Part("date", web_search.date_note()))
    loaded = [store.load(name) for name in names] if store is not None else []
    parts.extend(
        Part(f"skill:{skill.name}", skills.system_part(skill)) for skill in loaded if skill
    )
    return tuple(parts)


MEMORY_HEADING = (
    "What the user asked you to remember from earlier conversations (use it where it "
    "helps; do not mention it otherwise):"
)


def memory_part(memories: Sequence[Mapping[str, Any]]) -> Part | None:
    """The system message's "memory" part: one line per memory, None when there is none.

    Written in a stable order, pinned ones first, then oldest first (by id), whatever
    order they were chosen in (`history.memories.chosen` ranks by when each was last
    used): marking the memories a request carried as used changes their `used_at`,
    never these bytes, so the system message stays byte-identical turn after turn (the
    prompt cache holds) and changes only when a memory is added, edited, pinned,
    removed, or left out by the budget.
    """
    if not memories:
        return None
    ordered = sorted(memories, key=lambda m: (not m.get("pinned"), int(m["id"])))
    lines = "\n".join(f"- {m['text']}" for m in ordered)
    return Part("memory", f"{MEMORY_HEADING}\n{lines}")


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
    audio: bool = False,
    store: skills.SkillStore | None = None,
    search_on: bool | None = None,
    preset: str = "",
    chat_params: Mapping[str, Any] | None = None,
    n_ctx: int | None = None,
    extra_tools: Sequence[Tool] = (),
    router: bool = True,
    takes_tools: bool = True,
    library: LibraryConfig | None = None,
    memory_on: bool = False,
) -> Turn:
    """The turn that asks `model` about a conversation, as History stores it.

    `messages` are History rows (role, content, attachments), oldest first; a user
    message at the end is the question, the rest is replayed. `images` and `audio` say
    whether the model reads images and hears audio (else they are named, not sent). `search_on` offers web
    search (default: the configuration's `search_enabled`); `store` offers load_skill,
    its catalog within its share of the model's context `n_ctx` when that is known;
    `extra_tools` are more tools (MCP's) offered after the built-in ones (`tools.offered`).
    The request parameters are the config's for `model` and `preset`, then `chat_params`,
    plus llama.cpp's progress fields when the request goes to its `router` (not a provider).
    A model whose template cannot take tools (`takes_tools` False) is offered none.
    `library` offers search_documents over the chat's attached libraries; to a model
    that cannot call tools, the passages they hold for the question go with it instead.
    `memory_on` (the chat's memory: `memory_enabled` and its own switch) offers remember.
    """
    search_on = cfg.search_enabled if search_on is None else search_on
    if not takes_tools:
        # Today's date is there for web search, which a model without tools cannot do.
        system = tuple(part for part in system if part.name != "date")
    rows = list(messages)
    if rows and rows[0].get("role") == "system":
        # A compacted chat starts with the summary of what came before (`compact`): the
        # end of the system message, a part of its own, so the roles still alternate.
        system = (*system, Part("summary", summary_text(rows.pop(0).get("content") or "")))
    question: tuple[Part, ...] = ()
    found: dict | None = None
    if rows and rows[-1].get("role") == "user":
        last = rows.pop()
        text = last.get("content") or ""
        question = user_parts(text, last.get("attachments") or [], images=images, audio=audio)
        excerpts = excerpt_part(None if takes_tools else library, text, limit=excerpt_chars(n_ctx))
        if excerpts is not None:
            question, found = (excerpts[0], *question), excerpts[1]
    loaded = tuple(p.name.removeprefix("skill:") for p in system if p.name.startswith("skill:"))
    inputs = Inputs(
        cfg,
        switches={"search_enabled": search_on, "memory_enabled": memory_on},
        store=store,
        loaded=loaded,
        n_ctx=n_ctx,
        library=library,
    )
    tools = offered(inputs, extra_tools) if takes_tools else ()
    fields = request_params(cfg, model=model, preset=preset, chat=chat_params or {})
    return Turn(
        model=model,
        system=tuple(system),
        history=tuple(replay(rows, images=images, audio=audio)),
        question=question,
        tools=tools,
        params={**backend.LLAMA_PARAMS, **fields} if router else fields,
        max_rounds=cfg.max_searches if any(tool.schema for tool in tools) else 0,
        takes_tools=takes_tools,
        library=library,
        found=found,
        excerpt_chars=excerpt_chars(n_ctx),
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
    audio: bool = False,
    n_ctx: int | None = None,
    extra_tools: Sequence[Tool] = (),
    router: bool = True,
    takes_tools: bool = True,
    memories: Sequence[Mapping[str, Any]] = (),
) -> Turn:
    """A one-shot question (the quick window, `ask --print`): the Default preset, the
    configuration's web search, the skills `names` for this answer only, the `memories`
    chosen for it (`memory_part`; the remember tool is never offered: nothing to undo),
    no history; the rest as `build_turn`."""
    search_on = cfg.search_enabled and takes_tools
    system = system_parts(preset_text(cfg), search_on=search_on, store=store, names=names)
    memory = memory_part(memories)
    system = system if memory is None else (*system, memory)
    question = {"role": "user", "content": text, "attachments": list(attachments)}
    return build_turn(
        cfg,
        model=model,
        system=system,
        messages=[question],
        images=images,
        audio=audio,
        store=store,
        n_ctx=n_ctx,
        extra_tools=extra_tools,
        router=router,
        takes_tools=takes_tools,
    )


def replay(
    messages: Iterable[Mapping[str, Any]], *, images: bool, audio: bool = False
) -> list[dict]:
    """Stored messages as wire messages: user messages with their attachments, replies
    with their answer only (reasoning and tool rounds stay out of the context, as
    llama.cpp's own web page does); anything else is left out."""
    out: list[dict] = []
    for message in messages:
        if message.get("role") == "user":
            content = user_content(
                message.get("content") or "",
                message.get("attachments") or [],
                images=images,
                audio=audio,
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
    """A file attached to a message: `kind` "image" or "audio" (data is a data URI) or
    "text" (data is text); `seconds`: how long a sound lasts, when known."""

    kind: str
    name: str
    mime: str
    data: str
    seconds: float | None = None

    def to_dict(self) -> dict:
        """The form stored in History's `attachments` column."""
        stored = {"kind": self.kind, "name": self.name, "mime": self.mime, "data": self.data}
        return stored if self.seconds is None else {**stored, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: dict) -> Attachment:
        """Rebuild an attachment stored by `to_dict`."""
        return cls(
            kind=str(data.get("kind", "text")),
            name=str(data.get("name", "")),
            mime=str(data.get("mime", "")),
            data=str(data.get("data", "")),
            seconds=_seconds(data.get("seconds")),
        )

    def label(self) -> str:
        """Short text for the attachment's chip."""
        if self.kind == "text" and self.name == "pasted text":
            lines = len(self.data.splitlines())
            return f"pasted text ({lines} line{'' if lines == 1 else 's'})"
        if self.kind == "audio" and self.seconds is not None:
            minutes, seconds = divmod(round(self.seconds), 60)
            return f"{self.name} ({minutes}:{seconds:02d})"
        return self.name

    def audio_part(self) -> dict:
        """The `input_audio` content part of a sound (llama.cpp takes "wav" and "mp3")."""
        return {
            "type": "input_audio",
            "input_audio": {"data": self.data.partition(",")[2], "format": audio_format(self.mime)},
        }


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3"}
"""The sounds an attachment can be (mime type: llama.cpp's `input_audio.format`)."""


def audio_format(mime: str) -> str:
    """llama.cpp's `input_audio.format` of a sound's mime type ("wav" unless it is MP3)."""
    return AUDIO_FORMATS.get(mime, "wav")


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


def user_parts(
    text: str, attachments: Sequence[dict], *, images: bool, audio: bool = False
) -> tuple[Part, ...]:
    """A user message's parts: "user" (the typed text), then one "attachment:<name>" each.

    A text file is inlined as a fenced block; an image is an image part for a model
    that reads images, a sound an `input_audio` part for a model that hears audio,
    else a line naming it (a server without them would refuse the request).
    """
    parts = [Part("user", text)]
    for raw in attachments:
        item = Attachment.from_dict(raw)
        name = f"attachment:{item.name}"
        if item.kind == "audio":
            parts.append(
                Part(name, items=(item.audio_part(),))
                if audio
                else Part(name, f"[audio {item.name} not sent: this model does not hear audio]")
            )
        elif item.kind != "image":
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


def user_content(
    text: str, attachments: Sequence[dict], *, images: bool, audio: bool = False
) -> str | list[dict]:
    """The `content` of a user message: text with text files inlined, plus image and
    audio parts.

    Without them the content stays a plain string, which every chat template accepts.
    Images and sounds for a model that cannot take them are named, not sent.
    """
    return _content(user_parts(text, attachments, images=images, audio=audio))


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


# ---------------------------------------------------------------- a model without tools


EXCERPTS_SHARE = 0.25
"""The most of a model's context the passages found for a question may take: a small
model's 2,048 tokens keep room for the rest of the request and the reply."""


def excerpt_chars(n_ctx: int | None) -> int:
    """The characters the passages for a question may take in a context of `n_ctx` tokens."""
    if not n_ctx:
        return documents.RESULT_CHARS
    return min(documents.RESULT_CHARS, chars_for_tokens(n_ctx * EXCERPTS_SHARE))


def excerpt_part(
    library: LibraryConfig | None,
    text: str,
    *,
    limit: int = documents.RESULT_CHARS,
    wait: float = 0.0,
    cancel: threading.Event | None = None,
) -> tuple[Part, dict] | None:
    """The "excerpts" part for a question `text` to a model that cannot call tools, and
    the ``search_done`` event of its sources; None without a library (or a word to find).

    llamachat searches for the model, with the message as the query. By words only
    (BM25): this runs when the request is built, on the GUI thread, and a query's vector
    would make it wait for the router. A library still being read is waited for up to
    `wait` seconds (`read_libraries`, off the GUI thread).
    """
    if library is None or not text.strip():
        return None
    try:
        found = documents.find(
            dataclasses.replace(library, embedder=None), text, wait=wait, cancel=cancel
        )
    except STORE_ERRORS as exc:
        log.warning("cannot search the chat's libraries: %s", exc)
        return None
    return Part("excerpts", documents.excerpts_text(found, limit)), found.event()


def without_tools(request: Turn) -> Turn:
    """`request` for a model whose template turned out to take no tools (its server says
    so only once it is loaded): no tool offered (no round may call one), no date note, and
    the passages of its libraries go with the question, as `build_turn` makes it for such
    a model."""
    question, found = request.question, None
    excerpts = excerpt_part(request.library, _question_text(request), limit=request.excerpt_chars)
    if excerpts is not None:
        question, found = (excerpts[0], *question), excerpts[1]
    return dataclasses.replace(
        request,
        system=tuple(part for part in request.system if part.name != "date"),
        question=question,
        tools=(),
        max_rounds=0,
        takes_tools=False,
        found=found,
    )


def read_libraries(request: Turn, cancel: threading.Event | None = None) -> Turn:
    """`request` with its excerpts found again once the libraries still being read when
    it was built are read (the chat's first message brought them), waiting up to
    `documents.WAIT_SECONDS`; `request` itself when none was being read. It waits: run it
    off the GUI thread."""
    if (request.found or {}).get("error") != documents.READING:
        return request
    text = _question_text(request)
    excerpts = excerpt_part(
        request.library,
        text,
        limit=request.excerpt_chars,
        wait=documents.WAIT_SECONDS,
        cancel=cancel,
    )
    if excerpts is None:
        return request
    question = tuple(excerpts[0] if p.name == "excerpts" else p for p in request.question)
    return dataclasses.replace(request, question=question, found=excerpts[1])


def _question_text(request: Turn) -> str:
    """The question's typed text ('' without a question)."""
    return next((part.text for part in request.question if part.name == "user"), "")


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


# ---------------------------------------------------------------- skills


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
