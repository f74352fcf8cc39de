"""Float32 master weights and clipping on float32 gradients (DeepSpeed's bf16 mode), on hand-computed cases."""

import pytest
import torch

from moram_avalanche.algorithms.mixed_precision import (
    GradientClip,
    MasterWeights,
    clip_global_norm,
    master_copies,
    stepped_parameters,
    training_optimizer,
)


def adamw(lr):
    return lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=0.0, foreach=True)


def sgd(params):
    return torch.optim.SGD(params, lr=1.0)


def run_steps(param, optimizer, grad, steps):
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        param.grad = torch.full_like(param, grad)
        optimizer.step()


def test_a_bf16_weight_follows_the_float32_trajectory_rounded_where_pure_bf16_stays_put():
    """A constant gradient g: each AdamW step moves a weight by lr * g / (|g| + eps) (the bias-corrected
    moments are g and g^2), so 300 steps at lr 1e-5 from 1.0 reach 1 - 300e-5 = 0.997. bf16 spaces its
    numbers below 1 by 2^-8: 0.997 rounds to 1 - 2^-8 = 0.99609375. Pure bf16 loses every update
    (1e-5 is below half a spacing, 2^-9) and stays at 1.0."""
    steps, lr, g = 300, 1e-5, 0.5  # 0.5 is exact in bf16; 0.997 is far from the midpoint 1 - 2^-9
    mixed = torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))
    pure = torch.nn.Parameter(torch.ones(1, dtype=torch.bfloat16))
    reference = torch.nn.Parameter(torch.ones(1))
    with_masters = training_optimizer([mixed], adamw(lr))
    assert isinstance(with_masters, MasterWeights)
    run_steps(mixed, with_masters, g, steps)
    run_steps(pure, training_optimizer([pure], adamw(lr), master_weights=False), g, steps)
    run_steps(reference, adamw(lr)([reference]), g, steps)

    master = master_copies(with_masters)[0]
    assert master.dtype == torch.float32
    # by hand: 0.997, within one float32 rounding per step (an ulp below 1 is 2^-24)
    assert master.item() == pytest.approx(1 - steps * lr * g / (g + 1e-8), abs=steps * 2 ** -24)
    assert torch.equal(master, reference.detach())  # the float32 reference's step, bit for bit
    assert mixed.dtype == torch.bfloat16 and mixed.item() == 1 - 2 ** -8  # 0.997 rounded to bf16
    assert torch.equal(mixed.detach(), reference.detach().to(torch.bfloat16))
    assert pure.item() == 1.0  # every update below half a bf16 spacing: lost
    state = with_masters.state[master]
    assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.float32  # float32 moments
    assert mixed.grad is None or mixed.grad.dtype == torch.bfloat16
    assert master.grad is None  # the float32 gradient is freed after the step


def test_a_clipped_step_is_the_hand_computed_one_on_float32_gradients():
    """Gradient (3, 4): norm 5, bound 1: scaled by 1 / (5 + 1e-6) (torch's and DeepSpeed's coefficient);
    one SGD step at lr 1 from 0 lands on -(0.6, 0.8), the weight its bf16 rounding. A gradient of norm
    0.5 is under the bound and steps unscaled."""
    seen = []

    def recording_clip(params, max_norm):
        seen.extend(p.grad.dtype for p in params)
        return clip_global_norm(params, max_norm)

    weight = torch.nn.Parameter(torch.zeros(2, dtype=torch.bfloat16))
    optimizer = training_optimizer([weight], sgd, clip=GradientClip(1.0, recording_clip))
    weight.grad = torch.tensor([3.0, 4.0], dtype=torch.bfloat16)
    optimizer.step()
    master = master_copies(optimizer)[0]
    expected = -torch.tensor([3.0, 4.0]) / (5 + 1e-6)
    torch.testing.assert_close(master, expected, rtol=0, atol=1e-7)
    assert torch.equal(weight.detach(), expected.to(torch.bfloat16))
    assert seen == [torch.float32]  # clipped on the float32 copy

    optimizer.zero_grad()
    weight.grad = torch.tensor([0.3, 0.4], dtype=torch.bfloat16)
    before = master.clone()
    optimizer.step()
    torch.testing.assert_close(master, before - torch.tensor([0.3, 0.4]).to(torch.bfloat16).float(), rtol=0, atol=0)


def test_a_float32_parameter_is_clipped_in_place_and_keeps_the_plain_optimizer():
    weight = torch.nn.Parameter(torch.zeros(2))
    built = []
    optimizer = training_optimizer([weight], lambda params: built.append(sgd(params)) or built[-1])
    assert optimizer is built[0]  # no wrapper, no hook: a float32 model trains as without this module
    assert master_copies(optimizer) == [] and stepped_parameters(optimizer) == [weight]
    clipped = training_optimizer([weight], sgd, clip=GradientClip(1.0))
    weight.grad = torch.tensor([3.0, 4.0])
    clipped.step()
    torch.testing.assert_close(weight.detach(), -torch.tensor([3.0, 4.0]) / (5 + 1e-6))


def test_masters_are_read_again_before_the_first_step_and_only_stepped_weights_are_written():
    """A plugin may set a weight after the optimizer is built and before it first steps (LFPT5's first
    prompt rows): the first step starts from that value. A weight without a gradient is left alone."""
    moved = torch.nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))
    idle = torch.nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))
    optimizer = training_optimizer([moved, idle], sgd)
    assert stepped_parameters(optimizer) == [moved, idle]
    with torch.no_grad():
        moved.fill_(2.0)
        idle.fill_(3.0)
    moved.grad = torch.tensor([0.5], dtype=torch.bfloat16)
    optimizer.step()
    assert moved.item() == 1.5 and idle.item() == 3.0
    assert [m.item() for m in master_copies(optimizer)] == [1.5, 3.0]


def test_bad_bounds_are_refused_with_the_fix():
    for bad in (0, -1.0, float("inf"), float("nan"), True, "1"):
        with pytest.raises(ValueError, match=r"max_grad_norm must be a finite number > 0 \(the release's"):
            GradientClip(bad)
    with pytest.raises(ValueError, match="without a closure"):
        MasterWeights([torch.nn.Parameter(torch.zeros(1, dtype=torch.bfloat16))], sgd).step(lambda: 0.0)
