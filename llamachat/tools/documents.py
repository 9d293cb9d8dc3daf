"""`search_documents`: the model searches the libraries attached to its chat and to
the chat's project.

Offered while a chat or its project has a library (`inputs.LibraryConfig`); `make` is its
entry in the built-in tools (`offer.BUILTIN`). Each call opens
library.db in the thread that runs it (a reply's worker; SQLite connections stay in their
thread), asks `LibraryStore.search` for the best passages, and answers with each
passage's file, page and heading, cut so the whole result stays under `RESULT_CHARS`. The window shows the
sources as a search's results (``search_done``), each a link to its file.
"""

from __future__ import annotations

from llamachat import outside
from llamachat.library.index import Hit, LibraryError, LibraryStore
from llamachat.tools.base import Tool, ToolError, ToolResult, json_arguments
from llamachat.tools.inputs import Inputs, LibraryConfig

TOOL_NAME = "search_documents"
TITLE = "Searched documents"
MAX_HITS = 5
RESULT_CHARS = 6000
"""The most the model reads per call (about 1,500 tokens): five passages, each cut to a
fifth, so a search never floods the context."""

TOOL_SCHEMA: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search the user's own documents attached to this chat (PDFs, notes, code). "
            "Returns the best matching passages with their file and page. Use it when the "
            "question may be answered by those files, and cite the file and page."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for in the documents."}
            },
            "required": ["query"],
        },
    },
}


def source(hit: Hit) -> str:
    """A passage's source as the model and the user read it: file, page, heading."""
    where = outside.shown(hit.path.name) + (f", page {hit.page}" if hit.page is not None else "")
    return f"{where} ({hit.heading})" if hit.heading else where


def result_text(query: str, hits: list[Hit], limit: int = RESULT_CHARS) -> str:
    """The tool result: each passage under its source, the whole within `limit` characters."""
    if not hits:
        return (
            f'No passage of the attached documents matches "{query}". Try other words, '
            "or say the documents do not cover it."
        )
    share = limit // len(hits)
    blocks = [f'Passages from the attached documents for "{query}":']
    for number, hit in enumerate(hits, 1):
        head = f"[{number}] {source(hit)} — {outside.shown(hit.path)}\n"
        room = max(0, share - len(head))
        text = hit.text if len(hit.text) <= room else hit.text[: max(0, room - 1)] + "…"
        blocks.append(head + text)
    return "\n\n".join(blocks)


class SearchDocuments(Tool):
    """`search_documents`: the best passages of the chat's libraries (BM25 and vectors)."""

    name = TOOL_NAME
    schema = TOOL_SCHEMA

    def __init__(self, cfg: LibraryConfig) -> None:
        self._cfg = cfg

    def _query(self, arguments: str) -> str:
        query = json_arguments(arguments, '{"query": "..."}').get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError('give the words to look for, as {"query": "..."}')
        return query.strip()

    def run(self, arguments: str) -> ToolResult:
        """The passages found, and a ``search_done`` event with each source as a file link."""
        query = self._query(arguments)
        try:
            store = LibraryStore(self._cfg.path)
        except LibraryError as exc:
            raise ToolError(str(exc)) from None
        try:
            cfg = self._cfg
            hits = store.search(query, cfg.session_id, MAX_HITS, cfg.embedder, cfg.project_id)
        finally:
            store.close()
        results = [
            {
                "title": source(hit),
                "url": hit.path.as_uri(),
                "path": outside.shown(hit.path),
                "page": hit.page,
            }
            for hit in hits
        ]
        event = {"title": TITLE, "query": query, "results": results, "error": ""}
        return ToolResult(result_text(query, hits), [("search_done", event)])


def make(inputs: Inputs) -> list[Tool]:
    """The turn's search_documents tool, while the chat or its project has a library."""
    return [SearchDocuments(inputs.library)] if inputs.library is not None else []
