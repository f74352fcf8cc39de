"""OGD (``ogd``; Farajtabar et al., 2020) as TRACE's baseline runs it on a language model."""

from __future__ import annotations

from ...utils.checks import check_positive_int
from ..needs import StrategyNeeds
from .finetune import TextFineTune
from .plugins.ogd import OGD_GRADIENTS_PER_TASK, OGDPlugin


class TextOGD(TextFineTune):
    """OGD (Farajtabar et al., 2020) as TRACE's baseline runs it: every weight trains, each
    gradient projected orthogonally to the stored loss gradients of the earlier tasks
    (:class:`~moram_avalanche.strategies.text.plugins.ogd.OGDPlugin`, whose docstring says what is
    TRACE's and what differs).

    Args (besides TextStrategy's): gradients_per_task (1: minibatch loss gradients stored after
    each task; this library's choice).
    """

    #: run checkpoints are the whole strategy: the basis must survive a resume
    lean_checkpoints = False
    #: one process: the basis and its stored gradients are not synchronised across processes
    needs = StrategyNeeds(data_parallel=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_ogd_options(options))

    def __init__(self, *, model, tokenizer=None, gradients_per_task: int = OGD_GRADIENTS_PER_TASK, plugins=None,
                 **kwargs):
        self.ogd_plugin = OGDPlugin(gradients_per_task)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.ogd_plugin, *(plugins or [])], **kwargs)


def check_ogd_options(options) -> None:
    if "gradients_per_task" in options:
        check_positive_int("gradients_per_task", options["gradients_per_task"])



__all__ = ["TextOGD", "check_ogd_options"]
