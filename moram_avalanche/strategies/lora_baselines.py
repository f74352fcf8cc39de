"""SeqLoRA: one LoRA per target linear, trained on every experience in turn (ablation baseline)."""

from __future__ import annotations

from typing import Dict

import torch

from ..clip.inject import ENCODERS, TARGET_PATHS, inject_lora
from ..lora import LoRALinear
from .base import CLIPStrategy

#: parameter names of a LoRALinear's factors (what a SeqLoRA checkpoint holds)
LORA_KEYS = ("down", "up")


def lora_layers(model: torch.nn.Module) -> Dict[str, LoRALinear]:
    """Every LoRALinear of ``model`` by dotted name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


class SeqLoRA(CLIPStrategy):
    """Sequential LoRA: a single rank-``rank`` LoRA per target linear, never frozen or merged.

    The plain low-rank counterpart of MoRAM: the same targets (both encoders,
    q/k/v/out/c_fc/c_proj) and the same rank budget (16 = MoRAM's atoms per task), but one
    adapter that keeps training on every experience, with MoRAM's CLIP loop, loss and
    optimisation (AdamW lr 5e-4, 500 iterations per task, batch 64; method reference).
    LoRA's initialisation (``D`` Kaiming-uniform, ``U`` zero; :mod:`moram_avalanche.lora`).

    Args (keyword-only, besides CLIPStrategy's): rank, scale (of the update; 1), encoders,
    targets.
    """

    def __init__(self, *, model, tokenizer, rank: int = 16, scale: float = 1.0,
                 encoders=ENCODERS, targets=tuple(TARGET_PATHS), iterations: int = 500,
                 lr: float = 5e-4, train_mb_size: int = 64, **kwargs):
        if not lora_layers(model):
            inject_lora(model, encoders, targets, rank=rank, scale=scale)
        super().__init__(model=model, tokenizer=tokenizer, iterations=iterations, lr=lr,
                         train_mb_size=train_mb_size, **kwargs)

    def _lora_keys(self):
        return {f"{name}.{key}" for name in lora_layers(self.model) for key in LORA_KEYS}

    def checkpoint_model_state(self) -> dict:
        """The LoRA factors only (CLIP's weights stay frozen)."""
        keys = self._lora_keys()
        return {k: v for k, v in self.model.state_dict().items() if k in keys}

    def load_checkpoint_model_state(self, state: dict) -> None:
        keys = self._lora_keys()
        if set(state) != keys:
            raise ValueError(
                "checkpoint LoRA factors do not fit this model: extra "
                f"{sorted(set(state) - keys)[:5]}, missing {sorted(keys - set(state))[:5]}"
            )
        self.model.load_state_dict(state, strict=False)
