"""O-LoRA's regularisers on hand-computed cases."""

import pytest
import torch

from moram_avalanche.algorithms.olora import l2_loss, orthogonality_loss


def test_orthogonality_hand_computed():
    old = [torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 1.0]])]
    new = torch.tensor([[2.0, -1.0]])
    # D_0 D_new^T = [[2], [-1]]; D_1 D_new^T = [[1]]
    assert orthogonality_loss(new, old, power=1).item() == pytest.approx(2 + 1 + 1)
    assert orthogonality_loss(new, old, power=2).item() == pytest.approx(4 + 1 + 1)
    assert orthogonality_loss(new, [torch.tensor([[1.0, 2.0]])]).item() == pytest.approx(0.0)  # orthogonal
    assert orthogonality_loss(new, []).item() == 0.0


def test_orthogonality_gradient_reaches_only_the_new_factor():
    old = torch.tensor([[1.0, 0.0]])
    new = torch.tensor([[3.0, 4.0]], requires_grad=True)
    orthogonality_loss(new, [old], power=2).backward()
    assert torch.allclose(new.grad, torch.tensor([[6.0, 0.0]]))  # d/dnew (3)^2 = 2*3 on the first entry


def test_l2_and_errors():
    assert l2_loss([torch.tensor([[3.0, 4.0]]), torch.tensor([1.0])]).item() == pytest.approx(6.0)
    with pytest.raises(ValueError, match="power"):
        orthogonality_loss(torch.ones(1, 2), [], power=3)
    with pytest.raises(ValueError, match="different widths"):
        orthogonality_loss(torch.ones(1, 2), [torch.ones(1, 3)])


def test_olora_plugin_hand_computed():
    from torch import nn

    from moram_avalanche.layers.task_lora import TaskLoRALinear
    from moram_avalanche.strategies.text.plugins.olora import OLoRAPlugin

    layer = TaskLoRALinear(nn.Linear(2, 2), rank=1)
    layer.expand()
    layer.expand()
    with torch.no_grad():
        layer.downs[0].copy_(torch.tensor([[1.0, 0.0]]))
        layer.downs[1].copy_(torch.tensor([[2.0, -1.0]]))
        layer.ups[1].copy_(torch.tensor([[0.0], [0.0]]))

    class Stub:
        model = nn.Sequential(layer)
        loss = torch.tensor(1.0)

    OLoRAPlugin(lambda_orth=0.5, lambda_l2=0.1).before_backward(Stub)
    # 1 + 0.5 * |2| + 0.1 * (||[2, -1]|| + ||0||)
    assert Stub.loss.item() == pytest.approx(1 + 1.0 + 0.1 * 5 ** 0.5)

    # one value per task name (O-LoRA scripts/long.sh): WiC's 5 and 0.3
    Stub.loss, Stub.experience = torch.tensor(1.0), type("Experience", (), {"task_name": "wic"})
    per_task = OLoRAPlugin(lambda_orth={"mnli": 0.5, "wic": 5.0}, lambda_l2={"mnli": 0.0, "wic": 0.3})
    per_task.before_backward(Stub)
    assert Stub.loss.item() == pytest.approx(1 + 5.0 * 2 + 0.3 * 5 ** 0.5)
    Stub.experience.task_name = "cb"
    with pytest.raises(ValueError, match=r"lambda_orth gives values for tasks \['mnli', 'wic'\], not for 'cb'"):
        per_task.before_training_exp(Stub)
    with pytest.raises(ValueError, match="lambda_l2"):
        OLoRAPlugin(lambda_l2={"mnli": -1.0})
