"""Settings' list of RPC workers (``rpc_workers``): add, remove, and test them.

`WorkerList(addresses, llama_server)` shows the addresses; Add takes the typed
host:port (refused, with the reason, when it is not one); Test asks llama-server
about every worker (`rpc_workers.survey`, on the task runner) and shows each one's
devices and free memory, or why it cannot be used. `addresses()` is what Settings saves.

Errors: none raised; a bad address or an unusable worker is shown in the list's label.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llamachat.config import worker_address_problem
from llamachat.router.rpc_workers import NO_AUTH_WARNING, WorkerStatus, survey
from llamachat.ui import plain, tasks


class WorkerList(QWidget):
    """The RPC workers the managed server spreads models over, with Add, Remove and Test."""

    def __init__(
        self, addresses: tuple[str, ...], llama_server: Path | None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._llama_server = llama_server
        self.list = QListWidget()
        self.list.setAccessibleName("RPC workers")
        self.list.setMaximumHeight(80)
        self.list.addItems(list(addresses))
        # The warning stays at hand once Test has replaced it below.
        self.list.setToolTip(plain.tooltip(NO_AUTH_WARNING))
        self.new_address = QLineEdit()
        self.new_address.setAccessibleName("New RPC worker")
        self.new_address.setPlaceholderText("host:port, e.g. 192.168.1.20:50052")
        self.new_address.setToolTip("The address `llamachat worker` printed on the other machine")
        self.new_address.returnPressed.connect(self._on_add_clicked)
        add = QPushButton("Add")
        add.clicked.connect(self._on_add_clicked)
        remove = QPushButton("Remove")
        remove.clicked.connect(self._on_remove_clicked)
        self.test_button = QPushButton("Test")
        self.test_button.setAccessibleName("Test RPC workers")
        self.test_button.clicked.connect(self._on_test_clicked)
        self.status = plain.Label(NO_AUTH_WARNING)
        self.status.setAccessibleName("RPC workers status")
        self.status.setWordWrap(True)

        row = QHBoxLayout()
        row.addWidget(self.new_address, 1)
        for button in (add, remove, self.test_button):
            row.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.list)
        layout.addLayout(row)
        layout.addWidget(self.status)

    def addresses(self) -> list[str]:
        """The workers as listed, in their order."""
        return [self.list.item(i).text() for i in range(self.list.count())]

    @Slot()
    def _on_add_clicked(self) -> None:
        address = self.new_address.text().strip()
        problem = worker_address_problem(address)
        if problem:
            self.status.setText(problem[0].upper() + problem[1:] + ".")
            return
        if address not in self.addresses():
            self.list.addItem(address)
        self.new_address.clear()

    @Slot()
    def _on_remove_clicked(self) -> None:
        for item in self.list.selectedItems():
            self.list.takeItem(self.list.row(item))

    @Slot()
    def _on_test_clicked(self) -> None:
        addresses, binary = self.addresses(), self._llama_server
        if not addresses:
            self.status.setText("No workers to test: add one first.")
            return
        if binary is None:
            self.status.setText("No llama-server to ask about the workers.")
            return
        self.test_button.setEnabled(False)
        self.status.setText("Testing…")
        tasks.call_in_background(
            self, lambda: survey(binary, addresses), self._on_tested, self._on_test_failed
        )

    def _on_tested(self, statuses: list[WorkerStatus]) -> None:
        self.test_button.setEnabled(True)
        self.status.setText("\n".join(status.describe() for status in statuses))

    def _on_test_failed(self, message: str) -> None:
        self.test_button.setEnabled(True)
        self.status.setText(message)
