"""Text out of a file, split into passages with their page and heading.

`extract(path)` reads one file by its suffix: PDF (through `pypdf`, page by page),
Markdown (headings tracked), HTML (text outside scripts and styles, headings tracked),
plain text and source code. It returns the file's `Passage`s, or raises `Skipped`
whose str() says, for the Libraries panel, why the file was left out (a type
llamachat does not read, a file too large, encrypted, unreadable or not UTF-8).

It reads a file a `Part` at a time (`extract_part`: a PDF's pages for about
`PART_SECONDS`, any other file whole), so a caller can say how far a big PDF got, stop
between parts, and have the parts read elsewhere (the app reads them in a child process,
`library.child`, to keep pypdf off the window's GIL).

Qt-free.
"""

from __future__ import annotations

import html.parser
import io
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamachat import outside

log = logging.getLogger(__name__)

PASSAGE_CHARS = 1200
"""A passage's target length: about 300 tokens, a few paragraphs, small enough that five
of them leave the model's context room to answer."""

PART_SECONDS = 0.2
"""About how long one part of a PDF takes to read: progress a few times a second, and a
stop asked for between parts waits no longer."""
PART_PAGES = 50
"""The most pages in one part: progress also moves through a PDF that reads fast."""

MAX_TEXT_BYTES = 8 * 1024 * 1024
MAX_PDF_BYTES = 200 * 1024 * 1024

MARKDOWN = frozenset({".md", ".markdown", ".mdown", ".mkd"})
HTML = frozenset({".html", ".htm", ".xhtml"})
PLAIN = frozenset({".txt", ".text", ".rst", ".adoc", ".org", ".tex", ".log", ".csv", ".tsv"})
CODE = frozenset(
    {
        ".py", ".pyi", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".c", ".h", ".cc", ".cpp",
        ".hpp", ".cxx", ".rs", ".go", ".java", ".kt", ".kts", ".scala", ".swift", ".m",
        ".rb", ".php", ".pl", ".lua", ".r", ".jl", ".hs", ".ml", ".cs", ".fs", ".dart",
        ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".sql", ".css", ".scss", ".less",
        ".json", ".toml", ".yaml", ".yml", ".ini", ".cfg", ".conf", ".xml", ".cmake",
        ".gradle", ".proto", ".graphql", ".vue", ".svelte", ".el", ".clj", ".ex", ".exs",
        ".erl", ".zig", ".nim", ".v", ".vhdl", ".asm", ".s",
    }
)  # fmt: skip
NAMED = frozenset({"makefile", "dockerfile", "readme", "license", "copying", "changelog"})
PDF = ".pdf"


class Skipped(Exception):
    """A file that is not indexed; str() says why, in words for the Libraries panel."""


@dataclass(frozen=True)
class Passage:
    """A piece of a file's text: `page` (1-based, PDFs; else None) and its `heading`."""

    text: str
    page: int | None = None
    heading: str = ""


def readable(path: Path) -> bool:
    """Whether the file's type is one llamachat extracts text from."""
    suffix = path.suffix.lower()
    return (
        suffix == PDF
        or suffix in MARKDOWN | HTML | PLAIN | CODE
        or (not suffix and path.name.lower() in NAMED)
    )


@dataclass(frozen=True)
class Part:
    """What one `extract_part` call read: `pages` is the PDF's page count (None: not a
    PDF, read whole), `next_page` the 0-based page the next part starts at (None: done)."""

    passages: list[Passage] = field(default_factory=list)
    pages: int | None = None
    next_page: int | None = None


PartReader = Callable[[Path, int, int], Part]
"""Reads (path, size, first page) into a Part: `extract_part`, or a child process's."""


def extract(
    path: Path,
    size: int,
    read: PartReader | None = None,
    on_page: Callable[[int, int], None] | None = None,
) -> list[Passage]:
    """The passages of the file at `path` (of `size` bytes), read part by part through
    `read` (`extract_part` here); `on_page(pages read, pages)` after each part of a PDF.
    Raises Skipped, and whatever `read` or `on_page` raise (to stop it)."""
    read = read or extract_part
    passages: list[Passage] = []
    first: int | None = 0
    pages: int | None = None
    while first is not None:
        part = read(path, size, first)
        passages.extend(part.passages)
        first, pages = part.next_page, part.pages
        if pages is not None and on_page is not None:
            on_page(pages if first is None else first, pages)
    if pages is not None and not passages:
        raise Skipped("no text (a scanned PDF needs OCR)")
    return passages


def extract_part(path: Path, size: int, first_page: int = 0, seconds: float = PART_SECONDS) -> Part:
    """A PDF's pages from `first_page` for about `seconds` (PART_PAGES at most); any other
    file whole. Raises Skipped."""
    if not readable(path):
        kind = path.suffix.lower() or "no extension"
        raise Skipped(f"not a type llamachat reads ({kind})")
    suffix = path.suffix.lower()
    limit = MAX_PDF_BYTES if suffix == PDF else MAX_TEXT_BYTES
    if size > limit:
        raise Skipped(f"too large ({_mb(size)}; the limit is {_mb(limit)})")
    if suffix == PDF:
        return _pdf(path, size, first_page, seconds)
    text = _text(path)
    if suffix in MARKDOWN:
        return Part(list(_sections(_markdown_sections(text))))
    if suffix in HTML:
        parser = _HtmlText()
        parser.feed(text)
        parser.close()
        return Part(list(_sections(parser.sections())))
    return Part(list(_sections([("", text)])))


