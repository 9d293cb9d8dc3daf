"""llamachat as a desktop citizen: its icon, its menu and autostart entries, its global shortcut.

icon      the app icon (llamachat/icons/llamachat.svg) as a QIcon and as PNG files
entry     `llamachat --install-desktop` / `--uninstall-desktop`: the .desktop entries
portal    the XDG desktop portal's GlobalShortcuts interface (over D-Bus, jeepney)
x11       a key grab on the X11 root window, where no portal offers global shortcuts
hotkey    the quick ask shortcut: the portal, else X11, else a note for Settings
"""
