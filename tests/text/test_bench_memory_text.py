"""scripts/bench_memory_text.py: its allocator count on a hand case, and its rows on a tiny LLaMA."""

import importlib
from pathlib import Path

import pytest
import torch

from tiny_text import LLAMA_KWARGS

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TINY = dict(LLAMA_KWARGS, head_dim=8, bos_token_id=1, eos_token_id=2)


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the scripts import their siblings from their folder
    return importlib.import_module("bench_memory_text")


def test_allocated_peak_counts_a_hand_computed_step(bench):
    """y = 2x; y.sum().backward(): y and x's gradient (n x n float32 each) are alive together at
    the peak; x.grad alone stays. Scalars (the sum, its gradient) add a few bytes."""
    n = 512
    size = n * n * 4
    x = torch.randn(n, n, requires_grad=True)

    def step():
        y = x * 2
        y.sum().backward()

    numbers = bench.allocated_peak(step, torch.device("cpu"))
    assert numbers["net"] == size  # x.grad
    assert 2 * size <= numbers["peak"] <= 2 * size + 1024, numbers


def test_rows_hold_the_same_trainable_count_and_the_optimizer_state(bench, one_thread):
    from bench_text import build_base, model_config

    base = build_base("llama-1b", model_config("llama-1b", 2, **TINY), "cpu", torch.float32)
    inputs = bench.make_inputs(base.config, 2, 6, 2, "cpu")["train"]
    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)
    rows = bench.measure(base, inputs, torch.device("cpu"), 4, options, 0.1, tasks=3)
    assert [(row["variant"], row["gradient_checkpointing"]) for row in rows] == [
        (name, checkpoint) for checkpoint in (False, True) for name in ("lora", "moram task 1", "moram task 3")]
    trainable = rows[0]["trainable"]
    assert trainable > 0 and all(row["trainable"] == trainable for row in rows)  # rank 4 = 4 new atoms
    held = bench.held_bytes(base, inputs)
    for row in rows:
        assert row["peak"] == row["held"] + row["step_peak"] and row["held"] >= held
        # what the first AdamW step leaves: each trainable float's gradient, exp_avg and exp_avg_sq
        assert row["step_net"] >= 3 * 4 * trainable, row
        assert row["step_peak"] >= row["step_net"]
    # the grown bank's frozen atoms are held on top of the base (12 atoms per linear after 3 tasks)
    assert rows[2]["held"] > rows[1]["held"] >= held
    assert not any(p.grad is not None for p in base.parameters())


def test_the_librarys_loss_keeps_fewer_logits_than_the_models_own(bench, one_thread):
    """Only the answer positions reach the LM head: a step's peak is lower than with every
    position's logits, by at least the logits of the prompt positions (float32 copy included)."""
    from bench_text import build_base, model_config

    base = build_base("llama-1b", model_config("llama-1b", 1, **TINY), "cpu", torch.float32)
    inputs = bench.make_inputs(base.config, 2, 40, 2, "cpu")["train"]
    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)
    ours, full = (bench.measure(base, inputs, torch.device("cpu"), 4, options, 0.1, tasks=1, checkpointing=(False,),
                                full_logits=flag)[1] for flag in (False, True))
    prompt_logits = 2 * 39 * base.config.vocab_size * 4  # 39 prompt positions predict no answer token
    assert full["step_peak"] - ours["step_peak"] >= prompt_logits, (ours, full)


def test_extrapolation_in_depth_meets_a_deeper_measurement(bench, one_thread):
    """Each layer adds the same bytes: rows measured 1 and 2 layers deep, extended to 4 layers,
    give the weights held at 4 layers exactly and the step's peak within 5%."""
    from bench_text import build_base, model_config

    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)

    def rows(layers):
        base = build_base("llama-1b", model_config("llama-1b", layers, **TINY), "cpu", torch.float32)
        inputs = bench.make_inputs(base.config, 2, 24, 4, "cpu")["train"]
        return bench.measure(base, inputs, torch.device("cpu"), 4, options, 0.1, tasks=2)

    estimated = bench.extrapolate(rows(1), rows(2), (1, 2), 4)
    for guess, real in zip(estimated, rows(4)):
        assert guess["held"] == real["held"] and guess["trainable"] == real["trainable"]
        assert abs(guess["step_peak"] - real["step_peak"]) <= 0.05 * real["step_peak"], (guess, real)


