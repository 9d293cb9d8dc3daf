"""The tools a model can call: one small interface, and the tools the app offers.

A `Tool` has a `name`, a `schema` (the entry of the OpenAI `tools` list; empty: not
offered this round) and `run(arguments) -> ToolResult`: the text the model reads, plus
the stream events the window shows (``search_done``, ``skill_loaded``, and ``tool_done``,
any other tool's call and short result, shown as a search is). A tool may also
`announce` a call before it runs (``search_start``), so the window can say what is being
waited for. `backend.Client.stream_chat` looks tools up by name and knows nothing else
about them: adding a tool is one `Tool` subclass and one line in `offered` (or a
`tools=` list passed to `stream_chat`). The app's tools: `web_search`, `load_skill`
and `read_skill_file`.

Errors: a tool raises `ToolError` for a failure the model should read (bad arguments,
an unknown skill); `answer` turns that, an unknown tool name and any other exception
raised by `run` into a tool *result*, so the model always gets an answer to its call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from . import search, skills

if TYPE_CHECKING:
    from .backend import SearchConfig, SkillsConfig

log = logging.getLogger(__name__)

Event = tuple[str, object]
"""A stream event a tool hands the window: (kind, value), as `backend.StreamEvent`."""


class ToolError(Exception):
    """A tool call that cannot be answered; str() is the sentence the model reads."""


@dataclass
class ToolResult:
    """What one tool call produced: the text the model reads and the events the window shows."""

    text: str
    events: list[Event] = field(default_factory=list)


class Tool:
    """A function the model can call; subclasses set `name` and `schema` and implement `run`."""

    name: str
    schema: dict

    def announce(self, arguments: str) -> list[Event]:
        """Events to show before the call runs (none by default)."""
        return []

    def run(self, arguments: str) -> ToolResult:
        """Answer one call whose JSON arguments are `arguments`; raise ToolError to refuse."""
        raise NotImplementedError


def answer(tools: Sequence[Tool], name: str, arguments: str) -> tuple[list[Event], ToolResult]:
    """Run the call `name(arguments)`: its announce events and its result, failures included.

    Never raises (but for BaseExceptions such as KeyboardInterrupt): every failure
    becomes a result the model reads, as simonw/llm does, so a turn always goes on.
    """
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        names = ", ".join(sorted(t.name for t in tools))
        return [], ToolResult(f"error: unknown tool '{name}'. The tools you can call are: {names}.")
    announced: list[Event] = []
    try:
        announced = tool.announce(arguments)
        return announced, tool.run(arguments)
    except ToolError as exc:
        return announced, ToolResult(f"error: {exc}")
    except Exception as exc:
        log.exception("the %s tool failed", name)
        return announced, ToolResult(
            f"error: the {name} tool failed ({type(exc).__name__}: {exc}). "
            "Carry on without it, and tell the user if the answer needed it."
        )


def json_arguments(arguments: str, example: str) -> dict:
    """The call's arguments as a JSON object; else a ToolError showing `example`."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ToolError(f"the arguments were not a JSON object; call it with {example}")
    return parsed


class WebSearch(Tool):
    """`web_search`: the top results of a SearXNG search (`search.search`)."""

    name = search.TOOL_NAME
    schema = search.TOOL_SCHEMA

    def __init__(self, cfg: SearchConfig, http: Callable[[], httpx.Client] | None = None) -> None:
        self._cfg = cfg
        self._http = http

    def _query(self, arguments: str) -> str:
        try:
            return search.parse_query(arguments)
        except ValueError as exc:
            raise ToolError(
                f"the web_search arguments could not be used ({exc}). "
                'Call web_search with {"query": "..."}.'
            ) from None

    def announce(self, arguments: str) -> list[Event]:
        """The query about to be searched (``search_start``)."""
        return [("search_start", self._query(arguments))]

    def run(self, arguments: str) -> ToolResult:
        """Search; a search that fails is a result too, with the reason shown and read."""
        query = self._query(arguments)
        try:
            found = search.search(
                self._cfg.url,
                query,
                timeout=self._cfg.timeout,
                client=self._http() if self._http is not None else None,
            )
        except search.SearchError as exc:
            log.info("web search failed: %s", exc)
            return ToolResult(
                search.error_text(query, str(exc)),
                [("search_done", {"query": query, "results": [], "error": str(exc)})],
            )
        return ToolResult(
            search.result_text(query, found),
            [("search_done", {"query": query, "results": found, "error": ""})],
        )


