"""What the libraries cost: indexing text PDFs, a search over many passages, the window
while indexing.

`run(pages, passages, heartbeat)` writes `pages` pages of text PDF (100 to a file, with
fpdf2, the test extra's PDF writer) and indexes them with `LibraryStore.index` (FTS only),
timing it and the process's peak memory; indexes them again through the App's
`LibraryHost` (a background task reading the files in a child process, as the window does
it) while `heartbeat`, a 1 ms timer on the GUI thread, measures the event loop's stalls;
then indexes `passages` passages of
text and times `search_documents`' query over them (the words drawn as in English, common
ones often, most rarely); and indexes them again with vectors made here (`LocalVectors`:
clusters of 576 values, the size SmolLM2 gives; no router, so no HTTP is timed) and times
the query fused with the vectors' nearest, with the recall of those nearest against an
exact search.

Errors: none of its own; an indexing run that never ends raises TimeoutError.
"""

from __future__ import annotations

import math
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
RECALL_QUERIES = 10
"""Queries whose vectors' nearest are checked against an exact scan (~0.2 s each)."""
DIMENSION = 576
"""The vectors' size in the fused query: SmolLM2-135M's (the tests' model)."""
CLUSTERS = 300


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


class LocalVectors:
    """Deterministic vectors, the bench's embedding model: each text near one of
    `CLUSTERS` random centres (as passages on one topic are), normalized as llama.cpp's."""

    def __init__(self, dimension: int = DIMENSION, seed: int = 4) -> None:
        rng = random.Random(seed)
        self.dimension = dimension
        self._centres = [[rng.gauss(0, 1) for _ in range(dimension)] for _ in range(CLUSTERS)]
        # Noise drawn once and turned by a random shift: gauss per value would take minutes.
        self._noise = [[rng.gauss(0, 1) for _ in range(dimension)] for _ in range(64)]
        self._known: dict[str, list[float]] = {}

    def vector(self, text: str) -> list[float]:
        """`text`'s vector: its centre plus noise, both chosen by the text."""
        rng = random.Random(text)
        centre = self._centres[rng.randrange(CLUSTERS)]
        one, two = rng.sample(self._noise, 2)
        a, b = rng.randrange(self.dimension), rng.randrange(self.dimension)
        scale = rng.uniform(0.4, 0.9)
        vector = [
            c + scale * (x + y) for c, x, y in zip(centre, one[a:] + one[:a], two[b:] + two[:b])
        ]
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector]

    def remember(self, texts: list[str]) -> None:
        """Make the vectors of `texts` now, so that `embed` only looks them up."""
        self._known.update((text, self.vector(text)) for text in texts)

    def embed(self, texts: Any, _timeout: float) -> list[list[float]]:
        """The Embedder's function: one vector a text."""
        return [self._known.get(text) or self.vector(text) for text in texts]


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def index_pdfs(folder: Path, db: Path) -> dict[str, Any]:
    """Index the PDFs in `folder` in this thread: seconds, passages, peak memory."""
    from llamachat.library.index import LibraryStore

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
    from llamachat.library.index import LibraryStore

    store = LibraryStore(db)
    times = []
    found = 0
    for query in _queries():
        started = time.perf_counter()
        found += len(store.search(query, 1))
        times.append((time.perf_counter() - started) * 1000)
    store.close()
    return {**_spread(times), "hits": found}


def fused_times(folder: Path, db: Path, dimension: int = DIMENSION) -> dict[str, Any]:
    """Index the texts in `folder` with `LocalVectors` of `dimension` values, then the
    median and p95 of `QUERIES` searches fused with the vectors (the queries' vectors made
    beforehand), and the recall@20 of the vectors' nearest against an exact scan."""
    from llamachat.library import searching, vectors
    from llamachat.library.index import CANDIDATES, LibraryStore
    from llamachat.library.vectors import Embedder

    local = LocalVectors(dimension)
    embedder = Embedder("local", local.embed)
    store = LibraryStore(db)
    started = time.perf_counter()
    report = store.index(store.attach(1, folder), embedder=embedder)
    index_seconds = time.perf_counter() - started
    # Searched through a connection of its own, as search_documents does.
    store.close()
    store = LibraryStore(db)
    queries = _queries()
    local.remember(queries)
    times = []
    for query in queries:
        started = time.perf_counter()
        store.search(query, 1, embedder=embedder)
        times.append((time.perf_counter() - started) * 1000)
    found = 0
    for query in queries[:RECALL_QUERIES]:
        near = searching.nearest(store._db, store.vectors, query, 1, embedder, CANDIDATES)
        exact = store._db.execute(
            "SELECT rowid FROM passage_vectors ORDER BY vec_distance_cosine(embedding, ?) LIMIT ?",
            (vectors.pack(local.vector(query)), CANDIDATES),
        ).fetchall()
        found += len(set(near) & {rowid for (rowid,) in exact})
    store.close()
    return {
        **_spread(times),
        "recall_at_20": found / (CANDIDATES * RECALL_QUERIES),
        "passages": report.embedded,
        "dimension": dimension,
        "index_seconds": index_seconds,
    }


def _queries() -> list[str]:
    rng = random.Random(3)
    words, _weights = vocabulary()
    # Words people search for are neither the commonest nor the rarest.
    pool = words[20:2000]
    return [" ".join(rng.sample(pool, rng.randint(2, 3))) for _ in range(QUERIES)]


def _spread(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[int(len(times) * 0.95) - 1],
        "max_ms": times[-1],
    }


def run(
    pages: int,
    passages: int,
    heartbeat: Any,
    wait: Callable[[Callable[[], object], float, str], None],
) -> dict[str, Any]:
    """Every figure: indexing `pages` PDF pages, stalls meanwhile, a query over `passages`."""
    from llamachat.library.index import LibraryStore

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
        fused = fused_times(base / "texts", base / "vectors.db")
    return {
        "index": index,
        "stalls_ms": stalls,
        "query": {**query, "passages": indexed},
        "fused": fused,
    }
