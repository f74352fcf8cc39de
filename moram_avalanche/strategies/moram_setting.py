"""The MoRAM paper's loop settings, written once (its layer settings: :mod:`moram_avalanche.layers.moram.config`).

Every default of the package that *is* one of the paper's settings reads it from here or from
the layer's settings: the MoRAM strategy's routing options
(:class:`~moram_avalanche.strategies.clip.moram.MoRAM`), the shared CLIP loop's budget and optimiser
(:class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`, Avalanche's strategies by name), the
LoRA-style rows that match MoRAM's rank (:mod:`~moram_avalanche.strategies.clip.lora_baselines`),
the routing table's rows (:data:`~moram_avalanche.strategies.clip.moram.ROUTING_ABLATIONS`), the
language-model loop (:class:`~moram_avalanche.strategies.text.loop.TextStrategy`), and the
app's recipes (:mod:`moram_avalanche.experiments.clip.recipes`: what ``reproduce`` runs). Change a
value here and every one of them changes with it.

Sources: the MoRAM paper's CLIP hyper-parameters (method reference, "Hyper-parameters (CLIP)")
and its release [Artificer-AI-Lab/MoRAM XTAIL/runner_moram.sh, main.py]: r = 16 new atoms per
task, top-k budget k = 16, temperature tau = 0.01, eval threshold delta = 0.2
(:data:`~moram_avalanche.layers.moram.config.PAPER_CLIP`), AdamW lr 5e-4 with betas (0.9,
0.9999) and no weight decay, no warm-up, a cosine schedule, 500 iterations per task of batch 64
-- the same on X-TAIL (16 shots) and 5-shot MTIL. The language models' classification setting
(paper Sec. 4, LLM settings): AdamW at a constant lr 1e-3, batch 64, one epoch per task, with
torch's / transformers' Trainer betas (0.9, 0.999), which O-LoRA's T5 runs use
(``scripts/order_1.sh`` sets none), and gradients clipped to global norm 1.0: O-LoRA's DeepSpeed
configuration asks for the Trainer's (``configs/ds_configs/stage2.config:44``:
``"gradient_clipping": "auto"``, ``transformers`` ``TrainingArguments.max_grad_norm`` 1.0), and the
MoRAM release's TRACE runs clip at 1.0 too (``TRACE/utils/ds_utils.py:43``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Tuple

from ..layers.moram.config import PAPER_CLIP


@dataclass(frozen=True)
class MoRAMSetting:
    """The MoRAM paper's CLIP setting (see the module docstring for the source).

    Attributes:
        atoms_per_task: r, the rank-1 atoms added to every target linear per task.
        topk: k, the atoms each token keeps.
        temperature: tau, of the routing softmax.
        threshold: delta, the evaluation gate on a token's relevance.
        lr, betas, weight_decay, warmup: AdamW and the cosine schedule's warm-up.
        iterations: optimizer steps per task. train_mb_size: the training batch.
    """

    atoms_per_task: int = PAPER_CLIP.atoms_per_task
    topk: int = PAPER_CLIP.topk
    temperature: float = PAPER_CLIP.temperature
    threshold: float = PAPER_CLIP.threshold
    lr: float = 5e-4
    betas: Tuple[float, float] = (0.9, 0.9999)
    weight_decay: float = 0.0
    warmup: int = 0
    iterations: int = 500
    train_mb_size: int = 64

    def options(self) -> Dict[str, Any]:
        """The setting as the MoRAM strategy's keyword arguments."""
        return asdict(self)


@dataclass(frozen=True)
class TextLoopSetting:
    """The MoRAM paper's loop setting for language models (see the module docstring for the source).

    Attributes:
        lr: AdamW's constant learning rate. train_mb_size: the training batch.
        epochs: passes over each task's training data. betas, weight_decay: AdamW's.
        max_grad_norm: the bound on each step's global gradient norm.
    """

    lr: float = 1e-3
    train_mb_size: int = 64
    epochs: int = 1
    betas: Tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0


#: the MoRAM paper's CLIP setting (the one place its values are written)
MORAM = MoRAMSetting()
#: the MoRAM paper's language-model loop (the one place its values are written)
MORAM_TEXT_LOOP = TextLoopSetting()

__all__ = ["MORAM", "MORAM_TEXT_LOOP", "MoRAMSetting", "TextLoopSetting"]
