#!/bin/bash
# A run folder started by an older moram-avalanche, killed after its first experience, then
# resumed and analysed by this checkout (the promise "a 0.4 / 0.5 run folder still resumes").
#
#   git worktree add --detach /tmp/old-0.5 <commit of 0.5.0>
#   bash scripts/resume_old_run.sh /tmp/old-0.5 clip  OUT_DIR
#   bash scripts/resume_old_run.sh /tmp/old-0.5 text  OUT_DIR  T5_FOLDER
#
# T5_FOLDER: a small seq2seq model folder (`moram-avalanche demo --text` caches one under
# ~/.cache/moram-avalanche/moram-text-tiny-t5-*). STRATEGY=NAME runs another strategy than moram
# (e.g. avalanche.naive or ogd: their run checkpoints are Avalanche's whole-strategy pickles, which
# name every class by the module path of the version that wrote them). Prints the rows the old run
# wrote, the resume's exit code and "resuming ..." line, the rows after, and analyze's exit code and
# last line (analyze reads MoRAM's CLIP runs only).
set -u
old=$1; kind=$2; out=$3; model=${4:-}; strategy=${STRATEGY:-moram}
atoms=(); [ "$strategy" = moram ] && atoms=(--set atoms_per_task=4)
here=$(cd "$(dirname "$0")/.." && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# MoRAM's compiled CPU kernel stays unbuilt in both versions: checkouts before 0.7 read
# MORAM_AVALANCHE_KERNEL=off, this one MORAM_AVALANCHE_PATH=no-cpu-kernel (and warns about the old one)
old_switch=(MORAM_AVALANCHE_KERNEL=${MORAM_AVALANCHE_KERNEL:-off})
new_switch=(MORAM_AVALANCHE_PATH=${MORAM_AVALANCHE_PATH:-no-cpu-kernel})
if [ "$kind" = clip ]; then
  ARGS=(run --benchmark synthetic --order shapes,digits,textures --strategy "$strategy" --model moram-synthetic-tiny
        --pretrained none --iterations 6 --batch-size 8 --lr 1e-2 "${atoms[@]}" --no-augment
        --no-progress --cache-dir "$out.cache")
else
  ARGS=(run --benchmark synthetic-text --strategy "$strategy" --model "$model" --iterations 4 --batch-size 8 --no-progress)
fi
rows() { python -c "import json,sys; print(len(json.load(open(sys.argv[1]))['matrix']))" "$out/results.json" 2>/dev/null || echo 0; }
rm -rf "$out"
(cd /tmp && env "${old_switch[@]}" PYTHONPATH="$old" python -m moram_avalanche "${ARGS[@]}" --log-dir "$out" > "$out.old.log" 2>&1) &
pid=$!
while kill -0 $pid 2>/dev/null && [ "$(rows)" -lt 1 ]; do sleep 0.2; done
pkill -9 -f -- "--log-dir $out" ; wait $pid 2>/dev/null
echo "old version wrote $(rows) row(s)"
(cd /tmp && env "${new_switch[@]}" PYTHONPATH="$here" python -m moram_avalanche "${ARGS[@]}" --log-dir "$out" > "$out.new.log" 2>&1)
echo "resume: exit $?; $(grep -h -m1 'resuming' "$out.new.log")"
echo "rows now: $(rows)"
(cd /tmp && env "${new_switch[@]}" PYTHONPATH="$here" python -m moram_avalanche analyze "$out" --no-maps --no-progress > "$out.analyze.log" 2>&1)
echo "analyze: exit $?; $(tail -1 "$out.analyze.log")"
