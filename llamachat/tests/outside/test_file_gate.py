"""The tests of `llamachat.outside.file_gate`: the gate, over the messy folder."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest

from llamachat import outside
from llamachat.tests.support import NON_UTF8_NAME, SPARSE_BYTES, messy_folder, returns_at_once


class TestFileGate:
    """Regular files only, never blocking; reads bounded by bytes read; folders never left."""

    def test_walk_lists_the_regular_files_and_leaves_out_the_rest_saying_why(
        self, tmp_path: Path
    ) -> None:
        """Over the messy folder: the text files inside (the odd name kept as on disk), the
        sparse file by its size; a FIFO, socket, links out and broken links left out with
        their reason; nothing outside is reached."""
        messy = messy_folder(tmp_path / "docs")
        walked = {item.rel: item for item in outside.walk(messy.root)}
        for name in [*messy.readable, messy.large]:
            assert walked[name].reason == "" and walked[name].stat is not None, name
        assert walked[messy.large].stat.st_size == SPARSE_BYTES  # type: ignore[union-attr]
        for name, word in messy.left_out.items():
            assert word in walked[name].reason, (name, walked[name].reason)
        assert not any(rel.startswith("elsewhere/") for rel in walked)
        assert (messy.root / NON_UTF8_NAME).read_text().startswith("A file with an odd name")

    def test_walk_within_a_wider_folder_follows_links_into_it_only(self, tmp_path: Path) -> None:
        """`within` lets a link lead into the wider folder (a collection's shared files) and
        still never out of it."""
        messy = messy_folder(tmp_path / "docs")
        walked = {item.rel: item.reason for item in outside.walk(messy.root, within=tmp_path)}
        assert walked["passwd.txt"] == ""  # docs-outside is inside tmp_path
        assert "outside the folder" in walked["zero.txt"]

    def test_open_refuses_a_fifo_socket_and_device_at_once(self, tmp_path: Path) -> None:
        """A FIFO with no writer, a socket and a link to /dev/zero are refused without
        blocking, each with what it is."""
        messy = messy_folder(tmp_path / "docs")
        for name, what in (("fifo.txt", "pipe"), ("socket.txt", "socket"), ("zero.txt", "device")):
            refused = returns_at_once(functools.partial(outside.open_regular, messy.root / name))
            assert isinstance(refused, outside.NotRegular) and what in refused.reason, name

    def test_reads_are_bounded_by_the_bytes_read_not_by_stat(self, tmp_path: Path) -> None:
        """The 1 GB sparse file costs at most the limit: cut, refused as too large, or (a
        NUL in its first bytes) refused as not text without reading the rest."""
        messy = messy_folder(tmp_path / "docs")
        sparse = messy.root / messy.large
        data, more = outside.read_bytes(sparse, 4096, cut=True)
        assert (len(data), more) == (4096, True)
        with pytest.raises(outside.TooLarge):
            outside.read_text(sparse, 8 * 1024 * 1024)
        started = time.monotonic()
        with pytest.raises(outside.NotText):
            outside.read_text(sparse, 2 * SPARSE_BYTES)
        assert time.monotonic() - started < 1.0
        assert outside.read_text(messy.root / "normal.txt", 1000).startswith("Plain notes")

    def test_read_text_keeps_every_byte_past_its_probe(self, tmp_path: Path) -> None:
        """The first TEXT_PROBE bytes are searched for NULs before the rest is read; the
        text comes back whole across that boundary."""
        text = "é" * outside.file_gate.TEXT_PROBE + "end"
        (tmp_path / "long.txt").write_text(text)
        assert outside.read_text(tmp_path / "long.txt", 10 * len(text)) == text

    def test_a_name_that_is_not_utf8_is_shown_with_a_replacement_character(
        self, tmp_path: Path
    ) -> None:
        """The path opens the file as it is on disk; `shown` is text anything can hold."""
        messy = messy_folder(tmp_path / "docs")
        path = messy.root / NON_UTF8_NAME
        assert outside.shown(path.name) == "caf\N{REPLACEMENT CHARACTER}.txt"
        outside.shown(path).encode("utf-8")  # no lone surrogate left
        assert "vicunas" in outside.read_text(path, 1000)
