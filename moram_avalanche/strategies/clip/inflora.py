"""InfLoRA (Liang & Li, CVPR 2024) for CLIP: CLIPStrategy + mergeable K/V LoRA + InfLoRAPlugin."""

from __future__ import annotations

from typing import Optional, Sequence

from ...algorithms.dualgpm import LAMBDA_B, LAMBDA_E
from ...algorithms.schedules import LR_SCHEDULES, DomainLR
from ...clip.inject import inject_lora, target_linear_names
from ...clip.towers import ENCODERS, blocks
from ...layers.base import find_layers
from ...layers.lora import LoRALinear
from ...utils.checks import check_number, check_positive_int
from ...utils.names import check_names
from ..moram_setting import MORAM
from ..plugins.inflora import MEMORIES, InfLoRAPlugin
from .loop import CLIPStrategy

#: InfLoRA's targets: the key and value projections [InfLoRA models/vit_inflora.py]
INFLORA_TARGETS = ("k", "v")
#: projections whose input is the attention input (LN1 output), the covariance InfLoRA records
ATTENTION_INPUT_TARGETS = ("q", "k", "v")


class InfLoRA(CLIPStrategy):
    """InfLoRA (Liang & Li, CVPR 2024) on the shared CLIP loop (baselines reference, section 3).

    Wraps the key and value projections of every attention block of ``encoders`` in mergeable
    :class:`~moram_avalanche.layers.lora.LoRALinear` layers (scale 1) and adds an
    :class:`~moram_avalanche.strategies.plugins.inflora.InfLoRAPlugin`:
    per experience a designed, frozen down-projection (from the input covariance, kept out of
    the old tasks' input space by DualGPM), a trained zero-initialised up-projection, a DualGPM
    update on the post-training covariance, and a merge of the update into the weights.
    Evaluation uses the merged weights. The memory is the DualGPM of the class-incremental
    ``methods/inflora.py``; the official domain-incremental variant ``inflora_domain.py`` uses
    remove-only GPM (``memory="gpm"``). We follow the former because X-TAIL and MTIL add new
    classes with every domain; both protect the same space up to ties at the threshold.

    Args (keyword-only, besides CLIPStrategy's):
        rank: 10, as InfLoRA's ViT configs for CIFAR-100 and ImageNet-R [InfLoRA
            configs/cifar100_inflora.json, mimg10_inflora.json]; no CLIP source fixes it
            (LibContinual's CLIP config leaves it unset; reference, sections 3.4 and 6).
        encoders: ``("visual",)``: LoRA and covariances in the image encoder only, the text
            encoder frozen, as LibContinual's CLIP config (``visual_only: True``)
            [LibContinual config/InfLoRA_opt_clip.yaml]. ``("visual", "text")`` adds the text
            encoder, whose covariance comes from the class prompts, padding tokens included.
        targets: ``("k", "v")`` [InfLoRA models/vit_inflora.py]; any subset of q, k, v (the
            projections whose input is the attention input).
        num_tasks: ``T`` of the threshold schedule; None: the number of domains of the
            benchmark (``len(experience.domains)``, e.g. 10 on X-TAIL and 11 on MTIL).
        lambda_b, lambda_e: the schedule's ends, 0.95 and 1.0 [InfLoRA
            configs/cifar100_inflora.json; LibContinual config/InfLoRA_opt_clip.yaml].
        memory: ``"dual"`` (DualGPM, InfLoRA methods/inflora.py) or ``"gpm"`` (remove-only
            GPM, InfLoRA methods/inflora_domain.py).
        lr_schedule: ``"quarter_cosine"``: InfLoRA's shape, ``lr * cos(99 pi s / (200 (S -
            1)))``, which ends at ``cos(0.495 pi) ~ 1.6%`` of lr and never reaches 0 (mean ~0.64
            lr) [InfLoRA utils/schedulers.py ``CosineSchedule``], but set per iteration ``s`` of
            ``S`` where the original sets it per epoch of ``K`` (20 for CIFAR-100)
            (:func:`~moram_avalanche.algorithms.schedules.quarter_cosine_lr_factor`).
            ``"cosine"``: the harness's half cosine from lr to 0 (mean 0.5 lr), as the other
            strategies (:func:`~moram_avalanche.algorithms.schedules.cosine_lr_factor`).
        Optimisation: Adam (AdamW with weight decay 0) lr 5e-4, betas (0.9, 0.999), as InfLoRA
        and LibContinual [InfLoRA methods/inflora.py]; 500 iterations of batch 64, warm-up 0,
        no label smoothing: the few-shot budget of this package's harness (MoRAM release;
        reference, section 3.4 "proposed default") in place of InfLoRA's 20 epochs of batch
        128. The deviations from the original's optimisation are this budget and the schedule's
        granularity (per iteration instead of per epoch), or its shape with ``"cosine"``.
        The loss is the cross-entropy over the current classes only
        (``text_to_image_loss=False``), as InfLoRA and LibContinual.
    """

    check_values = staticmethod(lambda options: check_inflora_options(options))

    def __init__(self, *, model, tokenizer, rank: int = 10, encoders: Sequence[str] = ("visual",),
                 targets: Sequence[str] = INFLORA_TARGETS, num_tasks: Optional[int] = None,
                 lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E, memory: str = "dual",
                 lr_schedule: str = "quarter_cosine", lr: float | DomainLR = 5e-4,
                 betas=(0.9, 0.999), weight_decay: float = 0.0, iterations: int = MORAM.iterations,
                 train_mb_size: int = MORAM.train_mb_size, text_to_image_loss: bool = False, plugins=None,
                 **kwargs):
        encoders = check_names(encoders, ENCODERS, "encoder")
        targets = check_names(targets, ATTENTION_INPUT_TARGETS, "InfLoRA target")
        _check_rank(model, encoders, rank)  # before the model is changed
        inject_lora(model, encoders=encoders, targets=targets, rank=rank, mergeable=True)
        groups = {}
        for encoder in encoders:
            for name in target_linear_names(model, (encoder,), targets):
                group = name.rpartition(".")[0]
                entry = groups.setdefault(group, {"encoder": encoder, "layers": [], "dim": 0})
                entry["layers"].append(name)
                entry["dim"] = model.get_submodule(name).in_features
        for layer in find_layers(model, LoRALinear).values():
            layer.down.requires_grad_(False)  # designed per experience, never trained
        self.inflora_plugin = InfLoRAPlugin(groups, rank=rank, num_tasks=num_tasks,
                                            lambda_b=lambda_b, lambda_e=lambda_e, memory=memory)
        super().__init__(model=model, tokenizer=tokenizer, lr=lr, betas=betas, weight_decay=weight_decay,
                         iterations=iterations, train_mb_size=train_mb_size,
                         text_to_image_loss=text_to_image_loss,
                         plugins=[self.inflora_plugin, *(plugins or [])], **kwargs)
        self.lr_schedule = lr_schedule
        self.lr_factor = LR_SCHEDULES[lr_schedule]


