"""Checking a parsed config.toml against `KEYS`: `ConfigError` naming the file, line and key."""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from llamachat import params
from llamachat.config.definitions import (
    KEY,
    MCP_NAME,
    MCP_SERVER_TYPES,
    MCP_TIMEOUT,
    PROVIDER_KEYS,
    PROVIDER_TYPES,
    Kind,
    is_url,
)

TABLE_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")


class ConfigError(Exception):
    """The configuration file cannot be used; str() names the file, line and key."""

    def __init__(
        self, message: str, *, path: Path | None, line: int | None = None, key: str | None = None
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.key = key
        super().__init__(str(self))

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "configuration"
        if self.line is not None:
            where += f", line {self.line}"
        return f"{where}: {self.message}"


def _type_name(value: object) -> str:
    names = {
        bool: "boolean",
        int: "integer",
        float: "float",
        str: "string",
        list: "array",
        dict: "table",
    }
    return names.get(type(value), type(value).__name__)


def _line_of(text: str, key: str | None, *, table: str | None = None, index: int = 0) -> int | None:
    """The line setting `key` at top level or in the index-th [[table]] (key None: its header)."""
    current: str | None = None
    seen = -1
    assignment = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=") if key else None
    for number, line in enumerate(text.splitlines(), start=1):
        header = TABLE_HEADER.match(line)
        if header:
            current = header.group(1)
            seen += current == table
            if key is None and current == table and seen == index:
                return number
            if table is None and current == key:
                return number
            continue
        if assignment is None or not assignment.match(line):
            continue
        if (table is None and current is None) or (current == table and seen == index):
            return number
    return None


# A TOML key, maybe dotted and quoted: `m`, `model_params."a.b"`, `m . top_p`.
_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER_KEYS = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_ASSIGNED_KEYS = re.compile(rf"^\s*({_DOTTED})\s*=")


def _line_of_path(text: str, wanted: tuple[str, ...]) -> int | None:
    """The line that sets the nested key `wanted`, else the line of its nearest enclosing key.

    Finds `[a.b]` + `c = ...`, `[a]` + `b.c = ...`, `[a]` + `b = { c = ... }` and
    `a = { b = ... }` alike; None when nothing on the way is on a line of its own.
    """
    table: tuple[str, ...] = ()
    best: int | None = None
    best_depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER_KEYS.match(line)
        if header:
            table = found = _key_parts(header.group(1))
        elif TABLE_HEADER.match(line):
            table = found = ()  # an [[array table]]: nothing of `wanted` is inside
        else:
            assigned = _ASSIGNED_KEYS.match(line)
            if not assigned:
                continue
            found = table + _key_parts(assigned.group(1))
        if found and wanted[: len(found)] == found and len(found) > best_depth:
            best, best_depth = number, len(found)
            if best_depth == len(wanted):
                break
    return best


def _key_parts(dotted: str) -> tuple[str, ...]:
    """The names in a dotted TOML key, unquoted as TOML reads them (() if it is not one)."""
    try:
        data: object = tomllib.loads(f"{dotted} = 0")
    except tomllib.TOMLDecodeError:
        return ()
    parts: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        ((name, data),) = data.items()
        parts.append(name)
    return tuple(parts)


def _check_type(value: object, kind: Kind, name: str) -> str | None:
    # bool is an int in Python but never a valid number here: `max_searches = true` is a typo.
    if not isinstance(value, kind.types) or (isinstance(value, bool) and bool not in kind.types):
        return f"{name} must be {kind.wanted}, got {_type_name(value)}"
    if kind.str_items and isinstance(value, list) and not all(isinstance(i, str) for i in value):
        return f"{name} must be {kind.wanted}"
    if (
        kind.str_items
        and isinstance(value, dict)
        and not all(isinstance(i, str) for i in value.values())
    ):
        return f"{name} must be {kind.wanted}"
    return None


def _unknown(key: str, known: tuple[str, ...], label: str) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown key '{label}'{hint}"


def _folder_problem(folder: Path, *, writable: bool) -> str | None:
    """Why `folder` cannot be used (or made) as a folder, or None."""
    try:
        if folder.exists():
            if not folder.is_dir():
                return f"{folder} is a file, not a folder"
            if writable and not os.access(folder, os.W_OK | os.X_OK):
                return f"the folder {folder} cannot be written"
            return None
        # It is made on first use: the nearest part of the path that exists must be a
        # folder that can be written.
        parent = folder.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"{folder} cannot be made: {parent} is a file, not a folder"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"{folder} cannot be made: the folder {parent} cannot be written"
    except OSError as exc:
        return f"{folder} cannot be reached: {exc.strerror or exc}"
    return None


def _file_problem(file: Path) -> str | None:
    """Why `file` cannot be a file: it is a folder, or its folder cannot be (made); or None.

    Whether an existing folder may be written is left to the program that opens the
    file (History says so, naming the file), as a read-only folder can still be read.
    """
    try:
        if file.is_dir():
            return f"{file} is a folder, not a file"
    except OSError as exc:
        return f"{file} cannot be reached: {exc.strerror or exc}"
    return _folder_problem(file.parent, writable=False)


def _holds_nul(value: object) -> bool:
    """Whether a string in `value` (a string, list or table, at any depth) holds a NUL."""
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def resolve_path(value: str, config_path: Path) -> Path:
    resolved = Path(value).expanduser()
    # A desktop program's working folder is arbitrary, so the config file's folder
    # is the only stable anchor for a relative path.
    return resolved if resolved.is_absolute() else config_path.parent / resolved


def check_data(data: dict[str, Any], text: str, path: Path) -> None:
    """Raise ConfigError for the first problem, in file order."""

    def fail(message: str, key: str, line: int | None) -> NoReturn:
        raise ConfigError(message, path=path, line=line, key=key)

    for key, value in data.items():
        line = _line_of(text, key)
        spec = KEY.get(key)
        if spec is None:
            fail(_unknown(key, tuple(KEY), key), key, line)
        problem = _check_type(value, spec.kind, key)
        if problem:
            fail(problem, key, line)
        if _holds_nul(value):
            # No path, name or argument can hold one: os and subprocess calls would raise.
            fail(f"{key} holds a NUL byte (\\u0000); remove it", key, line)
        problem = spec.check(value) if spec.check else None
        if problem:
            fail(problem, key, line)
        if spec.folder_writable is not None and value:
            problem = _folder_problem(resolve_path(value, path), writable=spec.folder_writable)
            if problem:
                fail(f"{key}: {problem}", key, line)
        if spec.file_writable and value:
            problem = _file_problem(resolve_path(value, path))
            if problem:
                fail(f"{key}: {problem}", key, line)
        if key in ("model_params", "preset_params"):
            _check_param_tables(value, text, key, fail)
        if key == "providers":
            _check_providers(value, text, fail)
        if key == "mcp_servers":
            check_mcp_servers(value, text, fail)


def _check_param_tables(
    tables: dict[str, Any], text: str, key: str, fail: Callable[[str, str, int | None], NoReturn]
) -> None:
    """Check each parameter of each [key.<name>] table, failing with that parameter's line."""
    for name, values in tables.items():
        where = f"{key}.{name}"
        if not isinstance(values, dict):
            message = f"{where} must be a table of parameters, got {_type_name(values)}"
            fail(message, where, _line_of_path(text, (key, name)))
        for param, value in values.items():
            problem = params.problem({param: value}, where)
            if problem:
                fail(problem, f"{where}.{param}", _line_of_path(text, (key, name, param)))


def _check_providers(
    providers: list[Any], text: str, fail: Callable[[str, str, int | None], NoReturn]
) -> None:
    names: set[str] = set()
    for index, entry in enumerate(providers):
        label = f"providers[{index + 1}]"
        # An inline `providers = [...]` has no table headers: fall back to its line.
        table_line = _line_of(text, None, table="providers", index=index) or _line_of(
            text, "providers"
        )

        def line_of(
            key: str, index: int = index, table_line: int | None = table_line
        ) -> int | None:
            return _line_of(text, key, table="providers", index=index) or table_line

        if not isinstance(entry, dict):
            fail(f"{label} must be a table, got {_type_name(entry)}", "providers", table_line)
        for key, value in entry.items():
            name = f"{label}.{key}"
            if key not in PROVIDER_TYPES:
                fail(_unknown(key, PROVIDER_KEYS, name), name, line_of(key))
            problem = _check_type(value, PROVIDER_TYPES[key], name)
            if problem:
                fail(problem, name, line_of(key))
        for key in ("name", "base_url"):
            if not entry.get(key):
                fail(f"{label} needs a {key}", f"{label}.{key}", table_line)
        name, url = entry["name"], entry["base_url"]
        if "/" in name:
            fail(
                f"{label}.name must not contain '/' (its models are named '<name>/<model>')",
                f"{label}.name",
                line_of("name"),
            )
        if name in names:
            fail(f"two providers are named '{name}'", f"{label}.name", line_of("name"))
        names.add(name)
        if not is_url(url):
            fail(
                f"{label}.base_url must start with http:// or https:// and be a valid URL, got '{url}'",
                f"{label}.base_url",
                line_of("base_url"),
            )


def check_mcp_servers(
    servers: list[Any],
    text: str,
    fail: Callable[[str, str, int | None], NoReturn],
    *,
    table: str = "mcp_servers",
    types: dict[str, Kind] = MCP_SERVER_TYPES,
) -> None:
    names: set[str] = set()
    for index, entry in enumerate(servers):
        label = f"{table}[{index + 1}]"
        table_line = _line_of(text, None, table=table, index=index) or _line_of(text, table)

        def line_of(
            key: str, index: int = index, table_line: int | None = table_line
        ) -> int | None:
            return _line_of(text, key, table=table, index=index) or table_line

        if not isinstance(entry, dict):
            fail(f"{label} must be a table, got {_type_name(entry)}", table, table_line)
        for key, value in entry.items():
            name = f"{label}.{key}"
            if key not in types:
                fail(_unknown(key, tuple(types), name), name, line_of(key))
            problem = _check_type(value, types[key], name)
            if problem:
                fail(problem, name, line_of(key))
        server = entry.get("name", "")
        if not server:
            fail(f"{label} needs a name", f"{label}.name", table_line)
        if not MCP_NAME.match(server):
            fail(
                f"{label}.name must be 1 to 32 letters, digits or '-' (its tools are "
                f"named '<name>_<tool>'), got '{server}'",
                f"{label}.name",
                line_of("name"),
            )
        if server in names:
            fail(f"two MCP servers are named '{server}'", f"{label}.name", line_of("name"))
        names.add(server)
        if bool(entry.get("command")) == bool(entry.get("url")):
            fail(
                f"{label} needs either a command (a local server) or a url (a remote one)",
                f"{label}.command",
                table_line,
            )
        if entry.get("url") and not is_url(entry["url"]):
            fail(
                f"{label}.url must start with http:// or https:// and be a valid URL, "
                f"got '{entry['url']}'",
                f"{label}.url",
                line_of("url"),
            )
        timeout = entry.get("timeout", MCP_TIMEOUT)
        if not math.isfinite(timeout) or timeout <= 0:
            fail(
                f"{label}.timeout must be more than 0 seconds, got {timeout}",
                f"{label}.timeout",
                line_of("timeout"),
            )
