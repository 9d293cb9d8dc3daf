"""The tests of `llamachat.library.vectors`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat.dev.scripted_router import Model, ScriptedRouter
from llamachat.router.client import Client, ServerError, embeddings
from llamachat.router.models import Models
from llamachat.tests.support import SMOL_ID


class TestVectors:
    """The libraries' vectors: library.db opened with sqlite-vec, the embedder, rank fusion."""

    def test_vectors_find_a_passage_by_meaning_through_the_tool(
        self, router, tmp_path: Path
    ) -> None:
        """With an embedding model, indexing stores a vector per passage from the router's
        /v1/embeddings (batched), and search_documents finds a passage whose words are not
        the query's but whose vector is near it; full text alone finds nothing."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_embedder
        from llamachat.tools import LibraryConfig, documents

        root = tmp_path / "docs"
        root.mkdir()
        (root / "garage.txt").write_text("The automobile needs new tyres before winter.")
        (root / "kitchen.txt").write_text("Bake the bread for forty minutes.\n\n" * 3)
        router.synonyms = {"vehicle": "automobile"}
        db = tmp_path / "library.db"
        client = Client(router.url)
        try:
            embedder = make_embedder(client)
            store = LibraryStore(db)
            report = store.index(store.attach(3, root), embedder=embedder)
            assert (report.embedded, report.vectors) == (report.passages, "")
            assert store.search("vehicle", 3) == []  # no passage holds the word
            store.close()
            [sent] = [r.json for r in router.requests if r.path == "/v1/embeddings"][:1]
            assert sent["model"] == "test-model" and isinstance(sent["input"], list)
            tool = documents.SearchDocuments(LibraryConfig(db, 3, embedder=embedder))
            result = tool.run('{"query": "vehicle"}')
        finally:
            client.close()
        assert "[1] garage.txt — " in result.text and "automobile" in result.text
        [(_kind, event)] = result.events
        assert event["results"][0]["title"] == "garage.txt"

    def test_fusion_ranks_what_both_rankings_put_forward_first(self, router, tmp_path) -> None:
        """Reciprocal rank fusion: a passage in both lists beats one first in a single list;
        a search fuses BM25's list with the vectors' (each one's best is in the answer)."""
        from llamachat.library.index import LibraryStore
        from llamachat.library.vectors import fuse
        from llamachat.tests.support import make_embedder

        assert [item for item, _score in fuse([[1, 2, 3], [3, 4]])] == [3, 1, 2, 4]
        assert [item for item, _score in fuse([[5], []])] == [5]
        root = tmp_path / "docs"
        root.mkdir()
        (root / "words.txt").write_text("Zebra stripes are black and white.")
        (root / "meaning.txt").write_text("The automobile is parked outside.")
        (root / "both.txt").write_text("A zebra ran past the automobile.")
        (root / "none.txt").write_text("Nothing to see in this one at all.")
        router.synonyms = {"vehicle": "automobile"}
        client = Client(router.url)
        try:
            store = LibraryStore(tmp_path / "library.db")
            store.index(store.attach(1, root), embedder=make_embedder(client))
            hits = store.search("zebra vehicle", 1, limit=3, embedder=make_embedder(client))
            store.close()
        finally:
            client.close()
        names = [hit.path.name for hit in hits]
        assert names[0] == "both.txt", names  # second in BM25, first by vector
        assert {"words.txt", "meaning.txt"} <= set(names)
        assert hits[0].rank < hits[1].rank  # lower is better, as BM25's

    def test_reindex_embeds_only_changed_files_and_drops_the_vectors_of_removed_ones(
        self, router, tmp_path: Path
    ) -> None:
        """Vectors are incremental like the full text: an edited file's passages are sent
        again, unchanged files' are not, a removed file's vectors go with it."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_embedder

        root = tmp_path / "docs"
        root.mkdir()
        for name in ("a", "b", "c"):
            (root / f"{name}.txt").write_text(f"File {name} talks about {name}nimals.")
        client = Client(router.url)
        try:
            store = LibraryStore(tmp_path / "library.db")
            library = store.attach(1, root)
            assert store.index(library, embedder=make_embedder(client)).embedded == 3
            before = len(router.requests)
            (root / "a.txt").write_text("File a now talks about aardvarks, at length.")
            (root / "c.txt").unlink()
            report = store.index(library, embedder=make_embedder(client))
            sent = [r.json["input"] for r in router.requests[before:] if "embeddings" in r.path]
            count = store._db.execute("SELECT COUNT(*) FROM passage_vectors").fetchone()[0]
            store.close()
        finally:
            client.close()
        assert (report.indexed, report.removed, report.embedded) == (1, 1, 1)
        assert sent == [["File a now talks about aardvarks, at length."]]
        assert count == 2

    def test_another_embedding_model_embeds_everything_again(self, tmp_path: Path) -> None:
        """A new embedding_model makes every vector again (another model's vectors are not
        comparable); a search with the old model's name uses full text only, no vectors."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_embedder

        root = tmp_path / "docs"
        root.mkdir()
        (root / "a.txt").write_text("Alpha passage.")
        (root / "b.txt").write_text("Beta passage.")
        models = [Model("test-model", "loaded"), Model("embed-b", "loaded")]
        with ScriptedRouter(models) as router:
            client = Client(router.url)
            try:
                store = LibraryStore(tmp_path / "library.db")
                library = store.attach(1, root)
                store.index(library, embedder=make_embedder(client, "test-model"))
                report = store.index(library, embedder=make_embedder(client, "embed-b"))
                row = store._db.execute("SELECT model, dimension FROM vector_model").fetchone()
                before = len(router.requests)
                hits = store.search("alpha", 1, embedder=make_embedder(client, "test-model"))
                store.close()
            finally:
                client.close()
        assert (report.indexed, report.embedded) == (0, 2)
        assert row == ("embed-b", 64)
        assert [hit.path.name for hit in hits] == ["a.txt"]
        assert len(router.requests) == before  # no query vector of a model not stored

    def test_without_sqlite_vec_the_library_searches_full_text_and_says_so(
        self, router, tmp_path: Path, monkeypatch
    ) -> None:
        """sqlite-vec that will not load leaves the library working on full text, the
        reason in the report (what the panel shows), never an error."""
        import sqlean
        import sqlite_vec

        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import make_embedder

        def refuse(_db: object) -> None:
            raise sqlean.OperationalError("vec0.so: cannot open shared object file")

        root = tmp_path / "docs"
        root.mkdir()
        (root / "zebra.txt").write_text("The zebra division grew.")
        monkeypatch.setattr(sqlite_vec, "load", refuse)
        client = Client(router.url)
        try:
            store = LibraryStore(tmp_path / "library.db")
            report = store.index(store.attach(1, root), embedder=make_embedder(client))
            hits = store.search("zebra", 1, embedder=make_embedder(client))
            store.close()
        finally:
            client.close()
        assert not store.vectors
        assert "sqlite-vec could not be loaded (vec0.so" in report.vectors
        assert [hit.path.name for hit in hits] == ["zebra.txt"]
        assert not [r for r in router.requests if "embeddings" in r.path]

    @pytest.mark.real_router
    def test_real_router_embeds_passages_with_smollm2_in_embedding_mode(
        self, real_router, tmp_path: Path
    ) -> None:
        """The real llama-server router, SmolLM2 under a second preset name with
        `embeddings = true` and mean pooling: /v1/embeddings answers one vector a text,
        a library is indexed with them and searched by fusion; the chat model refuses."""
        from llamachat.library.index import LibraryStore
        from llamachat.tests.support import SMOL_EMBED_ID, make_embedder

        root = tmp_path / "docs"
        root.mkdir()
        (root / "llamas.txt").write_text("Llamas eat grass and hay in the Andes.")
        (root / "bread.txt").write_text("Bake the bread for forty minutes.")
        client = Client(real_router.url)
        try:
            got = embeddings(client, SMOL_EMBED_ID, ["a llama", "some bread"], timeout=120)
            assert [len(v) for v in got] == [576, 576]
            store = LibraryStore(tmp_path / "library.db")
            report = store.index(
                store.attach(1, root), embedder=make_embedder(client, SMOL_EMBED_ID)
            )
            hits = store.search("llamas", 1, embedder=make_embedder(client, SMOL_EMBED_ID))
            row = store._db.execute("SELECT model, dimension FROM vector_model").fetchone()
            store.close()
            with pytest.raises(ServerError, match="does not support embeddings"):
                embeddings(client, SMOL_ID, ["x"], timeout=60)
            Models(client).unload(SMOL_EMBED_ID)
        finally:
            client.close()
        assert (report.embedded, report.vectors) == (2, "")
        assert row == (SMOL_EMBED_ID, 576)
        assert hits[0].path.name == "llamas.txt" and len(hits) == 2

    def test_vectors_bits_first_then_floats_keep_the_exact_nearest_first(
        self, tmp_path: Path
    ) -> None:
        """The vectors' nearest are the 200 nearest by their bits, ranked by cosine on the
        floats: over 600 passages in clusters (vectors of 100 values, not a multiple of 8),
        the exact nearest is always first and nearly all of the exact 20 are found."""
        from llamachat.dev.bench_library import LocalVectors
        from llamachat.library import searching, vectors
        from llamachat.library.index import COARSE_CANDIDATES, LibraryStore
        from llamachat.library.vectors import Embedder

        root = tmp_path / "docs"
        root.mkdir()
        for name in range(3):
            # Over half a passage long each: one passage a paragraph.
            paragraphs = [f"Passage {name}-{i}: " + "more notes " * 60 for i in range(200)]
            (root / f"notes-{name}.txt").write_text("\n\n".join(paragraphs))
        local = LocalVectors(100)
        embedder = Embedder("local", local.embed)
        store = LibraryStore(tmp_path / "library.db")
        report = store.index(store.attach(1, root), embedder=embedder)
        assert report.embedded == 600 > COARSE_CANDIDATES
        found = 0
        try:
            for n in range(20):
                query = f"question {n}"
                near = searching.nearest(store._db, store.vectors, query, 1, embedder, 20)
                exact = [
                    rowid
                    for (rowid,) in store._db.execute(
                        "SELECT rowid FROM passage_vectors"
                        " ORDER BY vec_distance_cosine(embedding, ?) LIMIT 20",
                        (vectors.pack(local.vector(query)),),
                    )
                ]
                assert near[0] == exact[0], query
                found += len(set(near) & set(exact))
            near = searching.nearest(store._db, store.vectors, "question 0", 2, embedder, 20)
            assert near == []  # another chat's
        finally:
            store.close()
        assert found >= 0.9 * 20 * 20


class TestVectorChecks:
    """What the embedding server gives is checked before it is stored."""

    def _library(self, tmp_path: Path):
        from llamachat.library.index import LibraryStore

        root = tmp_path / "docs"
        root.mkdir()
        for name in ("alpha", "beta", "gamma"):
            (root / f"{name}.txt").write_text(f"The {name} notes.\n\nMore on {name}.")
        store = LibraryStore(tmp_path / "library.db")
        return store, store.attach(1, root)

    def test_vectors_whose_size_changes_between_requests_stop_the_indexing(self, tmp_path) -> None:
        """An embedding server whose vectors change length between requests: the indexing
        stops and says so, it does not take each answer for a new model and start again
        forever (1,326 requests in 60 s; issue 37, item 5)."""
        from llamachat.dev.bench_library import LocalVectors
        from llamachat.library.vectors import Embedder

        sizes = [LocalVectors(64), LocalVectors(32)]
        calls: list[int] = []

        def embed(texts, timeout):
            calls.append(len(texts))
            assert len(calls) < 20, "indexing re-embeds forever"
            return sizes[len(calls) % 2].embed(list(texts), timeout)

        store, library = self._library(tmp_path)
        try:
            report = store.index(library, embedder=Embedder("flaky", embed))
            stored = store._db.execute("SELECT count(*) FROM embedded_files").fetchone()[0]
        finally:
            store.close()
        assert len(calls) == 2
        assert "changed size between requests (32 values, then 64)" in report.vectors
        assert stored == 1  # the first file's vectors are kept; the indexing goes on next time

    def test_nan_vectors_are_refused_not_stored(self, tmp_path) -> None:
        """Vectors holding NaN are not stored (a NaN ranks nowhere): the report says why."""
        from llamachat.library.vectors import Embedder

        def embed(texts, timeout):
            return [[float("nan")] * 8 for _ in texts]

        store, library = self._library(tmp_path)
        try:
            report = store.index(library, embedder=Embedder("broken", embed))
            stored = store._db.execute("SELECT count(*) FROM embedded_files").fetchone()[0]
        finally:
            store.close()
        assert "not numbers (NaN or infinity)" in report.vectors and report.embedded == 0
        assert stored == 0
