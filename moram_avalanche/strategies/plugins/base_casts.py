"""KeepBaseCasts: MoRAM layers keep their frozen base weight's compute-dtype copy (an option, off by
default), for every task of a run.

Issue 44 ("GPU path II"), item 1: under bf16 autocast each call of a MoRAM layer casts its frozen
float32 base weight and bias to bf16, as ``nn.Linear`` does; kept, the copy saves two operators per
call at the memory of the frozen weights in bf16 (half of their float32 size)
(:func:`~moram_avalanche.layers.moram.layer.keep_base_casts`). Not with sharded weights (``--fsdp``:
the copy would hold the whole gathered weight), and not where memory is short.
"""

from __future__ import annotations

from avalanche.core import SupervisedPlugin

from ...layers.moram.layer import keep_base_casts


class KeepBaseCasts(SupervisedPlugin, supports_distributed=True):
    """Set :func:`~moram_avalanche.layers.moram.layer.keep_base_casts` on the strategy's model before
    each training and evaluation experience (layers a strategy adds later are covered too);
    :attr:`layers` counts the MoRAM layers it reached last."""

    def __init__(self) -> None:
        super().__init__()
        #: MoRAM layers set at the last experience
        self.layers = 0

    def _keep(self, strategy) -> None:
        self.layers = keep_base_casts(strategy.model, True)

    def before_training_exp(self, strategy, *args, **kwargs):
        self._keep(strategy)

    def before_eval_exp(self, strategy, *args, **kwargs):
        self._keep(strategy)


__all__ = ["KeepBaseCasts"]
