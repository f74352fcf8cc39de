"""``hidelora`` (TRACE's HiDeLoRA row, as the TRACE-style code runs it): the contrastive term by hand
and against a naive reference, the loss a training step backpropagates, what trains, the one LoRA
every task reads, the row reduced to SeqLoRA when its terms are off, bad options."""

import math
from types import SimpleNamespace

import pytest
import torch
from avalanche.core import SupervisedPlugin

from text_runs import FAST, benchmark, build


def naive_contrast(down, temperature):
    """CE(D D^T / t, I) written out with Python floats: mean_i [log sum_j exp(s_ij) - s_ii]."""
    rows = down.tolist()
    total = 0.0
    for i, a in enumerate(rows):
        logits = [sum(x * y for x, y in zip(a, b)) / temperature for b in rows]
        total += math.log(sum(math.exp(s) for s in logits)) - logits[i]
    return total / len(rows)


def test_the_contrastive_term_by_hand():
    from moram_avalanche.algorithms.hidelora import HIDELORA_TEMPERATURE, row_contrast_loss

    assert HIDELORA_TEMPERATURE == 0.8
    # D D^T = [[1, 0], [0, 4]] / 0.8 = [[1.25, 0], [0, 5]]: rows log(1 + e^-1.25) and log(1 + e^-5)
    value = row_contrast_loss(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    assert float(value) == pytest.approx((math.log1p(math.exp(-1.25)) + math.log1p(math.exp(-5))) / 2, rel=1e-6)
    # D D^T = [[2, 1], [1, 1]] / 0.8 = [[2.5, 1.25], [1.25, 1.25]]: row 1's logits are equal -> log 2
    value = row_contrast_loss(torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    assert float(value) == pytest.approx((math.log1p(math.exp(-1.25)) + math.log(2)) / 2, rel=1e-6)
    down = torch.randn(5, 7, generator=torch.Generator().manual_seed(3))
    assert float(row_contrast_loss(down, 0.3)) == pytest.approx(naive_contrast(down, 0.3), rel=1e-5)


def test_the_plugin_adds_the_weighted_terms_of_the_trainable_loras_only():
    from moram_avalanche.layers.lora import LoRALinear
    from moram_avalanche.strategies.text.plugins.hidelora import HiDeLoRAPlugin

    model = torch.nn.Sequential(LoRALinear(torch.nn.Linear(2, 3), 2), LoRALinear(torch.nn.Linear(2, 3), 2))
    with torch.no_grad():
        model[0].down.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        model[0].up.copy_(torch.tensor([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]]))  # ||U|| = 5
    model[1].down.requires_grad_(False)  # a frozen LoRA: no term
    model[1].up.requires_grad_(False)
    strategy = SimpleNamespace(model=model, loss=torch.tensor(1.0))
    HiDeLoRAPlugin(lambda_contrast=0.5, lambda_l2=0.1).before_backward(strategy)
    contrast = (math.log1p(math.exp(-1.25)) + math.log1p(math.exp(-5))) / 2
    norms = math.sqrt(5) + 5  # ||D||_F = sqrt(1 + 4), ||U||_F = 5
    assert float(strategy.loss.detach()) == pytest.approx(1 + 0.5 * contrast + 0.1 * norms, rel=1e-6)
    # the gradient reaches the trainable down-projection: d/dD of 0.5 * CE, by finite differences
    strategy.loss.backward()
    eps, d = 1e-3, model[0].down.detach().double()
    for i, j in ((0, 0), (0, 1), (1, 1)):
        up, down = d.clone(), d.clone()
        up[i, j] += eps
        down[i, j] -= eps
        numeric = 0.5 * (naive_contrast(up, 0.8) - naive_contrast(down, 0.8)) / (2 * eps)
        numeric += 0.1 * (up.norm() - down.norm()).item() / (2 * eps)
        assert float(model[0].down.grad[i, j]) == pytest.approx(numeric, abs=1e-4)


class LossSeen(SupervisedPlugin):
    """Each training step's task loss, backpropagated loss and the trainable downs as they were."""

    def __init__(self):
        super().__init__()
        self.steps = []

    def before_backward(self, strategy, **kwargs):
        from moram_avalanche.layers.base import find_layers
        from moram_avalanche.layers.lora import LoRALinear

        downs = [layer.down.detach().clone() for layer in find_layers(strategy.model, LoRALinear).values()]
        self.steps.append((float(strategy.mb_output.detach()), float(strategy.loss.detach()), downs))


def test_a_training_step_backpropagates_the_task_loss_plus_half_the_summed_contrast():
    seen = LossSeen()
    strategy, _ = build("hidelora", "llama", plugins=[seen])
    strategy.train(benchmark().train_stream[0])
    assert len(seen.steps) == FAST["iterations"]
    for task_loss, loss, downs in seen.steps:
        assert len(downs) == 4  # q_proj and v_proj of two layers (O-LoRA's and the code's default targets)
        by_hand = task_loss + 0.5 * sum(naive_contrast(d.double(), 0.8) for d in downs)
        assert loss == pytest.approx(by_hand, rel=1e-5)


def test_one_lora_trains_through_the_stream_and_every_task_reads_it():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear

    strategy, _ = build("hidelora", "llama")
    model = strategy.model
    layers = find_layers(model, LoRALinear)
    assert sorted(name.rsplit(".", 1)[-1] for name in layers) == ["q_proj", "q_proj", "v_proj", "v_proj"]
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable == {f"{name}.{factor}" for name in layers for factor in ("down", "up")}
    frozen = {k: v.clone() for k, v in model.state_dict().items() if not k.endswith((".down", ".up"))}
    stream = benchmark()
    for experience in stream.train_stream:
        before = {name: (layer.down.detach().clone(), layer.up.detach().clone()) for name, layer in layers.items()}
        strategy.train(experience)
        for name, layer in layers.items():  # the same LoRA moved on every task (nothing frozen after one)
            assert layer.down.requires_grad and layer.up.requires_grad
            assert not torch.equal(layer.down, before[name][0]) and not torch.equal(layer.up, before[name][1])
        after = model.state_dict()
        assert all(torch.equal(after[k], v) for k, v in frozen.items())  # the base never trains
    model.eval()
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(1))
    for layer in layers.values():  # no task routing: base + scale * U D x, for every task alike
        expected = layer.base(x) + 4.0 * (x @ layer.down.t() @ layer.up.t())
        torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)


