"""The tools a model can call, and the offer of them.

`base` holds the one small interface (`Tool`, `ToolResult`, `ToolError`) and `answer`,
which turns every call into a result the model reads; `web_search`, `skill_tools`,
`documents` (search_documents), `remember` and `mcp` are the tools; `inputs` is what a turn's
built-in tools are made from, and `offer` lists the built-in tools once (`BUILTIN`) and
makes a turn's (`offered`). This package re-exports the names a caller needs, so
`tools.Tool` and `tools.offered` work.
"""

from llamachat.tools.base import Event, Tool, ToolError, ToolResult, answer, json_arguments
from llamachat.tools.documents import SearchDocuments
from llamachat.tools.inputs import Inputs, LibraryConfig
from llamachat.tools.offer import BUILTIN, Builtin, offered
from llamachat.tools.skill_tools import LoadSkill, ReadSkillFile
from llamachat.tools.web_search import WebSearch

__all__ = [
    "BUILTIN",
    "Builtin",
    "Event",
    "Inputs",
    "LibraryConfig",
    "LoadSkill",
    "ReadSkillFile",
    "SearchDocuments",
    "Tool",
    "ToolError",
    "ToolResult",
    "WebSearch",
    "answer",
    "json_arguments",
    "offered",
]
