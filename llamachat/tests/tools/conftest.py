"""Fixtures of the tools tests: MCP hubs made from config.toml text."""

from __future__ import annotations

import pytest


@pytest.fixture
def mcp_hub(tmp_path):
    """Make mcp_tools.Hubs from config.toml text (loaded by config.load); all closed after."""

    from llamachat import config as config_module
    from llamachat.tools import mcp

    made = []

    def make(text: str, **options):
        path = tmp_path / "config.toml"
        path.write_text(text, encoding="utf-8")
        cfg = config_module.load(path)
        hub = mcp.Hub(cfg.mcp_servers, log_dir=tmp_path / "logs", **options)
        made.append(hub)
        return hub, cfg

    yield make
    for hub in made:
        hub.close()