def test_with_its_terms_off_the_row_is_seq_lora_step_for_step():
    torch.manual_seed(0)
    hide, hide_matrix = build("hidelora", "llama", lambda_contrast=0.0)
    torch.manual_seed(0)
    seq, seq_matrix = build("seq-lora", "llama")
    for strategy in (hide, seq):
        torch.manual_seed(1)
        strategy.train(benchmark().train_stream[0])
    a, b = hide.model.state_dict(), seq.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    torch.manual_seed(0)
    on, _ = build("hidelora", "llama")
    torch.manual_seed(1)
    on.train(benchmark().train_stream[0])
    assert any(not torch.equal(on.model.state_dict()[k], a[k]) for k in a if k.endswith(".down"))


@pytest.mark.parametrize("option,value", [("lambda_contrast", -1.0), ("lambda_contrast", float("nan")),
                                          ("lambda_l2", -0.5), ("lambda_l2", {"a": 1.0}), ("temperature", 0.0),
                                          ("temperature", "0.8"), ("rank", 0)])
def test_bad_options_are_refused_in_one_line(option, value):
    from moram_avalanche.strategies.options import check_strategy_options
    from moram_avalanche.strategies.registry import get_strategy

    cls = get_strategy("hidelora", family="text")
    with pytest.raises((ValueError, TypeError)) as error:
        check_strategy_options(cls, {option: value})
    assert option in str(error.value) and "\n" not in str(error.value)


def test_the_command_line_refuses_a_bad_option_in_one_line_before_anything_is_written(tmp_path):
    import subprocess
    import sys

    (tmp_path / "data").mkdir()
    done = subprocess.run([sys.executable, "-m", "moram_avalanche", "run", "--benchmark", "trace", "--data-root",
                           str(tmp_path / "data"), "--model", "x", "--strategy", "hidelora", "--set", "temperature=0",
                           "--log-dir", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("moram-avalanche run: --set temperature=0: temperature must be a finite number > 0")
    assert not (tmp_path / "out").exists()
