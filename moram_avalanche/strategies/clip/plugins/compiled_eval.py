"""CompiledEvaluation: the image tower's evaluation forward compiled (CUDA graphs on a GPU), on request.

Issue 44 ("GPU path II"), item 1: in bf16 a ViT-B/16 tower layer is host-bound -- its GEMMs take a
few microseconds and MoRAM adds a fixed number of small operators per layer -- so an evaluation
forward spends more time dispatching than computing. ``torch.compile(mode="reduce-overhead")``
records the whole tower once per batch shape as a CUDA graph and replays it with one launch;
training is untouched (its graph changes every task, and it needs the autograd tape).

The plugin compiles ``normalize(clip.encode_image(x))`` -- what both evaluation paths compute: the
package's strategies' :meth:`~moram_avalanche.strategies.clip.loop.CLIPStrategy.eval_image_features`
and, under Avalanche's own strategies, :meth:`~moram_avalanche.models.classifier.CLIPClassifier.encode_image`
-- and hands it to whichever of them evaluates, for the evaluation only (their
``eval_image_encoder``, cleared after every evaluation, so training and checkpoints never see it).
It compiles again when the tower's parameters change (a task adds atoms, or a strategy swaps
adapters): one compilation per task, and per distinct evaluation batch shape (the last, shorter
batch of a test set is a second graph). The first batch after each compilation runs eagerly
(:func:`eager_first`): with ``--keep-base-casts`` that call keeps each layer's base stacked with its
keys, which the graph then reads (one GEMM for the base and the keys, q, k and v together).
Numbers: the same operations in the same order; a compiled graph may fuse elementwise steps, so
logits can differ in the last bits (accuracies within a flipped arg-max of an exact tie).
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin

#: ``torch.compile``'s mode for the tower's evaluation: CUDA graphs, one launch per batch
EVAL_COMPILE_MODE = "reduce-overhead"


def tower_signature(model: torch.nn.Module) -> Tuple:
    """What a compiled evaluation depends on beyond the values: every parameter's and buffer's name,
    shape, dtype and device (a task's new atoms, frozen atoms kept as buffers, a swapped adapter or a
    moved model change it)."""
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return tuple((name, tuple(t.shape), t.dtype, t.device.type) for name, t in tensors)


def eager_first(eager: Callable, compiled: Callable) -> Callable:
    """``compiled``, whose first call runs ``eager`` instead: what MoRAM's layers keep across calls is
    made by an eager call only (:func:`~moram_avalanche.layers.moram.layer.keep_base_casts`: the base
    stacked with the keys, never made while a graph is traced), so the graph traced at the second
    call reads it."""
    called = False

    def encoder(x: torch.Tensor) -> torch.Tensor:
        nonlocal called
        if called:
            return compiled(x)
        called = True
        return eager(x)

    return encoder


class CompiledEvaluation(SupervisedPlugin):
    """Compile the image tower's evaluation forward of a :class:`~moram_avalanche.models.classifier.CLIPClassifier`
    (module docstring).

    Args:
        mode: ``torch.compile``'s mode (default :data:`EVAL_COMPILE_MODE`, CUDA graphs; on a CPU
            device ``"reduce-overhead"`` compiles without graphs).
        backend: ``torch.compile``'s backend (default ``"inductor"``; ``"eager"`` or ``"aot_eager"``
            trace without generating kernels, which is how the tests check the plumbing on a CPU).
    """

    def __init__(self, mode: Optional[str] = EVAL_COMPILE_MODE, backend: str = "inductor") -> None:
        super().__init__()
        self.mode = mode
        self.backend = backend
        #: compilations made so far (one per task and model structure)
        self.compilations = 0
        self._compiled: Optional[Callable] = None
        self._signature: Optional[Tuple] = None

    def encoder_for(self, clip: torch.nn.Module) -> Callable:
        """The compiled evaluation encoder of the open_clip model ``clip``, compiled again when it changed."""
        signature = (id(clip), tower_signature(clip))
        if self._compiled is None or signature != self._signature:

            def encode(x: torch.Tensor) -> torch.Tensor:
                return F.normalize(clip.encode_image(x), dim=-1)

            options = {"mode": self.mode} if self.mode else {}
            self._compiled = eager_first(encode, torch.compile(encode, backend=self.backend, dynamic=False, **options))
            self._signature = signature
            self.compilations += 1
        return self._compiled

    @staticmethod
    def _evaluator_of(strategy) -> Tuple[object, torch.nn.Module]:
        """``(who evaluates, the open_clip model)``: a CLIP strategy of the package, or an Avalanche
        strategy whose model is a :class:`~moram_avalanche.models.classifier.CLIPClassifier`."""
        model = strategy.model
        if hasattr(strategy, "eval_image_encoder") and hasattr(model, "encode_image"):
            return strategy, model
        if hasattr(model, "eval_image_encoder"):
            return model, model.model
        raise TypeError(f"CompiledEvaluation compiles a CLIP image tower; the strategy ({type(strategy).__name__}) "
                        f"evaluates a {type(model).__name__}: leave the plugin (--compile-eval) out for it")

    def before_eval(self, strategy, *args, **kwargs):
        owner, clip = self._evaluator_of(strategy)
        owner.eval_image_encoder = self.encoder_for(clip)

    def after_eval(self, strategy, *args, **kwargs):
        owner, _ = self._evaluator_of(strategy)
        owner.eval_image_encoder = None


__all__ = ["EVAL_COMPILE_MODE", "CompiledEvaluation", "eager_first", "tower_signature"]
