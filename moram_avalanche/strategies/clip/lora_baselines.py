"""The LoRA-style rows beside MoRAM: SeqLoRA (one LoRA, trained on every task) and MoE-LoRA.

Both sit on the shared CLIP loop and the shared injection (:mod:`moram_avalanche.clip.inject`)
with MoRAM's setting (:data:`~moram_avalanche.strategies.moram_setting.MORAM`): both
encoders, q/k/v/out/c_fc/c_proj, rank = MoRAM's atoms per task (so each adds as many
parameters per task), CLIPStrategy's optimisation and budget (MoRAM's), the text->image loss on. Their checkpoints hold the layers'
declared state (:func:`~moram_avalanche.layers.base.adapter_state_dict`).
"""

from __future__ import annotations

from ...clip.inject import TARGET_PATHS, inject_lora, inject_moe_lora
from ...clip.towers import ENCODERS
from ...layers.base import find_layers
from ...layers.lora import LoRALinear
from ...layers.moe_lora import MoELoRALinear
from ...utils.checks import check_number, check_positive_int
from ...utils.names import check_names
from ..moram_setting import MORAM
from ..plugins.growth import GrowthPlugin
from .loop import CLIPStrategy


def check_lora_options(options) -> None:
    """The value checks of SeqLoRA's and MoE-LoRA's own options given in ``options``."""
    if "rank" in options:
        check_positive_int("rank", options["rank"])
    if "scale" in options:
        check_number("scale", options["scale"])
    if "temperature" in options:
        check_number("temperature", options["temperature"], low=0, low_open=True, hint="1: the plain softmax")
    if "encoders" in options:
        check_names(options["encoders"], ENCODERS, "encoder")
    if "targets" in options:
        check_names(options["targets"], tuple(TARGET_PATHS), "target")


class SeqLoRA(CLIPStrategy):
    """Sequential LoRA: a single rank-``rank`` LoRA per target linear, never frozen or merged.

    The plain low-rank counterpart of MoRAM: the same targets and the same rank budget, but one
    adapter that keeps training on every experience. LoRA's initialisation (``D``
    Kaiming-uniform, ``U`` zero; :mod:`moram_avalanche.layers.lora`).

    Args (keyword-only, besides CLIPStrategy's): rank, scale (of the update; 1), encoders,
    targets.
    """

    check_values = staticmethod(check_lora_options)

    def __init__(self, *, model, tokenizer, rank: int = MORAM.atoms_per_task, scale: float = 1.0,
                 encoders=ENCODERS, targets=tuple(TARGET_PATHS), **kwargs):
        if not find_layers(model, LoRALinear):
            inject_lora(model, encoders, targets, rank=rank, scale=scale)
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)


class MoELoRA(CLIPStrategy):
    """The "MoE-LoRA coarse" row of the MoRAM paper's routing ablation.

    Per target linear, one rank-``rank`` LoRA expert per task (old experts and router rows
    frozen) mixed by a per-token softmax router
    (:class:`~moram_avalanche.layers.moe_lora.MoELoRALinear`), grown by a
    :class:`~moram_avalanche.strategies.plugins.growth.GrowthPlugin`: one expert per
    experience, frozen after it.

    Args (keyword-only, besides CLIPStrategy's): rank, temperature (router; 1), encoders,
    targets.
    """

    check_values = staticmethod(check_lora_options)

    def __init__(self, *, model, tokenizer, rank: int = MORAM.atoms_per_task, temperature: float = 1.0,
                 encoders=ENCODERS, targets=tuple(TARGET_PATHS), plugins=None, **kwargs):
        if not find_layers(model, MoELoRALinear):
            inject_moe_lora(model, encoders, targets, rank=rank, temperature=temperature)
        self.moe_plugin = GrowthPlugin(MoELoRALinear)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.moe_plugin, *(plugins or [])],
                         **kwargs)


__all__ = ["MoELoRA", "SeqLoRA", "check_lora_options"]
