"""When the context fills: compact the earlier messages into a summary, or leave them out.

A chat longer than the model's context can go on three ways, the `context_overflow`
policy says which (POLICIES; "ask" shows the over-context panel):

    compact   the model summarizes every message but the last `compact_keep` exchanges
              (`split`), with the fixed `SUMMARY_PROMPT`; an earlier part that itself
              does not fit the context is summarized in pieces, then the pieces
              (`summarize`). The summary is a message of its own (`is_summary`: role
              "system", `usage["summary_of"]` the number of messages it stands for) at
              the root of a new branch, so the original stays in the history.
    trim      the oldest messages are left out of the request, never out of the history
              (`trim_count`: whole exchanges, the fewest that make room).
    refuse    nothing is sent.

`ask --print` and the quick window have no earlier messages: their question's own text
is what is too long, so `compact_text` summarizes it in pieces (the question typed is
the focus) and `trim_text` keeps its end.

Qt-free: the window runs `summarize` on a worker thread; `ask` is any function that sends
one summarizing request and returns the model's text (`ask_model` streams it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llamachat import turn
from llamachat.router import client as backend

ASK, COMPACT, TRIM, REFUSE = "ask", "compact", "trim", "refuse"
POLICIES = (ASK, COMPACT, TRIM, REFUSE)
CHAT_KEY = "context_overflow"
"""The chat's own policy, kept with its parameters (never sent: not a `params.PARAMS` name)."""

SUMMARY_PROMPT = """\
You are compacting a conversation so that it can go on in a smaller context.
Summarize the conversation the user gives you so that the assistant can continue it
as if it had read all of it. Keep the user's goals and requests, the decisions made and
why, facts, names, numbers, file names, code and commands that still matter, what was
tried and failed, open questions and what was about to happen next. Leave out greetings
and anything later replaced. Write in the conversation's language, as short bullet
points under a few headings. Do not answer or continue the conversation: only summarize it."""
"""The fixed instructions of every summarizing request (quoted in the README)."""

PIECE_NOTE = "This is part {n} of {total} of a longer conversation: summarize this part only."
FOCUS_NOTE = "Pay particular attention to: {focus}"
TEXT_NOTE = (
    "This time the text is a document given with a question, not a conversation: "
    "keep what a question about it needs."
)

# The transcript's speakers, as the summarizing model reads them.
SPEAKERS = {"user": "User", "assistant": "Assistant"}
# The tokens a summary may take: an eighth of the context, within these bounds.
SUMMARY_TOKENS = (128, 2048)
# What a request's template and the notes around the transcript cost, kept free.
OVERHEAD_TOKENS = 64
# Pieces summarized in pieces again at most this many times (each level shrinks the text).
MAX_LEVELS = 6


class Stopped(Exception):
    """The summary was stopped before it was done."""


class CompactError(Exception):
    """The summary could not be made; str() says why."""


# ---------------------------------------------------------------- the summary message


def is_summary(row: Mapping[str, Any]) -> bool:
    """Whether a stored message is a compaction's summary (nothing else is role "system")."""
    return row.get("role") == "system"


def summarized(row: Mapping[str, Any]) -> int:
    """How many earlier messages a summary stands for (0 when it does not say)."""
    count = (row.get("usage") or {}).get("summary_of")
    return count if isinstance(count, int) else 0


def summary_title(count: int) -> str:
    """The summary block's heading: "Summary of 38 earlier messages"."""
    return f"Summary of {count} earlier message{'' if count == 1 else 's'}"


# ---------------------------------------------------------------- what to summarize


@dataclass(frozen=True)
class Split:
    """A path cut for compaction: `earlier` is summarized, `kept` stays as it is."""

    earlier: tuple[Mapping[str, Any], ...]
    kept: tuple[Mapping[str, Any], ...]

    def count(self) -> int:
        """How many messages the summary stands for (an earlier summary's count included)."""
        return sum(summarized(row) if is_summary(row) else 1 for row in self.earlier)


def split(rows: Sequence[Mapping[str, Any]], keep: int) -> Split:
    """Cut `rows` (a path, oldest first) before its last `keep` exchanges (an exchange
    starts at a user message); `earlier` is empty when there is nothing else."""
    starts = [n for n, row in enumerate(rows) if row.get("role") == "user"]
    if keep <= 0:
        at = len(rows)
    elif len(starts) > keep:
        at = starts[-keep]
    else:
        at = 0
    return Split(tuple(rows[:at]), tuple(rows[at:]))


