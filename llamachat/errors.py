"""What can go wrong talking to a server, and running one: the router's exceptions.

Here, outside `router/`, because the libraries' embeddings (`library.vectors`) meet them too.

Errors, two trees. Raised by `client.Client` methods and its `stream_chat` generator
(and by `models` and `providers`, which talk through a Client):

    BackendError           base class; attributes message, error_type, status
    ├── RouterUnreachable  nothing answers at the URL (refused, no route, DNS, connect
    │                      timeout); the message names the URL and says what to do
    ├── ServerError        HTTP status >= 400, carrying the server's error.message and
    │                      error.type (e.g. exceed_context_size_error) plus `details`;
    │                      also a redirect (error_type "redirect"), which is never followed
    ├── StreamError        an error chunk mid-stream, or a broken / garbled stream
    └── StallError         no byte for idle_timeout seconds in the middle of a reply, or
                           no answer begun in idle_timeout while no model loads ("hung")

Raised by `server`, `binary` and `model_files` (llamachat's own llama-server):

    ManagedServerError(Exception) base; ``message`` is the text shown to the user
    ├── ServerNotFound          no llama-server binary; says exactly how to get one
    ├── ServerLocked            another llamachat manages the server; ``url`` is its URL
    ├── ServerStartError        the server exited or never became healthy; names the log
    ├── RouterUnavailable       nothing answers at router_url and llamachat may not start one
    └── ModelFileError          a file offered to the models folder is not a usable GGUF

Every message is a sentence for the user, with the API key masked (`api_keys.mask_secret`).
"""

from __future__ import annotations

import html
import json
import logging
import re
import urllib.parse

import httpx

from llamachat.api_keys import mask_secret
from llamachat.outside.terminal import FILE_ONLY

log = logging.getLogger(__name__)

# An error page's title (or first line of text) is shown up to this many characters.
SUMMARY_CHARS = 200
PAGE_LOG_CHARS = 4096
"""Characters of an error page written to the log file (the page itself may be megabytes)."""

_HTML_RE = re.compile(rb"<(?:!doctype\s+html|html|head|body|title)\b", re.IGNORECASE)
_TITLE_RE = re.compile(r"<title\b[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_HIDDEN_RE = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_BREAK_RE = re.compile(
    r"<(?:br|hr|/?(?:p|div|h[1-6]|li|tr|pre|center|body|html))\b[^>]*>", re.IGNORECASE
)
_TAG_RE = re.compile(r"<[^>]*>")


class BackendError(Exception):
    """Something went wrong talking to the server; str() is a sentence for the user."""

    def __init__(self, message: str, *, error_type: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.status = status


class RouterUnreachable(BackendError):
    """Nothing answers at the server's URL."""


class ServerError(BackendError):
    """The server answered with an HTTP error; `details` holds its extra error fields."""

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "",
        status: int | None = None,
        details: dict | None = None,
    ) -> None:
        super().__init__(message, error_type=error_type, status=status)
        self.details = details or {}


class StreamError(BackendError):
    """The reply stream carried an error or broke."""


class StallError(BackendError):
    """The server went silent in the middle of a reply, or never began it."""


class ManagedServerError(Exception):
    """Base of every error about llamachat's own server; ``message`` is meant for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ServerNotFound(ManagedServerError):
    """No llama-server binary could be found."""


class ServerLocked(ManagedServerError):
    """Another llamachat process already manages a server; ``url`` is where it listens."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class ServerStartError(ManagedServerError):
    """The managed server exited or did not become healthy in time."""


class RouterUnavailable(ManagedServerError):
    """Nothing answers at router_url and llamachat is not allowed to start a server there."""


class ModelFileError(ManagedServerError):
    """A file offered to the models folder is missing, not a GGUF, or clashes with another."""


def server_error(status: int, body: bytes, url: str, *, secret: str | None = None) -> ServerError:
    """A ServerError from an error response's status and body (JSON, a web page, or text).

    Of a web page (a proxy's 502, a gateway's 500) only the title or first line of text is
    shown; the page's first PAGE_LOG_CHARS go to the log file only, `secret` masked.
    """
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or f"HTTP {status}")
        details = {k: v for k, v in error.items() if k not in ("message", "type", "code")}
        return ServerError(
            message, error_type=str(error.get("type") or ""), status=status, details=details
        )
    if isinstance(error, str):
        return ServerError(error, status=status)
    if _HTML_RE.search(body[:1024]):
        page = body.decode("utf-8", "replace")
        # The page is outside text of any size (escape sequences too): its start goes to
        # the log file only, never the terminal; the summary below is what people read.
        log.warning(
            "%s answered HTTP %s with this page (its first %s characters):\n%s",
            url,
            status,
            PAGE_LOG_CHARS,
            mask_secret(page, secret)[:PAGE_LOG_CHARS],
            extra={FILE_ONLY: True},
        )
        summary = _page_summary(page)
        return ServerError(
            f"{url} answered HTTP {status} with an error page"
            + (f": {summary}" if summary else " (see the log)"),
            status=status,
        )
    text = body[:300].decode("utf-8", "replace").strip()
    return ServerError(
        f"{url} answered HTTP {status}" + (f": {text}" if text else ""), status=status
    )


def _page_summary(page: str) -> str:
    """A web page's title, else its first line of text ('' when it has neither)."""
    title = _TITLE_RE.search(page)
    lines = [title.group(1)] if title else []
    lines += _TAG_RE.sub("", _BREAK_RE.sub("\n", _HIDDEN_RE.sub("", page))).splitlines()
    for line in lines:
        text = " ".join(html.unescape(_TAG_RE.sub("", line)).split())
        if text:
            return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + "…"
    return ""


def redirect_error(status: int, location: str, url: str) -> ServerError:
    """A ServerError for a redirect, never followed: the request and its key would go along."""
    target = urllib.parse.urljoin(url, location) if location else ""
    parts = urllib.parse.urlsplit(target)
    if parts.password:
        # Credentials in the Location are a secret of their own, whoever's they are.
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        target = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return ServerError(
        f"{url} redirected the request (HTTP {status}) to {target or 'an address it did not give'}"
        "; llamachat does not follow redirects. If the server moved, point the URL in the "
        "config at its new address.",
        error_type="redirect",
        status=status,
    )


def without_key(exc: BackendError, key: str | None) -> BackendError:
    """`exc` with `key` masked in its message and details: some gateways quote the key they got."""
    if key:
        exc.message = mask_secret(exc.message, key)
        exc.args = (exc.message,)
        if isinstance(exc, ServerError):
            exc.details = {
                k: mask_secret(v, key) if isinstance(v, str) else v for k, v in exc.details.items()
            }
    return exc


def request_failure(exc: httpx.HTTPError, url: str, base_url: str) -> BackendError:
    """The BackendError for a request to `url` (of the server at `base_url`) left unanswered."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        return RouterUnreachable(
            f"Cannot reach the server at {base_url} ({exc.__class__.__name__}: {exc}). "
            "Start llama-server in router mode there, or set router_url in the config "
            "to where it runs.",
            error_type="unreachable",
        )
    if isinstance(exc, httpx.TimeoutException):
        return StallError(f"{url} did not answer in time; the server may be stuck.")
    return StreamError(f"the request to {url} failed ({exc.__class__.__name__}: {exc}).")
