"""The tests of `llamachat.__main__`."""

from __future__ import annotations

import os
import subprocess
import sys

from llamachat import __version__
from llamachat.__main__ import load_or_create_config, main


class TestMain:
    """The `llamachat` command: parse the arguments, load the configuration, hand over."""

    def test_window_help_works_without_a_display(self, tmp_path) -> None:
        """`llamachat --help` and `--version` run with no display and no Qt."""

        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env.pop("QT_QPA_PLATFORM", None)
        command = [sys.executable, "-m", "llamachat"]
        shown = subprocess.run(
            [*command, "--help"], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert shown.returncode == 0, shown.stderr
        assert "--config PATH" in shown.stdout
        version = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, env=env, timeout=60, check=True
        )

        assert version.stdout.strip() == f"llamachat {__version__}"

    def test_window_first_run_writes_default_config_file(self, tmp_path) -> None:
        """A missing configuration file is created with the documented defaults, then loaded."""
        from llamachat import config

        target = tmp_path / "conf" / "config.toml"
        cfg = load_or_create_config(target)
        assert target.read_text(encoding="utf-8") == config.DEFAULT_TEXT
        assert cfg.path == target and cfg.router_url == "http://127.0.0.1:8080"

    def test_window_main_reports_bad_config_and_returns_2(self, tmp_path, capsys) -> None:
        """main() on a broken configuration prints file, line and key and returns 2."""

        bad = tmp_path / "bad.toml"
        bad.write_text("theme = 'neon'\n")
        assert main(["--config", str(bad)]) == 2
        err = capsys.readouterr().err
        assert f"{bad}, line 1" in err and "theme" in err
