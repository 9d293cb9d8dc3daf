"""The tests of `llamachat.ui.views.chips`."""

from __future__ import annotations

from PySide6.QtWidgets import QPushButton

from llamachat.tests.support import visible_widget_named


class TestChips:
    """Rows of chips: the loaded skills above the composer, the attachments in it."""

    def test_skill_chips_are_kept_when_only_their_counts_change(self, qtbot) -> None:
        """A count that comes in updates the chips' tooltips; the buttons stay (one may be
        under the pointer), and a changed list builds them again."""
        from llamachat.ui.views.chips import SkillChips

        chips = SkillChips()
        qtbot.addWidget(chips)
        chips.show()
        chips.set_skills(["pdf", "gone"], frozenset({"gone"}))
        # A chip added to a shown row is shown from the event loop.
        qtbot.waitUntil(lambda: all(b.isVisible() for b in chips.findChildren(QPushButton)))
        pdf = visible_widget_named(chips, QPushButton, "Unload skill pdf")
        gone = visible_widget_named(chips, QPushButton, "Remove missing skill gone")
        chips.set_skills(["pdf", "gone"], frozenset({"gone"}), {"pdf": 1230})
        assert visible_widget_named(chips, QPushButton, "Unload skill pdf") is pdf
        assert "~1,230 tokens" in pdf.toolTip()
        assert visible_widget_named(chips, QPushButton, "Remove missing skill gone") is gone
        assert gone.font().strikeOut()
        chips.set_skills(["pdf"])
        assert chips.skills() == ["pdf"] and chips.missing() == []
        qtbot.waitUntil(
            lambda: visible_widget_named(chips, QPushButton, "Unload skill pdf") is not pdf
        )
