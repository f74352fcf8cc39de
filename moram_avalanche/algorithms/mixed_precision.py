"""Mixed precision as DeepSpeed's bf16 mode does it: float32 master weights, clipping on float32 gradients.

The MoRAM release trains TRACE under DeepSpeed ZeRO-2 with bf16 (``TRACE/utils/ds_utils.py``:
``"bfloat16"`` on, ``"gradient_clipping": 1.0``), as TRACE (BeyonderXX/TRACE ``utils/ds_utils.py``)
and TreeLoRA (ZinYY/TreeLoRA ``utils/ds_utils.py``) do: the model's weights and its compute are
bf16, and the optimizer keeps a float32 master copy of every trainable weight. One step of
DeepSpeed's ZeRO optimizer (``deepspeed/runtime/zero/stage_1_and_2.py``,
``DeepSpeedZeroOptimizer.step``):

1. the gradients, accumulated over the micro-batches in the weights' dtype (under ZeRO the
   ``grad_accum_dtype`` is the model's: ``deepspeed/runtime/engine.py`` ``get_data_types``), are
   copied to float32;
2. the float32 gradients are clipped to global L2 norm ``max_norm``: scaled by
   ``max_norm / (norm + 1e-6)`` when that is below 1 (``unscale_and_clip_grads``), what
   ``torch.nn.utils.clip_grad_norm_`` does;
3. the optimizer steps the float32 masters (its moments are float32 too);
4. each bf16 weight becomes its master rounded to nearest.

:class:`MasterWeights` wraps any torch optimizer this way; :class:`GradientClip` is step 2, an
optimizer step pre-hook, so it clips what the optimizer steps: the float32 gradients of the
masters, or a float32 parameter's own. :func:`training_optimizer` builds both, and returns the
plain optimizer when no trainable parameter is in a low-precision dtype and nothing is clipped
(a float32 model trains exactly as without this module).

Why it matters: bf16 keeps 8 bits of mantissa, so an update smaller than half the spacing
between bf16 numbers around a weight (2^-9 of the weight) rounds away. AdamW's update is about
``lr`` per step, so at lr 1e-5 every weight above ~0.005 in magnitude stops moving in pure bf16;
with a master copy the updates add up in float32 and the bf16 weight follows the sum. The weights
a step leaves are the float32 reference's, rounded to bf16 (a test computes them by hand).

The other design, PyTorch's AMP recipe (float32 parameters under
``torch.autocast(dtype=torch.bfloat16)``), was not taken: the model would change (float32
trainable weights inside a bf16 model; for the full fine-tuning rows every weight, so norms,
embeddings and the residual stream would run in float32, not as the release computes them) and
every forward and generation call would need an autocast context; here the model, its forward,
its compiled generation and its sharding are those of the bf16 model. The memory is alike: both
keep a float32 copy of each trainable weight and float32 moments; here the frozen base and the
trainable weights stay bf16 beside the float32 masters
(:func:`~moram_avalanche.utils.memory.training_state_bytes`).

Framework-free: torch only.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Sequence

import torch

from ..utils.checks import check_number

#: dtypes whose trainable parameters get a float32 master copy
LOW_PRECISION = (torch.bfloat16, torch.float16)

#: ``(parameters, max_norm)`` -> clip their gradients in place
Clip = Callable[[List[torch.Tensor], float], object]


@torch.no_grad()
def clip_global_norm(parameters: List[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients of ``parameters`` together to global L2 norm at most ``max_norm``
    (``torch.nn.utils.clip_grad_norm_``: coefficient ``max_norm / (norm + 1e-6)`` when below 1,
    as DeepSpeed's ZeRO optimizer and ``transformers``' Trainer clip); returns the norm before."""
    return torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=True)


class GradientClip:
    """An optimizer step pre-hook (``optimizer.register_step_pre_hook``): ``clip`` (default
    :func:`clip_global_norm`) on the gradients of the parameters the optimizer steps, with bound
    ``max_norm``, just before each step -- after gradient accumulation, on the float32 gradients
    of :class:`MasterWeights`."""

    def __init__(self, max_norm: float, clip: Clip = clip_global_norm) -> None:
        check_number("max_grad_norm", max_norm, low=0, low_open=True,
                     hint="the release's DeepSpeed configuration: 1.0; None: no clipping")
        self.max_norm, self.clip = float(max_norm), clip

    def __call__(self, optimizer, args=(), kwargs=None) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if params:
            self.clip(params, self.max_norm)


