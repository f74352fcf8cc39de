"""A language model's training step with MoRAM's dropout drawn again in the backward
(layers/moram/dropped.py): the same loss and gradients as autograd through ``F.dropout``, bit
for bit, on the library's injected layers and on the peft method, with less kept for the backward."""

import pytest
import torch

from old_dropout import the_old_way
from tiny_text import batch, tiny_llama, tiny_t5

TARGETS = {"llama": ["q_proj", "k_proj", "v_proj", "o_proj"], "t5": ["q", "k", "v", "o"]}


def injected(build, family):
    from moram_avalanche.text.inject import add_task, inject_moram

    model = build()
    inject_moram(model, TARGETS[family], atoms_per_task=4, topk=2, dropout=0.2)
    for _ in range(2):
        add_task(model)
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.requires_grad:
                    parameter.normal_(std=0.3)  # (values are zero at a task's start: draw them)
    return model


def through_peft(build, family):
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    task_type = "CAUSAL_LM" if family == "llama" else "SEQ_2_SEQ_LM"
    return get_peft_model(build(), MoRAMConfig(task_type=task_type, target_modules=TARGETS[family], atoms_per_task=4,
                                               topk=2, dropout=0.2, init_weights=False))


def step(model, family, keep=None):
    """One training step's loss and the trainable parameters' gradients; ``keep``: record the
    bytes of every tensor kept for the backward (each storage once) and of every MoRAM layer's input."""
    x, y = batch()
    model.train()
    torch.manual_seed(11)
    kept, inputs = {}, {}
    from moram_avalanche.text import DropoutMoRAMLinear, MoRAMTunerLayer

    for module in model.modules():
        if isinstance(module, (DropoutMoRAMLinear, MoRAMTunerLayer)):  # (a peft layer's banks are not called)
            module.register_forward_pre_hook(lambda module, args: inputs.setdefault(id(module), args[0]))

    def pack(tensor):
        kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(input_ids=x, labels=x if family == "llama" else y).loss
    loss.backward()
    if keep is not None:
        keep.append(sum(kept.values()))
        for trained in (False, True):  # every layer's input, and those that get a gradient
            xs = [x for x in inputs.values() if x.requires_grad or not trained]
            distinct = {x.untyped_storage().data_ptr(): x.numel() * x.element_size() for x in xs}
            keep.extend([sum(x.numel() * x.element_size() for x in xs), sum(distinct.values())])
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("family, build", [("llama", tiny_llama), ("t5", tiny_t5)])
@pytest.mark.parametrize("make", [injected, through_peft])
@pytest.mark.parametrize("redraw", [False, True], ids=["noise kept", "drawn again"])
def test_a_training_step_is_the_same_bit_for_bit_and_keeps_less(monkeypatch, family, build, make, redraw):
    from moram_avalanche.layers.moram import dropped

    monkeypatch.setattr(dropped, "REDRAW_ON_CPU", redraw)  # True: what a GPU keeps
    lean_bytes, plain_bytes = [], []
    lean = step(make(build, family), family, lean_bytes)
    with monkeypatch.context() as patch:
        the_old_way(patch)
        plain = step(make(build, family), family, plain_bytes)
    assert torch.equal(lean[0], plain[0])
    assert lean[1].keys() == plain[1].keys() and len(lean[1]) >= 8
    for name, grad in lean[1].items():
        assert torch.equal(grad, plain[1][name]), name
    # autograd through F.dropout keeps each layer's dropped tokens (as large as its input), and the noise
    # where the input gets a gradient; the lean read keeps each distinct input at most once instead of the
    # dropped tokens: of every layer where it draws again, of those whose input gets a gradient where it
    # keeps the noise (elsewhere it is autograd's way)
    assert plain_bytes[1:] == lean_bytes[1:] and lean_bytes[3] > lean_bytes[4] > 0
    every, distinct = lean_bytes[1:3] if redraw else lean_bytes[3:5]
    assert plain_bytes[0] - lean_bytes[0] >= every - distinct > 0
