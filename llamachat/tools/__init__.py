"""The tools a model can call, and the offer of them.

`base` holds the one small interface (`Tool`, `ToolResult`, `ToolError`) and `answer`,
which turns every call into a result the model reads; `web_search`, `skill_tools`,
`documents` (search_documents) and `mcp` are the tools; `offer.offered` decides which of them a request offers. This
package re-exports the names a caller needs, so `tools.Tool` and `tools.offered` work.
"""

from llamachat.tools.base import Event, Tool, ToolError, ToolResult, answer, json_arguments
from llamachat.tools.documents import LibraryConfig, SearchDocuments
from llamachat.tools.offer import offered
from llamachat.tools.skill_tools import LoadSkill, ReadSkillFile, SkillsConfig
from llamachat.tools.web_search import SearchConfig, WebSearch

__all__ = [
    "Event",
    "LibraryConfig",
    "LoadSkill",
    "ReadSkillFile",
    "SearchConfig",
    "SearchDocuments",
    "SkillsConfig",
    "Tool",
    "ToolError",
    "ToolResult",
    "WebSearch",
    "answer",
    "json_arguments",
    "offered",
]
