"""``moram-replay`` (the SuperNI table's "MoRAM (with replay)"): MoRAM's atoms plus Avalanche's
ReplayPlugin of real samples, its buffer kept across a resume. Mechanics on the tiny stream."""

import pytest
from avalanche.training.plugins import ReplayPlugin

from tiny_stream import FAMILIES, TASKS, stream_tokenizer

FAST = dict(train_mb_size=4, iterations=2, lr=1e-2, max_new_tokens=2)


def bench():
    from moram_avalanche.benchmarks import synthetic_text

    return synthetic_text(TASKS, train_per_label=2, test_per_label=1)


def build(**options):
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    return get_strategy("moram-replay", family="text")(model=FAMILIES["t5"](tokenizer, seed=0), tokenizer=tokenizer,
                                                       **{**FAST, **options})


def buffer_of(strategy):
    return list(next(p for p in strategy.plugins if isinstance(p, ReplayPlugin)).storage_policy.buffer)


def test_moram_replay_is_moram_with_a_buffer_of_real_samples():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.strategies.text.moram import REPLAY_MEM_SIZE, TextMoRAM

    strategy = build(mem_size=4)
    assert isinstance(strategy, TextMoRAM) and strategy.lean_checkpoints is False
    stream = bench()
    for experience in list(stream.train_stream)[:2]:
        strategy.train(experience)
    items = buffer_of(strategy)
    assert len(items) == 4 and {task for _, _, task in items} == {0, 1}  # balanced over the tasks seen
    first = {prompt for prompt, _, _ in stream.train_stream[0].dataset}
    assert {prompt for prompt, _, task in items if task == 0} <= first  # real samples, not generated ones
    assert {layer.num_atoms for layer in find_layers(strategy.model, MoRAMLinear).values()} == {16}  # r 8 per task
    assert build().replay_plugin.mem_size == REPLAY_MEM_SIZE == 200
    with pytest.raises(ValueError, match="mem_size"):
        build(mem_size=0)


def test_a_resumed_run_keeps_the_buffer(tmp_path):
    from moram_avalanche.experiments.runner import run_stream

    stream = bench()
    first = build(mem_size=4)
    run_stream(first, stream, tmp_path, max_experiences=1, progress=False)
    resumed = build(mem_size=4)
    assert run_stream(resumed, stream, tmp_path, progress=False) == 3
    assert {task for _, _, task in buffer_of(resumed)} == {0, 1, 2}
    kept = [(p, a) for p, a, t in buffer_of(resumed) if t == 0]
    assert kept and set(kept) <= {(p, a) for p, a, _ in buffer_of(first)}
