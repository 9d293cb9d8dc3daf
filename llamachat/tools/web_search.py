"""Web search for the model's `web_search` tool, through a SearXNG instance's JSON API.

SearXNG is what self-hosters run: `GET {url}/search?q=...&format=json` answers with a
`results` list of `{title, url, content}`. This module turns that into the compact text
the model reads, and every way a search can fail into plain words, because a tool
failure is a tool *result*: the model asked and is waiting for an answer.

    SearchError   the search did not produce results (timeout, connection, HTTP status,
                  a body that is not SearXNG JSON); str() is the reason in plain words

`make` is its entry in the built-in tools (`offer.BUILTIN`, key `search_enabled`): the
tool, when a `search_url` is set. `date_note()` gives today's date at day granularity for the system prompt, so the prompt
prefix stays byte-identical all day and llama.cpp's prompt cache keeps working.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re

import httpx

from llamachat.tools.base import Event, Tool, ToolError, ToolResult
from llamachat.tools.inputs import Inputs

log = logging.getLogger(__name__)

TOOL_NAME = "web_search"
MAX_RESULTS = 5
SNIPPET_CHARS = 300

TOOL_SCHEMA: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search the web for current or specific information you do not know. "
            "Returns the top results with title, URL and a short snippet."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
            },
            "required": ["query"],
        },
    },
}

_SPACE = re.compile(r"\s+")


class SearchError(Exception):
    """A search that produced no usable answer; str() says why in plain words."""


def date_note(today: dt.date | None = None) -> str:
    """One sentence with today's date (day granularity) for the system prompt."""
    day = today or dt.date.today()
    return f"Today's date is {day:%A}, {day.day} {day:%B %Y}."


def parse_query(arguments: str) -> str:
    """The query out of a web_search call's JSON arguments; raises ValueError when unusable."""
    parsed = json.loads(arguments or "{}")
    query = parsed.get("query") if isinstance(parsed, dict) else None
    if not isinstance(query, str) or not query.strip():
        raise ValueError('expected a JSON object like {"query": "..."} with a non-empty query')
    return query.strip()


def _clean(text: object, limit: int) -> str:
    flat = _SPACE.sub(" ", text if isinstance(text, str) else "").strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def search(
    base_url: str,
    query: str,
    *,
    timeout: float = 10.0,
    max_results: int = MAX_RESULTS,
    client: httpx.Client | None = None,
) -> list[dict]:
    """Top results as `{"title", "url", "snippet"}` dicts (possibly empty); raises SearchError."""
    url = base_url.rstrip("/") + "/search"
    where = f"the search engine at {base_url}"
    http = client or httpx.Client()
    try:
        response = http.get(url, params={"q": query, "format": "json"}, timeout=timeout)
    except httpx.TimeoutException as exc:
        raise SearchError(f"{where} did not answer within {timeout:g} s") from exc
    except httpx.HTTPError as exc:
        raise SearchError(f"{where} could not be reached ({exc})") from exc
    finally:
        if client is None:
            http.close()
    if response.status_code == 403:
        raise SearchError(
            f"{where} refused JSON output (HTTP 403); enable the json format "
            "under search.formats in SearXNG's settings.yml"
        )
    if response.status_code >= 400:
        raise SearchError(f"{where} answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError as exc:
        raise SearchError(f"{where} did not answer with JSON") from exc
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise SearchError(f"{where} answered without a results list")
    results: list[dict] = []
    seen: set[str] = set()
    for item in data["results"]:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        if item["url"] in seen:
            continue
        seen.add(item["url"])
        results.append(
            {
                "title": _clean(item.get("title"), 200) or item["url"],
                "url": item["url"],
                "snippet": _clean(item.get("content"), SNIPPET_CHARS),
            }
        )
        if len(results) >= max_results:
            break
    log.debug("search %r: %d results", query, len(results))
    return results


def result_text(query: str, results: list[dict]) -> str:
    """The tool result the model reads: numbered title, URL and snippet per result."""
    if not results:
        return (
            f'No results for "{query}". Try a different query, or answer from what you '
            "know and say the search found nothing."
        )
    lines = [f'Search results for "{query}":']
    for n, item in enumerate(results, 1):
        lines.append(f"{n}. {item['title']}\n   {item['url']}")
        if item["snippet"]:
            lines.append(f"   {item['snippet']}")
    return "\n".join(lines)


def error_text(query: str, reason: str) -> str:
    """The tool result for a failed search, so the model can still answer."""
    return (
        f'error: the web search for "{query}" failed: {reason}. Answer from what you know '
        "and tell the user the search did not work."
    )


class WebSearch(Tool):
    """`web_search`: the top results of a SearXNG search (`search.search`)."""

    name = TOOL_NAME
    schema = TOOL_SCHEMA

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self._url = url
        self._timeout = timeout

    def _query(self, arguments: str) -> str:
        try:
            return parse_query(arguments)
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
            # A client of its own per search: a turn makes one or two, seconds apart.
            found = search(self._url, query, timeout=self._timeout)
        except SearchError as exc:
            log.info("web search failed: %s", exc)
            return ToolResult(
                error_text(query, str(exc)),
                [("search_done", {"query": query, "results": [], "error": str(exc)})],
            )
        return ToolResult(
            result_text(query, found),
            [("search_done", {"query": query, "results": found, "error": ""})],
        )


def make(inputs: Inputs) -> list[Tool]:
    """The turn's web_search tool, when the config names a search engine."""
    return [WebSearch(inputs.cfg.search_url)] if inputs.cfg.search_url else []
