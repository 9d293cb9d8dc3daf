"""How much of the model's context the next request takes, part by part.

`Tokenizer(client, model)` counts text with the server's own tokenizer (`POST /tokenize`,
`autoload=false`, so counting never loads a model, except `load()` at Send) and keeps every count, keyed by the
text, so a text is sent at most once: a keystroke, a reopened chat or a skill loaded
again costs no request for what was counted before. Where the server has no tokenizer
(a provider, a plain OpenAI-compatible server) or the model is not loaded, it estimates
from the characters, at a tokens-per-character ratio it learns from every exact count
and every reply's usage.

The chat template adds tokens of its own around each message; `Tokenizer` measures them
once per model through `POST /apply-template` (a few tiny requests) and the cost of each
set of tool schemas the same way, keyed by the schemas.

`measure(turn, tokenizer)` gives a `Breakdown`: the tokens of each part of a `turn.Turn`
(system, date, skill:<name>, memory, history, user, attachment:<file>, tools) plus "template".
`fits(breakdown, n_ctx, reserve)` says whether it leaves room for the reply.

Threads: `Tokenizer.count*` and `measure(..., exact=True)` may send requests and run off
the GUI thread; `quick` and `measure(..., exact=False)` never do. The cache is shared
under a lock. Qt-free.

Errors: none raised. A server that cannot count leaves estimates (`Breakdown.exact` is
False).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llamachat.router import client as backend
from llamachat.tokens import TOKENS_PER_CHAR
from llamachat.turn import Part, Turn

log = logging.getLogger(__name__)

# What an image costs when the server cannot say (llama.cpp's vision encoders: 256-1024).
IMAGE_TOKENS = 768
# A template's cost per message, and around the whole prompt, when the server cannot say.
MESSAGE_TOKENS = 5
PROMPT_TOKENS = 3
# Earlier messages are counted this many at a time (one request each).
HISTORY_CHUNK = 64
# Why a model is sent no tools (its server's `/props`), as the meter and the panels say it.
NO_TOOLS = "this model's chat template cannot take tools"

# The parts a breakdown lists, in the meter's words.
LABELS = {
    "system": "system prompt",
    "date": "today's date",
    "memory": "memories",
    "summary": "summary of earlier messages",
    "history": "earlier messages",
    "excerpts": "passages found in the chat's libraries",
    "user": "message",
    "tools": "tools",
    "template": "chat template",
    "reply": "reply so far",
}


def label(name: str) -> str:
    """A part's name as the user reads it (skill:pdf -> skill pdf)."""
    kind, _, rest = name.partition(":")
    if rest:
        return f"{kind} {rest}"
    return LABELS.get(name, name)


@dataclass(frozen=True)
class Breakdown:
    """The tokens of each part of a request, in wire order; `exact` when all were counted."""

    parts: tuple[tuple[str, int], ...] = ()
    exact: bool = False

    @property
    def total(self) -> int:
        """The request's tokens in all."""
        return sum(tokens for _name, tokens in self.parts)

    def get(self, name: str) -> int:
        """The tokens of the part called `name` (0 when there is none)."""
        return sum(tokens for part, tokens in self.parts if part == name)

    def with_part(self, name: str, tokens: int, *, exact: bool = True) -> Breakdown:
        """This breakdown with part `name` set to `tokens` (added at the end if new)."""
        parts = [(part, n) for part, n in self.parts if part != name]
        parts.append((name, tokens))
        return Breakdown(tuple(parts), self.exact and exact)

    def without(self, *prefixes: str) -> Breakdown:
        """This breakdown without the parts whose names start with any of `prefixes`."""
        parts = tuple(p for p in self.parts if not p[0].startswith(prefixes))
        return Breakdown(parts, self.exact)


