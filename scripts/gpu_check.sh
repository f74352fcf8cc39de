#!/usr/bin/env bash
# Every GPU check and timing of issue 15, unattended, on a CUDA machine with torch and pytest.
#
#   bash scripts/gpu_check.sh [OUT_DIR]        (default OUT_DIR: gpu_check_<date>)
#
# Writes into OUT_DIR (and prints as it goes):
#   environment.txt   nvidia-smi, torch / CUDA versions, the package's version
#   suite.txt         the whole test suite with the GPU visible (the CUDA tests run, not skip)
#   gpu_checks.txt    CUDA vs the CPU reference; AMP fp16 / bf16 vs fp32 (layer, ViT-B/16 tower,
#                     a short MoRAM run with amp=True)           -- scripts/gpu_checks.py
#   bench_tower.txt   ViT-B/16 image tower after 10 tasks: eval vs plain CLIP, one training step
#                     vs rank-16 LoRA (synchronised CUDA timings, round-robin medians)
#   cost_fp32/, cost_amp/  the paper's cost table (`moram-avalanche cost`): parameters, memory,
#                     ms/image of training and inference after 1 / 5 / 10 tasks, ViT-B/16,
#                     CLIP / MoRAM / MoE-Adapters / InfLoRA / SeqLoRA / MoE-LoRA
#   eval_rate.txt     images/s of a full X-TAIL-sized evaluation (ViT-B/16), before / after / replay
#   summary.txt       what passed and what failed
# No Triton kernel is part of the package (none was written for issue 15), so there is no
# kernel check here. Every step runs even when an earlier one fails; exit status 1 if any failed.
set -u
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check_$(date +%Y%m%d_%H%M%S)}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
status=0
summary="$OUT/summary.txt"
: > "$summary"

step() {  # step NAME FILE COMMAND...
  local name="$1" file="$2"; shift 2
  echo "== $name ($(date -u +%H:%M:%S)) -> $OUT/$file"
  local start=$SECONDS
  if "$@" > >(tee "$OUT/$file") 2>&1; then
    echo "ok   $name ($((SECONDS - start)) s)" >> "$summary"
  else
    echo "FAIL $name ($((SECONDS - start)) s, see $file)" >> "$summary"
    status=1
  fi
}

"$PY" - <<'EOF' > "$OUT/environment.txt" 2>&1
import torch, platform
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("cuda available:", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(), torch.cuda.get_device_capability())
    print("bf16 supported:", torch.cuda.is_bf16_supported())
EOF
nvidia-smi >> "$OUT/environment.txt" 2>&1 || true
cat "$OUT/environment.txt"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device visible: stopping (the CPU part is covered by the suite and scripts/bench_*.py)"
  exit 2
fi

step "test suite (CUDA visible)" suite.txt "$PY" -m pytest -q -rs
step "GPU numerics: CUDA vs reference, AMP vs fp32" gpu_checks.txt \
  "$PY" scripts/gpu_checks.py --out "$OUT/gpu_checks_summary.txt"
step "cost table (params, latency after 1/5/10 tasks), fp32" cost_fp32.txt \
  "$PY" -m moram_avalanche cost --device cuda --no-progress --out "$OUT/cost_fp32"
step "cost table (params, latency after 1/5/10 tasks), fp16 autocast" cost_amp.txt \
  "$PY" -m moram_avalanche cost --device cuda --amp --no-progress --out "$OUT/cost_amp"
step "ViT-B/16 tower, 10 tasks: eval vs plain CLIP, train step vs rank-16 LoRA (batch 64)" \
  bench_tower.txt "$PY" scripts/bench_tower.py --device cuda --batch 64 --repeats 10
step "X-TAIL-sized evaluation rate, ViT-B/16, a quarter of the test images (22,478), 1,100 classes" \
  eval_rate.txt "$PY" scripts/bench_eval.py --device cuda --model ViT-B-16 --batch-size 64 --scale 0.25

echo
cat "$summary"
exit $status
