"""``moram-avalanche cost`` on CPU with the tiny model: parameters and ms/image for every row."""

import json
import re

import pytest

from moram_avalanche.cli import main
from moram_avalanche.experiments.clip.cost import CostOptions, measure_cost
from moram_avalanche.experiments.clip.cost.measure import DEFAULT_STRATEGIES

# the tiny model's MoRAM layers: per block q, k, v, out (64 -> 64) and c_fc, c_proj (64 <-> 256);
# 2 blocks in each tower; 16 atoms per task
MORAM_PER_TASK = 4 * (4 * 16 * (64 + 64) + 2 * 16 * (64 + 256))


def table_rows(text, header):
    """The rows (lists of cells) of the Markdown table under ``## header``."""
    section = text.split(f"## {header}", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|") and not line.startswith("|---")][1:]


def test_cost_prints_parameters_and_ms_per_image_for_each_row(tiny_clip_name, tmp_path, capsys, one_thread):
    code = main(["cost", "--model", tiny_clip_name, "--tasks", "2", "--batch-size", "4", "--iterations", "2",
                 "--warmup", "0", "--classes", "2", "--eval-images", "4", "--repeats", "1", "--no-progress",
                 "--no-paper", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert re.search(r"device: CPU .*; precision: fp32", out)
    assert "peak memory: CPU proxy: held tensors" in out
    params = {row[0]: row for row in table_rows(out, "Trainable parameters")}
    assert list(params) == list(DEFAULT_STRATEGIES)
    assert params["moram"][1] == "r·d_in + r·d_out" and params["moram"][3] == f"{16 * (64 + 256):,}"
    assert params["moram"][4] == f"task 1: {MORAM_PER_TASK / 1e6:.2f}, task 2: {MORAM_PER_TASK / 1e6:.2f}"
    assert params["zeroshot"][1] == "0 (nothing trains)"
    latency = {row[0]: row for row in table_rows(out, "Latency and memory")}
    assert list(latency) == list(DEFAULT_STRATEGIES)
    for name, row in latency.items():
        assert row[1] == "2"  # after task 2; task 1 ran no step (growth only)
        assert float(row[3]) > 0  # inference ms/image
        if name == "zeroshot":
            assert row[2] == row[4] == "--"
        else:
            assert float(row[2]) > 0 and float(row[4]) > 0  # training ms/image, peak MiB
    results = json.loads((tmp_path / "cost.json").read_text())
    moram = next(r for r in results["strategies"] if r["strategy"] == "moram")
    assert [t["trainable"] for t in moram["tasks"]] == [MORAM_PER_TASK, MORAM_PER_TASK]
    assert (tmp_path / "cost.md").read_text().startswith("# Cost of zeroshot, moram")


def test_parameters_only(tiny_clip_name, capsys, one_thread):
    assert main(["cost", "--model", tiny_clip_name, "--strategies", "moram,seq-lora", "--tasks", "1,3",
                 "--params-only", "--batch-size", "2", "--classes", "2", "--eval-images", "2",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    params = {row[0]: row for row in table_rows(out, "Trainable parameters")}
    per_task = MORAM_PER_TASK / 1e6
    assert params["moram"][4] == f"task 1: {per_task:.2f}, task 3: {per_task:.2f}"
    assert params["moram"][5].startswith(f"{3 * per_task:.2f} after task 3")  # 3 tasks of atoms
    assert params["seq-lora"][5].startswith(f"{per_task:.2f} after task 3")  # one LoRA, never grows
    assert "Not measured (parameters only)." in out


@pytest.mark.parametrize("options, message", [
    ({"amp": True}, "amp \\(fp16 autocast\\) runs on CUDA only"),
    ({"device": "cuda:7"}, "CUDA is not available"),
    ({"strategies": ("moram", "moram")}, "strategies listed twice"),
    ({"strategies": ("lora",)}, "unknown strategy 'lora'"),
    ({"options": {"inflora": {"rank": 4}}, "strategies": ("moram",)}, "options for strategies that are not measured"),
    ({"tasks": (0, 5)}, "tasks must be positive"),
    ({"iterations": 0}, "iterations must be >= 1"),
])
def test_bad_options_fail_before_anything_runs(options, message):
    import torch

    if "device" in options and torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match=message):
        measure_cost(CostOptions(**options), progress=False)


def test_parameters_only_counts_what_a_timed_run_builds_and_trains(tiny_clip_name, one_thread):
    """``--params-only`` takes shortcuts (one load copied per strategy, a few images per task, no
    kernel build); its counts must be those of the full measurement, whose models are loaded,
    grown from a full batch and trained for real -- every default row, every task. One count
    depends on training itself: MoE-Adapters freeze the experts their routers chose most
    (MoE-Adapters' activation-based freezing), which steps that never run cannot do, so after
    task 1 params-only counts those experts as trainable still."""
    common = dict(model=tiny_clip_name, tasks=(1, 3), batch_size=4, classes=3, eval_images=2, repeats=1)
    counted = measure_cost(CostOptions(**common, timing=False), progress=False)
    timed = measure_cost(CostOptions(**common, iterations=1, warmup=0), progress=False)

    def counts(results):
        return {row["strategy"]: (row["class"], row["trains"], row.get("per_matrix"),
                                  [(t["task"], t["trainable"], t["added"]) for t in row["tasks"]])
                for row in results["strategies"]}

    counted, timed = counts(counted), counts(timed)
    assert list(counted) == list(DEFAULT_STRATEGIES)
    moe_counted, moe_timed = counted.pop("moe-adapters"), timed.pop("moe-adapters")
    assert counted == timed
    assert moe_counted[:3] == moe_timed[:3] and moe_counted[3][0] == moe_timed[3][0]  # task 1: nothing frozen yet
    (task, trainable, added), (task_timed, trainable_timed, added_timed) = moe_counted[3][1], moe_timed[3][1]
    assert (task, added) == (task_timed, added_timed) and trainable > trainable_timed  # frozen only by training
    # and by hand, from the tiny model's shapes (MORAM_PER_TASK above): MoRAM trains one task's atoms
    # and keeps every task's (each atom with its bookkeeping buffers)
    (_, first, added_first), (_, third, added_third) = counted["moram"][3]
    assert first == third == MORAM_PER_TASK and added_first > MORAM_PER_TASK and added_third == 3 * added_first


def test_parameters_only_embeds_no_text(tiny_clip_name, one_thread, monkeypatch):
    """Growing a task with 0 steps needs no text: the text->image term's seen classes (every class
    of every earlier task, through the text tower) were embedded per task for steps never taken."""
    from moram_avalanche.clip.head import TextHead

    embedded = []
    embed = TextHead.embed
    monkeypatch.setattr(TextHead, "embed", lambda self, prompts, *a, **k: embedded.append(len(prompts))
                        or embed(self, prompts, *a, **k))
    measure_cost(CostOptions(model=tiny_clip_name, strategies=("moram", "seq-lora"), tasks=(3,), batch_size=2,
                             classes=2, timing=False), progress=False)
    assert embedded == []


def test_parameters_only_grows_inflora_by_shapes_alone(tiny_clip_name, one_thread, monkeypatch):
    """InfLoRA's covariance passes and SVDs dominated ``--params-only`` (468 SVDs of 768 x 768 at 10
    tasks); its counts follow the shapes, so a count runs neither (the counts themselves are checked
    against a timed run above)."""
    import moram_avalanche.strategies.plugins.inflora as inflora

    def refuse(*args, **kwargs):
        raise AssertionError("a parameter count ran InfLoRA's covariance pass or its SVD")

    monkeypatch.setattr(inflora, "input_covariances", refuse)
    monkeypatch.setattr(inflora, "design_down_projection", refuse)
    result = measure_cost(CostOptions(model=tiny_clip_name, strategies=("inflora",), tasks=(1, 2), batch_size=2,
                                      classes=2, timing=False), progress=False)
    [row] = result["strategies"]
    assert [t["task"] for t in row["tasks"]] == [1, 2] and row["tasks"][0]["trainable"] > 0
