"""Writing config.toml: every change goes through one writer, validated and atomic.

`update_file()` changes top-level keys in place, keeping the user's comments and
layout (a tomlkit round-trip); `append_tables()` adds [[tables]]; `write_default()`
writes the commented default file. Each refuses, with ConfigError and the file left
as it was, a change that would make the file invalid.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import tomlkit

from llamachat.config.checks import TABLE_HEADER, ConfigError
from llamachat.config.definitions import DEFAULT_TEXT
from llamachat.config.load import load

log = logging.getLogger(__name__)


def write_default(path: Path) -> Path:
    """Write the commented default configuration (config.example.toml) to `path` (ConfigError if not)."""
    path = Path(path)
    _write(path, lambda _old: DEFAULT_TEXT)
    log.info("wrote the default configuration to %s", path)
    return path


def update_text(text: str, values: dict[str, object]) -> str:
    """`text` with the given top-level keys set; comments and layout are kept."""
    for key, raw in values.items():
        value = _toml_value(raw)
        doc = tomlkit.parse(text)
        if key in doc:
            doc[key] = value
            text = doc.as_string()
            continue
        uncommented = _uncomment(text, key, value)
        if uncommented is not None:
            text = uncommented
            continue
        doc[key] = value
        text = doc.as_string()
    return text


def update_file(path: Path, values: dict[str, object]) -> None:
    """Write top-level keys into the config file in place (created from DEFAULT_TEXT).

    The result is validated with load() before it replaces the file: a value that
    would make the file invalid raises ConfigError and leaves the file as it was.
    """
    path = Path(path)
    _write(path, lambda text: update_text(text, values))
    log.info("saved %s to %s", ", ".join(values), path)


def append_tables(path: Path, key: str, tables: list[dict]) -> None:
    """Add [[key]] tables at the end of the config file (created from DEFAULT_TEXT).

    Validated like update_file: a file that would not load is left as it was.
    """
    path = Path(path)
    blocks = []
    for table in tables:
        lines = [f"[[{key}]]"]
        for name, value in table.items():
            item = tomlkit.inline_table() if isinstance(value, dict) else None
            if item is not None:
                item.update(value)
            lines.append(
                f"{name} = {tomlkit.item(item if item is not None else value).as_string()}"
            )
        blocks.append("\n".join(lines) + "\n")
    _write(path, lambda text: text.rstrip("\n") + "\n\n" + "\n".join(blocks))
    log.info("added %d [[%s]] tables to %s", len(tables), key, path)


def _write(path: Path, change: Callable[[str], str]) -> None:
    """The one writer of config.toml: `change` applied to its text, checked, swapped in whole.

    `change` gets the file's text (DEFAULT_TEXT when there is no file). The result is
    written beside the file and loaded first: if it would not load, ConfigError says
    why and the file is left as it was.
    """
    try:
        old = path.read_text(encoding="utf-8-sig") if path.exists() else DEFAULT_TEXT
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration: {exc.strerror or exc}", path=path
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(
            "cannot read the configuration: it is not UTF-8 text", path=path
        ) from None
    new_text = change(old)
    temp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A unique name, so two processes saving at once never write into one file.
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        temp = Path(name)
        if path.exists():
            # mkstemp makes the file private; an existing file keeps the mode it had.
            os.chmod(temp, stat.S_IMODE(path.stat().st_mode))
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(new_text)
            # On disk before the rename, so a crash leaves the old file or the new one.
            file.flush()
            os.fsync(file.fileno())
        try:
            load(temp)
        except ConfigError as exc:
            # The user knows the file by its real name, not the temporary one.
            raise ConfigError(exc.message, path=path, line=exc.line, key=exc.key) from None
        # Replace in one step so a crash never leaves a half-written configuration.
        os.replace(temp, path)
    except OSError as exc:
        raise ConfigError(
            f"cannot save the configuration: {exc.strerror or exc}", path=path
        ) from None
    finally:
        if temp is not None:
            temp.unlink(missing_ok=True)


def _toml_value(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_toml_value(item) for item in value]
    return value


def _uncomment(text: str, key: str, value: object) -> str | None:
    """`text` with a top-level `# key = ...` default line turned into the real key, or None."""
    commented = re.compile(rf"^\s*#\s*{re.escape(key)}\s*=")
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if TABLE_HEADER.match(line):
            return None  # past the top level: a key here would land in a table
        if not commented.match(line):
            continue
        ending = line[len(line.rstrip("\r\n")) :] or "\n"
        assignment = f"{key} = {tomlkit.item(value).as_string()}{ending}"
        candidate = "".join([*lines[:index], assignment, *lines[index + 1 :]])
        # The line may sit inside a multi-line string; only a parse can tell.
        try:
            parsed = tomlkit.parse(candidate).unwrap()
        except tomlkit.exceptions.ParseError:
            continue
        if parsed.get(key) == value:
            return candidate
    return None
