"""`search_documents`: the model searches the libraries attached to its chat and to
the chat's project.

Offered while a chat or its project has a library (`inputs.LibraryConfig`); `make` is its
entry in the built-in tools (`offer.BUILTIN`). Each call opens
library.db in the thread that runs it (a reply's worker; SQLite connections stay in their
thread), asks `LibraryStore.search` for the best passages, and answers with each
passage's file, page and heading, cut so the whole result stays under `RESULT_CHARS`.
The window shows the sources as a search's results (``search_done``), each a link to its
file. A library attached moments ago (with the chat's first message) is waited for, up
to `WAIT_SECONDS`, while its first indexing runs; past that the answer says it is still
being read.

A model that cannot call tools is searched for (`find`, with its message as the query):
`excerpts_text` is the passages as they go into that message (`turn.excerpt_part`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

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


WAIT_SECONDS = 30.0
"""How long a search waits for a library's first indexing (attached with the chat's
first message, it is read while that message is sent)."""
WAIT_STEP = 0.2
READING = "The library is still being read: passages from the files read so far only."


@dataclass(frozen=True)
class Found:
    """What one search of a chat's libraries found: `hits` for `query`, and whether a
    library was `reading` still (its first indexing not over)."""

    query: str
    hits: tuple[Hit, ...]
    reading: bool = False

    def event(self) -> dict:
        """The ``search_done`` event the window shows: each source a link to its file."""
        results = [
            {
                "title": source(hit),
                "url": hit.path.as_uri(),
                "path": outside.shown(hit.path),
                "page": hit.page,
            }
            for hit in self.hits
        ]
        note = READING if self.reading else ""
        return {"title": TITLE, "query": self.query, "results": results, "error": note}


def find(
    cfg: LibraryConfig,
    query: str,
    *,
    wait: float = 0.0,
    cancel: threading.Event | None = None,
) -> Found:
    """The best passages of the chat's libraries for `query`; a library still being
    read for the first time is waited for up to `wait` seconds (or until `cancel`).

    Errors: LibraryError when library.db cannot be opened.
    """
    store = LibraryStore(cfg.path)
    try:
        deadline = time.monotonic() + wait
        stop = cancel if cancel is not None else threading.Event()
        reading = _reading(store, cfg)
        # The indexing commits as it goes, from another thread: each look sees how far.
        while reading and time.monotonic() < deadline and not stop.wait(WAIT_STEP):
            reading = _reading(store, cfg)
        hits = store.search(query, cfg.session_id, MAX_HITS, cfg.embedder, cfg.project_id)
    finally:
        store.close()
    return Found(query, tuple(hits), reading)


def _reading(store: LibraryStore, cfg: LibraryConfig) -> bool:
    """Whether a library of the chat or its project has never been read whole (attached
    moments ago, its first indexing under way or cut short)."""
    rows = store.libraries(cfg.session_id) if cfg.session_id is not None else []
    if cfg.project_id is not None:
        rows += store.libraries(project_id=cfg.project_id)
    return any(not row.indexed_at for row in rows)


def source(hit: Hit) -> str:
    """A passage's source as the model and the user read it: file, page, heading."""
    where = outside.shown(hit.path.name) + (f", page {hit.page}" if hit.page is not None else "")
    return f"{where} ({hit.heading})" if hit.heading else where


def result_text(query: str, hits: Sequence[Hit], limit: int = RESULT_CHARS) -> str:
    """The tool result: each passage under its source, the whole within `limit` characters."""
    if not hits:
        return (
            f'No passage of the attached documents matches "{query}". Try other words, '
            "or say the documents do not cover it."
        )
    head = f'Passages from the attached documents for "{query}":'
    return "\n\n".join([head, *_blocks(hits, limit)])


def tool_text(found: Found) -> str:
    """What search_documents answers: the passages, and whether a library is still read."""
    text = result_text(found.query, found.hits)
    if not found.reading:
        return text
    return (
        f"{text}\n\nThe attached library is still being read: these are from the files "
        "read so far. Say so if the answer may be in the rest."
    )


def excerpts_text(found: Found, limit: int = RESULT_CHARS) -> str:
    """The passages found for a message, as they go before it for a model that cannot
    call tools: marked as excerpts that llamachat found, each with its source."""
    reading = (
        " The library is still being read: only the files read so far were searched."
        if found.reading
        else ""
    )
    if not found.hits:
        return (
            "[llamachat searched the user's attached documents for this message and found "
            f"no matching passage.{reading}]"
        )
    head = (
        "[Excerpts from the user's attached documents, found by llamachat for the message "
        f"below; not written by the user. Cite the file and page you use.{reading}]"
    )
    # No label before the message: a small model repeats one ("The user's message: …").
    return "\n\n".join([head, *_blocks(found.hits, limit)])


def _blocks(hits: Sequence[Hit], limit: int) -> list[str]:
    """Each passage under its number and source, each cut to its share of `limit`."""
    share = limit // len(hits)
    blocks = []
    for number, hit in enumerate(hits, 1):
        head = f"[{number}] {source(hit)} — {outside.shown(hit.path)}\n"
        room = max(0, share - len(head))
        text = hit.text if len(hit.text) <= room else hit.text[: max(0, room - 1)] + "…"
        blocks.append(head + text)
    return blocks


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
            found = find(self._cfg, query, wait=WAIT_SECONDS)
        except LibraryError as exc:
            raise ToolError(str(exc)) from None
        return ToolResult(tool_text(found), [("search_done", found.event())])


def make(inputs: Inputs) -> list[Tool]:
    """The turn's search_documents tool, while the chat or its project has a library."""
    return [SearchDocuments(inputs.library)] if inputs.library is not None else []
