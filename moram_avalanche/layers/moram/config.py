"""MoRAMLayerConfig: the options of MoRAM's layer, checked once; and the paper's settings, each written once.

A :class:`MoRAMLayerConfig` is the four numbers of the paper's routing (steps 3-5 as
:mod:`~moram_avalanche.layers.moram.paths.reference` states them) and the atoms a task adds, checked
in ``__post_init__`` (peft's ``LoraConfig`` style): code above the layers builds one from what it
was given (the command line, a strategy's keyword arguments) and hands the layers its plain,
checked numbers (:meth:`MoRAMLayerConfig.options`). Its defaults are the paper's CLIP setting.

The paper's settings of the layer, the one place each is written (every other default of the
package reads them):

* :data:`PAPER_CLIP` -- the CLIP setting (method reference, "Hyper-parameters (CLIP)"; the
  release [Artificer-AI-Lab/MoRAM XTAIL/runner_moram.sh]): r = 16 new atoms per task, top-k
  k = 16, temperature tau = 0.01, eval threshold delta = 0.2;
* :data:`PAPER_LLM` -- the language models' classification setting (paper Sec. 4, LLM settings;
  reference ``language_models.md``): r = 8, k = 4, tau = 0.1, delta = 0.2 (and dropout 0.1 on
  the atoms' input: :data:`moram_avalanche.text.layer.PAPER_DROPOUT`);
* :data:`PAPER_TRACE` -- the paper's TRACE setting (Sec. 4, TRACE paragraph): r = 16, k = 16,
  tau = 0.03, delta = 0.2;
* :data:`RELEASE_TRACE` -- the release's shipped TRACE run (``TRACE/runner_moram.sh``:
  ``moram_rank=8``, ``moram_topk=$moram_rank``, ``moram_router_temp=0.03``,
  ``moram_infer_lora_a_thresh=0.2``), not the paper's paragraph (``--preset trace-release``);
* :data:`PAPER_CODEALPACA` -- the paper's CodeAlpaca setting (appendix, CodeAlpaca fine-tuning;
  reference ``language_models.md``): r = 16, k = 4, tau = 0.5, delta = 0.2, on all linear layers.

Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from ...utils.checks import check_number, check_positive_int


@dataclass(frozen=True)
class MoRAMLayerConfig:
    """MoRAM's layer options (defaults: the paper's CLIP setting, :data:`PAPER_CLIP`).

    Attributes:
        atoms_per_task: r, the rank-1 atoms every target linear appends per task.
        topk: k, the atoms each token keeps (the release keeps at least 2); None keeps every
            atom (the routing table's "self-activation" rows).
        temperature: tau of the routing softmax; None means tau = 1.
        threshold: delta, the evaluation gate on a token's relevance (a cosine-like number in
            [-1, 1]); 0 disables the gate.

    Checked once, when it is made: a value out of range is a ValueError naming the option,
    what was given and the paper's value.
    """

    atoms_per_task: int = 16
    topk: Optional[int] = 16
    temperature: Optional[float] = 0.01
    threshold: float = 0.2

    def __post_init__(self) -> None:
        check_positive_int("atoms_per_task", self.atoms_per_task)
        if self.topk is not None:
            check_positive_int("topk", self.topk)
        check_number("temperature", 1.0 if self.temperature is None else self.temperature, low=0, low_open=True,
                     hint="paper: 0.01 for CLIP; None means 1")
        check_number("threshold", self.threshold, low=0, high=1,
                     hint="it gates a cosine-like relevance in [-1, 1]; paper: 0.2, 0 disables the gate")

    def options(self) -> Dict[str, object]:
        """The layer's keyword arguments, normalised as a layer reports them (``temperature=None``
        -> 1.0): what :attr:`~moram_avalanche.layers.moram.layer.MoRAMRouting.options` of a layer built
        with this configuration is."""
        return {"atoms_per_task": int(self.atoms_per_task), "topk": None if self.topk is None else int(self.topk),
                "temperature": 1.0 if self.temperature is None else float(self.temperature),
                "threshold": float(self.threshold)}


#: the paper's CLIP setting (module docstring): the defaults of :class:`MoRAMLayerConfig`
PAPER_CLIP = MoRAMLayerConfig()
#: the paper's classification setting for language models (module docstring)
PAPER_LLM = MoRAMLayerConfig(atoms_per_task=8, topk=4, temperature=0.1, threshold=0.2)
#: the paper's TRACE setting (module docstring)
PAPER_TRACE = MoRAMLayerConfig(atoms_per_task=16, topk=16, temperature=0.03, threshold=0.2)
#: the release's shipped TRACE run (module docstring)
RELEASE_TRACE = MoRAMLayerConfig(atoms_per_task=8, topk=8, temperature=0.03, threshold=0.2)
#: the paper's CodeAlpaca setting (module docstring)
PAPER_CODEALPACA = MoRAMLayerConfig(atoms_per_task=16, topk=4, temperature=0.5, threshold=0.2)

__all__ = ["MoRAMLayerConfig", "PAPER_CLIP", "PAPER_CODEALPACA", "PAPER_LLM", "PAPER_TRACE", "RELEASE_TRACE"]
