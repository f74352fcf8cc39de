#!/usr/bin/env bash
# Download the wheels a GPU machine without network needs for scripts/gpu_check.sh, into .whl/.
#
#   bash scripts/gpu_wheels.sh [PYTHON_VERSION]      (default 3.12: the GPU image's Python)
#
# Run it where pip reaches PyPI, in the repository's root; carry .whl/ to the GPU machine with the
# checkout (gpu_check.sh installs every wheel in it, without network, into a private folder).
# A GPU image with PyTorch usually has torch, torchvision, transformers, peft, timm, accelerate,
# tensorboard, numpy, scipy, scikit-learn, matplotlib, pytest and tqdm, but not Avalanche
# (avalanche-lib), open_clip (open_clip_torch) or wandb, which Avalanche imports when it is
# imported. This brings those and what they need beyond such an image, at the versions
# constraints.txt pins (about 30 MB). GPUtil has no wheel on PyPI: it is built here from its
# source (pure Python).
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER="${1:-3.12}"
OUT=.whl
mkdir -p "$OUT"
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/.whl/" >> .git/info/exclude; }

NAMES=(avalanche-lib open_clip_torch ftfy wcwidth wandb cwevals platformdirs pydantic pydantic-core
       annotated-types typing-inspection opentelemetry-api opentelemetry-sdk opentelemetry-proto
       opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-common
       opentelemetry-semantic-conventions googleapis-common-protos importlib-metadata gdown beautifulsoup4
       soupsieve dill pytorchcv qpsolvers quadprog)

pinned() {  # the version constraints.txt pins for a package name (case and - / _ insensitive)
  local name
  name="$(echo "$1" | tr 'A-Z_' 'a-z-')"
  awk -F'==' -v n="$name" 'tolower($1) ~ /./ { k = tolower($1); gsub("_", "-", k); if (k == n) print $2 }' \
    constraints.txt | head -1
}

for name in "${NAMES[@]}"; do
  version="$(pinned "$name")"
  spec="$name${version:+==$version}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$OUT" "$spec"
done
version="$(pinned gputil)"
python3 -m pip wheel -q --no-deps "gputil${version:+==$version}" -w "$OUT"
echo "wheels in $OUT ($(du -sh "$OUT" | cut -f1)):"
ls "$OUT"