def split(text: str, limit: int = PASSAGE_CHARS) -> list[str]:
    """`text` cut into pieces of about `limit` characters, at paragraphs, then lines, then words."""
    pieces: list[str] = []
    current = ""
    for block in _blocks(text, limit):
        if current and len(current) + len(block) + 2 > limit:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{block}" if current else block
    if current:
        pieces.append(current)
    return pieces


def _blocks(text: str, limit: int) -> Iterator[str]:
    """The paragraphs of `text`, each no longer than `limit` (long ones cut at lines or words)."""
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= limit:
            yield paragraph
            continue
        line_piece = ""
        for word in re.split(r"(?<=\n)|(?<= )", paragraph):
            if len(line_piece) + len(word) > limit and line_piece:
                yield line_piece.strip()
                line_piece = ""
            # A single "word" longer than the limit (minified code, base64) is cut hard.
            while len(word) > limit:
                yield word[:limit]
                word = word[limit:]
            line_piece += word
        if line_piece.strip():
            yield line_piece.strip()


def _sections(sections: Iterable[tuple[str, str]], page: int | None = None) -> Iterator[Passage]:
    for heading, body in sections:
        for piece in split(body):
            yield Passage(piece, page, heading)


def refused(exc: outside.Refused) -> Skipped:
    """The Skipped the Libraries panel lists for a file the gate refused ("a pipe (FIFO), ...")."""
    return Skipped(exc.reason.removeprefix("is "))


def _text(path: Path) -> str:
    try:
        data, _more = outside.read_bytes(path, MAX_TEXT_BYTES)
    except outside.Refused as exc:
        raise refused(exc) from None
    if b"\0" in data[:8192]:
        raise Skipped("binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Skipped("not UTF-8 text") from None


# The PDF being read, kept from one part to the next: opening a 1,000-page PDF again
# costs a quarter of the pages a part reads.
_open_pdf: tuple[Path, int, Any] | None = None


def _pdf(path: Path, size: int, first: int, seconds: float) -> Part:
    global _open_pdf
    # Imported here: pypdf takes a while to import and only PDFs need it.
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        # Taken once: another thread reading another PDF may replace it meanwhile.
        cached = _open_pdf
        if cached is not None and first and cached[:2] == (path, size):
            reader = cached[2]
        else:
            _open_pdf = None
            # Read through the gate (pypdf would read the whole file itself, from any
            # kind of file); kept in memory while its parts are read, as pypdf keeps it.
            try:
                data, _more = outside.read_bytes(path, MAX_PDF_BYTES)
            except outside.Refused as exc:
                raise refused(exc) from None
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):
                raise Skipped("encrypted (a password is needed)")
            _open_pdf = (path, size, reader)
        pages = len(reader.pages)
        passages: list[Passage] = []
        deadline = time.monotonic() + seconds
        page, end = first, min(pages, first + PART_PAGES)
        while page < end and (page == first or time.monotonic() < deadline):
            text = reader.pages[page].extract_text() or ""
            page += 1
            passages.extend(_sections([("", text)], page=page))
    except Skipped:
        _open_pdf = None
        raise
    except (DependencyError, FileNotDecryptedError):
        _open_pdf = None
        raise Skipped("encrypted (cannot be decrypted)") from None
    except Exception as exc:  # noqa: BLE001 - the file is listed as skipped, with why
        _open_pdf = None
        # pypdf raises many kinds on a broken file; the panel names the file and the reason.
        log.info("cannot read the PDF %s: %s", path, exc)
        raise Skipped(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    if page >= pages:
        _open_pdf = None
        return Part(passages, pages)
    return Part(passages, pages, page)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _markdown_sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) pairs; code fences are not read as headings."""
    sections: list[tuple[str, str]] = []
    heading, fenced = "", False
    lines: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            sections.append((heading, "\n".join(lines)))
            heading, lines = match.group(2), []
        else:
            lines.append(line)
    sections.append((heading, "\n".join(lines)))
    return sections


class _HtmlText(html.parser.HTMLParser):
    """The text of an HTML page by heading, skipping scripts and styles."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "section", "article", "pre", "table"})
    _HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[tuple[str, list[str]]] = [("", [])]
        self._skipping = 0
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._HEADINGS:
            self._heading = []
        elif tag in self._BLOCK:
            self._parts[-1][1].append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self._HEADINGS and self._heading is not None:
            title = " ".join("".join(self._heading).split())
            self._parts.append((title, []))
            self._heading = None
        elif tag in self._BLOCK:
            self._parts[-1][1].append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._heading is not None:
            self._heading.append(data)
        else:
            self._parts[-1][1].append(data)

    def sections(self) -> list[tuple[str, str]]:
        """(heading, text) pairs in page order."""
        return [(heading, "".join(chunks)) for heading, chunks in self._parts]


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"
