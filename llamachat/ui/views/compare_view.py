"""The Compare window: one question's answers from 2-4 models side by side, and its chooser.

`CompareChooser` asks the question, which models answer it (2-4 of the model picker's
list) and whether to compare blind; under the list, whether the request fits each
picked model's context (`compare_fit`), and meanwhile each loaded one reads the chat
ahead (`Warmer.also`). When a pick must be loaded and the router is at its
`--models-max`, the chooser says which model in use (this chat's, another window's)
the load may unload, and its button becomes "Compare anyway" (Cancel keeps it). `CompareView` shows a `comparison.Comparison`: one
column per model, in a splitter (tabs when the window is too narrow for them), each with
its answer streaming into a `MessageView`, its figures (time to first token, tokens a
second, tokens, and what its prompt cost: tokens read, in how long, and cached), what it waits for, Stop, and "Continue with this one", which makes that
answer the chat's current version. A blind comparison names its columns "Model A",
"Model B"... until one is picked. `Compare` is the chat window's part that ties them
to its conversation (Chat > Compare with…, `/compare`). `WinsDialog` is the table of
blind picks: how often each model won against each other one, everywhere or in a project.

Model names, questions and answers are outside text: labels show them as plain text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llamachat.history.picks import EVERYWHERE, Picks
from llamachat.router.models import RUNNING, ModelInfo, Models, pushed_out
from llamachat.ui import plain, tasks
from llamachat.ui.chat import comparison as compare
from llamachat.ui.chat.compare_fit import CompareFit, Fit
from llamachat.ui.chat.conversation import Conversation
from llamachat.ui.chat.reply import ReplyStream
from llamachat.ui.models.in_use import unload_notice
from llamachat.ui.plain import Label
from llamachat.ui.views.figures import figures, prompt_cost
from llamachat.ui.views.message import MessageView

# Below this width a column's answer is too narrow to read: the columns become tabs.
MIN_COLUMN_PX = 320
COMMAND = "/compare"
# The picks and the question are measured (and warmed) once they rest this long.
SETTLE_MS = 400


class CompareChooser(QDialog):
    """Asks the question, the models (2-4) that answer it, and whether to compare blind."""

    settled = Signal()  # the picks or the question changed, then rested: measure, warm

    def __init__(
        self,
        models: list[str],
        *,
        text: str = "",
        checked: Sequence[str] = (),
        again: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare again" if again else "Compare models")
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Question:"))
        self.question_edit = QPlainTextEdit()
        self.question_edit.setPlainText(text)
        # Compare again answers the question asked: more versions of its reply.
        self.question_edit.setReadOnly(again)
        self.question_edit.setFixedHeight(80)
        layout.addWidget(self.question_edit)
        layout.addWidget(
            QLabel(f"Models ({compare.MIN_MODELS} to {compare.MAX_MODELS}), side by side:")
        )
        self.model_list = QListWidget()
        for model in models:
            item = QListWidgetItem(model)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(
                Qt.CheckState.Checked if model in checked else Qt.CheckState.Unchecked
            )
            self.model_list.addItem(item)
        layout.addWidget(self.model_list)
        # Whether the request fits each picked model's context (`show_fits`).
        self.fit_label = Label()
        self.fit_label.setWordWrap(True)
        layout.addWidget(self.fit_label)
        # What a load may unload that a window uses (`show_unload`).
        self.unload_label = Label()
        self.unload_label.setWordWrap(True)
        self.unload_label.hide()
        layout.addWidget(self.unload_label)
        self.blind_box = QCheckBox("Blind: call them Model A, B… until I pick one")
        layout.addWidget(self.blind_box)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Compare")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(SETTLE_MS)
        self._settle.timeout.connect(self.settled)
        self.model_list.itemChanged.connect(self._update)
        self.question_edit.textChanged.connect(self._update)
        self._update()

    def models(self) -> list[str]:
        """The models checked, in the list's order."""
        items = (self.model_list.item(n) for n in range(self.model_list.count()))
        return [i.text() for i in items if i.checkState() == Qt.CheckState.Checked]

    def question(self) -> str:
        """The question to ask them."""
        return self.question_edit.toPlainText()

    def blind(self) -> bool:
        """Whether the names stay hidden until a pick."""
        return self.blind_box.isChecked()

    def show_unload(self, notice: str) -> None:
        """Say what a load may unload that is in use ('' says nothing): then going on is
        "Compare anyway"."""
        self.unload_label.setText(notice)
        self.unload_label.setVisible(bool(notice))
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Compare anyway" if notice else "Compare")

    def show_fits(self, fits: list[Fit]) -> None:
        """Say, model by model, whether the request fits its context."""
        self.fit_label.setText("\n".join(fit.text() for fit in fits))

    @Slot()
    def _update(self) -> None:
        ok = compare.MIN_MODELS <= len(self.models()) <= compare.MAX_MODELS
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(
            ok and bool(self.question().strip())
        )
        self._settle.start()


