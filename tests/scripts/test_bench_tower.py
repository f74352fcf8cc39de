"""scripts/bench_tower.py on the tiny CLIP: the variants share the weights, eval meets a frozen bank, the quick run."""

import importlib

import pytest
import torch


@pytest.fixture
def bench(scripts):
    return importlib.import_module("bench_tower")


def test_the_variants_share_the_plain_weights_and_the_eval_tower_is_frozen(bench, one_thread):
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    towers = bench.build_towers(2, bench.QUICK_MODEL)
    assert list(towers) == ["plain", "split", "moram", "lora", "moram-train"]
    conv = towers["plain"].visual.conv1.weight
    assert all(tower.visual.conv1.weight is conv for tower in towers.values())  # one copy of the weights
    frozen, training = (find_layers(towers[name], MoRAMLinear) for name in ("moram", "moram-train"))
    assert len(frozen) == len(training) == 6 * 3  # six linears in each of the tiny CLIP's 3 blocks
    assert {(layer.num_frozen, layer.num_trainable) for layer in frozen.values()} == {(32, 0)}
    assert {(layer.num_frozen, layer.num_trainable) for layer in training.values()} == {(16, 16)}
    images = bench.images_for(towers["plain"], 2, "cpu")
    assert images.shape == (2, 3, 32, 32)
    with torch.inference_mode():  # freezing the bank changes no number
        torch.testing.assert_close(towers["moram"].eval().visual(images), towers["moram-train"].eval().visual(images))


def test_the_quick_run(bench, capsys, one_thread):
    bench.main(["--quick", "--tasks", "2", "--clocks", "synced", "graph"])
    out = capsys.readouterr().out
    assert "moram-synthetic-tiny (--quick)" in out and "eval on the frozen bank" in out
    assert "eval  float32 synced      : MoRAM" in out and "split attention alone" in out
    assert "eval  float32 graph       : not timed (CUDA graphs need a CUDA device" in out
    assert "train float32 synced      : MoRAM" in out and "train float32 graph" not in out  # a step is not captured
