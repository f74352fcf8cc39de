"""MoE-LoRA: one rank-r LoRA expert per task behind a learned per-token router (ablation)."""

from __future__ import annotations

from typing import Dict

import torch
from avalanche.core import SupervisedPlugin

from ..clip.inject import ENCODERS, TARGET_PATHS, inject_moe_lora
from ..moe_lora import STATE_KEYS, MoELoRALinear
from .base import CLIPStrategy


def moe_lora_layers(model: torch.nn.Module) -> Dict[str, MoELoRALinear]:
    """Every MoELoRALinear of ``model`` by dotted name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, MoELoRALinear)}


class MoELoRAPlugin(SupervisedPlugin):
    """One new expert per experience: expand before training (then rebuild the optimizer,
    which Avalanche built before this callback), freeze after."""

    def before_training_exp(self, strategy, **kwargs):
        layers = moe_lora_layers(strategy.model)
        if not layers:
            raise RuntimeError("MoELoRAPlugin found no MoELoRALinear: call inject_moe_lora first")
        for layer in layers.values():
            layer.expand()
        strategy.make_optimizer()

    def after_training_exp(self, strategy, **kwargs):
        for layer in moe_lora_layers(strategy.model).values():
            layer.freeze()


class MoELoRA(CLIPStrategy):
    """The "MoE-LoRA coarse" row of the MoRAM paper's routing ablation.

    Per target linear, one rank-``rank`` LoRA expert per task (old experts and router rows
    frozen) mixed by a per-token softmax router (:class:`~moram_avalanche.moe_lora.MoELoRALinear`).
    Everything else is MoRAM's setting (method reference): rank 16 = MoRAM's atoms per task,
    both encoders, q/k/v/out/c_fc/c_proj, AdamW lr 5e-4, 500 iterations per task, batch 64,
    the text->image loss on.

    Args (keyword-only, besides CLIPStrategy's): rank, temperature (router; 1), encoders,
    targets.
    """

    def __init__(self, *, model, tokenizer, rank: int = 16, temperature: float = 1.0,
                 encoders=ENCODERS, targets=tuple(TARGET_PATHS), iterations: int = 500,
                 lr: float = 5e-4, train_mb_size: int = 64, plugins=None, **kwargs):
        if not moe_lora_layers(model):
            inject_moe_lora(model, encoders, targets, rank=rank, temperature=temperature)
        self.moe_plugin = MoELoRAPlugin()
        super().__init__(model=model, tokenizer=tokenizer, iterations=iterations, lr=lr,
                         train_mb_size=train_mb_size, plugins=[self.moe_plugin, *(plugins or [])],
                         **kwargs)

    def checkpoint_model_state(self) -> dict:
        """The experts and routers only (CLIP's weights stay frozen)."""
        return {k: v for k, v in self.model.state_dict().items()
                if k.rpartition(".")[2] in STATE_KEYS}

    def load_checkpoint_model_state(self, state: dict) -> None:
        result = self.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise ValueError(
                f"checkpoint experts do not fit this model: {result.unexpected_keys[:5]}")
        missing = [k for k in result.missing_keys if k.rpartition(".")[2] in STATE_KEYS]
        if missing:
            raise ValueError(f"checkpoint lacks experts of this model: {missing[:5]}")
