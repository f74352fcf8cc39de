"""OGD (``ogd``; Farajtabar et al., 2020) as TRACE's baseline runs it on a language model."""

from __future__ import annotations

from ..needs import StrategyNeeds
from .plugins.ogd import TRACE_OGD_SETTING as TRACE
from .plugins.ogd import OGDConfig, OGDPlugin
from .seq_lora import TextSeqLoRA
from .settings import given_config


class TextOGD(TextSeqLoRA):
    """OGD as TRACE runs it: the LoRA TRACE trains (SeqLoRA's: ``LoraConfig(r=8, lora_alpha=32,
    lora_dropout=0.1)``, BeyonderXX/TRACE ``training/main.py:275-284``) through the whole stream,
    each LoRA parameter's gradient projected on its own rows of the basis of earlier tasks'
    gradients, each task adding its last step's gradient to the basis
    (:class:`~moram_avalanche.strategies.text.plugins.ogd.OGDPlugin`, whose docstring says what is
    TRACE's, what differs and why).

    The LoRA's targets: peft's defaults (the query and value projections), which TRACE's
    ``LoraConfig`` without ``target_modules`` gets from upstream peft; on ``--benchmark trace`` the
    MoRAM release's q, k, v, o, as for the other LoRA rows (its ``TRACE/training/main.py`` builds
    OGD's LoRA with its peft fork, whose defaults those are).

    Args (besides TextSeqLoRA's; defaults TRACE's, :class:`~moram_avalanche.strategies.text.plugins.ogd.OGDConfig`):
        gradients_per_task (1), directions (``"last-steps"``; ``"after-task"``: OGD's Algorithm 1,
        0.6's), projection (``"per-parameter"``; ``"whole"``: OGD's Eq. 5, 0.6's).

    Run checkpoints hold the LoRA and the basis (the plugin's state).
    """

    #: one process: the basis and the stored gradients are not synchronised across processes
    needs = StrategyNeeds(data_parallel=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_ogd_options(options))

    # defaults: TRACE's OGD, written once (moram_avalanche.strategies.text.plugins.ogd.OGDConfig)
    def __init__(self, *, model, tokenizer=None, gradients_per_task: int = TRACE.gradients_per_task,
                 directions: str = TRACE.directions, projection: str = TRACE.projection, plugins=None, **kwargs):
        self.ogd_plugin = OGDPlugin(gradients_per_task, directions, projection)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.ogd_plugin, *(plugins or [])], **kwargs)


def check_ogd_options(options) -> None:
    """One-line errors for ``ogd``'s own options given in ``options`` (its configuration,
    :class:`~moram_avalanche.strategies.text.plugins.ogd.OGDConfig`; the LoRA's are SeqLoRA's)."""
    given_config(OGDConfig, options)


__all__ = ["TextOGD", "check_ogd_options"]
