"""What sits under a message's text: its status, figures, actions and `‹ n/N ›` (`MessageFooter`).

The status line ("Stopped", an error in red, "Cut at the length limit") has Retry beside
an error and Continue beside a cut reply; under it, a reply not saved yet says so. Then
a row: the reply's figures ("38.2 tok/s · 412 tokens · 1.2 s", or what a stopped one
came to) at its left; then Edit under a question, Copy and Regenerate under a reply,
and the "⋯" menu (`more_actions.MoreActions`). A message with other versions (replies
regenerated, edits of a question) shows `‹ 2/3 ›`; Alt+Left and Alt+Right switch
versions while the focus is in the message. The footer only shows and emits, with the
message's id: the message view says what is offered, and the conversation acts.

Errors: this module raises no exceptions of its own; a failure here is a bug.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QPalette, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from llamachat.ui import plain, shortcuts
from llamachat.ui.views.more_actions import Choices, Entry, MoreActions


def action_button(parent: QWidget, text: str, name: str, slot) -> QToolButton:
    """A flat footer button reading `text`, named `name` for screen readers and the tooltip."""
    button = QToolButton(parent)
    button.setText(text)
    button.setAccessibleName(name)
    button.setToolTip(plain.tooltip(name))
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    button.clicked.connect(slot)
    return button


def set_quiet(label: QLabel, text: str) -> None:
    """Show `text` (ours, never markup) in the muted colour of a note; hidden when empty."""
    label.setText(text)
    label.setStyleSheet("")
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    label.setVisible(bool(text))


def _status_rows(
    view: QWidget, layout: QVBoxLayout, *buttons: QToolButton
) -> tuple[QLabel, QLabel]:
    """Add the status line (with `buttons` beside it) and the "not saved" line, all hidden."""
    row = QHBoxLayout()
    row.setContentsMargins(0, 0, 0, 0)
    status = plain.Label("", view)
    status.setAccessibleName("Status")
    status.setWordWrap(True)
    status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    row.addWidget(status, 1)
    for button in buttons:
        row.addWidget(button)
    layout.addLayout(row)
    # The text carries a database error: shown as it is, never read as markup.
    unsaved = plain.Label("", view)
    unsaved.setAccessibleName("Not saved")
    unsaved.setWordWrap(True)
    unsaved.setStyleSheet("color: #d1242f;")
    layout.addWidget(unsaved)
    for widget in (status, *buttons, unsaved):
        widget.hide()
    return status, unsaved


class MessageFooter(QObject):
    """What sits under a message's text: the status line with Retry and Continue, the "not
    saved" line, and the row of its figures, Edit (or Copy and Regenerate), ⋯ and `‹ n/N ›`."""

    retry_requested = Signal(object)
    continue_requested = Signal(object)  # go on with this reply, cut at the length limit
    edit_requested = Signal(object)
    regenerate_requested = Signal(object)
    version_requested = Signal(object)  # the id of the version of this message to show
    copy_requested = Signal()

    def __init__(
        self,
        view: QWidget,
        layout: QVBoxLayout,
        *,
        mine: bool,
        current: Callable[[], int | None],
        busy: Callable[[], bool],
        more: Sequence[Entry | Choices],
    ) -> None:
        super().__init__(view)
        self._view = view
        self._retry = action_button(
            view, "Retry", "Retry", lambda: self.retry_requested.emit(current())
        )
        self._continue = action_button(
            view,
            "Continue",
            "Continue reply",
            lambda: self.continue_requested.emit(current()),
        )
        # Laid out here, above the figures; what they read is the message view's to say.
        self.status, self.unsaved = _status_rows(view, layout, self._retry, self._continue)
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.setSpacing(2)
        # The figures, hidden until set; then room for buttons.
        self.stats = plain.Label("", view)
        self.stats.setAccessibleName("Reply statistics")
        self.stats.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.stats.hide()
        footer.addWidget(self.stats)
        footer.addStretch(1)
        layout.addLayout(footer)
        self._copy: QToolButton | None = None
        self._regenerate: QToolButton | None = None
        if mine:
            self._edit = action_button(
                view, "Edit", "Edit message", lambda: self.edit_requested.emit(current())
            )
            footer.addWidget(self._edit)
        else:
            self._copy = action_button(view, "Copy", "Copy reply", self.copy_requested.emit)
            self._regenerate = action_button(
                view,
                "Regenerate",
                "Regenerate",
                lambda: self.regenerate_requested.emit(current()),
            )
            self._regenerate.hide()
            footer.addWidget(self._copy)
            footer.addWidget(self._regenerate)
        self._row = footer
        # Built when first needed: most messages have one version and no fork button.
        self._version_switch = _VersionSwitch(
            view, footer, current, busy, self.version_requested.emit
        )
        # The "⋯" menu's entries (`more`: its text, what it does), given by the view.
        self._more = MoreActions(
            footer, lambda text, name, act: action_button(view, text, name, act), more
        )

    def show_figures(self, text: str, tip: str) -> None:
        """Show the reply's figures (`tip`: the rest of them, in the tooltip); hidden when empty."""
        self.stats.setText(text)
        self.stats.setToolTip(plain.tooltip(tip) if tip else "")
        self.stats.setVisible(bool(text))

    def show_quiet_figures(self, text: str) -> None:
        """Show what a stopped reply came to, muted as a note (ours, never markup)."""
        set_quiet(self.stats, text)

    def figures(self) -> str:
        """The figures shown ('' when there are none)."""
        return self.stats.text()

    def offer_more(self, allowed: bool) -> None:
        """Offer the "⋯" menu, or hide it."""
        self._more.set_allowed(allowed)

    def set_unsaved(self, error: str) -> None:
        """Mark the reply as not saved because of `error` ('' once it is saved)."""
        self.unsaved.setText(
            f"Not saved yet: {error} It is kept here and saved once there is room." if error else ""
        )
        self.unsaved.setVisible(bool(error))

    def unsaved_text(self) -> str:
        """What the "not saved" mark says ('' when the reply is saved)."""
        return self.unsaved.text() if self.unsaved.isVisibleTo(self._view) else ""

    def offer_retry(self, allowed: bool) -> None:
        """Show Retry beside the status line, or hide it."""
        self._retry.setVisible(allowed)

    def offer_reply_actions(self, *, copy: bool, regenerate: bool, continue_: bool) -> None:
        """Show or hide a reply's Copy, Regenerate and Continue."""
        if self._copy is not None and self._regenerate is not None:
            self._copy.setVisible(copy)
            self._regenerate.setVisible(regenerate)
        self._continue.setVisible(continue_)

    def set_versions(self, versions: Sequence[int]) -> None:
        """Show `‹ n/N ›` for a message with other versions (`versions`: every version's id)."""
        self._version_switch.show(versions)

    def version_text(self) -> str:
        """ "2/3" for the second of three versions; "" for a message with one version."""
        return self._version_switch.text()

    def more_actions(self) -> list[str]:
        """The texts of the "More actions" menu ([] when it is not offered)."""
        return self._more.texts()

    def more_choices(self, title: str) -> list[tuple[str, bool]]:
        """The "More actions" submenu `title`'s choices, each with whether it is checked."""
        return self._more.choices(title)

    def trigger_more(self, text: str) -> None:
        """Run the "More actions" entry reading `text` (as a click on it would)."""
        self._more.trigger(text)


