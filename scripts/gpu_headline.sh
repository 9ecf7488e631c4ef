#!/usr/bin/env bash
# The first article's headline numbers on real GPU compute, as one prepared command:
# `harnesscheck bench headline` (replay/benchmarks/headline.py) run from this checkout without
# installing it, on a machine with a CUDA GPU, PyTorch and transformers and nothing else reachable.
# docs/benchmarks.md ("Headline on GPU") says what it measures and how to read it.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu_headline.sh [--cpu-small] [--out DIR] [--wheels DIR] [--check] [BENCH-HEADLINE-OPTION ...]
       scripts/gpu_headline.sh --fetch-wheels DIR

Makes a random-initialised Qwen3-1.7B-shaped model (1.4B parameters, bfloat16) offline, serves it with
the transformers engine (real forward passes, real KV prefix cache, on the GPU), runs `bench preamble
--system-tokens 52000` (stable / header / stripped) and `bench history` (kept / rewritten) against it,
and writes under DIR: bench-preamble.json/.png, bench-history.json/.png, summary.json, summary.md (the
ratios header/stable, stripped/stable, rewritten/kept with 95% intervals beside the article's,
`timing: real-compute`, the GPU's name, the model's shape, the date) and headline.log. Sized for about
five minutes on one H200 (the first run there will tell).

  --cpu-small        the tiny model and a few thousand tokens, on a CPU (about a minute; the test suite
                     runs this: tests/engines/test_gpu_headline.py)
  --out DIR          output folder (default: $HC_OUT, else harnesscheck-results/headline)
  --wheels DIR       install the wheels in DIR first (pip --no-index --no-deps --target, nothing fetched):
                     the kit's dependencies a GPU image lacks (see --fetch-wheels)
  --check            set up and check the imports, the GPU and the model shape, then stop
  --fetch-wheels DIR on a machine that reaches the package registry: download into DIR the wheels the
                     CUDA image lacks (starlette, uvicorn, httptools, orjson, zstandard, jsonschema and
                     its three needs; CPython $HC_WHEEL_PYTHON, default 3.12; about 7 MB), then stop
  -h, --help         this text
Any other option goes to `harnesscheck bench headline` (its --help lists them: --system-tokens,
--sessions, --history-sessions, --turn-tokens, --model-preset, --layers, --engine-option, ...).

Size knobs from the environment (each the bench headline option of the same name):
  HC_SYSTEM_TOKENS (52000)  HC_SESSIONS (8)  HC_HISTORY_SESSIONS (5)  HC_HISTORY_SYSTEM_TOKENS (52000)
  HC_TURN_TOKENS (500)  HC_MODEL_PRESET (qwen3-1.7b)  HC_LAYERS  HC_MODEL_DIR  HC_DEVICE (auto)
  HC_ENGINE_OPTIONS ("KEY=VALUE ...")  HC_PYTHON (python3)  HC_OUT
The gate needs at least 4 sessions per arm (docs/gate.md).

On a lent GPU machine (device tool, nothing reachable from it), from this repo's root:
  here:  echo /.whl/ >> .git/info/exclude; bash scripts/gpu_headline.sh --fetch-wheels .whl
  there: bash scripts/gpu_headline.sh --wheels .whl --out "$OUT/headline"     (carry: [".whl"])
Exit status: 0 measured, 2 a missing module, no GPU for the full size, or a bad option; else the
benchmark's own.
EOF
}

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${HC_PYTHON:-python3}"
OUT_DIR="${HC_OUT:-$REPO/harnesscheck-results/headline}"
SIZE=full
WHEELS="${HC_WHEELS:-}"
CHECK_ONLY=0
FETCH=""
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --cpu-small) SIZE=small ;;
    --out) OUT_DIR="${2:?--out needs a folder}"; shift ;;
    --out=*) OUT_DIR="${1#--out=}" ;;
    --wheels) WHEELS="${2:?--wheels needs a folder}"; shift ;;
    --wheels=*) WHEELS="${1#--wheels=}" ;;
    --check) CHECK_ONLY=1 ;;
    --fetch-wheels) FETCH="${2:?--fetch-wheels needs a folder}"; shift ;;
    --fetch-wheels=*) FETCH="${1#--fetch-wheels=}" ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done

