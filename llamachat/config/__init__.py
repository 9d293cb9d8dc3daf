"""The user's configuration: one TOML file, read once at start.

`load()` returns a frozen `Config`. A missing file means the defaults; every other
problem raises one exception, `ConfigError`, naming the file, the line and the key
so the CLI can print it and the GUI can show it, never a traceback:

    ConfigError   unreadable file, invalid TOML, unknown key, wrong type, bad value

The package, by responsibility:

    keys     KEYS: each key described once (default, type, check, comment, example),
             and DEFAULT_TEXT, the commented default file derived from it
    checks   the checks of a parsed file against KEYS; ConfigError
    load     load(): config.toml -> Config, ProviderConfig, McpServerConfig; mcp.json servers
    file     the one writer of config.toml: update_file, append_tables, write_default

Adding a key means one `Key(...)` entry in definitions.py, a Config field, and its
resolution in `load._build()`. The repository's `config.example.toml` is
`DEFAULT_TEXT` byte for byte (a test holds them together), so the documentation a
user reads is the file they get.

Everything public is importable from here (``from llamachat.config import Config``).
"""

from llamachat.config.checks import ConfigError
from llamachat.config.definitions import (
    APP_NAME,
    DEFAULT_TEXT,
    DEFAULTS,
    KEY,
    KEYS,
    MCP_SERVER_KEYS,
    MCP_TIMEOUT,
    PROVIDER_KEYS,
    THEMES,
    Key,
    Kind,
    worker_address_problem,
)
from llamachat.config.load import (
    Config,
    McpServerConfig,
    ProviderConfig,
    default_path,
    load,
    mcp_json_servers,
)
from llamachat.config.writer import append_tables, update_file, update_text, write_default

__all__ = [
    "APP_NAME",
    "DEFAULTS",
    "DEFAULT_TEXT",
    "KEY",
    "KEYS",
    "MCP_SERVER_KEYS",
    "MCP_TIMEOUT",
    "PROVIDER_KEYS",
    "THEMES",
    "Config",
    "ConfigError",
    "Key",
    "Kind",
    "McpServerConfig",
    "ProviderConfig",
    "append_tables",
    "default_path",
    "load",
    "mcp_json_servers",
    "update_file",
    "update_text",
    "worker_address_problem",
    "write_default",
]
