"""A streamed reply cut into sentences to speak, as soon as each one is complete.

`SentenceSplitter.feed(delta)` takes the reply's text as it streams and returns the
sentences it completed, markdown taken out (`spoken`); `finish()` returns the rest.
A sentence ends at `.`, `!`, `?` (or `…`) followed by a space, at a line's end, or
at the reply's end. A dot ends nothing after a known abbreviation ("e.g.", "Dr."),
an initial ("J. Smith"), or between digits ("3.5"), nor the number of a numbered
list item ("1. "). Since a sentence is only known complete once the character after
its stop has come, the splitter holds at most the one sentence that is still open.

Code is not read aloud: a fenced block becomes the one sentence "Code block." when
its fence opens, and its lines are skipped; inline code is read as its text.

Errors: none; any text gives sentences (perhaps none).
"""

from __future__ import annotations

import re

CODE_BLOCK = "Code block."

# Words whose dot does not end a sentence (compared lowercased, without the dot).
_ABBREVIATIONS = frozenset(
    ("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf")
    + ("approx", "fig", "no", "vol", "ch", "sec", "ca", "inc", "ltd", "co")
    + ("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec")
)

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
# A stop, closing quotes or brackets after it, then whitespace.
_STOP = re.compile(r"([.!?…]+)([\"')\]»”’]*)(\s)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_RULE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"<?https?://\S+>?")
_EMPHASIS = re.compile(r"(\*\*|__|\*|~~)(?=\S)(.+?)(?<=\S)\1")
_INLINE_CODE = re.compile(r"`+([^`]*)`+")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_SPACES = re.compile(r"\s+")


def spoken(text: str) -> str:
    """One line or sentence of markdown as it is read: marks, links' targets and URLs out."""
    if _RULE.match(text) or _TABLE_RULE.match(text):
        return ""
    text = _QUOTE.sub("", _HEADING.sub("", _LIST_MARK.sub("", text)))
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("a link", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _EMPHASIS.sub(r"\2", text)  # nested: ***both*** and **bold _italic_**
    text = _HTML_TAG.sub("", text)
    if "|" in text:
        text = ", ".join(
            cell.strip() for cell in text.strip().strip("|").split("|") if cell.strip()
        )
    text = _SPACES.sub(" ", text).strip()
    # Nothing to say in a line of punctuation alone ("---", "**", "1.").
    return text if any(ch.isalnum() for ch in text) else ""


class SentenceSplitter:
    """Cuts streamed markdown into the sentences to speak, each as soon as it is complete."""

    def __init__(self) -> None:
        self._line = ""  # the open line: what came after the last newline
        self._in_code = False

    def feed(self, delta: str) -> list[str]:
        """Take the next piece of the reply; the sentences it completed, in order."""
        out: list[str] = []
        self._line += delta
        while "\n" in self._line:
            line, self._line = self._line.split("\n", 1)
            out.extend(self._whole_line(line))
        if not self._in_code and not _could_be_fence(self._line):
            done, self._line = _complete_sentences(self._line)
            out.extend(done)
        return out

    def finish(self) -> list[str]:
        """The reply ended: whatever is still open, as the last sentences."""
        line, self._line = self._line, ""
        out = self._whole_line(line)
        self._in_code = False
        return out

    def _whole_line(self, line: str) -> list[str]:
        if _FENCE.match(line):
            self._in_code = not self._in_code
            return [CODE_BLOCK] if self._in_code else []
        if self._in_code:
            return []
        # A line's end ends its last sentence.
        out, rest = _complete_sentences(line + " ")
        last = spoken(rest)
        return out + ([last] if last else [])


def _complete_sentences(line: str) -> tuple[list[str], str]:
    """The sentences `line` completes, and what is left open after them."""
    out: list[str] = []
    start = 0
    for stop in _STOP.finditer(line):
        if _ends_sentence(line, stop.start(1), start):
            sentence = spoken(line[start : stop.end(2)])
            if sentence:
                out.append(sentence)
            start = stop.end(3)
    return out, line[start:]


def _ends_sentence(line: str, dot: int, start: int) -> bool:
    """Whether the stop at `dot` ends a sentence begun at `start`."""
    if line[dot] != ".":
        return True
    word = line[start:dot].rsplit(None, 1)[-1] if line[start:dot].strip() else ""
    bare = word.lstrip("(\"'“‘[").lower()
    if bare in _ABBREVIATIONS:
        return False
    # An initial ("J. Smith") and a list item's number ("1. First") at a line's start.
    if len(bare) == 1 and bare.isalpha() and bare.upper() == word[-1:]:
        return False
    return not (bare.isdigit() and not line[start:dot].strip().count(" ") and start == 0)


def _could_be_fence(line: str) -> bool:
    """Whether the open line may still turn out to be a code fence (so say nothing yet)."""
    head = line.lstrip(" ")
    return len(line) - len(head) <= 3 and head[:3] in ("`", "``", "```", "~", "~~", "~~~")
