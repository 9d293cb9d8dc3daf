"""The tests of `llamachat.dev.structure`."""

from __future__ import annotations

from pathlib import Path

from llamachat.dev import structure


class TestStructure:
    """The package's shape measured from its source: cycles, files in ui/, long modules."""

    def test_structure_has_no_import_cycles_and_no_oversized_module_or_class(self) -> None:
        """The house keeps its rooms: no import cycle (type-checking imports included), at
        most 15 files directly in ui/, no module over 800 lines, no class over 400."""
        shape = structure.measure()
        assert "llamachat.router.client" in shape.module_lines, "the measure found no modules"
        assert any(cls.endswith(".ChatWindow") for cls in shape.class_lines)
        assert shape.problems() == []

    def test_structure_measure_finds_a_cycle_a_long_module_and_a_shared_file_name(
        self, tmp_path: Path
    ) -> None:
        """The structure check is not blind: a two-module cycle and a long file are reported."""
        package = tmp_path / "llamachat"
        (package / "ui").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "ui" / "__init__.py").write_text("")
        (package / "a.py").write_text("from llamachat import b\n")
        (package / "b.py").write_text(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from llamachat.a import x\n"
            + "pass\n" * 900
        )
        for folder in ("history", "library"):
            (package / folder).mkdir()
            (package / folder / "store.py").write_text("")
        problems = structure.measure(package).problems()
        assert "import cycle among: llamachat.a, llamachat.b" in problems
        assert (
            "2 modules named store.py: llamachat.history.store, llamachat.library.store"
            " (a file's name says what it holds)" in problems
        )
        assert any(p.startswith("llamachat.b: 90") for p in problems)
