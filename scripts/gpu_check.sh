#!/usr/bin/env bash
# Every GPU check, goal and profile of MoRAM's GPU path, unattended, in one run of at most 8 minutes.
#
#   bash scripts/gpu_check.sh [OUT_DIR]              the GPU run (default OUT_DIR: gpu_check_<date>)
#   bash scripts/gpu_check.sh --list                 the steps it would run and their budgets
#   bash scripts/gpu_check.sh --dry-run [OUT_DIR]    on the CPU: the steps and budgets, then each step's
#                                                    quick check (tiny sizes; every figure meaningless)
#
# For a GPU machine without network: wheels brought along in .whl/ (scripts/gpu_wheels.sh makes
# them; docs/concepts/gpu-path.md, "GPU check") are installed first, without network, into a private folder put on
# PYTHONPATH. Then, each step under its own time limit (its budget, and never past the run's
# 8 minutes: a step that would end later is cut to the time left), every step running even when
# an earlier one fails:
#   environment.txt  the command, the commit, nvidia-smi (the GPU), Python, torch / CUDA / Triton /
#                    transformers versions
#   gpu_checks.txt   numerics of every path on CUDA against the float64 reference, AMP against fp32,
#                    no host synchronisation, CUDA-graph capture and torch.compile of the GPU paths,
#                    the tower under AMP, a short MoRAM run with amp=True -- scripts/gpu_checks.py
#   gpu_table.txt    THE TABLE: every goal of the issue beside each measured ratio (per clock: one
#                    synchronised call, back to back, CUDA-graph replay) with its verdict, the
#                    release's way beside ours, the compiled decode step's kernels, graph breaks and
#                    recompiles -- scripts/gpu_table.py (gpu_table.json: the rows as data;
#                    profile/profile_decode_*.txt: the decode step's profiler tables)
#   profile.txt      THE PROFILE: the bf16 tower's top kernels by GPU time, launches per step, host
#                    time against GPU-busy share; each piece of a layer graph-replayed per shape and
#                    dtype; each option's micro-benchmark -- scripts/profile_gpu.py (in profile/:
#                    profile.txt, profile.json, the profiler's tables, the bf16 MoRAM tower's trace)
#   tool.txt         the project's GPU profiling tool, when it is at hand (the file MORAM_GPU_PROFILE_TOOL
#                    names, else ../shared/tools/gpu_profile.py or shared/tools/gpu_profile.py), with
#                    TORCH_LOGS=recompiles,graph_breaks,cudagraphs,perf_hints; its files in tool/
#   suite.txt        MoRAM's layer tests with CUDA visible (tests/layers/moram: the CUDA tests run, and
#                    the Triton kernels compiled for the GPU instead of interpreted)
#   summary.txt      what passed and what failed
# and OUT_DIR.tar.gz beside OUT_DIR: all of it in one file, to carry back. Not in the 8 minutes
# (run them on their own): the whole test suite, `moram-avalanche cost --device cuda`,
# scripts/bench_eval.py, scripts/bench_text.py at more sizes. Exit status 1 if a step failed or a
# goal was missed, 2 without a CUDA device (a GPU run).
set -u
cd "$(dirname "$0")/.."
MODE=gpu
case "${1:-}" in
  --list) MODE=list; shift ;;
  --dry-run) MODE=dry; shift ;;
  -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
PY="${PYTHON:-python3}"
TOOL="${MORAM_GPU_PROFILE_TOOL:-}"  # else the first of these that exists (the tool beside the checkout, or in it)
for candidate in ../shared/tools/gpu_profile.py shared/tools/gpu_profile.py; do
  [ -z "$TOOL" ] && [ -f "$candidate" ] && TOOL="$candidate"
done
LIMIT=480      # s: the whole run, wheels and environment included
RESERVE=15     # s: kept for the summary and the archive at the end

# The steps, in order: NAME | FILE | BUDGET (s, on the GPU). Each runs `run_NAME`; with QUICK=1 its quick
# check on the CPU. The budgets add up to the 8 minutes less the wheels, the environment and the reserve.
STEPS=(
  "numerics|gpu_checks.txt|95"
  "table|gpu_table.txt|195"
  "profile|profile.txt|50"
  "tool|tool.txt|50"
  "suite|suite.txt|30"
  "compile|triton_compile.txt|20"
)

run_numerics() {
  "$PY" scripts/gpu_checks.py ${QUICK:+--smoke-cpu} --out "$OUT/gpu_checks_summary.txt"
}
run_table() {
  TORCH_LOGS="${TORCH_LOGS:-recompiles,graph_breaks}" "$PY" scripts/gpu_table.py ${QUICK:+--quick} --compiled \
    --budget "$((STEP_LIMIT - 25))" --profile-dir "$OUT/profile" --out "$OUT/gpu_table.json"
}
run_profile() {
  "$PY" scripts/profile_gpu.py ${QUICK:+--quick} --budget "$((STEP_LIMIT - 15))" --out "$OUT/profile"
}
run_tool() {
  if [ ! -f "$TOOL" ]; then
    echo "no profiling tool at ${TOOL:-../shared/tools/ or shared/tools/} (set MORAM_GPU_PROFILE_TOOL to its file): skipped"
    return 0
  fi
  if [ -n "${QUICK:-}" ]; then  # the tool's own --quick runs the ViT-B/16 towers: minutes on a CPU
    "$PY" "$TOOL" --help
    return
  fi
  # its compiled generation (--skip-llama) is left out: gpu_table.py's compiled section profiles that step;
  # half the step for its own budget: a section it starts in time may run past it, and it writes its files last
  TORCH_LOGS="recompiles,graph_breaks,cudagraphs,perf_hints" "$PY" "$TOOL" --out "$OUT/tool" \
    --budget "$((STEP_LIMIT / 2))" --skip-llama
}
run_suite() {
  if [ -n "${QUICK:-}" ]; then  # on the CPU the Triton interpreter makes these tests long: collect only
    "$PY" -m pytest -q -p no:cacheprovider --collect-only tests/layers/moram | tail -3
    return
  fi
  "$PY" -m pytest -q -x -rs -p no:cacheprovider tests/layers/moram
}
run_compile() {  # the kernels' registers, occupancy and instructions per row as sm_90 compiles them (no GPU used)
  env -u TRITON_INTERPRET "$PY" tests/layers/moram/compile_triton_for_gpu.py 90
}
export -f run_numerics run_table run_profile run_tool run_suite run_compile