# The wheels of what the kit imports on this path and the CUDA image lacks (measured: the top-level
# modules of the bench and server processes of a --cpu-small run, against the image's package list in
# the device library's KINDS.md). Versions: those installed beside $PY, where it has them.
MISSING_ON_IMAGE="starlette uvicorn httptools orjson zstandard jsonschema jsonschema-specifications referencing rpds-py"
if [ -n "$FETCH" ]; then
  mkdir -p "$FETCH"
  pins=$("$PY" - $MISSING_ON_IMAGE <<'PYEOF'
import sys
from importlib import metadata
out = []
for name in sys.argv[1:]:
    try:
        out.append(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        out.append(name)
print(" ".join(out))
PYEOF
)
  # shellcheck disable=SC2086
  "$PY" -m pip download --no-deps --only-binary=:all: --python-version "${HC_WHEEL_PYTHON:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$FETCH" $pins
  du -sh "$FETCH"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/hc-headline.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# 1. harnesscheck.* from this checkout, installing nothing: pyproject's package-dir laid out as links
#    (harnesscheck/ holds the base package's files and one link per mapped folder: conformance, replay, ...).
"$PY" - "$REPO" "$WORK/pypath" <<'PYEOF'
import os
import sys
import tomllib

repo, dest = sys.argv[1:]
with open(os.path.join(repo, "pyproject.toml"), "rb") as f:
    mapping = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
root = os.path.join(dest, "harnesscheck")
os.makedirs(root)
base = os.path.join(repo, mapping["harnesscheck"])
for entry in os.listdir(base):
    if entry != "__pycache__":
        os.symlink(os.path.join(base, entry), os.path.join(root, entry))
for name, folder in mapping.items():
    if name == "harnesscheck":
        continue
    parent, _, leaf = name.rpartition(".")
    if parent != "harnesscheck":
        sys.exit(f"gpu_headline: package-dir entry {name!r} is not harnesscheck.<name>; extend this script")
    os.symlink(os.path.join(repo, folder), os.path.join(root, leaf))
PYEOF
export PYTHONPATH="$WORK/pypath${PYTHONPATH:+:$PYTHONPATH}"
# Never the working directory first on sys.path (here and in the servers the benchmark starts): the
# repo root's harnesscheck/ folder is the base package alone, without the mapped subpackages.
export PYTHONSAFEPATH=1

# 2. Carried wheels, if any (nothing is fetched).
if [ -n "$WHEELS" ]; then
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  shopt -u nullglob
  if [ ${#wheels[@]} -eq 0 ]; then
    echo "gpu_headline: --wheels $WHEELS holds no .whl file" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
    "${wheels[@]}"
  export PYTHONPATH="$WORK/pypath:$WORK/site${PYTHONPATH#"$WORK/pypath"}"
fi

# 3. What this path imports; the GPU; the versions. One line each, exit 2 with what is missing.
LOG=/dev/null
if [ "$CHECK_ONLY" = 0 ]; then
  mkdir -p "$OUT_DIR"
  LOG="$OUT_DIR/headline.log"
  : >"$LOG"
fi
"$PY" - "$SIZE" "$WORK/pypath" > >(tee -a "$LOG") 2> >(tee -a "$LOG" >&2) <<'PYEOF'
import importlib
import os
import sys

size, pypath = sys.argv[1:]
needed = ["harnesscheck", "torch", "transformers", "safetensors", "tokenizers", "jinja2", "yaml", "numpy",
          "scipy", "matplotlib", "httpx", "rich", "uvloop", "starlette", "uvicorn", "httptools", "orjson",
          "zstandard", "jsonschema"]
missing = []
for name in needed:
    try:
        importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - any failure to import is a missing module here
        missing.append(f"{name} ({type(error).__name__}: {error})")
if missing:
    print("gpu_headline: cannot import: " + "; ".join(missing), file=sys.stderr)
    print("gpu_headline: on a machine with the package registry run `bash scripts/gpu_headline.sh "
          "--fetch-wheels .whl`, carry .whl, and pass --wheels .whl here", file=sys.stderr)
    sys.exit(2)
import harnesscheck
import torch
import transformers

where = os.path.dirname(os.path.abspath(harnesscheck.__file__))
if not where.startswith(os.path.abspath(pypath)):
    print(f"gpu_headline: harnesscheck imports from {where}, not this checkout", file=sys.stderr)
    sys.exit(2)
cuda = torch.cuda.is_available()
gpu = torch.cuda.get_device_name(0) if cuda else "none"
print(f"gpu_headline: python {sys.version.split()[0]}, torch {torch.__version__}, transformers "
      f"{transformers.__version__}, CUDA available: {cuda}, GPU: {gpu}, size: {size}", flush=True)
if size == "full" and not cuda:
    print("gpu_headline: the full size needs a CUDA GPU and torch sees none; --cpu-small runs on a CPU",
          file=sys.stderr)
    sys.exit(2)
PYEOF

# 4. The environment's size knobs, as bench headline options.
knob() { if [ -n "${!1:-}" ]; then ARGS=("$2" "${!1}" "${ARGS[@]}"); fi; }
knob HC_SYSTEM_TOKENS --system-tokens
knob HC_SESSIONS --sessions
knob HC_HISTORY_SESSIONS --history-sessions
knob HC_HISTORY_SYSTEM_TOKENS --history-system-tokens
knob HC_TURN_TOKENS --turn-tokens
knob HC_MODEL_PRESET --model-preset
knob HC_LAYERS --layers
knob HC_MODEL_DIR --model-dir
knob HC_DEVICE --device
for option in ${HC_ENGINE_OPTIONS:-}; do ARGS=(--engine-option "$option" "${ARGS[@]}"); done
[ "$SIZE" = small ] && ARGS=(--device "${HC_DEVICE:-cpu}" "${ARGS[@]}")

if [ "$CHECK_ONLY" = 1 ]; then
  "$PY" -m harnesscheck bench headline --help >/dev/null
  echo "gpu_headline: ready: $PY -m harnesscheck bench headline --size $SIZE --out $OUT_DIR ${ARGS[*]}"
  exit 0
fi

# 5. The run: everything it prints also goes to DIR/headline.log; the results are written as each
#    benchmark ends, so a run stopped by a time limit still leaves what it measured.
command -v nvidia-smi >/dev/null && [ "$SIZE" = full ] && nvidia-smi -L | tee -a "$LOG"
export PYTHONUNBUFFERED=1
set -o pipefail
"$PY" -m harnesscheck bench headline --size "$SIZE" --out "$OUT_DIR" --no-progress "${ARGS[@]}" 2>&1 \
  | tee -a "$LOG"
