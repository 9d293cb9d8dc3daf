"""Reading config.toml into a frozen `Config` (with its providers and MCP servers)."""

from __future__ import annotations

import json
import logging
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import platformdirs

from llamachat import outside
from llamachat.config.checks import ConfigError, check_data, check_mcp_servers, resolve_path
from llamachat.config.definitions import (
    APP_NAME,
    DEFAULTS,
    KEY,
    MCP_SERVER_TYPES,
    MCP_TIMEOUT,
    STR_TABLE,
)

log = logging.getLogger(__name__)


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


def _default(name: str) -> Any:
    """The default of key `name`, for a Config field typed as its resolved value."""
    return KEY[name].default


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
    quick_ask_shortcut: str = _default("quick_ask_shortcut")
    autostart: bool = _default("autostart")
    search_enabled: bool = _default("search_enabled")
    search_url: str = _default("search_url")
    max_searches: int = _default("max_searches")
    embedding_model: str = _default("embedding_model")
    reply_reserve: int = _default("reply_reserve")
    context_overflow: str = _default("context_overflow")
    compact_model: str = _default("compact_model")
    compact_keep: int = _default("compact_keep")
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
    rpc_workers: tuple[str, ...] = ()
    rpc_split: tuple[float, ...] = ()
    idle_timeout: float = _default("idle_timeout")
    font_size: int = _default("font_size")
    sleep_idle_seconds: int = _default("sleep_idle_seconds")
    server_grace: int = _default("server_grace")
    warm_cache: bool = _default("warm_cache")
    warm_cache_providers: bool = _default("warm_cache_providers")
    slot_cache_mb: int = _default("slot_cache_mb")
    memory_enabled: bool = _default("memory_enabled")
    memory_tokens: int = _default("memory_tokens")
    dictation_sends: bool = _default("dictation_sends")
    memory_providers: tuple[str, ...] = ()
    quit_while_streaming: str = _default("quit_while_streaming")
    voice_model: Path | None = None
    read_aloud_speed: float = _default("read_aloud_speed")
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


MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""The largest config.toml or mcp.json read (a FIFO or /dev/zero named there is refused)."""

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)")


def load(path: Path | None = None) -> Config:
    """Read and validate the configuration; a missing file gives the defaults."""
    path = Path(path) if path is not None else default_path()
    try:
        raw, _more = outside.read_bytes(path, MAX_CONFIG_BYTES)
    except outside.Unreadable as exc:
        if not os.path.lexists(path):
            log.info("no configuration at %s, using the defaults", path)
            return _build({}, path)
        raise ConfigError(f"cannot read the configuration: {exc.why}", path=path) from None
    except outside.NotRegular as exc:
        what = "it is a folder" if "folder" in exc.reason else f"it {exc.reason}"
        raise ConfigError(f"cannot read the configuration: {what}", path=path) from None
    except outside.Refused as exc:
        raise ConfigError(f"cannot read the configuration: it {exc.reason}", path=path) from None
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
    check_data(data, text, path)
    return _build(data, path)


def _build(data: dict[str, Any], path: Path) -> Config:
    v: dict[str, Any] = {**DEFAULTS, **data}
    data_dir = _data_dir()

    def folder(key: str, default: Path) -> Path:
        return resolve_path(v[key], path) if v[key] else default

    return Config(
        path=path,
        router_url=v["router_url"].rstrip("/"),
        router_api_key_env=v["router_api_key_env"],
        default_model=v["default_model"],
        oneshot_model=v["oneshot_model"],
        quick_ask_shortcut=v["quick_ask_shortcut"],
        autostart=v["autostart"],
        search_enabled=v["search_enabled"],
        search_url=v["search_url"].rstrip("/"),
        max_searches=v["max_searches"],
        embedding_model=v["embedding_model"],
        reply_reserve=v["reply_reserve"],
        context_overflow=v["context_overflow"],
        compact_model=v["compact_model"],
        compact_keep=v["compact_keep"],
        skills_catalog_share=float(v["skills_catalog_share"]),
        skills_enabled=v["skills_enabled"],
        skills_dir=folder("skills_dir", Path(str(DEFAULTS["skills_dir"])).expanduser()),
        skills_dirs=tuple(resolve_path(p, path) for p in v["skills_dirs"] if p),
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
        models_preset=resolve_path(v["models_preset"], path) if v["models_preset"] else None,
        server_args=tuple(v["server_args"]),
        rpc_workers=tuple(v["rpc_workers"]),
        rpc_split=tuple(float(share) for share in v["rpc_split"]),
        idle_timeout=float(v["idle_timeout"]),
        font_size=v["font_size"],
        sleep_idle_seconds=v["sleep_idle_seconds"],
        server_grace=v["server_grace"],
        warm_cache=v["warm_cache"],
        warm_cache_providers=v["warm_cache_providers"],
        slot_cache_mb=v["slot_cache_mb"],
        memory_enabled=v["memory_enabled"],
        memory_tokens=v["memory_tokens"],
        dictation_sends=v["dictation_sends"],
        memory_providers=tuple(name.strip() for name in v["memory_providers"] if name.strip()),
        quit_while_streaming=v["quit_while_streaming"],
        voice_model=resolve_path(v["voice_model"], path) if v["voice_model"] else None,
        read_aloud_speed=float(v["read_aloud_speed"]),
        model_params={k: dict(t) for k, t in v["model_params"].items()},
        preset_params={k: dict(t) for k, t in v["preset_params"].items()},
        mcp_servers=_mcp_servers(v, path),
        mcp_config=resolve_path(v["mcp_config"], path) if v["mcp_config"] else None,
        mcp_allowed_tools=tuple(v["mcp_allowed_tools"]),
        mcp_disabled_tools=tuple(v["mcp_disabled_tools"]),
    )


def _mcp_servers(v: dict[str, Any], path: Path) -> tuple[McpServerConfig, ...]:
    """The [[mcp_servers]] tables, then those of mcp_config that config.toml does not name."""
    servers = [_mcp_server(entry, path) for entry in v["mcp_servers"]]
    if v["mcp_config"]:
        json_path = resolve_path(v["mcp_config"], path)
        if not json_path.exists():
            # Another program's file, which may come later: not a reason to refuse to start.
            log.warning("mcp_config: %s does not exist; no servers read from it", json_path)
            return tuple(servers)
        tables, _notes = mcp_json_servers(json_path)
        names = {server.name for server in servers}
        servers.extend(_mcp_server(t, json_path) for t in tables if t["name"] not in names)
    return tuple(servers)


def _mcp_server(entry: dict[str, Any], path: Path) -> McpServerConfig:
    return McpServerConfig(
        name=entry["name"],
        command=os.path.expanduser(entry.get("command", "")),
        args=tuple(entry.get("args", ())),
        env=tuple(entry.get("env", {}).items()),
        env_vars=tuple(entry.get("env_vars", {}).items()),
        cwd=resolve_path(entry["cwd"], path) if entry.get("cwd") else None,
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
        text = outside.read_text(path, MAX_CONFIG_BYTES, encoding="utf-8-sig")
    except outside.NotText as exc:
        raise ConfigError(f"the MCP servers file {exc.reason}", path=path) from None
    except outside.Unreadable as exc:
        raise ConfigError(f"cannot read the MCP servers file: {exc.why}", path=path) from None
    except outside.Refused as exc:
        raise ConfigError(f"cannot read the MCP servers file: it {exc.reason}", path=path) from None
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

    check_mcp_servers(tables, "", fail, types={**MCP_SERVER_TYPES, "headers": STR_TABLE})
    return tables, notes