def test_the_default_rows_adapt_traces_targets(bench):
    """TRACE's targets are the release's q, k, v, o (--targets trace, the default); --targets paper
    gives the classification streams' q, k."""
    from bench_text import build_base, model_config

    from moram_avalanche.layers.lora import LoRALinear
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    base = build_base("llama-1b", model_config("llama-1b", 2, **TINY), "cpu", torch.float32)
    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)
    assert bench.TARGETS["trace"]["llama"] == ("q_proj", "k_proj", "v_proj", "o_proj")
    for targets, per_layer in ((bench.TARGETS["trace"], 4), (bench.TARGETS["paper"], 2)):
        rows = bench.variants(base, 4, options, 0.1, 2, targets)
        lora, moram = rows["lora"](), rows["moram task 1"]()
        for model, kind in ((lora, LoRALinear), (moram, MoRAMLinear)):
            wrapped = [name for name, module in model.named_modules() if isinstance(module, kind)]
            assert len(wrapped) == 2 * per_layer and all(".self_attn." in name for name in wrapped)


def test_float32_master_weights_cost_what_they_hold_on_a_bf16_step(bench, one_thread):
    """The step on a bf16 model keeps, per trainable weight, its bf16 gradient (2 bytes), a float32
    master (4) and AdamW's two float32 moments (8): 14 bytes, where pure bf16 keeps 2 + 2 x 2 = 6, so
    the first step leaves exactly 8 more bytes per trainable weight (the step's float32 gradients are
    freed before it ends); both also hold AdamW's step counters, the same in both."""
    from bench_text import build_base, model_config

    base = build_base("llama-1b", model_config("llama-1b", 1, **TINY), "cpu", torch.bfloat16)
    inputs = bench.make_inputs(base.config, 2, 6, 2, "cpu")["train"]
    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)
    mixed, pure = (bench.measure(base, inputs, torch.device("cpu"), 4, options, 0.1, tasks=1, checkpointing=(False,),
                                 master_weights=flag) for flag in (True, False))
    for with_masters, without in zip(mixed, pure):
        trainable = with_masters["trainable"]
        assert trainable > 0 and without["trainable"] == trainable
        assert with_masters["step_net"] - without["step_net"] == 8 * trainable, (with_masters, without)
        assert with_masters["step_net"] >= 14 * trainable
        # at the peak the float32 copies of the gradients (4 bytes each) exist too
        assert with_masters["step_peak"] >= with_masters["step_net"] + 4 * trainable


def test_drawing_the_dropout_again_on_the_cpu_keeps_what_a_gpu_keeps(bench, one_thread, monkeypatch):
    """--redraw-on-cpu: MoRAM's backward draws its dropout again instead of keeping the noise, as on
    CUDA: the MoRAM rows' step peaks drop by at least half the noise of the layers whose input gets
    a gradient (the second block's four: 4 x 256 tokens x 32 wide x 4 bytes each; the CPU generator's
    state, 5 KB a layer, is kept instead); LoRA's do not move."""
    from bench_text import build_base, model_config

    from moram_avalanche.layers.moram import dropped

    base = build_base("llama-1b", model_config("llama-1b", 2, **TINY), "cpu", torch.float32)
    inputs = bench.make_inputs(base.config, 4, 200, 56, "cpu")["train"]
    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)
    rows = {}
    for redraw in (False, True):
        monkeypatch.setattr(dropped, "REDRAW_ON_CPU", redraw)
        rows[redraw] = bench.measure(base, inputs, torch.device("cpu"), 4, options, 0.1, tasks=2, checkpointing=(False,),
                                     targets=bench.TARGETS["trace"])
    for kept, redrawn in zip(rows[False], rows[True]):
        if kept["variant"] == "lora":
            assert redrawn["step_peak"] == kept["step_peak"]
        else:
            assert kept["step_peak"] - redrawn["step_peak"] >= 4 * 4 * 256 * 32 * 4 // 2, (kept, redrawn)


def test_the_lora_baseline_can_have_moram_s_dropout(bench, one_thread, capsys):
    """--lora-dropout: the LoRA row with dropout on its input keeps each layer's dropped input and
    noise too (autograd through F.dropout): its step peak rises; MoRAM's rows do not move."""
    from bench_text import build_base, model_config

    base = build_base("llama-1b", model_config("llama-1b", 2, **TINY), "cpu", torch.float32)
    inputs = bench.make_inputs(base.config, 4, 200, 56, "cpu")["train"]
    options = dict(bench.PAPER_TRACE_OPTIONS, atoms_per_task=4, topk=4)
    plain, same = (bench.measure(base, inputs, torch.device("cpu"), 4, options, 0.1, tasks=1, checkpointing=(False,),
                                 targets=bench.TARGETS["trace"], lora_dropout=p) for p in (0.0, 0.1))
    assert same[0]["variant"] == "lora" and same[0]["step_peak"] - plain[0]["step_peak"] >= 4 * 256 * 32 * 4
    assert [row["step_peak"] for row in same[1:]] == [row["step_peak"] for row in plain[1:]]
    with pytest.raises(SystemExit):
        bench.main(["--lora-dropout", "1.5"])
    assert "--lora-dropout must be a probability in [0, 1), got 1.5" in capsys.readouterr().err
