"""The router's models folder and preset file: adding GGUF files, per-model load options, re-scans.

`add_model_file` links (or copies) a GGUF, every part of a split one, into the models
folder; `set_preset_context` / `preset_options` write and read a model's load options in
llama.cpp's models preset file; `reload_models` makes a running router read both again.
Raises `errors.ModelFileError` for a file that cannot go in, `errors.RouterUnavailable`
when the router cannot be reached, and `errors.ManagedServerError` for the rest.
"""

from __future__ import annotations

import configparser
import logging
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

import httpx
import platformdirs

from llamachat import outside
from llamachat.api_keys import key_problem, mask_secret
from llamachat.errors import ManagedServerError, ModelFileError, RouterUnavailable
from llamachat.router.lock import is_loopback, managed_key

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"

_SHARD_RE = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def reload_models(url: str, *, api_key: str | None = None) -> None:
    """Make the router re-scan its models folder and preset (``GET /models?reload=1``)."""
    api_key = api_key or managed_key(url)
    problem = key_problem(api_key)
    if problem:
        raise ManagedServerError(problem)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        # A proxy from the environment must not stand between us and a server on this machine.
        response = httpx.get(
            f"{url.rstrip('/')}/models",
            params={"reload": "1"},
            headers=headers,
            timeout=30.0,
            trust_env=not is_loopback(url),
        )
    except httpx.HTTPError as exc:
        raise RouterUnavailable(
            mask_secret(f"Could not reach the router at {url}: {exc}", api_key)
        ) from None
    if response.status_code >= 400:
        raise ManagedServerError(
            mask_secret(
                f"The router at {url} refused to reload its models "
                f"(HTTP {response.status_code}): {response.text[:300]}",
                api_key,
            )
        )


# The per-model load options Settings > Model options writes into the preset file.
LOAD_OPTIONS = ("ctx-size", "n-gpu-layers", "load-on-startup")


class _CaseKept(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # llama.cpp's keys keep their case


def set_preset_context(
    preset: Path,
    model: str,
    ctx_size: int | None,
    *,
    options: Mapping[str, str | None] | None = None,
) -> None:
    """Write `ctx-size = ctx_size` into `model`'s section of a llama.cpp models preset file,
    with any other load `options` (e.g. `n-gpu-layers`, `load-on-startup`).

    A ctx_size of None or 0, or an option of None or '', removes that key (the model's own
    default applies). The rest of the file is kept as it is; a missing section (or file)
    is added. Raises ManagedServerError naming the file when it cannot be written.
    """
    parser = _CaseKept(interpolation=None)
    path = Path(preset).expanduser()
    wanted: dict[str, str | None] = {"ctx-size": str(int(ctx_size)) if ctx_size else None}
    wanted.update(options or {})
    try:
        if path.exists():
            parser.read(path, encoding="utf-8")
        if not parser.has_section(model):
            parser.add_section(model)
        for key, value in wanted.items():
            if value:
                parser.set(model, key, value)
            else:
                parser.remove_option(model, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            parser.write(handle)
    except (OSError, configparser.Error) as exc:
        raise ManagedServerError(f"Could not write the models preset {path}: {exc}") from None


def preset_options(preset: Path, model: str) -> dict[str, str]:
    """The load options `model`'s section of a preset file sets ({} when none or unreadable)."""
    parser = _CaseKept(interpolation=None)
    try:
        parser.read(Path(preset).expanduser(), encoding="utf-8")
    except (OSError, configparser.Error) as exc:
        log.info("cannot read the models preset %s: %s", preset, exc)
        return {}
    return dict(parser.items(model)) if parser.has_section(model) else {}


def default_preset_path() -> Path:
    """The models preset llamachat's server reads when the config names none."""
    return Path(platformdirs.user_data_dir("llamachat", appauthor=False)) / "models-preset.ini"


def _check_gguf(path: Path) -> None:
    """ModelFileError unless `path` is a regular file starting with the GGUF magic."""
    try:
        head, _more = outside.read_bytes(path, len(GGUF_MAGIC), cut=True)
    except outside.Refused as exc:
        raise ModelFileError(f"{exc}.") from None
    if head != GGUF_MAGIC:
        raise ModelFileError(f"{outside.shown(path.name)} is not a GGUF model file.")


def add_model_file(src: Path, models_dir: Path, *, link: bool = True) -> Path:
    """Put a GGUF into the models folder (symlinked, or copied) and return its path there.

    A split model (``name-00001-of-00003.gguf``) brings all its parts along.
    """
    src = Path(src).expanduser()
    _check_gguf(src)
    models_dir.mkdir(parents=True, exist_ok=True)
    shard = _SHARD_RE.match(src.name)
    if shard:
        count = int(shard["count"])
        parts = [
            src.with_name(f"{shard['stem']}-{i:05d}-of-{count:05d}.gguf")
            for i in range(1, count + 1)
        ]
        missing = [p.name for p in parts if not p.is_file()]
        if missing:
            raise ModelFileError(
                f"{src.name} is one part of a split model; missing: " + ", ".join(missing)
            )
    else:
        parts = [src]
    placed = [_place(part, models_dir / part.name, link=link) for part in parts]
    return placed[parts.index(src)]


def _place(src: Path, dest: Path, *, link: bool) -> Path:
    if dest.exists() or dest.is_symlink():
        if dest.exists() and os.path.samefile(dest, src):
            return dest
        raise ModelFileError(f"The models folder already has a different {dest.name}.")
    if link:
        try:
            dest.symlink_to(src.resolve())
            return dest
        except OSError as exc:
            log.info("cannot symlink %s (%s); copying it instead", src, exc)
    partial = dest.with_name(dest.name + ".part")
    shutil.copyfile(src, partial)
    partial.replace(dest)
    return dest
