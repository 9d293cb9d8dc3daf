"""The tests of `llamachat.ui.desktop.entry`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from PySide6.QtGui import QImage

from llamachat.__main__ import main
from llamachat.history.store import History
from llamachat.tests.support import app_config_on_disk, make_app


class TestEntry:
    """The freedesktop entries: llamachat in the applications menu, and at login if asked."""

    def test_install_desktop_writes_the_entry_icon_and_autostart_and_uninstall_removes_all(
        self, tmp_path, capsys, monkeypatch
    ) -> None:
        """--install-desktop writes a valid menu entry (New chat, Quick ask), the icon as SVG
        and PNGs, and with autostart = true a login entry, all under $XDG_DATA_HOME /
        $XDG_CONFIG_HOME; --uninstall-desktop leaves nothing behind."""
        from llamachat.ui.desktop import entry

        data, settings = tmp_path / "data", tmp_path / "settings"
        monkeypatch.setenv("XDG_DATA_HOME", str(data))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(settings))
        path = tmp_path / "my config.toml"
        path.write_text("autostart = true\n")
        assert main(["--config", str(path), "--install-desktop"]) == 0
        program = entry.launcher()[0]
        assert Path(program).is_absolute() and os.access(program, os.X_OK)
        run = f'{program} --config "{path}"'
        menu = data / "applications" / "llamachat.desktop"
        assert menu.read_text() == (
            "[Desktop Entry]\n"
            "Type=Application\n"
            "Version=1.4\n"
            "Name=llamachat\n"
            "GenericName=Local AI chat\n"
            "Comment=Chat with the models you run yourself with llama.cpp\n"
            "Icon=llamachat\n"
            f"Exec={run}\n"
            "Terminal=false\n"
            "StartupNotify=true\n"
            "Categories=Utility;\n"
            "Keywords=llama;llama.cpp;LLM;AI;assistant;\n"
            "Actions=new-chat;quick-ask;\n"
            "\n"
            "[Desktop Action new-chat]\n"
            "Name=New chat\n"
            f"Exec={run} --new-chat\n"
            "\n"
            "[Desktop Action quick-ask]\n"
            "Name=Quick ask\n"
            f"Exec={run} ask\n"
        )
        login = settings / "autostart" / "llamachat.desktop"
        assert f"Exec={run} --background\n" in login.read_text()
        validate = shutil.which("desktop-file-validate")
        if validate:  # Debian's desktop-file-utils, where installed
            for written in (menu, login):
                done = subprocess.run(
                    [validate, str(written)], capture_output=True, text=True, check=False
                )
                assert (done.returncode, done.stdout) == (0, ""), done.stdout
        theme = data / "icons" / "hicolor"
        assert (theme / "scalable/apps/llamachat.svg").read_bytes() == entry.icon.SVG.read_bytes()
        for size in entry.icon.PNG_SIZES:
            picture = QImage(str(theme / f"{size}x{size}/apps/llamachat.png"))
            assert (picture.width(), picture.height()) == (size, size)
        assert str(menu) in capsys.readouterr().out

        assert main(["--config", str(path), "--uninstall-desktop"]) == 0
        assert list(data.rglob("*")) == []
        assert not (settings / "autostart").exists()
        assert main(["--config", str(path), "--uninstall-desktop"]) == 0
        assert "nothing to remove" in capsys.readouterr().out

    def test_desktop_exec_line_quotes_as_the_specification_says(self) -> None:
        """An Exec argument with reserved characters is quoted, its \\ " ` $ escaped, % doubled,
        and the value's backslashes escaped once more; a plain argument stays bare."""
        from llamachat.ui.desktop.entry import exec_line

        assert exec_line(["/opt/llamachat/llamachat", "ask"]) == "/opt/llamachat/llamachat ask"
        assert exec_line(["/opt/llama chat/llamachat", "--config", 'a"b$c\\d%e', "50%"]) == (
            '"/opt/llama chat/llamachat" --config "a\\\\"b\\\\$c\\\\\\\\d%%e" 50%%'
        )

    def test_app_autostart_setting_writes_and_removes_the_login_entry(
        self, router, qtbot, tmp_path
    ) -> None:
        """Saving autostart = true writes $XDG_CONFIG_HOME/autostart/llamachat.desktop (starting
        llamachat in the background with this config); saving false removes it."""
        cfg = app_config_on_disk(router, tmp_path)
        login = Path(os.environ["XDG_CONFIG_HOME"]) / "autostart" / "llamachat.desktop"
        with History(cfg.history_path) as history:
            state = make_app(cfg, history)
            try:
                state.save_settings({"autostart": True})
                assert f"--config {cfg.path} --background\n" in login.read_text()
                state.save_settings({"autostart": False})
                assert not login.exists() and not login.parent.exists()
            finally:
                state.close()

    def test_uninstall_desktop_turns_autostart_off_and_settings_shows_it_off(
        self, qtbot, tmp_path, monkeypatch, capsys
    ) -> None:
        """--uninstall-desktop removes the login entry and sets autostart = false in the file;
        Settings ticks "Start at login" only while the entry exists."""
        from llamachat import config
        from llamachat.__main__ import main
        from llamachat.ui.settings import SettingsDialog

        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "settings"))
        path = tmp_path / "config.toml"
        path.write_text("# mine\nautostart = true\n")
        assert main(["--config", str(path), "--install-desktop"]) == 0
        login = tmp_path / "settings" / "autostart" / "llamachat.desktop"
        assert login.is_file()
        dialog = SettingsDialog(config.load(path))
        qtbot.addWidget(dialog)
        assert dialog.autostart.isChecked()
        stale = config.load(path)  # a running app's config, read before the uninstall

        assert main(["--config", str(path), "--uninstall-desktop"]) == 0
        assert not login.exists()
        assert path.read_text() == "# mine\nautostart = false\n"
        assert "autostart = false" in capsys.readouterr().out
        dialog = SettingsDialog(stale)
        qtbot.addWidget(dialog)
        assert not dialog.autostart.isChecked()
