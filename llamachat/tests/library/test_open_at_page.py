"""The tests of `llamachat.library.open_at_page`."""

from __future__ import annotations

import subprocess
from pathlib import Path


class TestOpenAtPage:
    """Which program opens a PDF at a page: a viewer known to take the page on its command line."""

    def test_viewer_command_opens_a_pdf_at_its_page_in_a_known_viewer(
        self, tmp_path: Path, monkeypatch
    ) -> None:
        """The desktop's default PDF application (xdg-mime, its .desktop file's Exec) opens
        the page when it is a viewer known to take one; another default gets no command
        (the desktop opens the file); with no default, the first known viewer on PATH does;
        a file that is not a PDF gets none."""
        from llamachat.library.open_at_page import viewer_command
        from llamachat.tests.support import recording_program

        bin_dir, record = tmp_path / "bin", tmp_path / "args.txt"
        monkeypatch.setenv("PATH", str(bin_dir))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
        monkeypatch.setenv("XDG_DATA_DIRS", str(tmp_path / "none"))
        apps = tmp_path / "share" / "applications"
        apps.mkdir(parents=True)
        (apps / "org.kde.okular.desktop").write_text(
            "[Desktop Entry]\nName=Okular\nExec=okular %U\n[Desktop Action new]\nExec=no\n"
        )
        (apps / "firefox.desktop").write_text("[Desktop Entry]\nExec=firefox %u\n")
        for name in ("evince", "okular", "firefox"):
            recording_program(bin_dir / name, record)
        pdf = tmp_path / "q&a #1.pdf"

        recording_program(bin_dir / "xdg-mime", tmp_path / "asked.txt", "org.kde.okular.desktop")
        command = viewer_command(pdf, 340)
        assert command == [str(bin_dir / "okular"), "--page", "340", str(pdf)]
        subprocess.run(command, check=True)
        assert record.read_text().splitlines()[1:] == ["--page", "340", str(pdf)]
        assert (tmp_path / "asked.txt").read_text().split() == [
            str(bin_dir / "xdg-mime"), "query", "default", "application/pdf",
        ]  # fmt: skip

        recording_program(bin_dir / "xdg-mime", tmp_path / "asked.txt", "firefox.desktop")
        assert viewer_command(pdf, 340) is None
        (bin_dir / "xdg-mime").unlink()
        assert viewer_command(pdf, 2) == [str(bin_dir / "evince"), "-i", "2", str(pdf)]
        assert viewer_command(tmp_path / "notes.txt", 2) is None
        assert viewer_command(pdf, 0) is None
