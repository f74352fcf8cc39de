"""The text loop's precision and clipping: a bf16 model trains float32 masters and moments (DeepSpeed's
bf16 mode), each optimizer step clips its accumulated float32 gradient once, and the defaults are the
published code's."""

import pytest
import torch

from text_runs import benchmark, build

#: bf16 numbers in [0.0625, 0.125) are 2^-11 apart: an update below 2^-12 (2.4e-4) rounds away
SMALL = 0.0625


def bf16_run(master_weights, lr=1e-5):
    """SeqFT on the tiny LLaMA in bf16, two optimizer steps at TRACE's full fine-tuning rate."""
    strategy, _ = build("finetune", "llama", lr=lr, master_weights=master_weights)
    strategy.model.to(torch.bfloat16)
    before = {name: p.detach().clone() for name, p in strategy.model.named_parameters()}
    strategy.train(benchmark().train_stream[0])
    return strategy, before


def test_a_bf16_model_steps_float32_masters_where_pure_bf16_loses_the_updates():
    """At lr 1e-5 two AdamW steps move a weight by at most ~2e-5: below half a bf16 spacing for every
    weight of magnitude >= 0.0625, so in pure bf16 none of those moves, while their float32 masters
    do, and every bf16 weight is its master rounded to nearest."""
    from moram_avalanche.algorithms.mixed_precision import MasterWeights, master_copies

    strategy, before = bf16_run(master_weights=True)
    optimizer = strategy.optimizer
    assert isinstance(optimizer, MasterWeights)
    params = dict(strategy.model.named_parameters())
    names = [name for name, p in params.items() if p.requires_grad]
    masters = dict(zip(names, master_copies(optimizer)))
    assert len(masters) == len(names) and all(m.dtype == torch.float32 for m in masters.values())
    for state in optimizer.state.values():
        assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.float32
    moved = 0
    for name in names:
        weight, master = params[name].detach(), masters[name]
        assert weight.dtype == torch.bfloat16 and torch.equal(weight, master.to(torch.bfloat16)), name
        large = before[name].abs() >= SMALL
        moved += int((master[large] != before[name][large].float()).sum())
    assert moved > 0  # the masters hold the small updates

    pure, before = bf16_run(master_weights=False)
    assert isinstance(pure.optimizer, torch.optim.AdamW) and master_copies(pure.optimizer) == []
    assert all(s["exp_avg"].dtype == torch.bfloat16 for s in pure.optimizer.state.values())
    for name, p in pure.model.named_parameters():
        large = before[name].abs() >= SMALL
        assert torch.equal(p.detach()[large], before[name][large]), name  # every such update lost


def test_each_optimizer_step_clips_the_accumulated_gradient_once_to_the_bound():
    """Two optimizer steps of two minibatches: two clips, each of the summed gradient (the step's),
    whose norm is at most max_grad_norm afterwards; max_grad_norm None: none."""
    from moram_avalanche.algorithms.mixed_precision import GradientClip, clip_global_norm

    norms = []

    def recording(params, max_norm):
        norms.append(float(clip_global_norm(params, max_norm)))
        after = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
        assert after <= max_norm * (1 + 1e-5)

    strategy, _ = build("seq-lora", train_mb_size=2, accumulation_steps=2, max_grad_norm=1e-3)
    assert strategy.max_grad_norm == 1e-3
    strategy.gradient_clip = lambda: GradientClip(strategy.max_grad_norm, recording)
    strategy.train(benchmark().train_stream[0])
    assert len(norms) == 2 and all(norm > 1e-3 for norm in norms)  # clipped, once per step
    unclipped, _ = build("seq-lora", max_grad_norm=None)
    assert unclipped.gradient_clip() is None


def test_a_short_last_cycle_is_rescaled_on_the_weights_the_masters_read():
    from moram_avalanche.algorithms.mixed_precision import training_optimizer
    from moram_avalanche.strategies.text.plugins.accumulation import AccumulatedSteps

    param = torch.nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))
    optimizer = AccumulatedSteps(training_optimizer([param], lambda ps: torch.optim.SGD(ps, lr=1.0)), 3)
    for grad in (1.0, 3.0):  # two of three cycles' minibatches (quarters, not the loop's thirds: exact in bf16)
        optimizer.zero_grad()
        param.grad = (param.grad if param.grad is not None else torch.zeros(1, dtype=torch.bfloat16)) + grad / 4
        optimizer.step()
    assert param.item() == 0.0  # not stepped yet
    # flush: the model's bf16 gradient (1 / 4 + 3 / 4) rescaled by 3 / 2, then one SGD step at lr 1
    assert optimizer.flush() and param.item() == -1.5


def test_the_defaults_are_the_published_codes():
    """Clipping at 1.0 on the loop (TRACE's, TreeLoRA's and the release's DeepSpeed configuration,
    O-LoRA's and SAPT's Trainer), master weights on, AdamW's betas (0.9, 0.999) (O-LoRA's Trainer);
    LFPT5's code clips no gradient (its max_grad_norm is Adafactor's update clipping)."""
    from moram_avalanche.strategies.options import strategy_parameters
    from moram_avalanche.strategies.registry import get_strategy

    for name in ("moram", "seq-lora", "o-lora", "finetune", "ogd", "l2p", "dualprompt", "treelora", "hidelora",
                 "sapt", "avalanche.gem", "lori-d"):
        parameters = strategy_parameters(get_strategy(name, "text"))
        assert parameters["max_grad_norm"].default == 1.0 and parameters["master_weights"].default is True, name
    assert strategy_parameters(get_strategy("moram", "text"))["betas"].default == (0.9, 0.999)
    assert strategy_parameters(get_strategy("lfpt5", "text"))["max_grad_norm"].default is None
    with pytest.raises(ValueError, match="max_grad_norm must be a finite number > 0"):
        build("seq-lora", max_grad_norm=0.0)