class MasterWeights:
    """An optimizer (``build(masters)``) stepping float32 master copies of the low-precision
    parameters of ``params``; float32 parameters are their own masters (module docstring).

    ``step`` copies each parameter's gradient (accumulated in its own dtype) to its master's
    float32 ``grad``, steps the optimizer (its pre-hooks, :class:`GradientClip`, see float32
    gradients), writes each stepped master back into its parameter (rounded to nearest) and
    frees the float32 gradients. The masters are taken from the parameters when the optimizer is
    built and again before its first step (a plugin may set weights in between, e.g. LFPT5's
    first prompt rows); a parameter changed from outside between two steps is overwritten by its
    master at the next step. ``param_groups``, ``state``, ``state_dict`` ... are the optimizer's,
    over the masters.
    """

    def __init__(self, params: Iterable[torch.Tensor], build: Callable[[List[torch.Tensor]], object]) -> None:
        self.params = list(params)
        masters = [p.detach().float() if p.dtype in LOW_PRECISION else p for p in self.params]
        #: (parameter, its float32 master) for each low-precision parameter
        self.copies = [(p, m) for p, m in zip(self.params, masters) if m is not p]
        self.optimizer = build(masters)
        #: whether the masters were read from the parameters at the first step (class docstring)
        self.synced = False

    @property
    def masters(self) -> List[torch.Tensor]:
        """The float32 copies this wrapper holds (not the float32 parameters that are their own)."""
        return [m for _, m in self.copies]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    @torch.no_grad()
    def step(self, closure=None) -> None:
        if closure is not None:
            raise ValueError("MasterWeights steps without a closure: call backward before step()")
        if not self.synced:
            for p, m in self.copies:
                m.copy_(p)
            self.synced = True
        for p, m in self.copies:
            m.grad = None if p.grad is None else p.grad.to(m.dtype)
        self.optimizer.step()
        for p, m in self.copies:
            if m.grad is not None:
                p.copy_(m)
                m.grad = None

    def __getattr__(self, name):
        if name == "optimizer":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.optimizer, name)


def training_optimizer(params: Sequence[torch.Tensor], build: Callable[[List[torch.Tensor]], object], *,
                       clip: Optional[GradientClip] = None, master_weights: bool = True):
    """The optimizer that steps ``params``: ``build`` over float32 masters of the low-precision
    ones (:class:`MasterWeights`) when ``master_weights`` and there are any, else ``build(params)``
    (pure bf16 weights only when asked: ``master_weights=False``); ``clip`` registered as its step
    pre-hook."""
    params = list(params)
    if master_weights and any(p.dtype in LOW_PRECISION for p in params):
        optimizer = MasterWeights(params, build)
        inner = optimizer.optimizer
    else:
        optimizer = inner = build(params)
    if clip is not None:
        inner.register_step_pre_hook(clip)
    return optimizer


def stepped_parameters(optimizer) -> List[torch.Tensor]:
    """The parameters whose ``.grad`` the next ``optimizer.step()`` reads: a
    :class:`MasterWeights`' model parameters, else those of the optimizer's groups."""
    if isinstance(optimizer, MasterWeights):
        return list(optimizer.params)
    return [p for group in optimizer.param_groups for p in group["params"]]


def master_copies(optimizer) -> List[torch.Tensor]:
    """The float32 master copies ``optimizer`` holds beside the model's weights (none unless it
    is, or wraps, a :class:`MasterWeights`)."""
    while optimizer is not None and not isinstance(optimizer, MasterWeights):
        optimizer = getattr(optimizer, "__dict__", {}).get("optimizer")
    return optimizer.masters if optimizer is not None else []


__all__ = ["LOW_PRECISION", "Clip", "GradientClip", "MasterWeights", "clip_global_norm", "master_copies",
           "stepped_parameters", "training_optimizer"]
