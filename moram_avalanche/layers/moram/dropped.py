"""Dropout on the atoms' input, drawn again in the backward instead of kept (the language models' layer).

The release's language-model layer reads its atoms on ``d = dropout(x)`` (Artificer-AI-Lab/MoRAM
``TRACE/utils/my_peft/tuners/moram.py``; :class:`~moram_avalanche.text.layer.DropoutMoRAMLinear`).
Its backward needs ``d`` (the trainable keys' gradient is ``dL/dA_tail = dL/dp_tail^T d``,
:mod:`~moram_avalanche.layers.moram.backward`) and the dropout's mask (``dL/dx``). Autograd over
``read(dropout(x))`` keeps both for every layer until the backward: ``d`` is ``[N, d_in]`` in the
compute dtype, the mask ``[N, d_in]`` (bool on CUDA, the input's dtype on the CPU), and the q, k
and v of one attention read the same ``x`` through three different draws. At LLaMA-1B's TRACE
setting (4 x 1024 tokens, 2048 wide, bf16, q k v o) that is about 100 MiB a decoder layer, the
whole of MoRAM's peak memory above a LoRA's on the same linears (issue "GPU path II": 1.154x on
an H200; ``scripts/bench_memory_text.py``).

Here a call keeps only ``x`` (the tensor its input already is: one for q, k and v, as a LoRA's
down-projection keeps it) and the random generator's state before the draw (a few bytes on CUDA,
5 KB on the CPU), and its backward draws the same mask again from that state:

* the draw is the one ``F.dropout(x, p, training=True)`` makes on that device (:func:`draw`):
  ``torch.native_dropout`` where PyTorch takes its fused kernel (CUDA), and on the CPU the
  composite ``noise = bernoulli(1 - p) / (1 - p); d = x * noise``; so the forward's numbers, and
  the generator's state after it, are ``F.dropout``'s bit for bit (a test);
* the backward restores the state, draws again (the same operation on the same state gives the
  same mask and ``d``), puts the generator back, and applies the dropout's own backward formula
  (``grad * noise``; ``native_dropout_backward(grad, mask, 1 / (1 - p))``) to the tokens' gradient.

So the gradients are those of ``read(F.dropout(x))`` bit for bit as well; the cost is one draw
more per layer in the backward (an elementwise pass over ``x``, against a GEMM over it), as
``torch.utils.checkpoint`` pays to recompute a dropout. Under gradient checkpointing nothing
changes: the checkpoint restores the generator before it recomputes the forward, so the
recomputed call draws the same mask and keeps its own state. Where a replay cannot be trusted
the caller keeps ``F.dropout``'s way (:func:`replayable`): a device other than the CPU and CUDA,
an empty input, a CUDA graph being captured (the generator's offsets are the graph's there).
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

import torch


def replayable(x: torch.Tensor, p: float) -> bool:
    """Whether a dropout of probability ``p`` on ``x`` can be drawn again in the backward (module
    docstring): CPU or CUDA tensors, not empty, ``0 < p < 1``, no CUDA graph being captured."""
    kind = x.device.type
    if not 0 < p < 1 or x.numel() == 0 or kind not in ("cpu", "cuda"):
        return False
    return kind == "cpu" or not torch.cuda.is_current_stream_capturing()


def draw(x: torch.Tensor, p: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(dropout(x), mask)`` drawn as ``F.dropout(x, p, training=True)`` draws it (the same random
    numbers, the same result): the fused kernel's ``(output, bool mask)`` on CUDA, and on the CPU
    the composite's ``(x * noise, noise)``, ``noise = bernoulli(1 - p) / (1 - p)`` in ``x``'s dtype
    and layout. No autograd."""
    with torch.no_grad():
        if x.device.type == "cuda":
            return torch.native_dropout(x, p, True)
        noise = torch.empty_like(x).bernoulli_(1 - p)
        noise.div_(1 - p)
        return x * noise, noise


class DropoutDraw(NamedTuple):
    """One call's dropout, enough to draw it again (module docstring): its probability, the
    generator's state before the draw, and the dtype the tokens are read in."""

    p: float
    state: torch.Tensor
    dtype: torch.dtype

    @staticmethod
    def of(x: torch.Tensor, p: float, dtype: torch.dtype) -> Tuple[torch.Tensor, "DropoutDraw"]:
        """``(dropout(x), its draw)``: :func:`draw` on ``x`` after keeping the generator's state."""
        state = _generator(x.device).get_state()
        dropped, _ = draw(x, p)
        return dropped, DropoutDraw(p, state, dtype)

    def again(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """:func:`draw` on ``x`` from the kept state: the forward's ``(dropout(x), mask)`` again;
        the generator is left as it was."""
        generator = _generator(x.device)
        now = generator.get_state()
        generator.set_state(self.state)
        try:
            return draw(x, self.p)
        finally:
            generator.set_state(now)

    def tokens(self, dropped: torch.Tensor) -> torch.Tensor:
        """``dropout(x)`` as the call's token rows ``[N, d_in]`` in its dtype (the forward's reshape and cast)."""
        tokens = dropped if dropped.dim() == 2 else dropped.reshape(-1, dropped.shape[-1])
        return tokens if tokens.dtype == self.dtype else tokens.to(self.dtype)

    def grad_input(self, grad_tokens: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``dL/dx`` from the tokens' gradient: back through the cast and the reshape, then the
        dropout's own backward (what autograd computes for ``F.dropout``)."""
        grad = grad_tokens.to(x.dtype).reshape(x.shape)
        if mask.dtype == torch.bool:  # the fused kernel's mask (derivatives.yaml: native_dropout)
            return torch.ops.aten.native_dropout_backward(grad, mask, 1.0 / (1.0 - self.p))
        return grad * mask  # the composite's x * noise


class DroppedTokens(NamedTuple):
    """The tokens of a call are ``dropout(x)``: the layer's input ``x`` (it gets the gradient, and
    is what the backward keeps) and the draw (:class:`DropoutDraw`)."""

    x: torch.Tensor
    draw: DropoutDraw


def _generator(device: torch.device) -> torch.Generator:
    """The default generator the dropout on ``device`` draws from."""
    if device.type == "cpu":
        return torch.default_generator
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.default_generators[index]


__all__ = ["DropoutDraw", "DroppedTokens", "draw", "replayable"]
