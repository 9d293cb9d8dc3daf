"""Incremental markdown to Qt rich-text HTML for streamed replies.

A reply grows a few characters at a time. `StreamingMarkdown` keeps the text
that is not yet known to be complete (the open tail) apart from the finished
top-level blocks before it: each finished block is rendered to HTML exactly
once, and a flush re-renders only the tail, so the cost of a flush follows the
size of the block being written, not the length of the reply.

A boundary between top-level blocks is proved by the first line of the next
block, outside an open code fence:

- a line that starts in column 0 after a blank line;
- a code fence opener or an ATX heading in column 0 (they interrupt anything);
- the line after a column-0 code fence closes, or after an ATX heading.

Anything else stays in the tail, which is always safe: a block split too late
costs a re-render, never a wrong one. A fenced code block is highlighted with
Pygments once it is closed; while open it is shown as plain monospace.

Most tokens only add words to the paragraph being written. When the text since the
last flush can change nothing already shown and needs no markup of its own (no
newline, no markup character, after a line whose block is settled, at the end of a
paragraph), the flush hands it over as plain text to append (`Update.append`)
instead of rendering the tail again: a full render would show exactly that text
after exactly what is shown, so the document is the same either way, for a
fraction of the cost (at 20 tokens a second each token is a render of its own).

Model-written HTML is shown as text (markdown-it runs with ``html=False`` and
everything else is escaped); images become plain links so nothing is loaded.

Text with no break opportunity (a model stuck on one character) gets a zero-width
space every `MAX_RUN` characters (`break_runs`): Qt lays out such a run in time
quadratic in its length, and the breaks keep rendering linear.

This module is Qt-free and raises no exceptions of its own: an error from
markdown-it or Pygments is a bug and propagates.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache

from markdown_it import MarkdownIt
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import _TokenType
from pygments.util import ClassNotFound

log = logging.getLogger(__name__)

COPY_SCHEME = "copy"

_FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^#{1,6}(\s|$)")

# Qt wraps a line by scanning ahead to the next break opportunity, so a run with none
# costs a scan of the rest of the run per line: 300 KB took 16 s, 10 MB minutes. A
# break every MAX_RUN characters bounds each scan; words and URLs are far shorter.
MAX_RUN = 80
BREAK = "\u200b"
# A stretch of HTML with no space outside its tags: what Qt sees as one unbroken run
# (inline tags such as <b> do not break it). The lookahead keeps short words from
# matching (a tag counts as one there); the repeat after it is fast on long runs.
_HTML_RUN = re.compile(rf"(?=(?:[^\s<]|<[^>]*>){{{MAX_RUN + 1}}})(?:[^\s<]+|<[^>]*>)+")
# At most MAX_RUN shown characters of such a run (an entity shows one), with its tags.
_HTML_RUN_PIECE = re.compile(
    rf"(?:(?:<[^>]*>)*(?:&#?[0-9A-Za-z]+;|[^<])){{1,{MAX_RUN}}}(?:<[^>]*>)*"
)
_LONG_TEXT_RUN = re.compile(rf"\S{{{MAX_RUN + 1},}}")
# Most fragments have no long stretch of text at all: looking for one with the tags
# taken out costs a fiftieth of _HTML_RUN's pass.
_TAG = re.compile(r"<[^>]*>")
_LONG_STRETCH = re.compile(rf"\S{{{MAX_RUN + 1}}}")
_RUN_END = re.compile(r"[^\s\u200b]*\Z")

# What may not arrive for text to be appended as it is: a character that starts markup
# (emphasis, code, links and autolinks, escapes, entities, a heading's closing #s), or
# any white space but a plain space (a line break, or one that markdown trims and Qt
# does not fold). The text before it must not end in one either: a delimiter's meaning
# depends on the character after it (`*(a)*` is emphasis, `*(a)*b` is not).
_MARKUP_CHARS = re.compile(r"[\\`*_~\[\])<>&#]|[^\S ]")
# A line whose block cannot change any more when words are added to it: it starts
# with a letter, after at most a list item's marker (`1`, `-`, `>` or `#` could
# still become a list, a rule, a quote or a heading).
_SETTLED_LINE = re.compile(r" *(?:[-+*] +|\d{1,9}[.)] +)?[^\W\d_]")
_SPACES = re.compile(r" {2,}")
# What may not arrive for text to be appended to an open code block as it is: a line
# break, or the characters a closing fence is made of.
_CODE_BREAK = re.compile(r"[`~]|[^\S \t]")
# What may close after the paragraph the text ends in, leaving it the document's end.
_CONTAINER_CLOSE = frozenset(
    {"list_item_close", "bullet_list_close", "ordered_list_close", "blockquote_close"}
)


@dataclass(frozen=True)
class Palette:
    """Colours for the HTML a renderer produces (Qt rich text takes no stylesheet classes)."""

    name: str
    muted: str
    code_background: str
    inline_code_background: str
    table_border: str
    pygments_style: str


LIGHT = Palette(
    name="light",
    muted="#6a737d",
    code_background="#f6f8fa",
    inline_code_background="#eff1f3",
    table_border="#d0d7de",
    pygments_style="default",
)
DARK = Palette(
    name="dark",
    muted="#8b949e",
    code_background="#161b22",
    inline_code_background="#2d333b",
    table_border="#3d444d",
    pygments_style="github-dark",
)


@dataclass
class RenderStats:
    """How much work a `StreamingMarkdown` did: proves finished blocks render once."""

    finished_renders: int = 0
    finished_chars: int = 0
    tail_renders: int = 0
    tail_chars: int = 0
    plain_appends: int = 0


@dataclass(frozen=True)
class Update:
    """The result of a flush: HTML of blocks finished since the last flush, and of the open tail.

    Or, with `append` set (and the others empty), plain text to add at the end of what
    is shown: the tail as rendered before plus `append` is what rendering it would show
    ('' when the new text shows nothing yet, such as a space ending the paragraph).
    """

    finished: str
    tail: str
    append: str | None = None


@dataclass
class _Env:
    first_code: int
    open_fence: bool
    last_fence: int
    codes: list[str] = field(default_factory=list)


class _CodeFormatter:
    """Pygments tokens to the lightest rich text Qt reads: <font>, <b> and <i>, runs merged.

    Pygments' HtmlFormatter writes a CSS style attribute per token, and parsing those
    cost Qt more than the lexing cost Pygments.
    """

    def __init__(self, style: str) -> None:
        self._style = get_style_by_name(style)
        self._tags: dict[_TokenType, tuple[str, str]] = {}

    def format(self, tokens: Iterable[tuple[_TokenType, str]]) -> str:
        out: list[str] = []
        run: list[str] = []
        run_tags = ("", "")
        for token_type, value in tokens:
            if run and value.isspace():
                # Whitespace shows no colour: it joins the run instead of splitting it.
                run.append(value)
                continue
            tags = self._tags.get(token_type) or self._tags_for(token_type)
            if tags != run_tags and run:
                out.append(run_tags[0] + _escape("".join(run)) + run_tags[1])
                run.clear()
            run_tags = tags
            run.append(value)
        if run:
            out.append(run_tags[0] + _escape("".join(run)) + run_tags[1])
        return "".join(out)

    def _tags_for(self, token_type: _TokenType) -> tuple[str, str]:
        style = self._style.style_for_token(token_type)
        start = end = ""
        if style["color"]:
            start, end = f'<font color="#{style["color"]}">', "</font>"
        if style["bold"]:
            start, end = start + "<b>", "</b>" + end
        if style["italic"]:
            start, end = start + "<i>", "</i>" + end
        self._tags[token_type] = (start, end)
        return start, end


@cache
def _formatter(style: str) -> _CodeFormatter:
    return _CodeFormatter(style)


@lru_cache(maxsize=64)
def lexer_for(language: str) -> Lexer | None:
    """The Pygments lexer for a fence's language name, or None; looked up once per name.

    Finding a lexer by name scans Pygments' registry and imports the lexer's module,
    which cost more than highlighting the block itself when done per block.
    """
    try:
        return get_lexer_by_name(language.lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def warm_up() -> None:
    """Import what the first highlighted code block would otherwise stall on."""
    for language in ("python", "bash", "javascript"):
        lexer_for(language)
    for style in {LIGHT.pygments_style, DARK.pygments_style}:
        _formatter(style)


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def break_runs(fragment: str) -> str:
    """HTML `fragment` with a zero-width space every MAX_RUN characters of unbroken text.

    Tags and entities are left whole; the breaks show nothing and only let Qt wrap.
    """
    if not _LONG_STRETCH.search(_TAG.sub("", fragment)):
        return fragment
    return _HTML_RUN.sub(_break_html_run, fragment)


def _break_html_run(match: re.Match) -> str:
    run = match.group()
    if "<" not in run and "&" not in run:
        return _break_text_run(match)  # the common case (one character repeated), faster
    pieces = _HTML_RUN_PIECE.findall(run)
    # A run of tags alone has no piece: it shows nothing and is left as it is.
    return BREAK.join(pieces) if sum(map(len, pieces)) == len(run) else run


def break_text_runs(text: str, run_before: int = 0) -> tuple[str, int]:
    """Plain `text` with the same breaks, for text that arrives in pieces.

    `run_before` is the unbroken run the previous piece ended with (at most MAX_RUN);
    returns the text and the run it ends with, to pass along with the next piece.
    """
    # A stand-in for the carried run: breaks fall every MAX_RUN characters from the start
    # of a run, so none lands inside it and it can be cut off again.
    full = _LONG_TEXT_RUN.sub(_break_text_run, "x" * run_before + text)
    end = _RUN_END.search(full[-(MAX_RUN + 1) :])
    return full[run_before:], len(end.group()) if end else 0


def _break_text_run(match: re.Match) -> str:
    run = match.group()
    return BREAK.join(run[i : i + MAX_RUN] for i in range(0, len(run), MAX_RUN))


class Renderer:
    """markdown-it ("commonmark" + tables + strikethrough) producing HTML that Qt rich text shows well."""

    def __init__(self, palette: Palette = LIGHT) -> None:
        self.palette = palette
        md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
        rules = {
            "fence": self._fence,
            "code_block": self._fence,
            "code_inline": self._code_inline,
            "image": self._image,
            "table_open": self._table_open,
            "blockquote_open": self._blockquote_open,
        }
        for name, rule in rules.items():
            # markdown-it binds a rule to its own renderer; the closure keeps ours.
            md.add_render_rule(name, lambda _r, t, i, _o, env, rule=rule: rule(t, i, env))
        self._md = md

    def render(
        self, text: str, *, first_code: int = 0, open_fence: bool = False
    ) -> tuple[str, list[str]]:
        """Render `text`; return the HTML and the raw code of each code block in order.

        Code blocks are numbered from `first_code` in their "Copy code" links; with
        `open_fence` the last code block is still being written and is not highlighted.
        """
        out, codes, _tokens = self._render(text, first_code, open_fence)
        return out, codes

    def render_open(
        self, text: str, *, first_code: int = 0, open_fence: bool = False
    ) -> tuple[str, list[str], bool]:
        """`render`, and whether `text` ends inside a paragraph's text (see `ends_in_paragraph`)."""
        out, codes, tokens = self._render(text, first_code, open_fence)
        return out, codes, ends_in_paragraph(tokens, text)

    def _render(self, text: str, first_code: int, open_fence: bool) -> tuple[str, list[str], list]:
        tokens = self._md.parse(text)
        last_fence = max(
            (i for i, t in enumerate(tokens) if t.type in ("fence", "code_block")), default=-1
        )
        env = _Env(first_code=first_code, open_fence=open_fence, last_fence=last_fence)
        out = self._md.renderer.render(tokens, self._md.options, {"llamachat": env})
        return break_runs(out.strip()), env.codes, tokens

    def _fence(self, tokens: list, idx: int, env: dict) -> str:
        token = tokens[idx]
        state: _Env = env["llamachat"]
        code = token.content
        index = state.first_code + len(state.codes)
        state.codes.append(code)
        language = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
        body = code.removesuffix("\n")
        still_open = state.open_fence and idx == state.last_fence
        highlighted = None if still_open else self._highlight(body, language)
        if highlighted is None:
            highlighted = _escape(body)
        p = self.palette
        # A frame, not a two-row table: Qt lays a table out several times to size its
        # columns, which made code blocks the dearest part of a streamed reply. A frame
        # takes no padding from HTML, so its blocks keep their distance from its edges.
        return (
            f'<table width="100%" cellspacing="0" border="0" '
            f'style="-qt-table-type: frame; background-color:{p.code_background}; '
            f'margin-top:4px; margin-bottom:8px"><tr><td>'
            f'<p style="margin-top:6px; margin-bottom:4px; margin-left:10px; margin-right:10px; '
            f'font-size:small"><span style="color:{p.muted}">{_escape(language) or "code"}</span>'
            f'&nbsp;&nbsp;&nbsp;<a href="{COPY_SCHEME}:{index}">Copy code</a></p>'
            # pre-wrap: a long line wraps (indentation kept) instead of running off the edge.
            f'<pre style="white-space:pre-wrap; margin-top:0; margin-bottom:10px; '
            f'margin-left:10px; margin-right:10px">'
            f"{highlighted}</pre></td></tr></table>\n"
        )

    def _highlight(self, code: str, language: str) -> str | None:
        if not language:
            return None
        lexer = lexer_for(language)
        if lexer is None:
            return None
        return _formatter(self.palette.pygments_style).format(lexer.get_tokens(code))

    def _code_inline(self, tokens: list, idx: int, env: dict) -> str:
        return (
            f'<code style="background-color:{self.palette.inline_code_background}">'
            f"{_escape(tokens[idx].content)}</code>"
        )

    def _image(self, tokens: list, idx: int, env: dict) -> str:
        # Images are not fetched: a model could point at any local file or tracker.
        token = tokens[idx]
        src = token.attrGet("src") or ""
        alt = "".join(child.content for child in token.children or ()) or src
        return f'<a href="{_escape(str(src))}">{_escape(alt)}</a>'

    def _table_open(self, tokens: list, idx: int, env: dict) -> str:
        return (
            f'<table border="1" cellspacing="0" cellpadding="5" '
            f'style="border-collapse:collapse; border-style:solid; '
            f'border-color:{self.palette.table_border}; margin-top:4px; margin-bottom:8px">\n'
        )

    def _blockquote_open(self, tokens: list, idx: int, env: dict) -> str:
        return f'<blockquote style="color:{self.palette.muted}">\n'


