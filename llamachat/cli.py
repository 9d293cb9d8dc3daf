"""One-shot questions: `llamachat ask --print` in the terminal.

    llamachat ask --print "question"            the answer on stdout, reasoning on stderr
    git diff | llamachat ask --print "review"   stdin is appended in a fenced block

Qt-free: the terminal path never imports PySide6, so it runs without a display.
Only the terminal's part is here (arguments, piped stdin, printing, exit codes): the
request is built by `turn`, as the windows build theirs.

A one-shot question is a session of mode "oneshot" in the history (searchable like
any chat). Skills it names (`/name`, or a mention as `SkillStore.mentions` rules; a
one-word mention is only pointed out on stderr) and skills the model loads apply to
that one reply only: they go into that request and nowhere else,
and nothing is written to the session's `skills`. While memory is on, the question
carries the memories kept everywhere, as a chat's system prompt does (it has no
project); the model is never offered `remember` (one question: nothing to undo).

Exit codes of `run()`: 0 answered, 1 the question could not be answered (no router,
no model, a server or stream error; the reason is on stderr), 2 nothing to ask,
130 interrupted.

Errors: `AskError(Exception)`, a question that cannot be asked (nothing to ask, no
model to answer); str() is a sentence for the user. Failures of the router and of
the managed server keep their own types (`backend.BackendError`, `server.ManagedServerError`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sqlite3
import stat
import sys
import time
from collections.abc import Callable
from typing import TextIO

from llamachat import compact, context, prompts, turn
from llamachat.config import Config
from llamachat.history import memories
from llamachat.history.store import History, HistoryError
from llamachat.outside import say, visible_controls
from llamachat.router import client as backend
from llamachat.router import providers, rpc_workers, server
from llamachat.router.models import Models
from llamachat.tools import mcp

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

SAVE_INTERVAL_S = 1.0


class AskError(Exception):
    """A question that cannot be asked; str() says why, for the user."""


def with_input(question: str, piped: str) -> str:
    """The question, then the piped text in a fenced block (either may be empty)."""
    if not piped:
        return question
    block = turn.fence(piped)
    return f"{question}\n\n{block}" if question.strip() else block


def stdin_is_piped(stream: TextIO | None = None) -> bool:
    """Whether stdin is a pipe or a file (not a terminal, not /dev/null or a socket).

    Only those are read: a launcher may hand a GUI process a socket or a pipe it
    never closes, and reading that would hang.
    """
    stream = stream if stream is not None else sys.stdin
    if stream is None:
        return False
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def read_piped(stream: TextIO | None = None) -> str:
    """The text piped into stdin, or '' when stdin is a terminal or nothing."""
    stream = stream if stream is not None else sys.stdin
    if not stdin_is_piped(stream):
        return ""
    try:
        return stream.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise AskError(f"cannot read stdin: {exc}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `ask` subcommand's arguments."""
    parser.add_argument("question", nargs="*", help="the question (words are joined by spaces)")
    parser.add_argument(
        "--print",
        dest="print_answer",
        action="store_true",
        help="answer on stdout without any window (stdin, when piped, is appended)",
    )
    parser.add_argument(
        "--model",
        default="",
        help="the model to ask (default: oneshot_model, else default_model, else a loaded one);"
        " the quick window keeps using it",
    )
    parser.add_argument(
        "--voice",
        action="store_true",
        help="start the quick window in voice mode: it listens, sends when you pause and"
        " reads the answer aloud (needs pip install 'llamachat[voice]')",
    )
    parser.add_argument(
        "--no-reasoning", action="store_true", help="hide the model's reasoning (else on stderr)"
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="write the model's text as sent, control characters too (else, to a terminal,"
        " they are shown as visible symbols)",
    )
    parser.add_argument(
        "--overflow",
        choices=(compact.COMPACT, compact.TRIM, compact.REFUSE),
        default=None,
        help="a question too long for the model's context: summarize its input in pieces,"
        " leave out the input's first lines, or refuse (default: context_overflow; 'ask'"
        " refuses, nobody can be asked here)",
    )
    parser.add_argument(
        "--allow-tools",
        action="store_true",
        help="let the model run MCP tools without asking (else only the always-allowed ones)",
    )


