"""The hand-written backward of MoRAM's six steps, shared by every path.

Every path computes steps 1-6 (:mod:`~moram_avalanche.layers.moram.paths.reference` states them)
once, without autograd (:mod:`~moram_avalanche.layers.moram.paths.reference` on the CPU,
:mod:`~moram_avalanche.layers.moram.paths.dense` on a GPU), and :class:`MoRAMFunction`
attaches their backward. Ordinary autograd would differentiate through the concatenation
``[frozen; trainable]`` and so compute, then discard, the full ``[R, d]`` weight gradients, save
a dozen ``[N, R]`` intermediates and run each elementwise step of the router as its own kernel.
Here, with ``g = dL/dy`` and the path's router backward giving ``dL/dp`` ``[N, R]`` and the
trainable atoms' coefficients ``c_tail`` ``[N, r]`` (the router's own backward:
:mod:`~moram_avalanche.layers.moram.paths.reference`):

* ``dL/dB_tail = c_tail^T g``; ``dL/dW = g^T x``; ``dL/db = sum g`` (where they require it);
* ``dL/dx = dL/dp A + g W``; ``dL/dA_tail = dL/dp_tail^T x``.

Only the trainable rows (``num_frozen..`` of the bank) get gradients; the bank as the forward
read it is kept (``[R, d]``, small beside the ``[N, R]`` projections), so nothing is joined
again in the backward. Where the tokens are a dropout of the layer's input (the language
models' layer), the backward keeps the input and draws the dropout again instead of keeping
the tokens (:mod:`~moram_avalanche.layers.moram.dropped`).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch.autograd.function import once_differentiable

from .bank import BankRows
from .dropped import DroppedTokens


def needs_grad(tokens: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
               bank: BankRows, dropped: Optional[DroppedTokens] = None) -> bool:
    """Whether autograd needs the backward: grad mode on and some input requires a gradient
    (with ``dropped``, the tokens' gradient is its input's)."""
    if dropped is not None:
        tokens = dropped.x
    return torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (tokens, weight, bias, bank.new_keys, bank.new_values))


def attach_backward(out: torch.Tensor, tokens, weight, bias, bank: BankRows, proj: torch.Tensor, state: tuple,
                    router_backward: Callable, dropped: Optional[DroppedTokens] = None,
                    needed: Optional[bool] = None) -> torch.Tensor:
    """``out`` with :class:`MoRAMFunction`'s backward when a gradient is needed, else ``out`` as is.
    ``dropped``: the tokens are a dropout of ``dropped.x``, which the backward keeps instead.
    ``needed``: :func:`needs_grad`'s answer where the caller asked it for this call (None: asked here)."""
    if not (needs_grad(tokens, weight, bias, bank, dropped) if needed is None else needed):
        return out
    tokens, draw, kept = (tokens, None, None) if dropped is None else dropped
    return MoRAMFunction.apply(out, tokens, weight, bias, bank.keys, bank.values, bank.new_keys, bank.new_values,
                               proj, bank.num_frozen, state, router_backward, draw, kept)


class MoRAMFunction(torch.autograd.Function):
    """Gives the output ``y`` of steps 1-6, computed without autograd, its hand-written backward.

    Args of ``apply``: ``y [N, d_out]`` (returned as the output, marked as modified),
    ``tokens [N, d_in]``, ``weight [d_out, d_in]`` or None (then ``y`` holds only the atoms'
    term), ``bias [d_out]`` or None, the joined bank ``keys [R, d_in]`` and ``values [R, d_out]``
    as the forward read them, the trainable rows ``new_keys [r, d_in]`` and ``new_values
    [r, d_out]`` as autograd knows them (rows ``num_frozen..`` of the bank), or None, ``proj
    [N, R]`` and the path's routing ``state`` (a tuple of tensors) as the forward computed them,
    and the path's ``router_backward(grad_out, values, proj, state, start, upstream, tail) ->
    (dL/dp [N, R] or None, c_tail [N, R - start] or None)`` (``upstream``: ``dL/dp`` is needed;
    ``tail``: ``c_tail`` is). Gradients go to ``tokens``, ``weight``, ``bias``, ``new_keys`` and
    ``new_values``, where they require it. With a ``draw``
    (:class:`~moram_avalanche.layers.moram.dropped.DropoutDraw`), ``tokens`` is the layer's input
    ``x`` and the forward read ``dropout(x)``: the backward makes it again from ``x`` (and the
    ``kept`` noise, where it is kept) and gives ``x`` its gradient through the dropout.
    """

    @staticmethod
    def forward(ctx, y, tokens, weight, bias, keys, values, new_keys, new_values, proj, num_frozen, state,
                router_backward, draw=None, kept=None):
        ctx.mark_dirty(y)
        ctx.save_for_backward(tokens, weight, keys, values, proj, kept, *state)
        ctx.num_frozen, ctx.router_backward, ctx.draw = num_frozen, router_backward, draw
        ctx.set_materialize_grads(False)
        return y

    @staticmethod
    @once_differentiable  # (a second derivative through the hand-written backward raises, not a wrong number)
    def backward(ctx, grad_out):
        grads = [None] * 14
        if grad_out is None:
            return tuple(grads)
        tokens, weight, keys, values, proj, kept, *state = ctx.saved_tensors
        draw, x = ctx.draw, None
        if draw is not None:  # the forward's tokens again: dropout(x) from its kept noise or drawn again
            x = tokens
            dropped, mask = draw.again(x, kept)
            tokens = draw.tokens(dropped)
            del dropped
        needs = ctx.needs_input_grad
        grad_out = grad_out.contiguous().to(tokens.dtype)
        start = ctx.num_frozen
        grad_proj, tail = ctx.router_backward(grad_out, values, proj, tuple(state), start, needs[1] or needs[6],
                                              needs[7])
        if needs[7]:                                                   # dL/dB_tail = c_tail^T g
            grads[7] = tail.t() @ grad_out
        if needs[2]:                                                   # dL/dW = g^T x
            grads[2] = grad_out.t() @ tokens
        if needs[3]:
            grads[3] = grad_out.sum(0)
        if needs[1]:                                                   # dL/dx = dL/dp A + g W
            grad_tokens = grad_proj @ keys
            if weight is not None:
                grad_tokens.addmm_(grad_out, weight)
            grads[1] = grad_tokens if draw is None else draw.grad_input(grad_tokens, x, mask)
        if needs[6]:                                                   # dL/dA_tail = dL/dp_tail^T x
            grads[6] = grad_proj[:, start:].t() @ tokens
        return tuple(grads)


__all__ = ["MoRAMFunction", "attach_backward", "needs_grad"]
