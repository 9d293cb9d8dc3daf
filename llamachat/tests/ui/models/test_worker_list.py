"""The tests of `llamachat.ui.models.worker_list`: the RPC workers in Settings."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from llamachat import config
from llamachat.router.server import free_port
from llamachat.tests.support import real_assets
from llamachat.ui.models.worker_list import WorkerList
from llamachat.ui.settings import SettingsDialog


def _button(widget: WorkerList, text: str) -> QPushButton:
    return next(b for b in widget.findChildren(QPushButton) if b.text() == text)


class TestWorkerList:
    def test_worker_list_adds_removes_and_tests_real_workers(self, rpc_worker, qtbot) -> None:
        binary, _model = real_assets()
        up, _ = rpc_worker()
        gone = f"127.0.0.1:{free_port()}"
        workers = WorkerList((gone,), binary)
        qtbot.addWidget(workers)

        workers.new_address.setText("192.168.1.20")
        qtbot.mouseClick(_button(workers, "Add"), Qt.MouseButton.LeftButton)
        assert workers.addresses() == [gone]
        assert "host:port" in workers.status.text()

        workers.new_address.setText(up)
        qtbot.mouseClick(_button(workers, "Add"), Qt.MouseButton.LeftButton)
        assert workers.addresses() == [gone, up]

        qtbot.mouseClick(workers.test_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: workers.test_button.isEnabled(), timeout=30000)
        lines = workers.status.text().splitlines()
        assert lines[0] == f"{gone}: it does not answer"
        assert lines[1].startswith(f"{up}: ") and "MiB free of" in lines[1]

        workers.list.item(0).setSelected(True)
        qtbot.mouseClick(_button(workers, "Remove"), Qt.MouseButton.LeftButton)
        assert workers.addresses() == [up]

    def test_worker_list_saved_by_settings_as_rpc_workers(self, qtbot, tmp_path: Path) -> None:
        path = tmp_path / "config.toml"
        config.write_default(path)
        dialog = SettingsDialog(config.load(path))
        qtbot.addWidget(dialog)
        dialog.rpc_workers.new_address.setText("192.168.1.20:50052")
        dialog.rpc_workers.new_address.returnPressed.emit()

        assert dialog.save()
        assert config.load(path).rpc_workers == ("192.168.1.20:50052",)
        assert 'rpc_workers = ["192.168.1.20:50052"]' in path.read_text(encoding="utf-8")
