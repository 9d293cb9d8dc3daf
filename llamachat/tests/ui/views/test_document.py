"""The tests of `llamachat.ui.views.document`."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtWidgets import QLabel

from llamachat.ui.views.message import MessageView


class TestDocument:
    """A message's text: the view that shows it and the writer that keeps it up to date."""

    def test_document_source_link_opens_the_pdf_at_its_page(
        self, qtbot, tmp_path: Path, monkeypatch
    ) -> None:
        """A document search's source in a reply links to its file with #page=N, its name
        as text; activating it starts the viewer found for the page, detached."""
        from llamachat.tests.support import recording_program

        bin_dir, record = tmp_path / "bin", tmp_path / "args.txt"
        monkeypatch.setenv("PATH", str(bin_dir))
        recording_program(bin_dir / "evince", record)
        pdf = tmp_path / "docs" / "q&a <b>#1.pdf"
        view = MessageView({"role": "assistant", "status": "complete", "content": "See it."})
        qtbot.addWidget(view)
        view.add_search(
            "zebra",
            [{"title": f"{pdf.name}, page 2", "url": pdf.as_uri(), "path": str(pdf), "page": 2}],
            title="Searched documents",
        )
        [label] = [
            label
            for label in view.findChildren(QLabel)
            if label.accessibleName() == "Searched documents"
        ]
        assert ">q&amp;a &lt;b&gt;#1.pdf, page 2</a>" in label.text()
        [href] = re.findall(r'href="([^"]+)"', label.text())
        assert href == f"{pdf.as_uri()}#page=2"
        label.linkActivated.emit(href)
        qtbot.waitUntil(lambda: record.exists() and len(record.read_text().splitlines()) == 4)
        assert record.read_text().splitlines()[1:] == ["-i", "2", str(pdf)]