class LoadSkill(Tool):
    """`load_skill`: a skill's instructions from the store, by name; once per conversation."""

    name = skills.LOAD_SKILL_NAME

    def __init__(
        self,
        store: skills.SkillStore,
        loaded: set[str] | None = None,
        on_load: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        # The skills already in the conversation (system message or an earlier call):
        # a second copy would only cost context.
        self._loaded = loaded if loaded is not None else set()
        self._on_load = on_load
        # Taken once per turn: the catalog the model was offered is the one it chose from.
        self.schema = store.tool_schema() or {}

    def run(self, arguments: str) -> ToolResult:
        """The skill's text (and ``skill_loaded``); an unknown name is a ToolError."""
        name = skills.parse_name(arguments)
        if not name:
            raise ToolError(
                'the load_skill arguments were not valid; call it with {"name": "<skill name>"}'
            )
        skill = self._store.load(name)
        if skill is None:
            known = self.schema.get("function", {}).get("parameters", {}).get("properties", {})
            names = ", ".join(known.get("name", {}).get("enum", []))
            raise ToolError(f"No such skill: {name}. The skills you can load: {names}.")
        if skill.name in self._loaded:
            return ToolResult(
                f"The skill {skill.name} is already loaded: its instructions are earlier in "
                "this conversation. Follow them; there is no need to load it again."
            )
        content = skills.tool_message("", skill)["content"]
        if not skill.model_invocable:
            return ToolResult(content)
        self._loaded.add(skill.name)
        if self._on_load is not None:
            self._on_load()
        return ToolResult(content, [("skill_loaded", skill.name)])


class ReadSkillFile(Tool):
    """`read_skill_file`: a text file from the folder of a skill loaded in the conversation.

    Offered (a non-empty `schema`) only while a loaded skill has files besides
    SKILL.md; `refresh` re-reads that after load_skill loads one mid-turn.
    """

    name = skills.READ_FILE_NAME

    def __init__(self, store: skills.SkillStore, loaded: set[str]) -> None:
        self._store = store
        self._loaded = loaded
        self.schema: dict = {}
        self.refresh()

    def refresh(self) -> None:
        """Offer the tool for the loaded skills that have files (none: no schema)."""
        with_files = []
        for name in sorted(self._loaded):
            skill = self._store.load(name)
            if skill is not None and skills.resource_files(skill):
                with_files.append(name)
        self.schema = skills.read_file_schema(with_files) if with_files else {}

    def run(self, arguments: str) -> ToolResult:
        """The file's text, and a ``tool_done`` event the window shows as it does a search."""
        example = '{"skill": "<loaded skill>", "path": "reference.md"}'
        parsed = json_arguments(arguments, example)
        name, path = parsed.get("skill"), parsed.get("path")
        if not isinstance(name, str) or not isinstance(path, str):
            raise ToolError(f"give the skill's name and a relative path, as {example}")
        skill = self._store.load(name) if name in self._loaded else None
        if skill is None:
            loaded = ", ".join(sorted(self._loaded)) or "none"
            raise ToolError(
                f"the skill {name} is not loaded; files can be read from the loaded "
                f"skills only ({loaded})."
            )
        shown = f"{name}/{path.strip()}"
        try:
            text, summary = skills.read_skill_file(skill, path)
        except skills.SkillFileError as exc:
            event = {"title": "Read skill file", "query": shown, "results": [], "error": str(exc)}
            return ToolResult(f"error: {exc}", [("tool_done", event)])
        event = {"title": "Read skill file", "query": summary, "results": [], "error": ""}
        return ToolResult(text, [("tool_done", event)])


def offered(
    search_cfg: SearchConfig | None,
    skills_cfg: SkillsConfig | None,
    http: Callable[[], httpx.Client] | None = None,
    extra: Sequence[Tool] = (),
    extra_rounds: int = 0,
) -> tuple[list[Tool], int]:
    """The app's tools that these settings turn on, and how many rounds may call them.

    `http` gives the client web searches go through, made when a search first needs it
    (without it, a fresh client per search). A tool whose `schema` is empty is not
    offered in a round (read_skill_file until a loaded skill has files). `extra` are
    more tools (an MCP server's), callable for `extra_rounds` rounds; a built-in tool
    wins a clash of names.
    """
    registered: list[tuple[Tool, int]] = []
    if search_cfg is not None and search_cfg.enabled and search_cfg.url:
        registered.append((WebSearch(search_cfg, http), search_cfg.max_searches))
    if skills_cfg is not None and skills_cfg.enabled and skills_cfg.store is not None:
        loaded = set(skills_cfg.loaded)
        reader = ReadSkillFile(skills_cfg.store, loaded)
        skill_tool = LoadSkill(skills_cfg.store, loaded, on_load=reader.refresh)
        if skill_tool.schema:
            registered.append((skill_tool, skills_cfg.max_searches))
        if skill_tool.schema or reader.schema:
            registered.append((reader, skills_cfg.max_searches))
    builtin = {tool.name for tool, _cap in registered}
    for tool in extra:
        if tool.name in builtin:
            log.warning("the tool %s is not offered: a built-in tool has its name", tool.name)
            continue
        registered.append((tool, extra_rounds))
    rounds = max((cap for _tool, cap in registered), default=0)
    return [tool for tool, _cap in registered], max(0, rounds)