class CompareColumn(QWidget):
    """One model's answer: its name, figures, state, the answer, Stop and Continue."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        self.name = Label()
        self.name.setStyleSheet("font-weight: bold")
        self.figures = Label()
        self.state = Label()
        self.state.setWordWrap(True)
        self.area = QScrollArea()
        self.area.setWidgetResizable(True)
        self.view: MessageView | None = None
        buttons = QHBoxLayout()
        self.stop_button = QPushButton("Stop")
        self.continue_button = QPushButton("Continue with this one")
        self.continue_button.setEnabled(False)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        buttons.addWidget(self.continue_button)
        for widget in (self.name, self.figures, self.state):
            layout.addWidget(widget)
        layout.addWidget(self.area, 1)
        layout.addLayout(buttons)

    def show_reply(self, reply: ReplyStream, label: str) -> MessageView:
        """Stream `reply` into a view of its own, under the name `label`."""
        # The view's model is the label: a blind column must not give the name away.
        self.view = MessageView({**reply.row(), "model": label})
        self.area.setWidget(self.view)
        self.state.setText("Answering…")
        return self.view


class CompareView(QWidget):
    """A comparison's columns, in a window of their own; Stop all, and a pick per column."""

    def __init__(self, comparison: compare.Comparison, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.comparison = comparison
        self.setWindowTitle("Compare")
        self.resize(1100, 700)
        layout = QVBoxLayout(self)
        # The window may get narrower than its columns side by side: they become tabs then.
        layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.tabs = QTabWidget()
        self.tabs.hide()
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.tabs, 1)
        bottom = QHBoxLayout()
        self.outcome = Label()
        self.stop_all = QPushButton("Stop all")
        self.stop_all.clicked.connect(lambda: comparison.stop())
        bottom.addWidget(self.outcome, 1)
        bottom.addWidget(self.stop_all)
        layout.addLayout(bottom)
        self.columns: list[CompareColumn] = []
        for index in range(len(comparison.models)):
            column = CompareColumn()
            column.name.setText(comparison.label(index))
            column.state.setText("Waiting…")
            column.stop_button.clicked.connect(lambda _c=False, i=index: comparison.stop(i))
            column.continue_button.clicked.connect(lambda _c=False, i=index: comparison.choose(i))
            self.splitter.addWidget(column)
            self.columns.append(column)
        for index, reply in enumerate(comparison.replies):
            if reply is not None:
                self._on_column_started(index, reply)
            elif comparison.waiting[index]:
                self._on_column_waiting(index, comparison.waiting[index])
        comparison.column_started.connect(self._on_column_started)
        comparison.column_waiting.connect(self._on_column_waiting)
        comparison.column_ended.connect(self._on_column_ended)
        comparison.finished.connect(self._on_finished)
        comparison.chosen.connect(self._on_chosen)

    def tabbed(self) -> bool:
        """Whether the columns are tabs (the window is narrow)."""
        return self.tabs.isVisibleTo(self)

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Columns side by side when each has room, else tabs."""
        super().resizeEvent(event)
        narrow = event.size().width() < MIN_COLUMN_PX * len(self.columns)
        if narrow != self.tabbed():
            self._lay_out(narrow)

    def _lay_out(self, tabbed: bool) -> None:
        for index, column in enumerate(self.columns):
            if tabbed:
                self.tabs.addTab(column, self.comparison.label(index))
            else:
                self.splitter.addWidget(column)
        self.tabs.setVisible(tabbed)
        self.splitter.setVisible(not tabbed)

    @Slot(int, object)
    def _on_column_started(self, index: int, reply: ReplyStream) -> None:
        column = self.columns[index]
        label = self.comparison.label(index)
        reply.attach(column.show_reply(reply, label))
        if self.comparison.loads[index]:
            column.state.setText(f"Loading {label}, then answering…")
        reply.stats.connect(lambda _stats, r=reply, c=column: _show_figures(c, r))
        reply.timings.connect(lambda _timings, r=reply, c=column: _show_figures(c, r))

    @Slot(int, str)
    def _on_column_waiting(self, index: int, text: str) -> None:
        self.columns[index].state.setText(text)

    @Slot(int, str, str)
    def _on_column_ended(self, index: int, status: str, error: str) -> None:
        column = self.columns[index]
        column.state.setText({"complete": "Done.", "stopped": "Stopped."}.get(status, error))
        column.stop_button.setEnabled(False)
        column.continue_button.setEnabled(self.comparison.answered[index])

    @Slot()
    def _on_finished(self) -> None:
        self.stop_all.setEnabled(False)
        self.outcome.setText("Pick the answer to go on with; the others stay as its versions.")

    @Slot(int, object)
    def _on_chosen(self, index: int, _path: object) -> None:
        for n, column in enumerate(self.columns):
            column.name.setText(self.comparison.label(n))
            self.tabs.setTabText(self.tabs.indexOf(column), self.comparison.label(n))
            column.continue_button.setEnabled(False)
        self.outcome.setText(f"The chat goes on with {self.comparison.label(index)}.")


def _show_figures(column: CompareColumn, reply: ReplyStream) -> None:
    """The column's figures: time to first token, the reply's, then what its prompt cost
    this model (each model reads it with its own tokenizer and cache)."""
    usage, timings = reply.figures()
    text, tip = figures(usage, timings, prompt=False)
    ttft = timings.get("ttft_ms")
    first = f"first token {ttft / 1000:.2f} s" if isinstance(ttft, (int, float)) else ""
    line = " · ".join(part for part in (first, text) if part)
    column.figures.setText("\n".join(part for part in (line, prompt_cost(usage, timings)) if part))
    column.figures.setToolTip(plain.tooltip(tip))


class WinsDialog(QDialog):
    """How often each model's answer was picked over each other one's, in blind comparisons."""

    def __init__(
        self, picks: Picks, *, project_id: int | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Comparison wins")
        self._picks = picks
        self._project_id = project_id
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Blind picks: the row's model won against the column's."))
        self.project_box = QCheckBox("This chat's project only")
        self.project_box.setEnabled(project_id is not None)
        self.project_box.toggled.connect(self.refresh)
        layout.addWidget(self.project_box)
        self.table = QTableWidget()
        layout.addWidget(self.table, 1)
        self.resize(560, 360)
        self.refresh()

    @Slot()
    def refresh(self) -> None:
        """Fill the table from the picks kept (in the project, when its box is checked)."""
        scope = self._project_id if self.project_box.isChecked() else EVERYWHERE
        wins = self._picks.wins(scope)
        models = sorted({name for pair in wins for name in pair})
        table = self.table
        table.clear()
        table.setRowCount(len(models))
        table.setColumnCount(len(models))
        # Item texts are drawn as plain text: a model's name is outside text.
        table.setHorizontalHeaderLabels(models)
        table.setVerticalHeaderLabels(models)
        for row, winner in enumerate(models):
            for column, loser in enumerate(models):
                if winner != loser:
                    won, lost = wins.get((winner, loser), 0), wins.get((loser, winner), 0)
                    item = QTableWidgetItem(f"{won} of {won + lost}" if won + lost else "")
                    item.setFlags(Qt.ItemFlag.ItemIsEnabled)
                    table.setItem(row, column, item)


class Compare(QObject):
    """The chat window's Compare: the chooser, then a `CompareView` for each comparison."""

    def __init__(
        self,
        chat: Conversation,
        *,
        infos: Callable[[], list[ModelInfo]],
        sent: Callable[[], None],
        say: Callable[[str], None],
        parent: QWidget,
    ) -> None:
        super().__init__(parent)
        self._chat = chat
        self._infos = infos
        self._sent = sent
        self._say = say
        self._window = parent
        self.view: CompareView | None = None
        """The comparison's window, shown last (None: none yet)."""
        chat.comparer.started.connect(self._on_started)

    def _models_listed(self) -> list[str]:
        return [info.id for info in self._infos()]

    def open(self, text: str = "") -> CompareChooser:
        """Ask what to compare (`text`: the question so far), then compare (non-modal)."""
        chooser = CompareChooser(
            self._models_listed(), text=text, checked=[self._chat.model], parent=self._window
        )
        chooser.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        chooser.accepted.connect(lambda: self._ask(chooser))
        self._follow(chooser)
        chooser.open()
        return chooser

    def offer_again(self, reply_id: int) -> CompareChooser | None:
        """Regenerate of a compared reply: the chooser again, the same models checked
        (None: the reply was not compared; a normal Regenerate then)."""
        compared = self._chat.comparer.compared_models(reply_id)
        session_id = self._chat.session_id
        path = self._chat.history.messages(session_id) if compared and session_id else []
        at = next((n for n, row in enumerate(path) if row["id"] == reply_id), 0)
        if not at:
            return None
        models = list(dict.fromkeys([*compared, *self._models_listed()]))
        chooser = CompareChooser(
            models, text=path[at - 1]["content"], checked=compared, again=True, parent=self._window
        )
        chooser.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        chooser.accepted.connect(
            lambda: self._chat.comparer.again(reply_id, chooser.models(), blind=chooser.blind())
        )
        self._follow(chooser)
        chooser.open()
        return chooser

    def _follow(self, chooser: CompareChooser) -> None:
        """While `chooser` is open: its picks are measured against each one's context and
        the loaded ones warmed; once it closes, only the chat's model is kept warm."""
        fit = CompareFit(self._chat.builder, self._chat.context.context_size, parent=chooser)
        fit.measured.connect(chooser.show_fits)
        warmer = self._chat.warmer
        # What the count learned of a pick (its context, whether it takes tools) may
        # change its request: warmed again as it will be sent.
        fit.measured.connect(lambda _fits: warmer.trigger())

        def settled() -> None:
            fit.measure(chooser.question(), chooser.models())
            warmer.also(chooser.models())

        chooser.settled.connect(settled)
        chooser.finished.connect(lambda _result: warmer.also(()))
        # The router's limit, asked once: whether a pick's load may unload a model in use.
        limit: list[int | None] = [None]

        def check_unload() -> None:
            picked = chooser.models()
            infos = self._infos()
            loaded = {i.id for i in infos if i.status in RUNNING}
            loads = [m for m in picked if m not in loaded and self._is_router(m)]
            out = pushed_out(infos, loads, picked, limit[0])
            in_use = self._chat.app.models_in_use
            chooser.show_unload(unload_notice(loads, out, in_use.users))

        def on_limit(future: Future) -> None:
            limit[0] = future.result()
            check_unload()

        chooser.settled.connect(check_unload)
        router = Models(self._chat.app.registry.router())
        tasks.run_in_background(router.max_instances, on_limit, receiver=chooser)

    def _is_router(self, model: str) -> bool:
        """Whether `model` is one of the router's (a provider's is never loaded)."""
        return self._chat.builder.client_for(model)[1] == model

    def show_wins(self) -> WinsDialog:
        """Show the table of blind picks (Chat > Comparison wins…)."""
        dialog = WinsDialog(
            self._chat.history.picks,
            project_id=self._chat.builder.project_id(),
            parent=self._window,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def _ask(self, chooser: CompareChooser) -> None:
        outcome = self._chat.comparer.ask(
            chooser.question(), chooser.models(), blind=chooser.blind()
        )
        if outcome == compare.SENT:
            self._sent()
        elif outcome == compare.BUSY:
            self._say("A reply is still coming: stop it (Esc) before comparing.")

    @Slot(object)
    def _on_started(self, comparison: compare.Comparison) -> None:
        if self.view is not None:
            self.view.close()
            self.view.deleteLater()
        self.view = CompareView(comparison, self._window)
        self.view.show()
