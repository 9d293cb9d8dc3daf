"""The tests of `llamachat.config.definitions`."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from llamachat.tests.support import write_config_file


class TestConfigDefinitions:
    """Every configuration key, described once: default, type, value check, comment, example."""

    def test_config_example_file_loads_to_the_defaults(self, tmp_path: Path) -> None:

        from llamachat import config

        path = config.write_default(tmp_path / "config.toml")
        from_example = dataclasses.replace(config.load(path), path=None)
        from_nothing = dataclasses.replace(config.load(tmp_path / "missing.toml"), path=None)
        assert from_example == from_nothing == config.Config()
        for key, value in tomllib.loads(config.DEFAULT_TEXT).items():
            assert config.DEFAULTS[key] == value, key

    def test_config_example_documents_every_key_with_valid_examples(self, tmp_path: Path) -> None:

        from llamachat import config

        lines = config.DEFAULT_TEXT.splitlines()
        for key in config.DEFAULTS:
            if key in ("providers", "mcp_servers"):
                assert f"# [[{key}]]" in lines
                continue
            if key in ("model_params", "preset_params"):
                assert any(line.startswith(f"# [{key}.") for line in lines), key
                continue
            where = [i for i, line in enumerate(lines) if re.match(rf"(# )?{key} = ", line)]
            assert where, f"{key} is not in the example file"
            assert lines[where[0] - 1].startswith("# "), f"{key} has no comment above it"
        # Uncommenting every example value must give a valid file that changes those keys.
        uncommented = re.sub(
            r"^# ((\w+ = .*)|(\[\[(providers|mcp_servers)\]\])|(\[\w+_params\.[\w.-]+\]))$",
            r"\1",
            config.DEFAULT_TEXT,
            flags=re.MULTILINE,
        )
        (tmp_path / "team-skills").mkdir()
        cfg = config.load(write_config_file(tmp_path, uncommented))
        assert cfg.router_api_key_env == "LLAMA_API_KEY"
        assert cfg.search_enabled is True and cfg.search_url == "http://127.0.0.1:8888"
        assert cfg.server_args == ("--ctx-size", "16384", "--n-gpu-layers", "99")
        assert cfg.model_params == {"Qwen3-8B-Q4_K_M": {"temperature": 0.6, "top_p": 0.95}}
        assert cfg.preset_params == {"Coder": {"temperature": 0.2}}
        assert cfg.providers == (
            config.ProviderConfig(
                name="openrouter",
                base_url="https://openrouter.ai/api/v1",
                api_key_env="OPENROUTER_API_KEY",
                models=("deepseek/deepseek-chat",),
            ),
        )
        assert [server.name for server in cfg.mcp_servers] == ["time", "github"]
        assert cfg.mcp_servers[1].headers_env == (("Authorization", "GITHUB_MCP_AUTHORIZATION"),)
