"""The libraries' vectors: library.db opened with sqlite-vec, the embedder, rank fusion.

Python's own sqlite3 may be built without extension loading, so `connect` opens
library.db through sqlean (a drop-in sqlite3 with FTS5 that loads extensions) and loads
sqlite-vec into it. When sqlite-vec will not load, the connection still works, without
vectors: `problem()` says why (logged once), and the libraries search full text only.

The vectors are searched in two steps (`searching.nearest`): the passages whose
bits (`coarse`: each value's sign, a 32nd of the floats) are nearest the query's by hamming
distance, then those few ranked by cosine distance on the float vectors kept beside them.
Cosine, not L2: llama.cpp's router normalizes its vectors, but another may not, and neither
the signs nor the cosine depend on a vector's length.

`Embedder` is how indexing and search get vectors: the embedding model's name and the
function that sends texts to the router's `/v1/embeddings` (`router.client.embeddings`).
`fuse` merges ranked lists by reciprocal rank fusion.

Qt-free.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlean
import sqlite_vec

from llamachat.errors import BackendError

log = logging.getLogger(__name__)

DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, sqlean.Error)
"""What a library.db connection raises (sqlean's errors are not sqlite3's)."""

RRF_K = 60
"""Reciprocal rank fusion's constant: a passage's score is the sum of 1 / (RRF_K + rank)."""

_state: dict[str, str] = {}  # "problem": why vectors are off ('' when they work), once known


class EmbeddingError(Exception):
    """The router gave no usable vectors; str() says why, for the Libraries panel."""


@dataclass(frozen=True)
class Embedder:
    """An embedding model on the router: `embed(texts, timeout)` gives one vector a text."""

    model: str
    embed: Callable[[Sequence[str], float], list[list[float]]]

    def vectors(
        self, texts: Sequence[str], timeout: float, *, dimension: int | None = None
    ) -> list[list[float]]:
        """One vector per text, all of one length (`dimension`, when given: the length of
        the vectors the same indexing got before), every value a finite number;
        EmbeddingError when the router fails or gives anything else."""
        try:
            got = self.embed(texts, timeout)
        except BackendError as exc:
            raise EmbeddingError(
                f"The router gave no vectors for {self.model}: {exc.message}"
            ) from None
        if len(got) != len(texts) or not got or len({len(v) for v in got}) != 1 or not got[0]:
            raise EmbeddingError(
                f"The router's vectors for {self.model} do not match the texts sent "
                f"({len(got)} for {len(texts)})"
            )
        if dimension is not None and len(got[0]) != dimension:
            # Taken as a new model, it would drop every vector and start again, forever.
            raise EmbeddingError(
                f"The router's vectors for {self.model} changed size between requests "
                f"({dimension} values, then {len(got[0])})"
            )
        if not all(math.isfinite(value) for vector in got for value in vector):
            # A NaN ranks nowhere (and sorts nowhere): stored, its passage is lost to search.
            raise EmbeddingError(
                f"The router's vectors for {self.model} hold values that are not numbers "
                "(NaN or infinity)"
            )
        return got


def connect(path: Path, timeout: float) -> tuple[Any, bool]:
    """A connection to `path`, and whether sqlite-vec is loaded in it (if not: `problem`)."""
    db = sqlean.connect(str(path), timeout=timeout)
    try:
        db.enable_load_extension(True)
        try:
            sqlite_vec.load(db)
        finally:
            db.enable_load_extension(False)
    except (sqlean.Error, AttributeError, OSError) as exc:
        _note(f"sqlite-vec could not be loaded ({exc})")
        return db, False
    _state["problem"] = ""
    return db, True


def problem() -> str:
    """Why the libraries have no vectors here ('' when sqlite-vec loads, or was not tried)."""
    return _state.get("problem", "")


def _note(why: str) -> None:
    if _state.get("problem") != why:
        log.warning("library search uses full text only: %s", why)
    _state["problem"] = why


def pack(vector: Sequence[float]) -> bytes:
    """A vector as sqlite-vec's float32 blob."""
    return struct.pack(f"{len(vector)}f", *vector)


def coarse(blob: bytes) -> bytes:
    """A float32 blob padded with zeros to a multiple of 8 values, as `vec_quantize_binary`
    takes it (a zero is bit 0 in the query and every passage alike: no distance added)."""
    return blob + bytes(4 * (-(len(blob) // 4) % 8))


def bits(dimension: int) -> int:
    """The length of the `coarse` bits of a vector of `dimension` floats."""
    return -(-dimension // 8) * 8


def fuse(rankings: Iterable[Sequence[int]]) -> list[tuple[int, float]]:
    """Ids ranked by reciprocal rank fusion of several best-first lists, with their scores."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for place, item in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + place)
    return sorted(scores.items(), key=lambda pair: -pair[1])
