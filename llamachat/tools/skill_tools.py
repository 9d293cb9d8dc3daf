"""The skill tools: `load_skill` puts a skill's instructions into the conversation, `read_skill_file` reads its other files.

`make` is their entry in the built-in tools (`offer.BUILTIN`): on while there is a skills
store (`turn.skill_store` reads `skills_enabled`). The two share the turn's loaded skills:
a skill load_skill loads can have its files read in the same reply.
"""

from __future__ import annotations

from collections.abc import Callable

from llamachat import skills
from llamachat.config import Config
from llamachat.tokens import chars_for_tokens
from llamachat.tools.base import Tool, ToolError, ToolResult, json_arguments
from llamachat.tools.inputs import Inputs


class LoadSkill(Tool):
    """`load_skill`: a skill's instructions from the store, by name; once per conversation."""

    name = skills.LOAD_SKILL_NAME

    def __init__(
        self,
        store: skills.SkillStore,
        loaded: set[str] | None = None,
        on_load: Callable[[], None] | None = None,
        *,
        catalog_chars: int | None = None,
    ) -> None:
        self._store = store
        # The skills already in the conversation (system message or an earlier call):
        # a second copy would only cost context.
        self._loaded = loaded if loaded is not None else set()
        self._on_load = on_load
        # Taken once per turn: the catalog the model was offered is the one it chose from.
        self.schema = store.tool_schema(max_chars=catalog_chars) or {}

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


def catalog_budget(cfg: Config, n_ctx: int | None) -> int | None:
    """The skills catalog's characters: `skills_catalog_share` of the context (None: unknown)."""
    if not n_ctx:
        return None
    return chars_for_tokens(n_ctx * cfg.skills_catalog_share)


def make(inputs: Inputs) -> list[Tool]:
    """The turn's skill tools: load_skill while there is a skill to load, read_skill_file
    too (offered once a loaded skill has files); none without a store."""
    store = inputs.store
    if store is None:
        return []
    loaded = set(inputs.loaded)
    reader = ReadSkillFile(store, loaded)
    loader = LoadSkill(
        store,
        loaded,
        on_load=reader.refresh,
        catalog_chars=catalog_budget(inputs.cfg, inputs.n_ctx),
    )
    if not (loader.schema or reader.schema):
        return []
    return [loader, reader] if loader.schema else [reader]
