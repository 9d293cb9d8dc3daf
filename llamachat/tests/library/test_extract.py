"""The tests of `llamachat.library.extract`."""

from __future__ import annotations

from pathlib import Path


class TestExtract:
    """Text out of a file, split into passages with their page and heading."""

    def test_huge_and_non_utf8_files_are_skipped_and_listed(self, tmp_path: Path) -> None:
        """A text file over the limit and one that is not UTF-8 are listed, not indexed."""
        from llamachat.library import extract
        from llamachat.library.index import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        (root / "huge.txt").write_bytes(b"word " * (extract.MAX_TEXT_BYTES // 5 + 1))
        (root / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
        store = LibraryStore(tmp_path / "library.db")
        library = store.attach(1, root)
        store.index(library)
        why = {row.path.name: row.skipped for row in store.files(library)}
        assert why == {
            "huge.txt": "too large (8.0 MB; the limit is 8.0 MB)",
            "latin.txt": "not UTF-8 text",
        }
        store.close()

    def test_split_keeps_passages_near_the_target_length(self) -> None:
        """Paragraphs are joined up to the target, a long one is cut at words."""
        from llamachat.library.extract import split

        text = "\n\n".join(f"Paragraph {n} " + "word " * 50 for n in range(20))
        pieces = split(text, 600)
        assert all(len(piece) <= 600 for piece in pieces)
        assert "".join(pieces).count("Paragraph") == 20
        assert split("x" * 1500, 600) == ["x" * 600, "x" * 600, "x" * 300]