def reserve_for(n_ctx: int, configured: int) -> int:
    """The tokens kept free for the reply: the configured reserve, at most a quarter of n_ctx."""
    return max(0, min(configured, n_ctx // 4))


def fits(breakdown: Breakdown, n_ctx: int | None, reserve: int) -> bool:
    """Whether the request plus the reply reserve fits in `n_ctx` (True when n_ctx is unknown)."""
    return n_ctx is None or breakdown.total + reserve <= n_ctx


@dataclass(frozen=True)
class Overflow:
    """A request that does not fit: its breakdown, the model's context and the reply reserve;
    `loads`: the skills the message itself loads (`/name`); `compacted`: the chat was just
    compacted for it."""

    model: str
    breakdown: Breakdown
    n_ctx: int
    reserve: int
    trained: int | None = None
    loads: tuple[str, ...] = ()
    compacted: bool = False

    @property
    def excess(self) -> int:
        """How many tokens too many."""
        return self.breakdown.total + self.reserve - self.n_ctx

    def message(self) -> str:
        """What to tell the user, with the numbers."""
        sent = "Not sent, even with the chat compacted" if self.compacted else "Not sent"
        return (
            f"{sent}: this message needs {self.breakdown.total:,} tokens plus "
            f"{self.reserve:,} for the reply, but {self.model}'s context holds "
            f"{self.n_ctx:,} ({self.excess:,} too many)."
        )

    def details(self) -> str:
        """The breakdown, one part a line, biggest first."""
        parts = sorted(self.breakdown.parts, key=lambda part: -part[1])
        return "\n".join(f"  {label(name)}: {tokens:,}" for name, tokens in parts if tokens)


def check(
    turn: Turn, tokenizer: Tokenizer, n_ctx: int | None, reserve: int, *, exact: bool = False
) -> Overflow | None:
    """The Overflow when `turn` plus `reserve` does not fit in `n_ctx`, else None."""
    if n_ctx is None:
        return None
    measured = measure(turn, tokenizer, exact=exact)
    if fits(measured, n_ctx, reserve_for(n_ctx, reserve)):
        return None
    return Overflow(tokenizer.model, measured, n_ctx, reserve_for(n_ctx, reserve))


@dataclass(frozen=True)
class _Overhead:
    """A chat template's own tokens: per message, and around the prompt with/without system."""

    per_message: int
    with_system: int
    without_system: int
    exact: bool

    def tokens(self, n_messages: int, has_system: bool) -> int:
        base = self.with_system if has_system else self.without_system
        return max(0, base + n_messages * self.per_message)


_GUESS = _Overhead(MESSAGE_TOKENS, PROMPT_TOKENS, PROMPT_TOKENS, exact=False)


class Tokenizer:
    """Token counts for one model on one server, cached by text; estimates where it cannot count."""

    def __init__(self, client: backend.Client | None, model: str) -> None:
        self.client = client
        self.model = model
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, int], int] = {}
        self._tools: dict[str, int] = {}
        self._overhead: _Overhead | None = None
        # Calibration: characters and tokens of everything counted so far.
        self._chars = 0
        self._tokens = 0
        # False once the server said it cannot tokenize (no /tokenize): no more asking.
        self._can_count = client is not None

    # ------------------------------------------------------------------ no requests

    @property
    def tokens_per_char(self) -> float:
        """The ratio estimates use: learned from counts once there are enough, else the default."""
        with self._lock:
            if self._chars >= 200 and self._tokens:
                return self._tokens / self._chars
        return TOKENS_PER_CHAR

    def estimate(self, text: str) -> int:
        """A token estimate for `text`, from its length."""
        return round(len(text) * self.tokens_per_char) if text else 0

    def cached(self, text: str) -> int | None:
        """The count of `text` if it was counted before, else None."""
        if not text:
            return 0
        with self._lock:
            return self._counts.get((len(text), hash(text)))

    def quick(self, text: str) -> int:
        """The count of `text` if known, else an estimate; never sends a request."""
        known = self.cached(text)
        return known if known is not None else self.estimate(text)

    @property
    def can_count(self) -> bool:
        """False once the server proved it has no tokenizer (estimates only from then on)."""
        return self._can_count

    def learn(self, chars: int, tokens: int) -> None:
        """Calibrate the estimates with a request the server counted (`chars` -> `tokens`)."""
        if chars > 0 and tokens > 0:
            with self._lock:
                self._chars += chars
                self._tokens += tokens

    def overhead(self, n_messages: int, has_system: bool) -> tuple[int, bool]:
        """The template's tokens for a request of `n_messages`, and whether it was measured."""
        known = self._overhead or _GUESS
        return known.tokens(n_messages, has_system), known.exact

    def message_tokens(self) -> int:
        """What the template adds for one more message."""
        return (self._overhead or _GUESS).per_message

    def cached_tools(self, tools: Sequence[dict]) -> int | None:
        """The measured cost of these tool schemas, or None."""
        with self._lock:
            return self._tools.get(_tools_key(tools))

    # ------------------------------------------------------------------ requests

    def count(self, text: str, *, timeout: float = 30.0) -> tuple[int, bool]:
        """The tokens of `text` and whether the server counted them (else an estimate);
        a server that has not answered within `timeout` seconds leaves the estimate."""
        known = self.cached(text)
        if known is not None:
            return known, True
        tokens = self._tokenize(text, timeout)
        if tokens is None:
            return self.estimate(text), False
        with self._lock:
            self._counts[(len(text), hash(text))] = tokens
            self._chars += len(text)
            self._tokens += tokens
        return tokens, True

    def measure_template(self) -> bool:
        """Measure the template's own tokens once (later calls do nothing); True when known."""
        if self._overhead is not None:
            return True
        x = {"content": "x"}
        one = self._prompt_tokens([{"role": "user", **x}])
        two = self._prompt_tokens([{"role": "system", **x}, {"role": "user", **x}])
        four = self._prompt_tokens(
            [{"role": r, **x} for r in ("system", "user", "assistant", "user")]
        )
        x_tokens, counted = self.count("x")
        if None in (one, two, four) or not counted:
            return False
        assert one is not None and two is not None and four is not None
        per_message = max(0, round((four - two - 2 * x_tokens) / 2))
        with_system = two - 2 * x_tokens - 2 * per_message
        without_system = one - x_tokens - per_message
        self._overhead = _Overhead(per_message, with_system, without_system, exact=True)
        return True

    def tools_cost(self, tools: Sequence[dict]) -> tuple[int, bool]:
        """What offering `tools` adds to a request, and whether the server measured it."""
        if not tools:
            return 0, True
        key = _tools_key(tools)
        with self._lock:
            known = self._tools.get(key)
        if known is not None:
            return known, True
        base = [{"role": "system", "content": "x"}, {"role": "user", "content": "x"}]
        plain = self._prompt_tokens(base)
        offered = self._prompt_tokens(base, tools=list(tools)) if plain is not None else None
        if plain is None or offered is None:
            tokens, counted = self.count(key)
            return tokens, counted
        cost = max(0, offered - plain)
        with self._lock:
            self._tools[key] = cost
        return cost, True

    def load(self, *, timeout: float) -> bool:
        """Have the router load the model, as the request about to go would (one `/tokenize`
        that may load it); True when it counts now."""
        return self._tokenize("x", timeout, load=True) is not None

    def _tokenize(self, text: str, timeout: float = 30.0, *, load: bool = False) -> int | None:
        if not self._can_count or self.client is None:
            return None
        try:
            data = self.client.request_json(
                "POST",
                "/tokenize",
                root=True,
                params={"autoload": "true" if load else "false"},
                json={"model": self.model, "content": text},
                timeout=timeout,
            )
        except backend.ServerError as exc:
            if exc.status == 404:
                self._can_count = False  # no tokenizer here: estimates from now on
            log.debug("no token count from %s: %s", self.model, exc)
            return None
        except backend.BackendError as exc:
            log.debug("no token count from %s: %s", self.model, exc)
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    def _prompt_tokens(self, messages: list[dict], tools: list[dict] | None = None) -> int | None:
        """The tokens of `messages` as the template renders them, or None when unknown."""
        if not self._can_count or self.client is None:
            return None
        body: dict = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        try:
            data = self.client.request_json(
                "POST",
                "/apply-template",
                root=True,
                params={"autoload": "false"},
                json=body,
            )
        except backend.BackendError as exc:
            log.debug("no template from %s: %s", self.model, exc)
            return None
        prompt = data.get("prompt") if isinstance(data, dict) else None
        if not isinstance(prompt, str):
            return None
        return self._tokenize(prompt)


