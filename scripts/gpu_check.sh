#!/usr/bin/env bash
# Every GPU check and figure of MoRAM's GPU path, unattended, in one run of at most 8 minutes.
#
#   bash scripts/gpu_check.sh [OUT_DIR]        (default OUT_DIR: gpu_check_<date>)
#
# For a GPU machine without network: wheels brought along in .whl/ (scripts/gpu_wheels.sh makes
# them; README, "GPU check") are installed first, without network, into a private folder put on
# PYTHONPATH. Steps, each under its own time limit so that the whole run ends within 8 minutes:
#   environment.txt   nvidia-smi, Python, torch / CUDA / Triton / transformers versions      (~5 s)
#   gpu_checks.txt    numerics of every path on CUDA against the float64 reference, AMP against
#                     fp32, no host synchronisation (set_sync_debug_mode), CUDA graph capture and
#                     torch.compile of the GPU paths, the ViT-B/16 tower under AMP, a short MoRAM
#                     run with amp=True -- scripts/gpu_checks.py                           (<= 130 s)
#   gpu_table.txt     THE TABLE: every speed and memory row of the issue against its goal, the
#                     official release's way timed beside ours -- scripts/gpu_table.py     (<= 270 s)
#                     (gpu_table.json: the same rows as data)
#   suite.txt         the layers' tests with CUDA visible (tests/layers; CUDA tests run)    (<= 75 s)
#   summary.txt       what passed and what failed
# Not in the 8 minutes (run them on their own): the whole test suite, `moram-avalanche cost
# --device cuda`, scripts/bench_eval.py, scripts/bench_text.py --compiled generation at more sizes.
# Every step runs even when an earlier one fails; exit status 1 if any failed.
set -u
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check_$(date +%Y%m%d_%H%M%S)}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if compgen -G ".whl/*.whl" > /dev/null; then
  SITE="${TMPDIR:-/tmp}/moram_gpu_site"
  echo "installing $(ls .whl/*.whl | wc -l) wheels from .whl/ into $SITE (no network)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || echo "warning: some wheels did not install (see above); the steps that need them will say so"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
summary="$OUT/summary.txt"
: > "$summary"

step() {  # step NAME FILE SECONDS COMMAND...
  local name="$1" file="$2" limit="$3"; shift 3
  echo "== $name ($(date -u +%H:%M:%S), at most $limit s) -> $OUT/$file"
  local start=$SECONDS
  timeout --signal=INT --kill-after=10 "$limit" "$@" > >(tee "$OUT/$file") 2>&1
  local code=$?
  if [ $code -eq 0 ]; then
    echo "ok   $name ($((SECONDS - start)) s)" >> "$summary"
  else
    [ $code -eq 124 ] && echo "(stopped at its $limit s limit)" | tee -a "$OUT/$file"
    echo "FAIL $name ($((SECONDS - start)) s, exit $code, see $file)" >> "$summary"
    status=1
  fi
}

"$PY" - <<'EOF' > "$OUT/environment.txt" 2>&1
import importlib, platform
import torch
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
for name in ("triton", "transformers", "peft", "open_clip", "avalanche"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as error:
        print(name, "NOT AVAILABLE:", type(error).__name__, str(error).splitlines()[0][:120])
print("cuda available:", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(), torch.cuda.get_device_capability())
EOF
nvidia-smi >> "$OUT/environment.txt" 2>&1 || true
cat "$OUT/environment.txt"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device visible: stopping (the CPU part is covered by the suite and scripts/bench_*.py)"
  exit 2
fi

step "GPU numerics, host synchronisation, CUDA graphs, torch.compile" gpu_checks.txt 130 \
  "$PY" scripts/gpu_checks.py --out "$OUT/gpu_checks_summary.txt"
step "the table: every goal of the GPU path, the release's way beside ours" gpu_table.txt 270 \
  "$PY" scripts/gpu_table.py --budget 230 --compiled --out "$OUT/gpu_table.json"
step "layer tests with CUDA visible" suite.txt 75 "$PY" -m pytest -q -rs -p no:cacheprovider tests/layers

echo
cat "$summary"
exit $status
