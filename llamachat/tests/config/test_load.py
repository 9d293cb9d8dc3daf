"""The tests of `llamachat.config.load`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamachat.tests.support import (
    config_error,
    returns_at_once,
    run_gui_headless,
    write_config_bytes,
    write_config_file,
)


class TestLoad:
    """Reading config.toml into a frozen `Config` (with its providers and MCP servers)."""

    def test_config_missing_file_gives_defaults_in_the_per_user_folders(
        self, tmp_path: Path, isolated_home: Path
    ) -> None:
        from llamachat import config

        cfg = config.load(tmp_path / "nowhere.toml")
        data = isolated_home / ".local/share/llamachat"
        assert cfg.path == tmp_path / "nowhere.toml"
        assert cfg.router_url == "http://127.0.0.1:8080"
        assert cfg.max_searches == 2
        assert cfg.history_path == data / "history.db"
        assert cfg.prompts_dir == data / "prompts"
        assert cfg.models_dir == data / "models"
        assert cfg.skills_dir == isolated_home / ".agents/skills"
        assert config.default_path() == isolated_home / ".config/llamachat/config.toml"

    def test_config_llamachat_config_env_chooses_the_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from llamachat import config

        path = write_config_file(tmp_path, 'default_model = "from-env"\n')
        monkeypatch.setenv("LLAMACHAT_CONFIG", str(path))
        assert config.default_path() == path
        assert config.load().default_model == "from-env"

    def test_config_search_is_off_without_a_url_and_on_with_one(self, tmp_path: Path) -> None:
        from llamachat import config

        assert (
            config.load(write_config_file(tmp_path, "search_enabled = true\n")).search_enabled
            is False
        )
        on = config.load(write_config_file(tmp_path, 'search_url = "http://127.0.0.1:8888/"\n'))
        assert on.search_enabled is True and on.search_url == "http://127.0.0.1:8888"
        off = 'search_enabled = false\nsearch_url = "http://127.0.0.1:8888"\n'
        assert config.load(write_config_file(tmp_path, off)).search_enabled is False
        assert config.Config(search_url="").search_enabled is False

    def test_config_skills_are_off_only_when_every_skills_folder_is_missing(
        self, tmp_path: Path
    ) -> None:
        from llamachat import config

        missing = write_config_file(tmp_path, f'skills_dir = "{tmp_path / "none"}"\n')
        assert config.load(missing).skills_enabled is False
        (tmp_path / "extra").mkdir()
        text = f'skills_dir = "{tmp_path / "none"}"\nskills_dirs = ["{tmp_path / "extra"}"]\n'
        cfg = config.load(write_config_file(tmp_path, text))
        assert cfg.skills_enabled is True
        assert cfg.skill_roots() == (tmp_path / "none", tmp_path / "extra")

    def test_config_paths_expand_tilde_and_anchor_relative_paths_at_the_file(
        self, tmp_path: Path, isolated_home: Path
    ) -> None:
        from llamachat import config

        text = (
            'history_path = "~/chats/history.db"\n'
            'prompts_dir = "presets"\n'
            'models_preset = "~/models/preset.ini"\n'
            'llama_server = "~/bin/llama-server"\n'
            'voice_model = "voices/en.onnx"\n'
        )
        cfg = config.load(write_config_file(tmp_path, text))
        assert cfg.history_path == isolated_home / "chats/history.db"
        assert cfg.prompts_dir == tmp_path / "presets"
        assert cfg.models_preset == isolated_home / "models/preset.ini"
        assert cfg.llama_server == str(isolated_home / "bin/llama-server")
        assert cfg.voice_model == tmp_path / "voices/en.onnx"

    def test_config_invalid_toml_names_the_file_and_line(self, tmp_path: Path) -> None:
        path = write_config_file(
            tmp_path, 'router_url = "http://127.0.0.1:8080"\n\nmax_searches = = 3\n'
        )
        error = config_error(path)
        assert error.path == path and error.line == 3
        assert str(error).startswith(f"{path}, line 3: invalid TOML")
        assert "(at line" not in str(error)

    def test_config_unreadable_file_names_the_file(self, tmp_path: Path) -> None:
        folder = tmp_path / "folder.toml"
        folder.mkdir()
        error = config_error(folder)
        assert error.path == folder and str(folder) in str(error)
        latin = tmp_path / "latin.toml"
        latin.write_bytes(b'default_model = "caf\xe9"\n')
        error = config_error(latin)
        assert str(latin) in str(error) and "not UTF-8" in str(error)
        locked = write_config_file(tmp_path, "theme = 'dark'\n")
        locked.chmod(0)
        try:
            if os.access(locked, os.R_OK):
                pytest.skip("running as root: a mode-0 file is still readable")
            error = config_error(locked)
            assert str(locked) in str(error) and "ermission" in str(error)
        finally:
            locked.chmod(0o600)

    def test_config_api_key_comes_from_the_environment_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from llamachat import config

        text = (
            'router_api_key_env = "ROUTER_KEY"\n'
            '[[providers]]\nname = "remote"\nbase_url = "https://api.example.org/v1/"\n'
            'api_key_env = "REMOTE_KEY"\n'
        )
        cfg = config.load(write_config_file(tmp_path, text))
        assert cfg.api_key() is None and cfg.providers[0].api_key() is None
        monkeypatch.setenv("ROUTER_KEY", "sk-router-secret")
        monkeypatch.setenv("REMOTE_KEY", "sk-remote-secret")
        assert cfg.api_key() == "sk-router-secret"
        assert cfg.providers[0].api_key() == "sk-remote-secret"
        assert cfg.providers[0].base_url == "https://api.example.org/v1"
        assert "secret" not in repr(config.load(cfg.path))

    @pytest.mark.parametrize(
        ("text", "line", "key", "says"),
        [
            pytest.param('theme = "dark"\nrouter_url = \n', 2, None, "", id="syntax"),
            pytest.param('\n\nmax_searches = "two"\n', 3, "max_searches", "integer", id="type"),
            pytest.param(
                'router_ulr = "http://127.0.0.1:8080"\n',
                1,
                "router_ulr",
                "router_url",
                id="unknown-key",
            ),
            pytest.param("idle_timeout = -1\n", 1, "idle_timeout", "", id="bad-value"),
            pytest.param(
                '[[providers]]\nname = "remote"\nbase_url = 5\n',
                3,
                "base_url",
                "",
                id="provider-type",
            ),
            pytest.param('server_args = ["-c", 4096]\n', 1, "server_args", "", id="list-item-type"),
            pytest.param(b'theme = "dark\xff\xfe"\n', None, None, "", id="not-utf8"),
            pytest.param(None, None, None, "", id="unreadable"),
        ],
    )
    def test_fault_bad_config_through_the_cli_exits_2_naming_file_line_and_key(
        self, tmp_path: Path, text, line, key, says
    ) -> None:
        """`llamachat --config bad.toml`: exit 2, the file (and line and key) named, no traceback."""
        path = tmp_path / "bad.toml"
        if text is None:
            path.mkdir()  # a path that cannot be read as a file, even by root
        else:
            write_config_bytes(path, text)
        done = run_gui_headless(path, tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"llamachat: {path}")
        if line is not None:
            assert f"{path}, line {line}" in done.stderr
        if key is not None:
            assert key in done.stderr
        assert says in done.stderr
        assert len(done.stderr.strip().splitlines()) <= 3

    def test_fault_config_path_under_a_file_exits_2_naming_it(self, tmp_path: Path) -> None:
        """`--config a-file/config.toml`: the part of the path that is a file is named, exit 2.
        (Root enters any folder, so a folder without permissions cannot be tested here; a path
        through a file fails the same way, with ENOTDIR instead of EACCES.)"""
        blocker = tmp_path / "a-file"
        blocker.write_text("", encoding="utf-8")
        done = run_gui_headless(blocker / "config.toml", tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert "Traceback" not in done.stderr
        assert f"{blocker} is a file" in done.stderr

    def test_an_mcp_servers_file_that_is_a_fifo_is_refused_at_once(self, tmp_path: Path) -> None:
        """mcp.json as a FIFO is a ConfigError naming what it is, never a wait."""
        from llamachat.config import ConfigError
        from llamachat.config.load import mcp_json_servers

        os.mkfifo(tmp_path / "mcp.json")
        refused = returns_at_once(lambda: mcp_json_servers(tmp_path / "mcp.json"))
        assert isinstance(refused, ConfigError) and "pipe" in str(refused)
