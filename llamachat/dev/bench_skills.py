"""Benchmark: what one send's skill work costs with many skills installed.

``python -m llamachat.dev.bench_skills [--skills N] [--repeats R]`` writes N realistic
skills into a temporary folder, then prints, in milliseconds, the median and 95th
percentile of one send's skill work (``user_names()``/``names()``,
``parse_commands()``, ``match_mentions()``, ``load()`` of a skill whose body is
not cached yet, ``tool_schema()``), of a ``refresh()`` that finds nothing changed,
of one ``tool_message()``, and of the cold scan. `run()` returns the same figures
for the project's benchmark suite.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from llamachat import skills

_TOPICS = (
    "pdf",
    "git",
    "docker",
    "sql",
    "api",
    "review",
    "deploy",
    "test",
    "csv",
    "image",
    "k8s",
    "terraform",
    "release",
    "docs",
    "finance",
    "calendar",
    "email",
    "slides",
)
_ACTIONS = ("helper", "tools", "cli", "check", "report", "lint", "export", "guide")


def build(root: Path, n_skills: int) -> list[str]:
    """Write `n_skills` skills with realistic frontmatter and bodies under `root`."""
    names = []
    for index in range(n_skills):
        topic = _TOPICS[index % len(_TOPICS)]
        action = _ACTIONS[(index // len(_TOPICS)) % len(_ACTIONS)]
        name = f"{topic}-{action}-{index}"
        folder = root / name
        (folder / "scripts").mkdir(parents=True)
        (folder / "scripts" / "run.sh").write_text("#!/bin/sh\necho run\n")
        (folder / "reference.md").write_text(f"# {name} reference\n")
        extra = "disable-model-invocation: true\n" if index % 25 == 0 else ""
        body = "\n".join(
            f"{step}. Check the {topic} input, then run `scripts/run.sh --step {step}`; "
            f"see reference.md for the {action} options and the edge cases."
            for step in range(1, 40)
        )
        (folder / skills.SKILL_FILE).write_text(
            "---\n"
            f"name: {name}\n"
            "description: >-\n"
            f"  Work with {topic} files and services through the {action}: inspect,\n"
            f"  convert, validate and summarise them. Use when the user mentions {topic}\n"
            f"  or asks for a {action} run.\n"
            "license: MIT\n"
            "metadata:\n"
            "  author: example.org\n"
            f"{extra}"
            "---\n\n"
            f"# {name}\n\n{body}\n"
        )
        names.append(name)
    return names


def run(n_skills: int = 500, repeats: int = 200) -> dict:
    """Time one send's skill work over `n_skills` skills; every figure is in milliseconds."""
    with tempfile.TemporaryDirectory(prefix="llamachat-bench-skills-") as tmp:
        root = Path(tmp)
        names = build(root, n_skills)
        _age(root)
        cold = []
        for _ in range(max(3, min(repeats, 10))):
            started = time.perf_counter()
            skills.SkillStore(root).names()
            cold.append(_ms(started))
        store = skills.SkillStore(root)
        store.names()
        message = _message(names)
        ops: dict[str, list[float]] = {
            key: [] for key in ("names", "parse_commands", "match_mentions", "load", "tool_schema")
        }
        send = []
        for index in range(repeats):
            # A different skill each time, so a body is read rather than served
            # from the cache while repeats <= n_skills: the costly case.
            target = names[index % len(names)]
            t0 = time.perf_counter()
            store.names()
            user_names = store.user_names()
            t1 = time.perf_counter()
            text, _commanded = skills.parse_commands(message, user_names)
            t2 = time.perf_counter()
            store.match_mentions(text)
            t3 = time.perf_counter()
            store.load(target)
            t4 = time.perf_counter()
            store.tool_schema()
            t5 = time.perf_counter()
            for key, low, high in (
                ("names", t0, t1),
                ("parse_commands", t1, t2),
                ("match_mentions", t2, t3),
                ("load", t3, t4),
                ("tool_schema", t4, t5),
            ):
                ops[key].append((high - low) * 1000)
            send.append((t5 - t0) * 1000)
        skill = store.load(names[1])
        schema = store.tool_schema() or {}
        return {
            "n_skills": n_skills,
            "repeats": repeats,
            "message_chars": len(message),
            "catalog_chars": len(schema.get("function", {}).get("description", "")),
            "cold_scan_ms": _summary(cold),
            "send_ms": _summary(send),
            "ops_ms": {key: _summary(values) for key, values in ops.items()},
            "refresh_ms": _summary(_time(store.refresh, repeats)),
            "tool_message_ms": _summary(
                _time(lambda: skills.tool_message("call_1", skill), repeats)
            ),
        }


def _age(root: Path) -> None:
    # Files written a moment ago count as "racily" fresh and are re-checked on
    # every refresh for two seconds; installed skills are older than that.
    past = time.time() - 3600
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), (past, past))
        os.utime(folder, (past, past))


def _message(names: list[str]) -> str:
    """A realistic message: a /command, two mentions, prose and a code block."""
    code = "\n".join(f"    total += row[{i}] * weight  # column {i}" for i in range(20))
    return (
        f"/{names[3]} Please look at the function below. I think the {names[7]} "
        f"approach applies, and maybe {names[-1].upper()} for the export step.\n\n"
        "It should read the CSV, skip the header, and return the weighted sum; "
        "right now it returns 0 for files with a BOM. See /tmp/data.csv.\n\n"
        "```python\ndef weighted(rows, weight):\n    total = 0\n    for row in rows:\n"
        f"{code}\n    return total\n```\n\nThanks! Keep the answer short.\n"
    )


def _time(call: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(_ms(started))
    return times


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"median": round(statistics.median(ordered), 4), "p95": round(p95, 4)}


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(prog="python -m llamachat.dev.bench_skills")
    parser.add_argument("--skills", type=int, default=500, help="skills to create")
    parser.add_argument("--repeats", type=int, default=200, help="sends to time")
    args = parser.parse_args(argv)
    result = run(n_skills=args.skills, repeats=args.repeats)
    print(
        f"{result['n_skills']} skills, {result['repeats']} sends, "
        f"{result['message_chars']}-character message, "
        f"{result['catalog_chars']}-character tool description"
    )
    print(f"{'':24}{'median ms':>12}{'p95 ms':>12}")
    rows = [("one send (total)", result["send_ms"])]
    rows += [(f"  {key}()", value) for key, value in result["ops_ms"].items()]
    rows += [
        ("refresh(), no change", result["refresh_ms"]),
        ("tool_message()", result["tool_message_ms"]),
        ("cold scan", result["cold_scan_ms"]),
    ]
    for label, figures in rows:
        print(f"{label:24}{figures['median']:>12.3f}{figures['p95']:>12.3f}")


if __name__ == "__main__":
    main()
