"""TreeLoRA (``treelora``; Qian et al., ICML 2025) as its code runs on TRACE: SeqLoRA plus the
tree-searched regulariser."""

from __future__ import annotations

from typing import Optional

from ...algorithms.treelora import TREELORA_REG
from ...utils.checks import check_nonnegative_int
from ..needs import StrategyNeeds
from .plugins.treelora import TreeLoRAPlugin, check_reg, check_search
from .seq_lora import TextSeqLoRA


class TextTreeLoRA(TextSeqLoRA):
    """TreeLoRA (Qian et al., ICML 2025) as its code runs on TRACE (ZinYY/TreeLoRA): one LoRA per
    target linear trained through the whole stream, never frozen nor re-initialised (its
    ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)`` with ``r_sum=0``: only ``loranew_A/B``
    exist and train, ``training/main.py``), plus the tree-searched regulariser on the LoRAs'
    down-projections (:class:`~moram_avalanche.strategies.text.plugins.treelora.TreeLoRAPlugin`, whose
    docstring and :mod:`moram_avalanche.algorithms.treelora` say what is the code's and what differs).

    Args (besides TextSeqLoRA's: rank 8, scale 4, dropout 0.1, target_modules): reg (0.5, its
    TRACE script; 0: SeqLoRA), search ("sample": the code's draws; "greedy": the most probable
    task), seed (None: the run's, ``torch.initial_seed()``).
    """

    #: run checkpoints are the whole strategy: the stored matrices and the tree must survive a resume
    lean_checkpoints = False
    #: one process: the plugin's store is not synchronised across processes (and not with --fsdp)
    needs = StrategyNeeds(data_parallel=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_treelora_options(options))

    def __init__(self, *, model, tokenizer=None, reg: float = TREELORA_REG, search: str = "sample",
                 seed: Optional[int] = None, plugins=None, **kwargs):
        self.treelora_plugin = TreeLoRAPlugin(reg, search, seed)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.treelora_plugin, *(plugins or [])],
                         **kwargs)


def check_treelora_options(options) -> None:
    """Value checks of TreeLoRA's own options given in ``options`` (its LoRA layer's are
    :class:`TextSeqLoRA`'s check, run too)."""
    if "reg" in options:
        check_reg(options["reg"])
    if "search" in options:
        check_search(options["search"])
    if "seed" in options and options["seed"] is not None:
        check_nonnegative_int("seed", options["seed"])


__all__ = ["TextTreeLoRA", "check_treelora_options"]