class _Record:
    """The one-shot exchange in the history; a failing history only costs a warning."""

    def __init__(self, cfg: Config, err: TextIO) -> None:
        self._err = err
        self._history: History | None = None
        self._reply_id: int | None = None
        self._saved_at = 0.0
        try:
            self._history = History(cfg.history_path)
        except (HistoryError, sqlite3.Error, OSError) as exc:
            self._give_up(exc)

    def _guard(self, action: Callable[[], object]) -> None:
        try:
            action()
        except (HistoryError, sqlite3.Error, OSError) as exc:
            self._give_up(exc)

    def _give_up(self, exc: Exception) -> None:
        say(f"this exchange is not saved in the history: {exc}", self._err)
        self.close()

    def start(self, model: str, text: str) -> None:
        """Save the question and an empty reply marked streaming."""
        history = self._history
        if history is None:
            return

        def save() -> None:
            session = history.create_session("oneshot", model, prompt_name=prompts.DEFAULT_NAME)
            history.add_message(session, "user", text, model=model)
            self._reply_id = history.add_message(
                session, "assistant", "", model=model, status="streaming"
            )

        self._guard(save)

    def update(
        self, content: list[str], reasoning: list[str], *, final: dict | None = None
    ) -> None:
        """Save the reply so far (at most once a second), or for good with `final` fields."""
        history, reply_id = self._history, self._reply_id
        if history is None or reply_id is None:
            return
        now = time.monotonic()
        if final is None and now - self._saved_at < SAVE_INTERVAL_S:
            return
        self._saved_at = now
        fields = final or {}
        self._guard(
            lambda: history.update_message(
                reply_id, content="".join(content), reasoning="".join(reasoning), **fields
            )
        )

    def close(self) -> None:
        """Close the history."""
        history, self._history = self._history, None
        if history is not None:
            with contextlib.suppress(HistoryError, sqlite3.Error):
                history.close()


