"""The tests of `llamachat.ui.theme`."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QPalette

from llamachat.ui import theme


class TestTheme:
    """Light and dark colours on Qt's Fusion style, following the desktop unless told otherwise."""

    def test_theme_apply_sets_fusion_with_light_dark_or_the_systems_palette(self, qapp) -> None:

        style, palette = qapp.style().name(), qapp.palette()
        try:
            assert theme.apply_theme(qapp, "dark") == "dark"
            assert qapp.style().name().lower() == "fusion"
            window = qapp.palette().color(QPalette.ColorRole.Window)
            text = qapp.palette().color(QPalette.ColorRole.WindowText)
            assert window.lightness() < 80 and text.lightness() > 200
            assert theme.apply_theme(qapp, "light") == "light"
            assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 200
            assert theme.apply_theme(qapp, "system") == theme.system_scheme(qapp)
            assert qapp.palette() == theme.palette_for(theme.system_scheme(qapp))
            with pytest.raises(ValueError, match="theme must be one of"):
                theme.apply_theme(qapp, "sepia")
        finally:
            qapp.styleHints().unsetColorScheme()
            qapp.setStyle(style)
            qapp.setPalette(palette)
