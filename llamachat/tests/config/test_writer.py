"""The tests of `llamachat.config.writer`."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamachat.tests.support import CHECKOUT
from llamachat.ui.settings import SettingsDialog


class TestConfigWriter:
    """Writing config.toml: the default file, and settings saved keeping comments."""

    def test_config_write_default_writes_exactly_the_example_file(self, tmp_path: Path) -> None:
        from llamachat import config

        written = config.write_default(tmp_path / "new" / "config.toml")
        example = CHECKOUT / "config.example.toml"
        assert written.read_bytes() == example.read_bytes()

    def test_settings_update_file_keeps_comments_and_uncomments_default_lines(
        self, tmp_path: Path
    ) -> None:
        from llamachat import config

        path = tmp_path / "config.toml"
        config.update_file(path, {"router_api_key_env": "MY_KEY", "theme": "dark"})
        text = path.read_text(encoding="utf-8")
        assert text == config.DEFAULT_TEXT.replace(
            '# router_api_key_env = "LLAMA_API_KEY"', 'router_api_key_env = "MY_KEY"'
        ).replace('theme = "system"', 'theme = "dark"')
        with pytest.raises(config.ConfigError, match="max_searches must be 0 or more") as caught:
            config.update_file(path, {"max_searches": -1})
        assert caught.value.path == path
        assert path.read_text(encoding="utf-8") == text
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "home"]

    def test_settings_round_trip_keeps_the_users_comments(self, qtbot, tmp_path: Path) -> None:
        from llamachat import config

        path = tmp_path / "config.toml"
        original = (
            config.DEFAULT_TEXT.replace(
                'router_url = "http://127.0.0.1:8080"',
                'router_url = "http://127.0.0.1:8080"  # the box under my desk',
            )
            + "\n# My own note, at the end.\n"
        )
        path.write_text(original, encoding="utf-8")
        dialog = SettingsDialog(config.load(path))
        qtbot.addWidget(dialog)
        dialog.router_url.setText("http://10.0.0.5:8080")
        dialog.api_key_env.setText("MY_KEY")
        dialog.search_url.setText("http://127.0.0.1:8888")
        dialog.skills_dirs.setPlainText("~/team-skills\n")
        dialog.default_model.setCurrentText("qwen")
        dialog.theme.setCurrentIndex(dialog.theme.findData("dark"))
        with qtbot.waitSignal(dialog.saved) as saved:
            assert dialog.save() is True
        text = path.read_text(encoding="utf-8")
        assert 'router_url = "http://10.0.0.5:8080"  # the box under my desk' in text
        assert text.endswith("\n# My own note, at the end.\n")
        changed = (
            "router_url",
            "# router_api_key_env",
            "# search_url",
            "# skills_dirs",
            "# default_model",
            "theme",
        )
        kept = [line for line in original.splitlines() if not line.startswith(changed)]
        assert [line for line in text.splitlines() if line in kept] == kept
        new = saved.args[0]
        assert new == config.load(path)
        assert (
            new.router_url,
            new.router_api_key_env,
            new.search_url,
            new.default_model,
            new.theme,
        ) == ("http://10.0.0.5:8080", "MY_KEY", "http://127.0.0.1:8888", "qwen", "dark")
        assert new.skills_dirs == (Path.home() / "team-skills",)

        bad = SettingsDialog(new)
        qtbot.addWidget(bad)
        bad.router_url.setText("ftp://elsewhere")
        assert bad.save() is False
        assert "router_url must start with http:// or https://" in bad.error()
        assert bad.error_label.isVisibleTo(bad)
        assert path.read_text(encoding="utf-8") == text
