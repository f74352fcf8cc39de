"""LoRI-D / LoRI-S (juzhengz/LoRI): frozen peft-drawn A, only B trains, LoRI-S's model-wide
magnitude mask keeps the code's fraction and masked entries stay zero while training."""

import math

import numpy as np
import pytest
import torch
from avalanche.core import SupervisedPlugin
from torch import nn

from text_runs import benchmark, build


def test_a_is_drawn_as_peft_draws_it_and_frozen():
    from moram_avalanche.layers.lori import LoRILinear

    torch.manual_seed(3)
    layer = LoRILinear(nn.Linear(400, 30), rank=32, scale=2.0)
    # peft's LoRA A: kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(d_in), 1/sqrt(d_in)); a seeded naive draw
    torch.manual_seed(3)
    nn.Linear(400, 30)  # the base layer's own draws come first
    bound = 1 / math.sqrt(400)
    naive = torch.empty(32, 400).uniform_(-bound, bound)
    torch.testing.assert_close(layer.down.detach(), naive)
    assert layer.down.abs().max() <= bound
    assert abs(layer.down.var().item() - bound ** 2 / 3) < 0.05 * bound ** 2 / 3  # U(-b, b): variance b^2 / 3
    assert not layer.down.requires_grad and layer.up.requires_grad
    assert torch.count_nonzero(layer.up) == 0  # B from zero: the layer starts as its base


def test_magnitude_masks_keep_the_codes_fraction_over_the_whole_model():
    from moram_avalanche.layers.lori import magnitude_masks

    # 20 entries pooled over two matrices; sparsity 0.75 keeps k = int(0.25 * 20) = 5: |19| ... |15|
    ups = {"a": torch.arange(10.0).reshape(5, 2), "b": -torch.arange(10.0, 20.0).reshape(5, 2) * torch.tensor([1, -1])}
    masks = magnitude_masks(ups, 0.75)
    assert masks["a"].sum() == 0  # model-wide: the small matrix keeps nothing
    assert masks["b"].sum() == 5 and masks["b"][3:].all() and masks["b"][2, 1] and not masks["b"][2, 0]
    # the code's k = int((1 - s) * total) in floating point: 1 - 0.9 = 0.0999..., so k = 1 of 20: only |19|
    assert magnitude_masks(ups, 0.9)["b"].sum() == 1 and magnitude_masks(ups, 0.9)["b"][4, 1]
    # sparsity 0.5 keeps the 10 largest magnitudes: all of b
    assert magnitude_masks(ups, 0.5)["b"].all() and magnitude_masks(ups, 0.5)["a"].sum() == 0
    # ties at the threshold are kept, as the code's |B| >= threshold keeps them
    tied = magnitude_masks({"t": torch.tensor([[1.0, 1.0, 1.0, 0.5]])}, 0.75)
    assert tied["t"].tolist() == [[True, True, True, False]]
    with pytest.raises(ValueError, match="keeps no entry"):
        magnitude_masks({"t": torch.ones(2, 2)}, 0.9)
    with pytest.raises(ValueError, match=r"sparsity must be in \[0, 1\)"):
        magnitude_masks(ups, 1.0)


