"""WeightCopy on a model with known weights: interpolation, averaging, L2 distance, placement."""

import pytest
import torch
from torch import nn

from moram_avalanche.algorithms.weight_copy import WeightCopy


def linear(weight, bias, dtype=torch.float32):
    layer = nn.Linear(2, 1).to(dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([weight], dtype=dtype))
        layer.bias.copy_(torch.tensor([bias], dtype=dtype))
    return layer


def values(layer):
    return layer.weight.flatten().tolist() + layer.bias.tolist()


@pytest.mark.parametrize("on", ["cpu", "model"])
def test_wise_interpolation_by_hand(on):
    layer = linear([1.0, 2.0], 3.0)
    start = WeightCopy(layer, on)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[5.0, 6.0]]))
        layer.bias.fill_(7.0)
    start.blend_into(layer, 0.8)
    assert values(layer) == pytest.approx([0.8 * 5 + 0.2 * 1, 0.8 * 6 + 0.2 * 2, 0.8 * 7 + 0.2 * 3])


@pytest.mark.parametrize("on", ["cpu", "model"])
def test_running_average_is_the_mean_of_the_points(on):
    layer = linear([1.0, -1.0], 0.0)
    average = WeightCopy(layer, on)  # point 1: (1, -1, 0)
    points = [[1.0, -1.0, 0.0]]
    for count, point in enumerate([[3.0, 5.0, 2.0], [8.0, 2.0, -5.0], [0.0, 0.0, 9.0]], start=1):
        with torch.no_grad():
            layer.weight.copy_(torch.tensor([point[:2]]))
            layer.bias.fill_(point[2])
        average.average_in(layer, count)
        points.append(point)
    average.load_into(layer)
    expected = [sum(col) / len(points) for col in zip(*points)]  # (3, 1.5, 1.5)
    assert values(layer) == pytest.approx(expected)


def test_squared_distance_and_its_gradient():
    layer = linear([1.0, 2.0], 3.0)
    anchor = WeightCopy(layer)
    assert anchor.squared_distance(layer).item() == 0
    with torch.no_grad():
        layer.weight.add_(torch.tensor([[4.0, -1.0]]))
        layer.bias.add_(2.0)
    loss = anchor.squared_distance(layer)
    assert loss.item() == pytest.approx(16 + 1 + 4)
    loss.backward()
    assert layer.weight.grad.tolist() == [[8.0, -2.0]] and layer.bias.grad.tolist() == [4.0]


def test_copies_are_detached_float32_on_cpu_or_the_model_dtype():
    layer = linear([1.0, 2.0], 3.0, dtype=torch.float64)
    on_cpu, on_model = WeightCopy(layer, "cpu"), WeightCopy(layer, "model")
    assert {t.dtype for t in on_cpu.tensors.values()} == {torch.float32}
    assert {t.dtype for t in on_model.tensors.values()} == {torch.float64}
    with torch.no_grad():
        layer.bias.fill_(-1.0)
    assert on_model.tensors["bias"].item() == 3.0  # a copy, not a view
    assert on_cpu.nbytes == 3 * 4 and on_model.nbytes == 3 * 8
    with pytest.raises(ValueError, match="'cpu' or 'model'"):
        WeightCopy(layer, "gpu")


def test_a_changed_model_is_refused():
    layer = linear([1.0, 2.0], 3.0)
    copy = WeightCopy(layer)
    layer.extra = nn.Parameter(torch.zeros(1))
    with pytest.raises(ValueError, match="model only: \\['extra'\\]"):
        copy.blend_into(layer, 0.5)
