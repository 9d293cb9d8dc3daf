"""The tests of `llamachat.library.searching`."""

from __future__ import annotations

from pathlib import Path

import pytest


def _notes(root: Path) -> Path:
    """Twelve one-passage notes: "note" in all, "llama" in six, "grass" in eight, both of
    those in two, "quokka" in one."""
    root.mkdir()
    for n in range(6):
        (root / f"a{n}.txt").write_text(f"Note {n}. The llama ate." + (" Grass." if n < 2 else ""))
        (root / f"b{n}.txt").write_text(f"Note {n}. Grass grew." + (" A quokka!" if n == 5 else ""))
    return root


class TestSearching:
    """BM25 over FTS5, kept fast for common words by a budget of passages scored."""

    def test_query_words_leave_out_common_english_words_unless_there_is_no_other(self) -> None:
        """Each word once, lower case, without the stopwords (kept when they are all)."""
        from llamachat.library.searching import fts_query, query_words

        assert query_words("What do Llamas eat? llamas!") == ["llamas", "eat"]
        assert query_words("to be or not to be") == ["to", "be", "or", "not"]
        assert fts_query(["llamas", "eat"], "AND") == '"llamas" AND "eat"'

    def test_bm25_within_its_budget_ranks_rare_words_then_passages_holding_every_word(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With a budget of 4 passages: a rare word is ranked alone; two common words, by
        the passages holding both; words whose passages together are still too many, by
        the first 4 passages holding any of them."""
        from llamachat.library import searching
        from llamachat.library.index import LibraryStore

        monkeypatch.setattr(searching, "RANK_BUDGET", 4)
        root = _notes(tmp_path / "docs")
        store = LibraryStore(tmp_path / "library.db")
        try:
            store.index(store.attach(1, root))
            [hit] = store.search("llama quokka", 1, limit=1)
            assert hit.path.name == "b5.txt"
            both = {hit.path.name for hit in store.search("llama grass", 1, limit=2)}
            assert both == {"a0.txt", "a1.txt"}
            first = {hit.path.name for hit in store.search("note llama", 1, limit=20)}
            assert first == {"a0.txt", "a1.txt", "a2.txt", "a3.txt"}
            assert store.search("llama", 2) == []  # another chat's library
        finally:
            store.close()
