"""Which tools a request offers: the built-in ones its settings turn on, then any extra (MCP) tools."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from llamachat.tools.documents import LibraryConfig
    from llamachat.tools.skill_tools import SkillsConfig
    from llamachat.tools.web_search import SearchConfig
from llamachat.tools.base import Tool
from llamachat.tools.documents import SearchDocuments
from llamachat.tools.skill_tools import LoadSkill, ReadSkillFile
from llamachat.tools.web_search import WebSearch

log = logging.getLogger(__name__)


def offered(
    search_cfg: SearchConfig | None,
    skills_cfg: SkillsConfig | None,
    http: Callable[[], httpx.Client] | None = None,
    extra: Sequence[Tool] = (),
    extra_rounds: int = 0,
    library_cfg: LibraryConfig | None = None,
) -> tuple[list[Tool], int]:
    """The app's tools that these settings turn on, and how many rounds may call them.

    `http` gives the client web searches go through, made when a search first needs it
    (without it, a fresh client per search). A tool whose `schema` is empty is not
    offered in a round (read_skill_file until a loaded skill has files). `extra` are
    more tools (an MCP server's), callable for `extra_rounds` rounds; a built-in tool
    wins a clash of names. `library_cfg` offers search_documents over a chat's libraries.
    """
    registered: list[tuple[Tool, int]] = []
    if search_cfg is not None and search_cfg.enabled and search_cfg.url:
        registered.append((WebSearch(search_cfg, http), search_cfg.max_searches))
    if skills_cfg is not None and skills_cfg.enabled and skills_cfg.store is not None:
        loaded = set(skills_cfg.loaded)
        reader = ReadSkillFile(skills_cfg.store, loaded)
        skill_tool = LoadSkill(
            skills_cfg.store,
            loaded,
            on_load=reader.refresh,
            catalog_chars=skills_cfg.catalog_chars,
        )
        if skill_tool.schema:
            registered.append((skill_tool, skills_cfg.max_searches))
        if skill_tool.schema or reader.schema:
            registered.append((reader, skills_cfg.max_searches))
    if library_cfg is not None:
        registered.append((SearchDocuments(library_cfg), library_cfg.max_searches))
    builtin = {tool.name for tool, _cap in registered}
    for tool in extra:
        if tool.name in builtin:
            log.warning("the tool %s is not offered: a built-in tool has its name", tool.name)
            continue
        registered.append((tool, extra_rounds))
    rounds = max((cap for _tool, cap in registered), default=0)
    return [tool for tool, _cap in registered], max(0, rounds)