def test_masked_entries_stay_zero_after_adamw_steps():
    from moram_avalanche.layers.lori import LoRILinear

    torch.manual_seed(0)
    layer = LoRILinear(nn.Linear(6, 5), rank=3, scale=2.0)
    mask = torch.rand(5, 3) > 0.6
    layer.up.data.fill_(1.0)
    layer.set_mask(mask)
    assert torch.count_nonzero(layer.up) == 0  # LoRI-S restarts B from zero
    down = layer.down.detach().clone()
    optimizer = torch.optim.AdamW([p for p in layer.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.01)
    for _ in range(5):
        optimizer.zero_grad()
        layer(torch.randn(4, 6)).pow(2).sum().backward()
        optimizer.step()
    assert torch.count_nonzero(layer.up[~mask]) == 0
    assert torch.count_nonzero(layer.up[mask]) == mask.sum()  # the kept entries did train
    assert torch.equal(layer.down, down)
    assert set(layer.state_keys) == {"down", "up", "mask", "masked"}


def _lori_layers(strategy):
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lori import LoRILinear

    return find_layers(strategy.model, LoRILinear)


def test_lori_d_trains_only_b_on_every_projection():
    strategy, matrix = build("lori-d", "llama", rank=4)
    layers = _lori_layers(strategy)
    projections = {name.rsplit(".", 1)[-1] for name in layers}
    assert projections == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    downs = {name: layer.down.detach().clone() for name, layer in layers.items()}
    trainable = {n for n, p in strategy.model.named_parameters() if p.requires_grad}
    assert trainable and all(n.endswith(".up") for n in trainable)
    bench = benchmark()
    strategy.train(bench.train_stream[0])
    strategy.eval(bench.test_stream)
    assert all(torch.equal(layer.down, downs[name]) for name, layer in layers.items())
    assert any(torch.count_nonzero(layer.up) for layer in layers.values())
    assert not any(bool(layer.masked) for layer in layers.values())


def test_lori_s_runs_both_stages_and_keeps_its_mask_through_the_stream():
    strategy, matrix = build("lori-s", "llama", rank=4, sparsity=0.75, dense_lr=1e-2)
    layers = _lori_layers(strategy)
    downs = {name: layer.down.detach().clone() for name, layer in layers.items()}
    bench = benchmark()
    for experience in bench.train_stream:
        strategy.train(experience)
        strategy.eval(bench.test_stream)
        masks = torch.cat([layer.mask.reshape(-1) for layer in layers.values()])
        total = masks.numel()
        assert masks.sum() >= int(0.25 * total)  # k kept (ties may add), by magnitude over the whole model
        assert masks.sum() <= int(0.25 * total) + 5
        for layer in layers.values():
            assert bool(layer.masked) and torch.count_nonzero(layer.up[~layer.mask]) == 0
    assert sum(int(torch.count_nonzero(layer.up)) for layer in layers.values()) > 0
    assert all(torch.equal(layer.down, downs[name]) for name, layer in layers.items())
    assert matrix.result().shape == (3, 3) and not np.isnan(matrix.result()).any()


def test_lori_s_mask_is_the_magnitude_mask_of_its_dense_stage(monkeypatch):
    """The mask LoRI-S trains under is exactly magnitude_masks of the B its LoRI-D stage left."""
    from moram_avalanche.layers import lori
    from moram_avalanche.strategies.text import lori as text_lori

    seen = {}

    def spy(ups, sparsity):
        seen["ups"] = {k: v.detach().clone() for k, v in ups.items()}
        seen["masks"] = lori.magnitude_masks(ups, sparsity)
        return seen["masks"]

    monkeypatch.setattr(text_lori, "magnitude_masks", spy)
    strategy, _ = build("lori-s", "llama", rank=4, dense_lr=1e-2, lr=3e-3)
    rates = []
    fresh = strategy.fresh_optimizer
    strategy.fresh_optimizer = lambda params: rates.append(strategy.experience_lr()) or fresh(params)
    strategy.train(benchmark().train_stream[0])
    assert rates[-2:] == [1e-2, 3e-3]  # LoRI-D's stage at dense_lr, then LoRI-S's at lr, each a fresh AdamW
    layers = _lori_layers(strategy)
    assert any(torch.count_nonzero(up) for up in seen["ups"].values())  # stage 1 trained B
    assert all(torch.equal(layers[name].mask, mask) for name, mask in seen["masks"].items())
    kept = sum(int(m.sum()) for m in seen["masks"].values())
    total = sum(m.numel() for m in seen["masks"].values())
    assert kept >= int(0.1 * total)  # the default sparsity, 0.9


@pytest.mark.parametrize("name,options,match", [
    ("lori-s", {"sparsity": 1.0}, "sparsity"),
    ("lori-s", {"sparsity": -0.1}, "sparsity"),
    ("lori-s", {"dense_lr": 0.0}, "dense_lr"),
    ("lori-s", {"lr_schedule": "cosine"}, "lr_schedule must be 'constant'"),
    ("lori-d", {"rank": 0}, "rank"),
])
def test_bad_options_are_refused_in_one_line(name, options, match):
    with pytest.raises(ValueError, match=match) as error:
        build(name, "llama", **options)
    assert "\n" not in str(error.value)


def test_default_targets_refuse_a_model_without_the_seven_projections():
    with pytest.raises(ValueError, match="pass target_modules"):
        build("lori-d", "t5")
    strategy, _ = build("lori-d", "t5", target_modules=["q", "v"], rank=2)
    assert _lori_layers(strategy)


def test_defaults_are_the_codealpaca_scripts():
    from moram_avalanche.strategies.text.lori import TextLoRIS

    strategy, _ = build("lori-s", "llama", lr=5e-4)
    assert isinstance(strategy, TextLoRIS)
    assert (strategy.dense_lr, strategy.sparsity) == (5e-5, 0.9)
    layer = next(iter(_lori_layers(strategy).values()))
    assert layer.scale == 2.0  # lora_alpha 64 / r 32


def lori_loss_by_hand(lm, prompts, answers):
    """juzhengz/LoRI src/mask_trainers.py, by hand: per example the sum of the answer tokens' log
    probabilities (_get_batch_logps with average_log_prob=False: labels shifted by one for a causal
    model), the loss the mean of their negatives over the examples (lines 294, 299, 307)."""
    inputs, labels = lm.teacher_forced(prompts, answers)
    if lm.seq2seq:
        logits = lm.model(**inputs, labels=labels).logits
    else:
        logits, labels = lm.model(**inputs).logits[:, :-1], labels[:, 1:]
    mask = labels != -100
    picked = torch.gather(logits.float().log_softmax(-1), 2, labels.clamp(min=0).unsqueeze(2)).squeeze(2)
    per_example = (picked * mask).sum(-1)
    return -per_example.mean(), -(picked * mask).sum() / mask.sum()


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_loris_loss_sums_each_examples_tokens_and_averages_over_examples(family):
    options = {"rank": 4} if family == "llama" else {"rank": 4, "target_modules": ["q", "v"]}
    strategy, _ = build("lori-d", family, **options)
    lm = strategy.model
    assert lm.loss_reduction == "example-sum"
    prompts, answers = ["colour red", "size"], ["warm", "big small warm red"]  # answers of unequal lengths
    summed, token_mean = lori_loss_by_hand(lm, prompts, answers)
    torch.testing.assert_close(lm.loss(prompts, answers), summed, rtol=1e-5, atol=1e-6)
    lm.loss_reduction = "token-mean"  # the other rows' (and 0.6's) loss: the mean over the batch's tokens
    torch.testing.assert_close(lm.loss(prompts, answers), token_mean, rtol=1e-5, atol=1e-6)
    assert abs(summed.item() - token_mean.item()) > 1e-3


class LossSeen(SupervisedPlugin):
    """The loss the loop backpropagates at each step and LoRI's, by hand, on the same batch."""

    def __init__(self):
        super().__init__()
        self.pairs = []

    def before_backward(self, strategy, **kwargs):
        with torch.no_grad():
            by_hand, _ = lori_loss_by_hand(strategy.model, strategy.mb_x, strategy.mb_y)
        self.pairs.append((float(strategy.loss.detach()), float(by_hand)))


@pytest.mark.parametrize("name", ["lori-d", "lori-s"])
def test_the_strategy_trains_on_loris_summed_loss(name):
    seen = LossSeen()
    strategy, _ = build(name, "llama", rank=4, plugins=[seen])
    strategy.train(benchmark().train_stream[0])
    assert seen.pairs and all(loss == pytest.approx(hand, rel=1e-5) for loss, hand in seen.pairs)
    with pytest.raises(ValueError, match=r"loss_reduction must be one of .*LoRI's src/mask_trainers.py"):
        build(name, "llama", loss_reduction="sum")


def test_each_gradient_is_clipped_on_its_own():
    """LoRI clips every parameter's gradient by itself (grad_norm_strategy=even), not the global norm."""
    from moram_avalanche.layers.lori import clip_each_gradient

    big, small = torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    big.grad, small.grad = torch.tensor([3.0, 4.0]), torch.tensor([0.3, 0.4])  # norms 5 and 0.5
    clip_each_gradient([big, small], 1.0)
    torch.testing.assert_close(big.grad, torch.tensor([0.6, 0.8]))  # 5 -> 1
    torch.testing.assert_close(small.grad, torch.tensor([0.3, 0.4]))  # a global clip would have scaled it too


def test_the_strategy_clips_every_trained_b_before_each_step(monkeypatch):
    from moram_avalanche.strategies.text import lori as text_lori

    calls = []
    monkeypatch.setattr(text_lori, "clip_each_gradient", lambda params, norm: calls.append((len(params), norm)))
    strategy, _ = build("lori-d", "llama", rank=4)
    strategy.train(benchmark().train_stream[0])
    layers = _lori_layers(strategy)
    assert calls and all(call == (len(layers), 1.0) for call in calls)  # one B per layer, LoRI's max_grad_norm 1
    calls.clear()
    unclipped, _ = build("lori-d", "llama", rank=4, max_grad_norm=None)
    unclipped.train(benchmark().train_stream[0])
    assert calls == []
    # The clip is the optimizer's step pre-hook (moram_avalanche.algorithms.mixed_precision), so with
    # gradient accumulation it clips the accumulated float32 gradient once per optimizer step; the
    # refusal of accumulation_steps > 1 (the clip used to run on every minibatch's partial sum) is gone:
    # 2 optimizer steps of 2 minibatches each, 2 clips
    accumulated, _ = build("lori-d", "llama", rank=4, accumulation_steps=2)
    accumulated.train(benchmark().train_stream[0])
    assert calls == [(len(layers), 1.0)] * 2
    build("lori-s", "llama", accumulation_steps=2, max_grad_norm=None)