class _VersionSwitch:
    """`‹ n/N ›` in a message's footer, to show another version of it; built when first needed."""

    def __init__(
        self,
        view: QWidget,
        footer: QHBoxLayout,
        current: Callable[[], int | None],
        busy: Callable[[], bool],
        on_version: Callable[[int], None],
    ) -> None:
        self._view = view
        self._footer = footer
        # The message's id now (it changes once saved), whether it streams, and where a
        # version asked for goes.
        self._current = current
        self._busy = busy
        self._on_version = on_version
        self._versions: list[int] = []
        self._label: QLabel | None = None
        self._buttons: tuple[QToolButton, QToolButton] | None = None

    def show(self, versions: Sequence[int]) -> None:
        """Show the place of the view's message among `versions` (hidden with one version)."""
        view = self._view
        current = self._current()
        self._versions = list(versions)
        if current not in self._versions or len(self._versions) < 2:
            if self._label is not None:
                self._label.hide()
                for button in self._buttons or ():
                    button.hide()
            return
        if self._label is None:
            older = action_button(view, "‹", "Previous version", lambda: self._step(-1))
            newer = action_button(view, "›", "Next version", lambda: self._step(1))
            self._label = plain.Label("", view)
            self._label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            self._buttons = (older, newer)
            for at, widget in enumerate((older, self._label, newer)):
                self._footer.insertWidget(at, widget)
            for action, step in (("previous_version", -1), ("next_version", 1)):
                for sequence in shortcuts.BY_ACTION[action].sequences():
                    shortcut = QShortcut(sequence, view)
                    shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
                    shortcut.activated.connect(lambda step=step: self._step(step))
        place = self._versions.index(current) + 1
        total = len(self._versions)
        self._label.setText(f"{place}/{total}")
        self._label.setAccessibleName(f"Version {place} of {total}")
        assert self._buttons is not None
        older, newer = self._buttons
        older.setEnabled(place > 1)
        newer.setEnabled(place < total)
        for widget in (older, self._label, newer):
            widget.show()

    def text(self) -> str:
        """ "2/3" for the second of three versions; "" for a message with one version."""
        label = self._label
        return label.text() if label is not None and not label.isHidden() else ""

    def _step(self, step: int) -> None:
        current = self._current()
        if current not in self._versions or self._busy():
            return
        at = self._versions.index(current) + step
        if 0 <= at < len(self._versions):
            self._on_version(self._versions[at])