def _tools_key(tools: Sequence[dict]) -> str:
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False)


def measure(
    turn: Turn, tokenizer: Tokenizer, *, exact: bool = False, timeout: float = 30.0
) -> Breakdown:
    """The tokens of each part of `turn`: counted (`exact`, may send requests, each given
    `timeout` seconds) or cached/estimated.

    The template's own tokens are the "template" part; a question's parts are "user" and
    "attachment:<file>" as `turn` names them.
    """
    parts: list[tuple[str, int]] = []
    all_exact = True

    def add(name: str, texts: Iterable[str], images: int = 0) -> None:
        nonlocal all_exact
        total = images * IMAGE_TOKENS
        if images:
            all_exact = False
        for text in texts:
            if exact:
                tokens, counted = tokenizer.count(text, timeout=timeout)
            else:
                known = tokenizer.cached(text)
                tokens, counted = (known, True) if known is not None else (0, False)
                if known is None:
                    tokens = tokenizer.estimate(text)
            total += tokens
            all_exact = all_exact and counted
        parts.append((name, total))

    if exact:
        tokenizer.measure_template()
    for part in turn.parts():
        if part.name == "tools":
            if exact:
                tokens, counted = tokenizer.tools_cost(part.items)
            else:
                known = tokenizer.cached_tools(part.items)
                tokens, counted = (known, True) if known is not None else (0, False)
                if known is None:
                    tokens = tokenizer.estimate(_tools_key(part.items))
            all_exact = all_exact and counted
            parts.append(("tools", tokens))
        elif part.name == "history":
            texts, images = _history_texts(part.items)
            # Counted a chunk of messages at a time, each chunk once: opening a long chat
            # costs one request per HISTORY_CHUNK messages, a new message only the last
            # chunk again. The blank lines joining a chunk are not in the request.
            chunks = [
                "\n\n".join(texts[start : start + HISTORY_CHUNK])
                for start in range(0, len(texts), HISTORY_CHUNK)
            ]
            add("history", chunks, images)
            joins = (len(texts) - len(chunks)) * _blank_line(tokenizer, exact)
            parts[-1] = ("history", max(0, parts[-1][1] - joins))
        else:
            add(part.name, [part.text] if part.text else [], _images(part))
    n_messages = (1 if turn.system else 0) + len(turn.history) + (1 if turn.question else 0)
    template, measured = tokenizer.overhead(n_messages, bool(turn.system_message()))
    parts.append(("template", template + _joins(turn, tokenizer)))
    return Breakdown(tuple(parts), all_exact and measured)


