"""What the libraries cost: indexing text PDFs, a search over many passages, the window
while indexing.

`run(pages, passages, heartbeat)` writes `pages` pages of text PDF (100 to a file, with
fpdf2, the test extra's PDF writer) and indexes them with `LibraryStore.index` (FTS only),
timing it and the process's peak memory; indexes them again through the App's
`LibraryHost` (a background task reading the files in a child process, as the window does
it) while `heartbeat`, a 1 ms timer on the GUI thread, measures the event loop's stalls;
then indexes `passages` passages of
text and times `search_documents`' query over them (the words drawn as in English, common
ones often, most rarely).

Errors: none of its own; an indexing run that never ends raises TimeoutError.
"""

from __future__ import annotations

import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGES_PER_PDF = 100
QUERIES = 50


def vocabulary(seed: int = 5, size: int = 20_000) -> tuple[list[str], list[float]]:
    """Made-up words with Zipf weights (the n-th most common word 1/n as often)."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    words = sorted({"".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(size * 2)})[
        :size
    ]
    rng.shuffle(words)
    return words, [1 / (n + 1) for n in range(len(words))]


def _text(rng: random.Random, words: list[str], weights: list[float], n: int) -> str:
    return " ".join(rng.choices(words, weights, k=n))


def write_pdfs(folder: Path, pages: int, seed: int = 1) -> list[Path]:
    """`pages` pages of text PDF, about 350 words a page, `PAGES_PER_PDF` to a file."""
    from fpdf import FPDF

    rng = random.Random(seed)
    words, weights = vocabulary()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for start in range(0, pages, PAGES_PER_PDF):
        pdf = FPDF()
        pdf.set_font("helvetica", size=10)
        for _page in range(min(PAGES_PER_PDF, pages - start)):
            pdf.add_page()
            pdf.multi_cell(0, 4, _text(rng, words, weights, 350))
        path = folder / f"book-{start // PAGES_PER_PDF:03}.pdf"
        pdf.output(str(path))
        paths.append(path)
    return paths


def write_texts(folder: Path, passages: int, seed: int = 2) -> None:
    """Text files holding about `passages` passages (paragraphs of ~140 words), 1,000 a file."""
    rng = random.Random(seed)
    words, weights = vocabulary()
    folder.mkdir(parents=True, exist_ok=True)
    for start in range(0, passages, 1000):
        count = min(1000, passages - start)
        paragraphs = [_text(rng, words, weights, 140) for _ in range(count)]
        (folder / f"notes-{start // 1000:03}.txt").write_text("\n\n".join(paragraphs))


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def index_pdfs(folder: Path, db: Path) -> dict[str, Any]:
    """Index the PDFs in `folder` in this thread: seconds, passages, peak memory."""
    from llamachat.library.store import LibraryStore

    before = _peak_rss_mib()
    store = LibraryStore(db)
    started = time.perf_counter()
    report = store.index(store.attach(1, folder))
    seconds = time.perf_counter() - started
    store.close()
    return {
        "seconds": seconds,
        "passages": report.passages,
        "files": report.indexed,
        "peak_rss_mib": _peak_rss_mib(),
        "peak_rss_growth_mib": _peak_rss_mib() - before,
    }


def stalls_while_indexing(
    folder: Path, db: Path, heartbeat: Any, wait: Callable[[Callable[[], object], float, str], None]
) -> list[float]:
    """The heartbeat's lateness (ms) while the App's LibraryHost indexes `folder`."""
    from llamachat.ui.library.host import LibraryHost

    host = LibraryHost(db)
    heartbeat.start()
    host.attach(1, folder)
    wait(lambda: not host.busy(), 600, "the background indexing to end")
    heartbeat.stop()
    host.close()
    return list(heartbeat.late_ms)


def query_times(db: Path, passages: int) -> dict[str, Any]:
    """Median and p95 of `QUERIES` searches of two or three words over `passages` passages."""
    from llamachat.library.store import LibraryStore

    rng = random.Random(3)
    words, _weights = vocabulary()
    store = LibraryStore(db)
    times = []
    found = 0
    # Words people search for are neither the commonest nor the rarest.
    pool = words[20:2000]
    for _ in range(QUERIES):
        query = " ".join(rng.sample(pool, rng.randint(2, 3)))
        started = time.perf_counter()
        found += len(store.search(query, 1))
        times.append((time.perf_counter() - started) * 1000)
    store.close()
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[int(len(times) * 0.95) - 1],
        "max_ms": times[-1],
        "hits": found,
    }


def run(
    pages: int,
    passages: int,
    heartbeat: Any,
    wait: Callable[[Callable[[], object], float, str], None],
) -> dict[str, Any]:
    """Every figure: indexing `pages` PDF pages, stalls meanwhile, a query over `passages`."""
    from llamachat.library.store import LibraryStore

    with tempfile.TemporaryDirectory(prefix="llamachat-bench-library-") as tmp:
        base = Path(tmp)
        write_pdfs(base / "pdfs", pages)
        index = index_pdfs(base / "pdfs", base / "index.db")
        stalls = stalls_while_indexing(base / "pdfs", base / "window.db", heartbeat, wait)
        write_texts(base / "texts", passages)
        store = LibraryStore(base / "texts.db")
        indexed = store.index(store.attach(1, base / "texts")).passages
        store.close()
        query = query_times(base / "texts.db", indexed)
    return {
        "index": index,
        "stalls_ms": stalls,
        "query": {**query, "passages": indexed},
    }
