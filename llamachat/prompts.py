"""System prompt presets: one `<name>.md` file each in the prompts folder.

Plain files so a user can edit them in any editor and copy them between machines.

Errors: `PromptError` for everything the user should read (no such preset, a name
already taken, a file that cannot be read or written); its subclass `InvalidName`,
also a `ValueError`, for a name that cannot be a file name.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from llamachat import outside

log = logging.getLogger(__name__)

DEFAULT_NAME = "Default"
DEFAULT_TEXT = (
    "You are a helpful assistant. Answer clearly and accurately, and keep answers "
    "as short as the question allows. When you are not sure, say so instead of "
    "guessing. Use Markdown for lists, tables and code.\n"
)
SUFFIX = ".md"
MAX_PRESET_BYTES = 1024 * 1024
"""The largest preset read: a system prompt, not a book (a bigger file is refused, as is a FIFO)."""
# Characters some file system refuses in a name; refusing them everywhere keeps a
# prompts folder portable between machines.
_FORBIDDEN = set('/\\:*?"<>|')


class PromptError(Exception):
    """A preset cannot be found, read or written; the message says why."""


class InvalidName(PromptError, ValueError):
    """A preset name that cannot be used as a file name."""


def check_name(name: str) -> str:
    """Return `name` if it can be a preset's file name, else raise InvalidName."""
    if not name or not name.strip():
        raise InvalidName("a preset needs a name")
    if name != name.strip():
        raise InvalidName(f"a preset name cannot start or end with a space: {name!r}")
    if name.startswith("."):
        raise InvalidName(f"a preset name cannot start with '.': {name!r}")
    bad = sorted(_FORBIDDEN.intersection(name) | {c for c in name if ord(c) < 32})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise InvalidName(f"a preset name cannot contain {shown}: {name!r}")
    return name


class Prompts:
    """The presets in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _file(self, name: str) -> Path:
        return self.folder / (check_name(name) + SUFFIX)

    def ensure_default(self) -> None:
        """Create the folder, and the Default preset when there is no preset at all."""
        if not self.names():
            self.save(DEFAULT_NAME, DEFAULT_TEXT)

    def names(self) -> list[str]:
        """Every preset's name, sorted without regard to case."""
        try:
            files = [p for p in self.folder.glob("*" + SUFFIX) if p.is_file()]
        except OSError as exc:
            raise PromptError(f"cannot list the prompts folder {self.folder}: {exc}") from None
        names = []
        for path in files:
            try:
                names.append(check_name(path.name[: -len(SUFFIX)]))
            except InvalidName:
                continue  # e.g. an editor's hidden ".name.md" swap file
        return sorted(names, key=str.casefold)

    def get(self, name: str) -> str:
        """The text of a preset."""
        path = self._file(name)
        try:
            data, _more = outside.read_bytes(path, MAX_PRESET_BYTES)
        except outside.Refused as exc:
            if not os.path.lexists(path):
                raise PromptError(f"no prompt preset named {name!r}") from None
            raise PromptError(f"cannot read the prompt preset {exc}") from None
        return data.decode("utf-8", errors="replace")

    def save(self, name: str, text: str) -> None:
        """Create or replace a preset."""
        path = self._file(name)
        temp = path.with_name(f".{path.name}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temp.write_text(text, encoding="utf-8")
            # Replace in one step so a crash never leaves a half-written preset.
            os.replace(temp, path)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise PromptError(f"cannot save the prompt preset {path}: {exc.strerror}") from None

    def delete(self, name: str) -> None:
        """Remove a preset."""
        path = self._file(name)
        try:
            path.unlink()
        except FileNotFoundError:
            raise PromptError(f"no prompt preset named {name!r}") from None
        except OSError as exc:
            raise PromptError(f"cannot delete the prompt preset {path}: {exc.strerror}") from None

    def rename(self, old: str, new: str) -> None:
        """Give a preset a new name that no other preset has."""
        source, target = self._file(old), self._file(new)
        if not source.is_file():
            raise PromptError(f"no prompt preset named {old!r}")
        # On a case-insensitive file system a case-only rename finds `target` as `source`.
        if target.exists() and not target.samefile(source):
            raise PromptError(f"a prompt preset named {new!r} already exists")
        try:
            source.rename(target)
        except OSError as exc:
            raise PromptError(f"cannot rename the prompt preset {source}: {exc.strerror}") from None