def ends_in_paragraph(tokens: list, text: str) -> bool:
    """True when the last line of `text` is the end of a paragraph's text, shown last.

    Words added to that line then show at the very end of the rendered document. Not
    so in a heading, a table cell or code, nor in a paragraph that may still turn out
    to be a link reference definition (it starts with `[`; a definition shows nothing).
    """
    if not text or text.endswith("\n"):
        return False
    i = len(tokens) - 1
    while i >= 0 and tokens[i].type in _CONTAINER_CLOSE:
        i -= 1
    if i < 2 or tokens[i].type != "paragraph_close" or tokens[i - 1].type != "inline":
        return False
    inline = tokens[i - 1]
    lines = text.count("\n") + 1
    return bool(inline.map) and inline.map[1] == lines and not inline.content.startswith("[")


@lru_cache(maxsize=4)
def renderer_for(palette: Palette) -> Renderer:
    """A shared renderer per palette (building the markdown-it parser is not free)."""
    return Renderer(palette)


class StreamingMarkdown:
    """Markdown that grows by appends; finished blocks render once, only the open tail re-renders."""

    def __init__(self, *, palette: Palette = LIGHT, plain_appends: bool = True) -> None:
        """`plain_appends=False` renders the open tail again at every flush: what plain
        appends must show exactly (their reference)."""
        self._renderer = renderer_for(palette)
        self._plain_appends = plain_appends
        self._finished_text: list[str] = []
        self._tail = ""
        self._scanned = 0
        self._fence: tuple[str, int] | None = None
        self._fence_top_level = False
        self._prev_blank = False
        self._codes: list[str] = []
        self._tail_codes: list[str] = []
        # How much of the tail the document shows, and whether words added to its last
        # line may simply be appended to the document (see `_plain_extension`).
        self._shown = 0
        self._extendable = False
        self.stats = RenderStats()

    def append(self, text: str) -> None:
        """Add streamed text to the open tail; nothing is parsed until the next flush."""
        self._tail += text

    def text(self) -> str:
        """All text appended so far."""
        return "".join(self._finished_text) + self._tail

    def code(self, index: int) -> str:
        """The raw code of code block `index` (the number in its ``copy:<n>`` link)."""
        codes = self._codes + self._tail_codes
        return codes[index] if 0 <= index < len(codes) else ""

    def code_count(self) -> int:
        """How many code blocks the text holds so far."""
        return len(self._codes) + len(self._tail_codes)

    def flush(self) -> Update:
        """Render what changed: blocks newly proved finished (once) and the open tail.

        When the new text only adds words to the paragraph being written, it comes
        back as plain text to append instead (`Update.append`).
        """
        cut = self._scan()
        if not cut and self._plain_appends:
            extension = self._plain_extension()
            if extension is not None:
                self._shown = len(self._tail)
                self.stats.plain_appends += 1
                return Update("", "", extension)
        finished = self._commit(self._tail[:cut]) if cut else ""
        if cut:
            self._tail = self._tail[cut:]
            self._scanned -= cut
        tail = ""
        self._tail_codes = []
        self._extendable = False
        if self._tail.strip():
            tail, self._tail_codes, self._extendable = self._renderer.render_open(
                self._tail, first_code=len(self._codes), open_fence=self._fence is not None
            )
            self.stats.tail_renders += 1
            self.stats.tail_chars += len(self._tail)
        self._shown = len(self._tail)
        return Update(finished, tail)

    def finish(self) -> Update:
        """Render everything left as finished (an unclosed fence is highlighted too)."""
        finished = self._commit(self._tail)
        self._tail = ""
        self._tail_codes = []
        self._scanned = 0
        self._fence = None
        self._prev_blank = False
        self._shown = 0
        self._extendable = False
        return Update(finished, "")

    def _plain_extension(self) -> str | None:
        """The text to append when what arrived since the last flush only adds words.

        None when the tail must be rendered again. The text is what Qt shows of the new
        words: markdown drops the spaces that end a paragraph (they show once words
        follow) and Qt shows a run of spaces as one.
        """
        new = self._tail[self._shown :]
        line = self._tail[self._tail.rfind("\n", 0, self._shown) + 1 : self._shown]
        if self._fence is not None:
            return self._code_extension(new, line)
        if not self._extendable or not new or _MARKUP_CHARS.search(new):
            return None
        words = line.rstrip(" ")
        if not words or _MARKUP_CHARS.match(words[-1]) or not _SETTLED_LINE.match(line):
            return None
        if ";" in new and "&" in line:
            return None  # it may end an entity (&amp;)
        if _LONG_TEXT_RUN.search(_last_run(line) + new):
            return None  # a rendering would break the run (break_runs)
        return _SPACES.sub(" ", (" " if line.endswith(" ") else "") + new).rstrip(" ")

    def _code_extension(self, new: str, line: str) -> str | None:
        """The text to append to an open code block's last line (None: render it again).

        Only for a fence opened in column 0, whose lines are its code as they are (an
        indented one loses its indentation), and once its last line has begun with
        something that is neither white space nor the fence's character.
        """
        fence = self._fence
        # A line of fence characters alone may be the closing fence (Qt shows a line of
        # white space alone as an empty one).
        if (
            fence is None
            or not (self._fence_top_level and new and line.strip(" \t" + fence[0]))
            or _CODE_BREAK.search(new)
        ):
            return None
        if _LONG_TEXT_RUN.search(_last_run(line) + new):
            return None
        if self._tail_codes:
            self._tail_codes[-1] += new  # what "Copy code" copies
        return new

    def _commit(self, text: str) -> str:
        self._finished_text.append(text)
        self.stats.finished_chars += len(text)
        if not text.strip():
            return ""
        out, codes = self._renderer.render(text, first_code=len(self._codes))
        self._codes.extend(codes)
        self.stats.finished_renders += 1
        return out

    def _scan(self) -> int:
        """Scan complete lines not seen yet; return the offset of the last proved boundary."""
        tail = self._tail
        pos = self._scanned
        cut = 0
        while (end := tail.find("\n", pos)) >= 0:
            line = tail[pos:end]
            if self._fence is not None:
                char, length = self._fence
                stripped = line.strip()
                if stripped.startswith(char * length) and not stripped.strip(char):
                    self._fence = None
                    if self._fence_top_level:
                        cut = end + 1
            elif not line.strip():
                self._prev_blank = True
            else:
                column0 = not line[0].isspace()
                opener = _FENCE_OPEN.match(line)
                if opener and opener.group(2)[0] == "`" and "`" in opener.group(3):
                    opener = None
                heading = column0 and _HEADING.match(line) is not None
                if column0 and (self._prev_blank or opener or heading):
                    cut = pos
                if opener:
                    self._fence = (opener.group(2)[0], len(opener.group(2)))
                    self._fence_top_level = column0
                elif heading:
                    cut = end + 1
                self._prev_blank = False
            pos = end + 1
        self._scanned = pos
        return cut


def _last_run(line: str) -> str:
    """The unbroken run of text `line` ends with ('' when it ends with white space)."""
    # From the right: the cost follows the run, not the line (a paragraph's last line
    # is all of it).
    return "" if not line or line[-1].isspace() else line.rsplit(None, 1)[-1]


def render_markdown(text: str, *, palette: Palette = LIGHT) -> str:
    """Render a whole markdown text to Qt rich-text HTML in one go."""
    return renderer_for(palette).render(text)[0]


def plain_text(text: str) -> str:
    """The words of a markdown text without its markup, on one line (for snippets).

    Code keeps its text, a link or image its label; raw HTML stays as the text it is.
    """
    words: list[str] = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type in ("fence", "code_block", "html_block"):
            words.append(token.content)
        for child in token.children or ():
            if child.type == "image":
                words.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                words.append(" ")
            elif child.content:
                words.append(child.content)
        words.append(" ")
    return " ".join("".join(words).split())