def run(
    args: argparse.Namespace,
    cfg: Config,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Answer `args.question` (plus piped stdin) on stdout; returns the exit code."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        typed = " ".join(args.question)
        store = turn.skill_store(cfg)
        question = turn.parse_question(typed, store, always=cfg.skill_mentions)
        if question.suggested:
            # A one-word mention may mean the word, not the skill: say how to load it.
            names = ", ".join(question.suggested)
            loads = " ".join(f"/{name}" for name in question.suggested)
            say(f"mentioned, not loaded: skill {names} (add {loads} to load it)", err)
        piped = read_piped(stdin)
        text = with_input(question.text, piped)
        if not text.strip():
            if question.commands:
                raise AskError(
                    f"Only a skill was named ({', '.join(question.commands)}): "
                    "ask a question with it."
                )
            raise AskError('Nothing to ask: give a question, e.g. llamachat ask --print "why?"')
    except AskError as exc:
        say(exc, err)
        return EXIT_USAGE

    managed = None
    registry: providers.Registry | None = None
    hub: mcp.Hub | None = None
    try:
        if cfg.manage_server:
            # Starts llamachat's own server when nothing answers (stopped again at exit),
            # or finds the one a running llamachat manages.
            url, managed = server.ensure_router(cfg)
            if url.rstrip("/") != cfg.router_url.rstrip("/"):
                cfg = dataclasses.replace(cfg, router_url=url)
        registry = providers.Registry(cfg)
        model = args.model or turn.configured_model(cfg)
        if not model:
            listed = registry.models()
            if not listed and providers.ROUTER in registry.errors:
                raise registry.errors[providers.ROUTER]
            model = turn.pick_model(cfg, listed)
        if not model:
            raise AskError(turn.no_model_message(cfg))
        client, wire_model = registry.client_for(model)
        n_ctx, _trained = Models(client).context_limits(wire_model)
        # The MCP servers start first: their tools are part of the request, as built.
        hub, extra = _mcp_tools(cfg, args, err)
        kept = _memories(cfg, model, router=wire_model == model)

        def build(text: str) -> turn.Turn:
            return turn.oneshot_turn(
                cfg,
                model=model,
                text=text,
                names=question.skills,
                store=store,
                n_ctx=n_ctx,
                extra_tools=extra,
                router=wire_model == model,
                memories=kept,
            )

        request = build(text)
        tokenizer = context.Tokenizer(client, wire_model)
        overflow = context.check(request, tokenizer, n_ctx, cfg.reply_reserve, exact=True)
        policy = getattr(args, "overflow", None) or cfg.context_overflow
        if overflow is not None and policy in (compact.COMPACT, compact.TRIM):
            fitted = _fit(policy, overflow, question.text, piped, client, tokenizer, err)
            if fitted is not None:
                text, request = fitted, build(fitted)
                overflow = context.check(request, tokenizer, n_ctx, cfg.reply_reserve, exact=True)
        if overflow is not None:
            say(f"{overflow.message()}\n{overflow.details()}", err)
            if policy not in (compact.COMPACT, compact.TRIM):
                say("--overflow compact or trim makes it fit (the input summarized or cut)", err)
            return EXIT_USAGE
        return _stream(registry, request, text, cfg, args, out, err)
    except (AskError, backend.BackendError, server.ManagedServerError) as exc:
        say(getattr(exc, "message", None) or exc, err)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if hub is not None:
            hub.close()
        if registry is not None:
            registry.close()
        if managed is not None:
            managed.stop()


def _memories(cfg: Config, model: str, *, router: bool) -> tuple[memories.MemoryRow, ...]:
    """The memories kept everywhere that a question to `model` carries, as a chat's would
    (none while memory is off, or when the history cannot be read: the question goes on)."""
    if not cfg.memory_enabled or not memories.sent_to(
        model, router=router, providers=cfg.memory_providers
    ):
        return ()
    try:
        history = History(cfg.history_path)
        try:
            rows = history.memories.listed(project_id=None)
        finally:
            history.close()
    except (HistoryError, sqlite3.Error, OSError) as exc:
        log.warning("the memories could not be read: %s", exc)
        return ()
    return memories.chosen(rows, cfg.memory_tokens).kept


def _fit(
    policy: str,
    overflow: context.Overflow,
    typed: str,
    piped: str,
    client: backend.Client,
    tokenizer: context.Tokenizer,
    err: TextIO,
) -> str | None:
    """The question made to fit by `policy`: its input (piped, else the question itself)
    summarized in pieces with the question as the focus, or without its first lines;
    None when it cannot be. Says on stderr what was done.

    `tokenizer` counted the question: its estimates are calibrated on it, so a line's
    cost is known without a request per line.
    """
    material = piped or typed
    # The question typed is the focus of its input's summary; a long question is its own.
    focus = typed if piped else ""
    if policy == compact.TRIM:
        trimmed = compact.trim_text(material, overflow.excess, tokenizer.quick)
        if trimmed is None:
            # Trimming leaves out whole lines from the top: one long line has none to spare.
            lines = len(material.splitlines())
            say(
                "--overflow trim leaves out the input's first lines, and "
                + ("its one line is" if lines < 2 else f"its {lines:,} lines are")
                + " too long to make it fit: --overflow compact summarizes it instead",
                err,
            )
            return None
        material, lines = trimmed
        say(f"{lines:,} earlier line{'' if lines == 1 else 's'} of the input not sent", err)
        return with_input(typed, material) if piped else material
    try:
        budget = compact.Budget.for_context(
            overflow.n_ctx, tokenizer.quick(compact.instructions(focus, text=True))
        )
        summary = compact.summarize(
            material.splitlines(keepends=True),
            compact.ask_model(client, tokenizer.model),
            budget=budget,
            cost=tokenizer.quick,
            focus=focus,
            text=True,
            on_piece=lambda n, total: say(f"compacting the input: part {n} of {total}", err),
        )
    except (compact.CompactError, backend.BackendError) as exc:
        say(f"the input could not be compacted: {getattr(exc, 'message', None) or exc}", err)
        return None
    note = f"(The input, {len(material):,} characters, summarized to fit the context.)"
    return with_input(typed, f"{note}\n{summary}") if piped else f"{note}\n{summary}"


def _mcp_tools(
    cfg: Config, args: argparse.Namespace, err: TextIO
) -> tuple[mcp.Hub | None, list[mcp.McpTool]]:
    """The MCP tools `ask --print` offers: the hub (to close) and its tools.

    Nobody can be asked in a terminal pipe: a tool runs with --allow-tools or when it
    is always allowed in the config; any other call is denied, and said on stderr.
    """
    if not any(server.enabled for server in cfg.mcp_servers):
        return None, []

    def consent(name: str, _arguments: str) -> str:
        if getattr(args, "allow_tools", False) or name in cfg.mcp_allowed_tools:
            return mcp.ALLOW_ONCE
        say(f"not run: {name} (pass --allow-tools to let the model run MCP tools)", err)
        return mcp.DENY

    hub = mcp.Hub(cfg.mcp_servers, secrets=mcp.config_secrets(cfg))
    return hub, hub.turn_tools(consent=consent, disabled=cfg.mcp_disabled_tools)


def _stream(
    registry: providers.Registry,
    request: turn.Turn,
    text: str,
    cfg: Config,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    model = request.model
    client, wire_model = registry.client_for(model)
    record = _Record(cfg, err)
    record.start(model, text)
    content: list[str] = []
    reasoning: list[str] = []
    stats: dict = {}
    status, error, code = "complete", "", EXIT_OK
    # In a terminal the reasoning gets a line of its own. The answer always ends with a
    # line break, as a command's output does (a shell prompt or `>> file` follows it).
    err_tty = _isatty(err)
    raw = getattr(args, "raw", False)
    answer_text = visible_controls if _isatty(out) and not raw else str
    reasoning_text = visible_controls if err_tty and not raw else str
    # On llama.cpp's router the reply's stream is kept: a dropped connection reads on.
    conversation = backend.new_conversation() if client is registry.router() else None
    stream = client.stream_chat(request, model=wire_model, conversation=conversation)
    try:
        for kind, value in stream:
            if kind == "content":
                if reasoning and not content and err_tty and not args.no_reasoning:
                    err.write("\n\n")
                content.append(str(value))
                out.write(answer_text(str(value)))
                out.flush()
            elif kind == "reasoning":
                reasoning.append(str(value))
                if not args.no_reasoning:
                    err.write(reasoning_text(str(value)))
                    err.flush()
            elif kind == "stats" and isinstance(value, dict):
                stats = value
            elif kind != "resume":
                log.info("%s: %s", kind, value)
            record.update(content, reasoning)
    except backend.BackendError as exc:
        # Named when a worker of the server this command started was lost meanwhile.
        error = rpc_workers.explain(client.base_url, exc.message or str(exc))
        status, code = "error", EXIT_FAILED
    except KeyboardInterrupt:
        status, code = "stopped", EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop generating, and keep Python from failing
        # again when it flushes stdout at exit.
        status, code = "stopped", EXIT_FAILED
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    finally:
        stream.close()
        record.update(
            content,
            reasoning,
            final={
                "status": status,
                "error": error,
                "usage": stats.get("usage") or {},
                "timings": stats.get("timings") or {},
            },
        )
        record.close()
    answer = "".join(content)
    if answer and not answer.endswith("\n"):
        with contextlib.suppress(OSError, ValueError):
            out.write("\n")
            out.flush()
    if error:
        say(error, err)
    return code


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False
