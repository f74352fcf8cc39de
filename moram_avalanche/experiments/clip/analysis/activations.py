"""Which atoms fire on which tokens (paper Figs. 3, 5-8).

The mixture weight of atom ``i`` on a token ``x`` is the ``w_i`` of the layer's routing
(method reference, steps 2-5: ``s = p / ||p||``, top-k, ``softmax(s / tau)``, and at inference
the gate ``s_i >= delta``), 0 for atoms not kept. :func:`mixture_weights` asks the layer itself
(:meth:`~moram_avalanche.layers.moram.layer.MoRAMLinear.mixture`, the same routing its forward
runs), so what is drawn is what the model computes. :func:`layer_activations` runs the model
on a batch of images (or prompts) and returns, for one layer, the weights of every atom on
every token of every sample: the paper's atoms x tokens maps, and, averaged over tokens and
samples, its activation ratios.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, List, NamedTuple

import torch
from torch import nn

from ....layers.moram.layer import MoRAMLinear


def mixture_weights(layer: MoRAMLinear, tokens: torch.Tensor) -> torch.Tensor:
    """``[N, R]`` mixture weights of the layer's ``R`` atoms on ``tokens`` ``[N, d_in]``.

    In eval mode (``layer.eval()``) the gate ``delta`` applies, as at inference; in train mode
    it does not. Computed by the layer's own routing; no gradient.
    """
    if layer.num_atoms == 0:
        return tokens.new_zeros(tokens.shape[0], 0)
    gate = layer.threshold if (not layer.training and layer.threshold > 0) else None
    with torch.no_grad():
        _, idx, weights = layer.mixture(tokens.to(layer.keys.dtype), None, None, layer.effective_topk, gate)
    dense = weights.new_zeros(tokens.shape[0], layer.num_atoms)
    return dense.scatter_(1, idx, weights)


@contextlib.contextmanager
def captured_inputs(module: nn.Module) -> Iterator[List[torch.Tensor]]:
    """While open, the input of every forward call of ``module`` is appended to the list yielded."""
    seen: List[torch.Tensor] = []
    handle = module.register_forward_hook(lambda _module, args, _out: seen.append(args[0].detach()))
    try:
        yield seen
    finally:
        handle.remove()


def as_samples_first(x: torch.Tensor, samples: int, length: int) -> torch.Tensor:
    """A layer input ``[B, L, d]`` or ``[L, B, d]`` (sequence-first towers) as ``[B, L, d]``."""
    if x.dim() != 3:
        raise ValueError(f"expected a [batch, tokens, width] layer input, got {tuple(x.shape)}")
    if tuple(x.shape[:2]) == (samples, length):
        return x
    if tuple(x.shape[:2]) == (length, samples):
        return x.transpose(0, 1)
    raise ValueError(f"a layer input of shape {tuple(x.shape)} matches neither {samples} samples of "
                     f"{length} tokens nor the transpose")


class Activations(NamedTuple):
    """The mixture weights of one layer's atoms on every token of a batch."""

    weights: torch.Tensor  # [B, R, L] (samples, atoms, tokens)
    atom_task: torch.Tensor  # [R] the task (0-based) that added each atom


def layer_activations(model: nn.Module, layer_name: str, inputs: torch.Tensor, *,
                      encoder: str = "visual") -> Activations:
    """Run ``model`` (in eval mode) on ``inputs`` and return ``layer_name``'s mixture weights.

    Args:
        model: an open_clip CLIP with MoRAM layers.
        layer_name: the dotted name of one of them.
        inputs: images ``[B, 3, H, W]`` for ``encoder="visual"``, token ids ``[B, L]`` for "text".
    """
    layer = model.get_submodule(layer_name)
    if not isinstance(layer, MoRAMLinear):
        raise ValueError(f"{layer_name} is a {type(layer).__name__}, not a MoRAM layer")
    if encoder not in ("visual", "text"):
        raise ValueError(f"encoder must be 'visual' or 'text', got {encoder!r}")
    was_training = model.training
    model.eval()
    try:
        weights = _weights(model, layer, inputs, encoder)
    finally:
        model.train(was_training)
    return Activations(weights, layer.atom_task.detach().cpu().clone())


def _weights(model: nn.Module, layer: MoRAMLinear, inputs: torch.Tensor, encoder: str) -> torch.Tensor:
    """``[B, R, L]`` weights; a batch as long as the sequence (an ambiguous layout) runs in halves."""
    encode = model.encode_image if encoder == "visual" else model.encode_text
    with torch.inference_mode(), captured_inputs(layer) as seen:
        encode(inputs)
    x, samples = seen[0], inputs.shape[0]
    if x.dim() == 3 and x.shape[0] == x.shape[1] and samples > 1:
        half = samples // 2
        return torch.cat([_weights(model, layer, inputs[:half], encoder),
                          _weights(model, layer, inputs[half:], encoder)])
    length = x.shape[1] if x.shape[0] == samples else x.shape[0]
    x = as_samples_first(x, samples, length)
    weights = mixture_weights(layer, x.reshape(-1, x.shape[-1]))
    return weights.reshape(samples, length, -1).transpose(1, 2).float().cpu()


__all__ = ["Activations", "as_samples_first", "captured_inputs", "layer_activations", "mixture_weights"]
