"""The MoRAM layer written the obvious way, for tests and speed comparisons only.

This is a literal transcription of the method's six steps (stated in
:mod:`~moram_avalanche.layers.moram.paths.reference`): old and new atoms are concatenated on every
call, the top-k is applied as a full ``-inf`` mask built with ``scatter``, and the read-out is a
dense ``[N, R] x [R, d_out]`` product. It shares no code with
:class:`~moram_avalanche.layers.moram.layer.MoRAMLinear`: the test suite checks every path against it.

Routing ablations: ``topk=None`` keeps every atom, ``temperature=None`` means 1, and
``router`` (blocks of router rows ``[r_t, d_in]``) replaces the relevance by ``x G^T``.
"""

from __future__ import annotations

import torch


def naive_mixture(
    proj: torch.Tensor, *, topk, temperature, threshold: float, training: bool,
    router_logits: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mixture weights ``w`` ``[N, R]`` from projections ``p`` ``[N, R]`` (steps 2-5).

    ``router_logits`` ``[N, R]``, when given, is the relevance instead of ``p / ||p||``.
    """
    if router_logits is None:
        norm = torch.clamp(torch.linalg.vector_norm(proj, dim=-1, keepdim=True), min=1e-12)
        relevance = proj / norm
    else:
        relevance = router_logits
    temperature = 1.0 if temperature is None else temperature
    k = proj.shape[-1] if topk is None else min(max(topk, 2), proj.shape[-1])
    top_idx = torch.topk(relevance, k, dim=-1).indices
    masked = torch.full_like(relevance, float("-inf")).scatter(
        -1, top_idx, relevance.gather(-1, top_idx)
    )
    mix = torch.softmax(masked / temperature, dim=-1)
    if not training and threshold > 0:
        mix = mix * (relevance >= threshold).to(mix.dtype)
    return mix


def naive_moram(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    *,
    topk: int,
    temperature,
    threshold: float,
    training: bool,
    router: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``W x + b + sum_i w_i (A_i x) B_i`` for blocks of keys ``[r_t, d_in]`` and values ``[d_out, r_t]``."""
    out = x @ weight.t()
    if bias is not None:
        out = out + bias
    if not keys:
        return out
    all_keys = torch.cat(keys, dim=0)
    all_values = torch.cat(values, dim=1)
    proj = x @ all_keys.t()
    logits = None if router is None else x @ torch.cat(router, dim=0).t()
    mix = naive_mixture(
        proj, topk=topk, temperature=temperature, threshold=threshold, training=training,
        router_logits=logits,
    )
    return out + (mix * proj) @ all_values.t()


class NaiveMoRAMLinear(torch.nn.Module):
    """Module form of :func:`naive_moram`: frozen blocks plus one trainable block, concatenated per call."""

    def __init__(self, weight, bias, frozen_keys, frozen_values, new_keys, new_values, *,
                 topk=16, temperature=0.01, threshold=0.2):
        super().__init__()
        self.register_buffer("weight", weight.detach().clone())
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.register_buffer("frozen_keys", frozen_keys.detach().clone())
        self.register_buffer("frozen_values", frozen_values.detach().clone())
        self.new_keys = torch.nn.Parameter(new_keys.detach().clone())
        self.new_values = torch.nn.Parameter(new_values.detach().clone())
        self.topk, self.temperature, self.threshold = topk, temperature, threshold

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        out = naive_moram(
            flat, self.weight, self.bias,
            [self.frozen_keys, self.new_keys], [self.frozen_values, self.new_values],
            topk=self.topk, temperature=self.temperature, threshold=self.threshold,
            training=self.training,
        )
        return out.reshape(*x.shape[:-1], out.shape[-1])


__all__ = ["NaiveMoRAMLinear", "naive_mixture", "naive_moram"]
