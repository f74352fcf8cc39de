"""Dropout on the atoms' input, made again in the backward instead of kept (the language models' layer).

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

Here a call keeps ``x`` (the tensor its input already is: one for q, k and v, as a LoRA's
down-projection keeps it) and makes ``d`` and the mask again in its backward:

* the draw is the one ``F.dropout(x, p, training=True)`` makes on that device (:func:`draw`):
  ``torch.native_dropout`` where PyTorch takes its fused kernel (CUDA), and on the CPU the
  composite ``noise = bernoulli(1 - p) / (1 - p); d = x * noise`` in ``x``'s layout; so the
  forward's numbers, and the generator's state after it, are ``F.dropout``'s bit for bit (a test);
* on CUDA the call keeps the random generator's state before the draw (16 bytes), and the
  backward restores it, draws again (the same kernel on the same state gives the same mask and
  ``d``) and puts the generator back: nothing kept per element but ``x``, at the cost of one
  elementwise pass over ``x`` in the backward, as ``torch.utils.checkpoint`` pays to recompute a
  dropout;
* on the CPU, where drawing ``bernoulli`` again costs more than that pass (1.15x the step of four
  1024-wide layers reading one input, ``float32``: ``scripts/bench_dropout.py --redraw-on-cpu``),
  the call keeps the composite's noise as autograd does, but not ``d``, which the backward makes
  again as ``x * noise`` (the forward's operation): half of what autograd keeps, for one pass
  (1.03x that step in ``float32``, 1.02x in bf16: ``scripts/bench_dropout.py``).
  :data:`REDRAW_ON_CPU` draws again there too (what a GPU keeps:
  ``scripts/bench_memory_text.py --redraw-on-cpu``);
* the backward applies the dropout's own backward formula (``grad * noise``;
  ``native_dropout_backward(grad, mask, 1 / (1 - p))``) to the tokens' gradient.

So the gradients are those of ``read(F.dropout(x))`` bit for bit as well. Under gradient
checkpointing nothing changes where the checkpoint restores the generator before it recomputes
the forward (``preserve_rng_state=True``, PyTorch's and transformers' default): the recomputed call
draws the same mask. Where a draw cannot be trusted to be made again, or keeping ``x`` could cost
more, the caller keeps ``F.dropout``'s way (:func:`replayable`): a device other than the CPU and
CUDA, an empty or inference input, an input that is a view into a larger tensor or not
contiguous, on CUDA one not aligned to 16 bytes or a CUDA graph being captured (the generator's
offsets are the graph's there).

What changes for a user, as when a LoRA keeps its input:

* ``x`` is kept for the backward, so editing it in place after the layer's call makes the
  backward raise autograd's "modified by an inplace operation" (transformers' T5, LLaMA, GPT-2,
  Qwen2, Mistral and BART give these layers fresh tensors);
* the kept generator state is read before the draw and set again in the backward: another thread
  drawing from the same device's default generator between the two (or during the backward)
  makes the masks differ, as for ``torch.utils.checkpoint``'s recomputation;
* under autocast with a float32 input read by one layer alone, ``x`` (4 bytes an element) is more
  than the dropped bf16 tokens and a bool mask were (3); q, k and v reading one input keep 4
  where they kept 9.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import torch


def replayable(x: torch.Tensor, p: float) -> bool:
    """Whether a dropout of probability ``p`` on ``x`` can be made again in the backward from ``x``
    (module docstring): ``0 < p < 1``; ``x`` a CPU or CUDA tensor, not empty, not an inference
    tensor (autograd cannot keep one), contiguous and the whole of its storage (keeping a view
    would keep the larger tensor under it alive; the draw depends on the layout), on CUDA aligned
    to 16 bytes (the fused kernel's vector width depends on it) and no CUDA graph being captured."""
    kind = x.device.type
    if (not 0 < p < 1 or kind not in ("cpu", "cuda") or x.numel() == 0 or x.is_inference()
            or not x.is_contiguous() or x.untyped_storage().nbytes() != x.numel() * x.element_size()):
        return False
    return kind == "cpu" or (x.data_ptr() % 16 == 0 and not torch.cuda.is_current_stream_capturing())


def redrawn(x: torch.Tensor) -> bool:
    """Whether the backward draws a dropout on ``x`` again (CUDA; the CPU with :data:`REDRAW_ON_CPU`)
    rather than keep its noise."""
    return x.device.type != "cpu" or REDRAW_ON_CPU


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


#: whether a backward on the CPU draws the dropout again too (module docstring). Off: there
#: ``bernoulli`` costs more than keeping the composite's noise (the dropped tokens are made again
#: from it); CUDA always draws again (its fused kernel draws in one pass over ``x``)
REDRAW_ON_CPU = False


class DropoutDraw(NamedTuple):
    """One call's dropout, enough to make it again (module docstring): its probability, the
    generator's state before the draw (None where the noise is kept instead), and the dtype the
    tokens are read in."""

    p: float
    state: Optional[torch.Tensor]
    dtype: torch.dtype

    @staticmethod
    def of(x: torch.Tensor, p: float, dtype: torch.dtype
           ) -> Tuple[torch.Tensor, "DropoutDraw", Optional[torch.Tensor]]:
        """``(dropout(x), its draw, the kept noise)``: :func:`draw` on ``x``, with the generator's
        state before it where the backward draws again (CUDA; the CPU with :data:`REDRAW_ON_CPU`),
        else with the composite's noise (``bernoulli(1 - p) / (1 - p)`` in ``x``'s dtype)."""
        if redrawn(x):
            state = _generator(x.device).get_state()
            return draw(x, p)[0], DropoutDraw(p, state, dtype), None
        dropped, noise = draw(x, p)
        return dropped, DropoutDraw(p, None, dtype), noise

    def again(self, x: torch.Tensor, kept: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        """The forward's ``(dropout(x), mask)`` again: ``x`` times the ``kept`` noise (the forward's
        operation on the same tensors), or :func:`draw` on ``x`` from the kept state, the generator
        then left as it was."""
        if kept is not None:
            return x * kept, kept
        if not x.is_contiguous() or x.data_ptr() % 16:  # (a saved-tensor hook gave it back in another layout)
            x = x.clone(memory_format=torch.contiguous_format)  # the forward's: contiguous, aligned (replayable)
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
        return tokens if tokens.dtype == self.dtype else tokens.to(dtype=self.dtype)

    def grad_input(self, grad_tokens: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``dL/dx`` from the tokens' gradient: back through the cast and the reshape, then the
        dropout's own backward (what autograd computes for ``F.dropout``)."""
        grad = grad_tokens.to(dtype=x.dtype).reshape(x.shape)
        if mask.dtype == torch.bool:  # the fused kernel's mask (derivatives.yaml: native_dropout)
            return torch.ops.aten.native_dropout_backward(grad, mask, 1.0 / (1.0 - self.p))
        return grad * mask  # the composite's x * noise


class DroppedTokens(NamedTuple):
    """The tokens of a call are ``dropout(x)``: the layer's input ``x`` (it gets the gradient, and
    is what the backward keeps), the draw (:class:`DropoutDraw`) and the kept noise (None where the
    backward draws again)."""

    x: torch.Tensor
    draw: DropoutDraw
    kept: Optional[torch.Tensor] = None


def _generator(device: torch.device) -> torch.Generator:
    """The default generator the dropout on ``device`` draws from."""
    if device.type == "cpu":
        return torch.default_generator
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.default_generators[index]


__all__ = ["REDRAW_ON_CPU", "DropoutDraw", "DroppedTokens", "draw", "redrawn", "replayable"]