def check_inflora_options(options) -> None:
    """The value checks of :class:`InfLoRA`'s own options given in ``options`` (nothing built;
    the rank's upper bound, the attention width, is checked against the model)."""
    if "encoders" in options:
        check_names(options["encoders"], ENCODERS, "encoder")
    if "targets" in options:
        check_names(options["targets"], ATTENTION_INPUT_TARGETS, "InfLoRA target")
    if "lr_schedule" in options and options["lr_schedule"] not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {tuple(LR_SCHEDULES)}, got {options['lr_schedule']!r}")
    if "memory" in options and options["memory"] not in MEMORIES:
        raise ValueError(f"memory must be one of {MEMORIES} (DualGPM or plain GPM), got {options['memory']!r}")
    if "rank" in options:
        check_positive_int("rank", options["rank"])
    if options.get("num_tasks") is not None:
        check_positive_int("num_tasks", options["num_tasks"])
    for name in ("lambda_b", "lambda_e"):
        if name in options:
            check_number(name, options[name], low=0, high=1, hint="DualGPM's threshold")


def _check_rank(model, encoders, rank) -> None:
    """``1 <= rank <=`` the attention input size (LN1 width) of every block of ``encoders``."""
    for block in blocks(model, encoders):
        width = block.module.ln_1.normalized_shape[-1]
        if not 1 <= rank <= width:
            raise ValueError(f"InfLoRA rank must be in 1..{width}, the attention input size of the "
                             f"{block.encoder} encoder's block {block.name!r}, got rank={rank}")


__all__ = ["ATTENTION_INPUT_TARGETS", "INFLORA_TARGETS", "InfLoRA", "check_inflora_options"]
