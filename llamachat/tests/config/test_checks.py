"""The tests of `llamachat.config.checks`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat import config
from llamachat.__main__ import main
from llamachat.tests.support import (
    config_error,
    run_gui_headless,
    write_config_bytes,
    write_config_file,
)


class TestChecks:
    """Checking a parsed config.toml against `KEYS`: errors naming the file, line and key."""

    def test_config_wrong_type_names_the_key_the_type_and_the_line(self, tmp_path: Path) -> None:
        path = write_config_file(tmp_path, '# comment\ntheme = "dark"\nmax_searches = "two"\n')
        error = config_error(path)
        assert (error.key, error.line) == ("max_searches", 3)
        assert "max_searches must be an integer, got string" in str(error)
        error = config_error(write_config_file(tmp_path, "max_searches = true\n"))
        assert "max_searches must be an integer, got boolean" in str(error)
        error = config_error(write_config_file(tmp_path, 'server_args = ["-c", 4096]\n'))
        assert error.key == "server_args" and "list of strings" in str(error)

    def test_config_rpc_workers_and_split_are_checked(self, tmp_path: Path) -> None:
        error = config_error(write_config_file(tmp_path, 'rpc_workers = ["192.168.1.20"]\n'))
        assert error.key == "rpc_workers" and "host:port" in str(error)
        error = config_error(write_config_file(tmp_path, 'rpc_workers = ["a:1,b:2"]\n'))
        assert "no spaces or commas" in str(error)
        error = config_error(write_config_file(tmp_path, 'rpc_split = [3, "one"]\n'))
        assert error.key == "rpc_split" and "list of numbers" in str(error)
        error = config_error(write_config_file(tmp_path, "rpc_split = [3, -1]\n"))
        assert "0 or more" in str(error)
        cfg = config.load(
            write_config_file(tmp_path, 'rpc_workers = ["10.0.0.2:50052"]\nrpc_split = [3, 1]\n')
        )
        assert (cfg.rpc_workers, cfg.rpc_split) == (("10.0.0.2:50052",), (3.0, 1.0))

    def test_config_unknown_key_is_reported_with_a_suggestion(self, tmp_path: Path) -> None:
        error = config_error(write_config_file(tmp_path, 'theme = "dark"\nmax_search = 3\n'))
        assert (error.key, error.line) == ("max_search", 2)
        assert "unknown key 'max_search' (did you mean 'max_searches'?)" in str(error)
        text = (
            '[[providers]]\nname = "a"\nbase_url = "https://a.example.org"\n\n'
            '[[providers]]\nname = "b"\nbase_uri = "https://b.example.org"\n'
        )
        error = config_error(write_config_file(tmp_path, text))
        assert (error.key, error.line) == ("providers[2].base_uri", 7)
        assert "did you mean 'base_url'?" in str(error)
        error = config_error(write_config_file(tmp_path, "[search]\nurl = 'x'\n"))
        assert (error.key, error.line) == ("search", 1)

    @pytest.mark.parametrize(
        ("text", "key", "line", "words"),
        [
            ('theme = "blue"\n', "theme", 1, "theme must be one of system, light, dark"),
            ("\nmax_searches = -1\n", "max_searches", 2, "0 or more"),
            ("idle_timeout = 0\n", "idle_timeout", 1, "more than 0"),
            ('router_url = "127.0.0.1:8080"\n', "router_url", 1, "http:// or https://"),
            ('search_url = "ftp://example.org"\n', "search_url", 1, "http:// or https://"),
            ('[[providers]]\nname = "x"\n', "providers[1].base_url", 1, "needs a base_url"),
            (
                '[[providers]]\nbase_url = "https://x.example.org"\n',
                "providers[1].name",
                1,
                "needs a name",
            ),
            (
                '[[providers]]\nname = "x"\nbase_url = "x.example.org"\n',
                "providers[1].base_url",
                3,
                "http:// or https://",
            ),
            (
                '[[providers]]\nname = "a/b"\nbase_url = "https://x.example.org"\n',
                "providers[1].name",
                2,
                "must not contain '/'",
            ),
            (
                (
                    '[[providers]]\nname = "x"\nbase_url = "https://x.example.org"\n'
                    '[[providers]]\nname = "x"\nbase_url = "https://y.example.org"\n'
                ),
                "providers[2].name",
                5,
                "two providers are named 'x'",
            ),
            ('providers = ["x"]\n', "providers", 1, "providers[1] must be a table"),
            (
                "read_aloud_speed = 9\n",
                "read_aloud_speed",
                1,
                "read_aloud_speed must be from 0.75 to 2.0, got 9",
            ),
        ],
    )
    def test_config_bad_values_name_the_key_and_line(
        self, tmp_path: Path, text: str, key: str, line: int, words: str
    ) -> None:
        error = config_error(write_config_file(tmp_path, text))
        assert (error.key, error.line) == (key, line)
        assert words in str(error)

    @pytest.mark.parametrize(
        ("text", "key"),
        [
            ('skills_dir = "skills\\u0000x"\n', "skills_dir"),
            ('prompts_dir = "prompts\\u0000x"\n', "prompts_dir"),
            ('history_path = "history\\u0000.db"\n', "history_path"),
            ('skills_dirs = ["ok", "more\\u0000x"]\n', "skills_dirs"),
            ('models_preset = "preset\\u0000.ini"\n', "models_preset"),
        ],
    )
    def test_config_nul_byte_in_a_path_exits_2_naming_file_line_and_key(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str
    ) -> None:
        """A NUL byte no file name can hold: a ConfigError (exit 2, also for `ask --print`)."""
        path = write_config_file(tmp_path, "# comment\n" + text)
        error = config_error(path)
        assert (error.path, error.line, error.key) == (path, 2, key)
        assert "NUL" in error.message
        assert main(["--config", str(path), "ask", "--print", "hi"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"llamachat: {path}, line 2: {key}") and "Traceback" not in err

    @pytest.mark.parametrize(
        ("value", "says"),
        [("a-file/history.db", "is a file, not a folder"), ("a-folder", "is a folder")],
    )
    def test_config_history_path_that_cannot_be_a_database_exits_2_naming_the_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, says: str
    ) -> None:
        """history_path under a file, or naming a folder: a ConfigError, checked by every command."""
        (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
        (tmp_path / "a-folder").mkdir()
        text = (
            f'manage_server = false\nrouter_url = "http://127.0.0.1:9"\nhistory_path = "{value}"\n'
        )
        path = write_config_file(tmp_path, text)
        error = config_error(path)
        assert (error.path, error.line, error.key) == (path, 3, "history_path")
        assert says in error.message
        assert main(["--config", str(path), "ask", "--print", "hi"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"llamachat: {path}, line 3: history_path") and says in err

    @pytest.mark.parametrize(
        ("text", "key", "line"),
        [
            ('[model_params.m]\ntemperature = "hot"\n', "model_params.m.temperature", 3),
            (
                '[model_params."a.b"]\ntop_p = 0.9\n\n[preset_params.Coder]\nseed = [1]\n',
                "preset_params.Coder.seed",
                6,
            ),
            ("[model_params]\nm = { top_k = 1.5 }\n", "model_params.m.top_k", 3),
            ('model_params = { m = { colour = "red" } }\n', "model_params.m.colour", 2),
            ('[model_params]\nm.min_p = "low"\n', "model_params.m.min_p", 3),
        ],
    )
    def test_config_bad_model_params_name_the_line(
        self, tmp_path: Path, text: str, key: str, line: int
    ) -> None:
        """A bad value in a [model_params.<model>] table: the error has its line and full key."""
        path = write_config_file(tmp_path, "# comment\n" + text)
        error = config_error(path)
        assert (error.key, error.line) == (key, line)
        assert str(error).startswith(f"{path}, line {line}: ") and key in str(error)

    @pytest.mark.parametrize("size", [1, 5, 73, 100000])
    def test_config_font_size_out_of_range_is_refused(self, tmp_path: Path, size: int) -> None:
        """font_size is 0 (the system's) or 6 to 72 points, in the file and through Settings."""
        from llamachat import config

        error = config_error(write_config_file(tmp_path, f"\nfont_size = {size}\n"))
        assert (error.key, error.line) == ("font_size", 2)
        assert "0 (the system's size) or from 6 to 72" in error.message
        for fine in (0, 6, 72):
            assert (
                config.load(write_config_file(tmp_path, f"font_size = {fine}\n")).font_size == fine
            )
        path = write_config_file(tmp_path, "# mine\nfont_size = 12\n")
        with pytest.raises(config.ConfigError) as caught:
            config.update_file(path, {"font_size": size})
        assert caught.value.key == "font_size"
        assert path.read_text(encoding="utf-8") == "# mine\nfont_size = 12\n"

    @pytest.mark.parametrize(
        ("text", "key", "says"),
        [
            pytest.param('router_url = "http://[::1"\n', "router_url", "valid URL", id="bad-ipv6"),
            pytest.param(
                'router_url = "http://127.0.0.1:99999"\n', "router_url", "valid URL", id="bad-port"
            ),
            pytest.param("idle_timeout = nan\n", "idle_timeout", "got nan", id="nan"),
            pytest.param("idle_timeout = inf\n", "idle_timeout", "got inf", id="inf"),
            pytest.param('prompts_dir = "a-file"\n', "prompts_dir", "is a file", id="prompts-file"),
            pytest.param('models_dir = "a-file"\n', "models_dir", "is a file", id="models-file"),
            pytest.param(
                'models_dir = "a-file/models"\n',
                "models_dir",
                "cannot be made",
                id="models-under-file",
            ),
            pytest.param(
                'prompts_dir = "a-file/p"\n',
                "prompts_dir",
                "cannot be made",
                id="prompts-under-file",
            ),
        ],
    )
    def test_fault_bad_urls_numbers_and_folders_exit_2_naming_file_line_and_key(
        self, tmp_path: Path, text: str, key: str, says: str
    ) -> None:
        """A URL no parser takes, a NaN timeout, folders that are files: exit 2 naming the file,
        line and key, never a traceback or a window that crashes (or silently never times out).
        (Tests run as root, which writes anywhere: an unwritable folder is not tested here.)"""
        (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
        path = write_config_bytes(tmp_path / "bad.toml", "# comment\n" + text)
        done = run_gui_headless(path, tmp_path)
        assert done.returncode == 2, (done.returncode, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith(f"llamachat: {path}, line 2: {key}"), done.stderr
        assert says in done.stderr

    def test_config_embedding_model_key_and_its_check(self, tmp_path: Path) -> None:
        """embedding_model: off by default, a model name as the router lists it; a name
        with spaces around it or a control character is refused with the key's name."""
        assert config.Config().embedding_model == ""
        cfg = config.load(write_config_file(tmp_path, 'embedding_model = "nomic-embed:Q8_0"\n'))
        assert cfg.embedding_model == "nomic-embed:Q8_0"
        for bad in ('" nomic"', '"a\\tb"'):
            error = config_error(write_config_file(tmp_path, f"embedding_model = {bad}\n"))
            assert error.key == "embedding_model" and "model name" in str(error)
        assert "# embedding_model = " in config.DEFAULT_TEXT