list_steps() {
  local total=0 entry name file budget
  echo "steps (GPU budgets; the run stops at $LIMIT s, $RESERVE s kept for the summary and the archive):"
  for entry in "${STEPS[@]}"; do
    IFS='|' read -r name file budget <<< "$entry"
    total=$((total + budget))
    printf '  %-9s %4d s  -> %s\n' "$name" "$budget" "$file"
  done
  printf '  %-9s %4d s  (of %d s; the rest: wheels, environment, reserve)\n' "total" "$total" "$LIMIT"
}

if [ "$MODE" = list ]; then
  list_steps
  exit 0
fi

OUT="${1:-gpu_check_$(date +%Y%m%d_%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export OUT PY TOOL
if [ "$MODE" = dry ]; then
  export QUICK=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  echo "dry run on the CPU: each step's quick check (tiny sizes: every figure meaningless), no time limit of the GPU run"
  list_steps
fi
START=$SECONDS

if [ "$MODE" = gpu ] && compgen -G ".whl/*.whl" > /dev/null; then
  SITE="${TMPDIR:-/tmp}/moram_gpu_site"
  echo "installing $(ls .whl/*.whl | wc -l) wheels from .whl/ into $SITE (no network)"
  timeout 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .whl/*.whl || echo "warning: some wheels did not install (see above); the steps that need them will say so"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

{
  echo "command: bash scripts/gpu_check.sh $([ "$MODE" = dry ] && echo '--dry-run ')$OUT"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # a copy without .git (carried to a GPU machine) names its commit in .commit: git rev-parse HEAD > .commit
  echo "commit: $(git rev-parse HEAD 2>/dev/null || cat .commit 2>/dev/null || echo unknown)$(git diff --quiet HEAD \
    2>/dev/null || echo ' (with uncommitted changes, or no .git)')"
  "$PY" -c "import platform, torch; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', \
torch.version.cuda); print('cuda available:', torch.cuda.is_available())"
} > "$OUT/environment.txt" 2>&1
if [ "$MODE" = gpu ] && ! grep -q "cuda available: True" "$OUT/environment.txt"; then
  cat "$OUT/environment.txt"
  echo "no CUDA device visible: stopping (bash scripts/gpu_check.sh --dry-run checks every step on the CPU)"
  exit 2
fi
{
  "$PY" - <<'EOF'
import importlib
import torch
for name in ("triton", "transformers", "peft", "open_clip", "avalanche"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as error:
        print(name, "NOT AVAILABLE:", type(error).__name__, str(error).splitlines()[0][:120])
try:  # Triton 3.6 and older pass the routing kernels' rows through shared memory (docs: "Triton versions")
    from moram_avalanche.layers.moram.paths.triton import rows_first, rows_stay_in_their_warp
    print("routing kernels keep each row in its warp (Triton >= 3.7):", rows_stay_in_their_warp())
    print("routing kernels' blocks rows first where a row is several slices (Triton < 3.7):", rows_first(2))
except Exception as error:
    print("routing kernels' rows: unknown:", type(error).__name__, str(error).splitlines()[0][:120])
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(), torch.cuda.get_device_capability())
EOF
  if command -v nvidia-smi > /dev/null; then nvidia-smi 2>&1; else echo "nvidia-smi: not available"; fi
} >> "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

status=0
summary="$OUT/summary.txt"
: > "$summary"
for entry in "${STEPS[@]}"; do
  IFS='|' read -r name file budget <<< "$entry"
  if [ "$MODE" = dry ]; then
    limit=1800  # the CPU's quick checks are not held to the GPU's budgets
  else
    left=$((LIMIT - RESERVE - (SECONDS - START)))
    limit=$(( budget < left ? budget : left ))
    if [ "$limit" -lt 20 ]; then
      echo "skip $name: the $LIMIT s of the run are spent" | tee -a "$summary"
      status=1
      continue
    fi
  fi
  echo "== $name ($(date -u +%H:%M:%S), at most $limit s) -> $OUT/$file"
  step_start=$SECONDS
  STEP_LIMIT=$limit timeout --signal=INT --kill-after=5 "$limit" bash -c "run_$name" 2>&1 | tee "$OUT/$file"
  code=${PIPESTATUS[0]}
  if [ $code -eq 0 ]; then
    echo "ok   $name ($((SECONDS - step_start)) s)" >> "$summary"
  else
    [ $code -eq 124 ] && echo "(stopped at its $limit s limit)" | tee -a "$OUT/$file"
    echo "FAIL $name ($((SECONDS - step_start)) s, exit $code, see $file)" >> "$summary"
    status=1
  fi
done
echo "total $((SECONDS - START)) s" >> "$summary"

echo
cat "$summary"
tar -czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && echo "everything in one file: $OUT.tar.gz"
exit $status