def measure_parts(parts: Sequence[Part], tokenizer: Tokenizer, *, exact: bool = False) -> Breakdown:
    """The tokens of a question's parts alone (the draft: "user", "attachment:<file>")."""
    question = Turn(model=tokenizer.model, question=tuple(parts))
    measured = measure(question, tokenizer, exact=exact)
    return measured.without("template") if parts else Breakdown(exact=True)


def _images(part: Part) -> int:
    return sum(1 for item in part.items if item.get("type") == "image_url")


def _history_texts(messages: Sequence[dict]) -> tuple[list[str], int]:
    texts: list[str] = []
    images = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for item in content:
                if item.get("type") == "text":
                    texts.append(str(item.get("text") or ""))
                elif item.get("type") == "image_url":
                    images += 1
    return texts, images


def _blank_line(tokenizer: Tokenizer, exact: bool) -> int:
    if exact:
        return tokenizer.count("\n\n")[0]
    known = tokenizer.cached("\n\n")
    return 1 if known is None else known


def _joins(turn: Turn, tokenizer: Tokenizer) -> int:
    # The parts of one message are joined by a blank line, a token of its own.
    system = sum(1 for part in turn.system if part.text)
    question = sum(1 for part in turn.question if part.text)
    joins = max(0, system - 1) + max(0, question - 1)
    return joins * _blank_line(tokenizer, exact=False)
