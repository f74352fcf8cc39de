#!/usr/bin/env bash
# The test suite on the oldest dependency set setup.cfg admits (constraints-oldest.txt: the GPU
# image's torch 2.11, Triton 3.6, transformers 5.17), in a fresh virtualenv that is removed however
# the run ends. CI runs constraints.txt's set (.ci/run); run this before changing a lower bound in
# setup.cfg or regenerating constraints-oldest.txt, and quote its summary line in CHANGELOG.md.
#
#   bash scripts/check_oldest.sh                 # the whole suite (about an hour on two cores)
#   bash scripts/check_oldest.sh tests/layers    # pytest's arguments instead of the whole suite
set -euo pipefail
cd "$(dirname "$0")/.."

# a shell's own PYTHONPATH or virtualenv would put another copy of the package first
unset PYTHONPATH VIRTUAL_ENV
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work" PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
export TORCH_EXTENSIONS_DIR="$work/torch_extensions"  # the CPU routing kernel, built for this torch
python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
pip install -q -c constraints-oldest.txt -e ".[test]"
python - <<'EOF'
import torch, transformers, triton
print(f"oldest set: torch {torch.__version__}, Triton {triton.__version__}, transformers {transformers.__version__}")
EOF
python -m pytest -q "$@"