def transcript(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The messages as the summarizing model reads them, one entry each (text files
    inlined, images named; replies give their answer only, failed ones nothing)."""
    out: list[str] = []
    for row in rows:
        if is_summary(row):
            out.append(f"Summary of what came before:\n{row.get('content') or ''}")
            continue
        speaker = SPEAKERS.get(str(row.get("role")))
        if speaker is None:
            continue
        content = turn.user_content(
            str(row.get("content") or ""), list(row.get("attachments") or []), images=False
        )
        if isinstance(content, str) and content.strip():
            out.append(f"{speaker}: {content}")
    return out


# ---------------------------------------------------------------- summarizing in pieces


@dataclass(frozen=True)
class Budget:
    """What one summarizing request may hold: `tokens` of transcript, `summary` of answer."""

    tokens: int
    summary: int

    @classmethod
    def for_context(cls, n_ctx: int, prompt_tokens: int) -> Budget:
        """The budget in a context of `n_ctx` tokens whose instructions take `prompt_tokens`."""
        low, high = SUMMARY_TOKENS
        summary = max(low, min(high, n_ctx // 8))
        tokens = n_ctx - summary - prompt_tokens - OVERHEAD_TOKENS
        if tokens < 2 * summary:
            raise CompactError(
                f"the model's context ({n_ctx:,} tokens) is too small to summarize in"
            )
        return cls(tokens, summary)


def pieces(entries: Sequence[str], budget: int, cost: Callable[[str], int]) -> list[list[str]]:
    """`entries` in order, grouped so that each group costs at most `budget` tokens; an
    entry longer than that alone is cut into parts that fit."""
    groups: list[list[str]] = []
    group: list[str] = []
    used = 0
    for entry in entries:
        for part in _cut(entry, budget, cost):
            tokens = cost(part) + 2  # the blank line joining it to the next
            if group and used + tokens > budget:
                groups.append(group)
                group, used = [], 0
            group.append(part)
            used += tokens
    if group:
        groups.append(group)
    return groups


def _cut(entry: str, budget: int, cost: Callable[[str], int]) -> list[str]:
    tokens = cost(entry)
    if tokens <= budget:
        return [entry]
    # Characters in proportion to the tokens, a little short so that each part fits.
    size = max(1, int(len(entry) * budget / tokens * 0.9))
    return [entry[start : start + size] for start in range(0, len(entry), size)]


def summarize(
    entries: Sequence[str],
    ask: Callable[[str, str, int], str],
    *,
    budget: Budget,
    cost: Callable[[str], int],
    focus: str = "",
    text: bool = False,
    on_piece: Callable[[int, int], None] = lambda _n, _total: None,
) -> str:
    """One summary of `entries` (a transcript, or a document's lines when `text`).

    `ask(instructions, material, max_tokens)` sends one summarizing request. What does
    not fit `budget` is cut into pieces summarized one by one, then their summaries are
    summarized (again in pieces while they do not fit). `on_piece(n, total)` says which
    request of the current level goes out.
    """
    level = list(entries)
    for _ in range(MAX_LEVELS):
        groups = pieces(level, budget.tokens, cost)
        total = len(groups)
        summaries = []
        for n, group in enumerate(groups, 1):
            on_piece(n, total)
            notes = [PIECE_NOTE.format(n=n, total=total)] if total > 1 else []
            summaries.append(
                ask(instructions(focus, text=text, notes=notes), "\n\n".join(group), budget.summary)
            )
        if total == 1:
            return summaries[0]
        level = [summary for summary in summaries if summary.strip()]
    raise CompactError("the summaries did not get shorter")


def instructions(focus: str = "", *, text: bool = False, notes: Sequence[str] = ()) -> str:
    """The system message of a summarizing request: the fixed prompt, then its notes."""
    lines = [SUMMARY_PROMPT, *notes]
    if text:
        lines.append(TEXT_NOTE)
    if focus.strip():
        lines.append(FOCUS_NOTE.format(focus=focus.strip()))
    return "\n\n".join(lines)


def ask_model(
    client: backend.Client,
    model: str,
    *,
    router: bool = True,
    cancel: threading.Event | None = None,
    on_text: Callable[[str], None] = lambda _text: None,
    on_progress: Callable[[dict], None] = lambda _progress: None,
) -> Callable[[str, str, int], str]:
    """An `ask` for `summarize` that streams from `model`; `on_text` gets each piece,
    `on_progress` llama.cpp's prompt progress while it reads the material.

    Raises Stopped once `cancel` is set, CompactError when the model gives no text,
    and the client's BackendError.
    """

    def ask(system: str, material: str, max_tokens: int) -> str:
        # A turn of its own: the instructions and the material, no tools.
        request = turn.Turn(
            model,
            system=(turn.Part("system", system),),
            question=(turn.Part("user", material),),
            params={**(backend.LLAMA_PARAMS if router else {}), "max_tokens": max_tokens},
        )
        out: list[str] = []
        stream = client.stream_chat(request, cancel=cancel)
        try:
            for kind, value in stream:
                if kind == "content":
                    out.append(str(value))
                    on_text(str(value))
                elif kind == "progress" and isinstance(value, dict):
                    on_progress(value)
        finally:
            stream.close()
        if cancel is not None and cancel.is_set():
            raise Stopped()
        summary = "".join(out).strip()
        if not summary:
            raise CompactError(f"{model} gave no summary")
        return summary

    return ask


# ---------------------------------------------------------------- leaving messages out


def trim_count(
    rows: Sequence[Mapping[str, Any]], excess: int, cost: Callable[[Mapping[str, Any]], int]
) -> int | None:
    """How many of the oldest `rows` to leave out of the request to free `excess` tokens:
    whole exchanges (what is sent starts at a user message); None when leaving them all
    out is not enough."""
    freed = 0
    for n, row in enumerate(rows):
        if freed >= excess and row.get("role") == "user":
            return n
        freed += cost(row)
    return len(rows) if freed >= excess else None


def trim_text(text: str, excess: int, cost: Callable[[str], int]) -> tuple[str, int] | None:
    """`text` without its first lines, enough to free `excess` tokens, a marker in their
    place; with how many lines went. None when a single line is left and too long."""
    lines = text.splitlines(keepends=True)
    freed = 0
    for n, line in enumerate(lines):
        if freed >= excess + OVERHEAD_TOKENS // 4:
            marker = f"[{n:,} earlier line{'' if n == 1 else 's'} not sent]\n"
            return marker + "".join(lines[n:]), n
        freed += cost(line)
    return None
