"""What a turn's built-in tools are made from (`Inputs`), the chat's libraries among it.

`turn.build_turn` gathers these once per request; each built-in tool's module makes its
tools from them (`offer.BUILTIN`), and the tool loop never sees them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from llamachat.config import Config
from llamachat.library.vectors import Embedder
from llamachat.skills import SkillStore


@dataclass(frozen=True)
class LibraryConfig:
    """What search_documents searches: the chat's libraries and its project's."""

    path: Path
    """library.db."""
    session_id: int | None
    """The chat (None: not saved yet, its project's libraries only)."""
    embedder: Embedder | None = None
    """The embedding model that made the library's vectors (None: full text only)."""
    project_id: int | None = None
    """The chat's project, whose libraries it searches too (None: none)."""


@dataclass(frozen=True)
class Inputs:
    """Everything one turn's built-in tools are made from."""

    cfg: Config
    switches: Mapping[str, bool] = field(default_factory=dict)
    """A chat's own word on a tool's key (its web search toggle), over the config's."""
    store: SkillStore | None = None
    """The skills the model may load (None: skills are off)."""
    loaded: tuple[str, ...] = ()
    """The skills already in the conversation, in load order."""
    n_ctx: int | None = None
    """The model's context size (None: not known yet)."""
    library: LibraryConfig | None = None
    """The chat's libraries (None: it has none)."""

    def on(self, key: str) -> bool:
        """Whether the config key `key` turns its tool on: the chat's word, else the config's."""
        return bool(self.switches.get(key, getattr(self.cfg, key, False)))
