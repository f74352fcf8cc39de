"""InfLoRA (Liang & Li, CVPR 2024) for CLIP: CLIPStrategy + K/V LoRA + InfLoRAPlugin (DualGPM)."""

from __future__ import annotations

import warnings
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

import torch
from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader

from ..clip.inject import encoder_module, inject_lora, residual_blocks, target_linear_names
from ..covariance import InputCovariance
from ..dualgpm import LAMBDA_B, LAMBDA_E, DualGPM, design_down_projection, threshold
from ..lora import LoRALinear
from .base import CLIPStrategy, _domain_of
from .schedule import LR_SCHEDULES

#: InfLoRA's targets: the key and value projections [InfLoRA models/vit_inflora.py]
INFLORA_TARGETS = ("k", "v")
#: projections whose input is the attention input (LN1 output), the covariance InfLoRA records
_ATTENTION_INPUT_TARGETS = ("q", "k", "v")
#: keys of a LoRA layer's entries in a run checkpoint: the merged base weight and the factors
_CHECKPOINT_SUFFIXES = ("base.weight", "down", "up")
#: memory kinds: DualGPM [InfLoRA methods/inflora.py] or plain GPM [methods/inflora_domain.py]
MEMORIES = ("dual", "gpm")


def lora_layers(model: torch.nn.Module) -> Dict[str, LoRALinear]:
    """Every LoRALinear of ``model`` by dotted name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


def input_covariances(
    model: torch.nn.Module,
    recorded: Mapping[str, torch.nn.Module],
    *,
    images: Iterable[torch.Tensor] = (),
    tokens: Iterable[torch.Tensor] = (),
) -> Dict[str, torch.Tensor]:
    """``{key: mean over tokens of x x^T}`` of the input of each ``recorded`` module (no grad).

    ``images`` batches go through ``model.encode_image``, ``tokens`` batches through
    ``model.encode_text``; each recorded module sees the tokens of the encoder it lives in.
    The model runs in eval mode (restored after).
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), InputCovariance(recorded) as recorder:
            for batch in images:
                model.encode_image(batch)
            for batch in tokens:
                model.encode_text(batch)
    finally:
        model.train(was_training)
    return recorder.covariances()


class InfLoRAPlugin(SupervisedPlugin):
    """InfLoRA's per-task procedure around the shared CLIP loop (baselines reference, section 3.2).

    Layers are grouped by attention module ("group" = the LoRA'd q/k/v projections of one
    attention, which share their input, the LN1 output): one covariance and one
    :class:`~moram_avalanche.dualgpm.DualGPM` memory per group. ``memory="dual"``: the DualGPM
    of the class-incremental ``methods/inflora.py`` (default: X-TAIL and MTIL add new classes
    with every domain); ``"gpm"``: the remove-only GPM of the official domain-incremental
    variant ``methods/inflora_domain.py``. Both protect the same space up to ties at the
    threshold (:mod:`~moram_avalanche.dualgpm`); they store different bases.

    * ``before_training_exp``: covariance pass over the experience's training data with the
      current (merged) model; each group's down-projection = the top-``rank`` left singular
      vectors of the covariance projected out of the old input space, / sqrt(3), identical for
      all its layers (:func:`~moram_avalanche.dualgpm.design_down_projection`); rows beyond
      the numerical rank of the projected covariance are filled from the free space (our
      guard; the original keeps arbitrary null-space vectors, which may lie in the old space);
      if the free space has fewer than ``rank`` directions, a warning says how many rows fall
      in the old space. up = 0; the optimizer is rebuilt.
    * ``after_training_exp``: covariance pass with the trained model, DualGPM update with
      ``eps_t = lambda_b + (lambda_e - lambda_b) t / T`` (``t`` = experiences trained before,
      ``T`` = ``num_tasks`` or the number of domains of the stream), then every LoRA layer
      merges its update into the base weight (its up-projection returns to zero).

    Covariance data: the experience's training set as the strategy trains on it (its train
    transform), in order, in batches of ``eval_mb_size``, loaded with the ``num_workers`` that
    ``strategy.train`` was given (Avalanche hands ``train``'s keyword arguments to the plugin
    hooks) -- the original uses its training loader [InfLoRA methods/inflora.py]. Text
    groups (``encoders`` with "text") see the tokenized prompts of the experience's classes
    (its ``template``), every one of the ``context_length`` positions counting, padding
    included, as LibContinual's CLIP port [LibContinual core/model/InfLoRA_opt.py].

    Attributes:
        memories: ``{group: DualGPM}``. tasks_done: experiences taken into the memories.
        history: per experience ``{"domain", "threshold", "old_space": {group: dims},
            "kind": {group: "remove"|"retain"}}``.
    """

    def __init__(self, groups: Mapping[str, Mapping], *, rank: int, num_tasks: Optional[int] = None,
                 lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E, memory: str = "dual") -> None:
        super().__init__()
        if num_tasks is not None and num_tasks < 1:
            raise ValueError(f"num_tasks must be a positive int or None, got {num_tasks}")
        if memory not in MEMORIES:
            raise ValueError(f"memory must be one of {MEMORIES} (DualGPM or plain GPM), got {memory!r}")
        threshold(0, 1, lambda_b, lambda_e)  # validates the lambdas
        self.groups = {name: {"encoder": g["encoder"], "layers": list(g["layers"]), "dim": int(g["dim"])}
                       for name, g in groups.items()}
        self.rank = rank
        self.num_tasks = num_tasks
        self.lambda_b, self.lambda_e = lambda_b, lambda_e
        too_wide = {name: g["dim"] for name, g in self.groups.items() if not 1 <= rank <= g["dim"]}
        if too_wide:
            raise ValueError(f"rank must be in 1..the layer input size, got rank={rank} for input sizes "
                             f"{too_wide}; pick a rank <= {min(too_wide.values())}")
        self.memory = memory
        self.memories = {name: DualGPM(g["dim"], dual=memory == "dual") for name, g in self.groups.items()}
        self.tasks_done = 0
        self.history: List[dict] = []

    # ------------------------------------------------------------------ hooks
    def before_training_exp(self, strategy, **kwargs):
        self._threshold(strategy.experience)  # fail before any work if the stream is too long
        covariances = self.covariances(strategy, num_workers=kwargs.get("num_workers", 0))
        layers = lora_layers(strategy.model)
        for name, group in self.groups.items():
            memory = self.memories[name]
            if memory.free_dim < self.rank:
                warnings.warn(
                    f"InfLoRA, experience {self.tasks_done}, layer group {name}: the memory leaves "
                    f"only {memory.free_dim} free input directions for rank {self.rank}, so "
                    f"{self.rank - memory.free_dim} rows of the new down-projection lie in the old "
                    "tasks' input space and may interfere with them; use a smaller rank or lambda_b")
            projected = memory.project_away(covariances[name])
            down = design_down_projection(projected, self.rank, free=memory.free_basis())
            for layer_name in group["layers"]:
                layer = layers[layer_name]
                layer.set_down(down.to(layer.down.dtype))
                with torch.no_grad():
                    layer.up.zero_()
                layer.down.requires_grad_(False)
                layer.up.requires_grad_(True)
        strategy.make_optimizer()

    def after_training_exp(self, strategy, **kwargs):
        eps = self._threshold(strategy.experience)
        covariances = self.covariances(strategy, num_workers=kwargs.get("num_workers", 0))
        for name, memory in self.memories.items():
            memory.update(covariances[name], eps)
        for layer in lora_layers(strategy.model).values():
            layer.merge()
        self.tasks_done += 1
        self.history.append({
            "domain": str(getattr(strategy.experience, "domain", "")), "threshold": eps,
            "old_space": {name: m.old_space_dim for name, m in self.memories.items()},
            "kind": {name: m.kind for name, m in self.memories.items()},
        })

    # ------------------------------------------------------------------ pieces
    def covariances(self, strategy, num_workers: int = 0) -> Dict[str, torch.Tensor]:
        """The input covariance of every group on the current experience's training data.

        ``num_workers``: loader processes for the images (0: the main process).
        """
        layers = lora_layers(strategy.model)
        recorded = {name: layers[g["layers"][0]] for name, g in self.groups.items()}
        encoders = {g["encoder"] for g in self.groups.values()}
        images = tokens = ()
        if "visual" in encoders:
            dataset = strategy.adapted_dataset
            loader = DataLoader(dataset, batch_size=strategy.eval_mb_size, shuffle=False,
                                num_workers=num_workers, collate_fn=getattr(dataset, "collate_fn", None))
            images = (batch[0].to(strategy.device) for batch in loader)
        if "text" in encoders:
            prompts = _domain_of(strategy.experience).prompts()
            size = strategy.text_head.batch_size
            tokens = (strategy.tokenizer(prompts[i:i + size]).to(strategy.device)
                      for i in range(0, len(prompts), size))
        return input_covariances(strategy.model, recorded, images=images, tokens=tokens)

    def _threshold(self, experience) -> float:
        total = self.num_tasks if self.num_tasks is not None else len(getattr(experience, "domains", ()))
        if total < 1:
            raise ValueError("InfLoRA needs the number of tasks T for its threshold schedule: the "
                             "experience has no `domains`; pass num_tasks")
        return threshold(self.tasks_done, total, self.lambda_b, self.lambda_e)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {"tasks_done": self.tasks_done, "history": self.history,
                "memories": {name: m.state_dict() for name, m in self.memories.items()}}

    def load_state_dict(self, state: dict) -> None:
        if set(state["memories"]) != set(self.memories):
            raise ValueError("the checkpoint's DualGPM memories are for other layers: "
                             f"{sorted(state['memories'])[:3]} vs {sorted(self.memories)[:3]}")
        for name, memory_state in state["memories"].items():
            self.memories[name].load_state_dict(memory_state)
        self.tasks_done = int(state["tasks_done"])
        self.history = list(state["history"])


class InfLoRA(CLIPStrategy):
    """InfLoRA (Liang & Li, CVPR 2024) on the shared CLIP loop (baselines reference, section 3).

    Wraps the key and value projections of every attention block of ``encoders`` in
    :class:`~moram_avalanche.lora.LoRALinear` (scale 1) and adds an :class:`InfLoRAPlugin`:
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
            (:func:`~moram_avalanche.strategies.schedule.quarter_cosine_lr_factor`).
            ``"cosine"``: the harness's half cosine from lr to 0 (mean 0.5 lr), as the other
            strategies (:func:`~moram_avalanche.strategies.schedule.cosine_lr_factor`).
        Optimisation: Adam (AdamW with weight decay 0) lr 5e-4, betas (0.9, 0.999), as InfLoRA
        and LibContinual [InfLoRA methods/inflora.py]; 500 iterations of batch 64, warm-up 0,
        no label smoothing: the few-shot budget of this package's harness (MoRAM release;
        reference, section 3.4 "proposed default") in place of InfLoRA's 20 epochs of batch
        128. The deviations from the original's optimisation are this budget and the schedule's
        granularity (per iteration instead of per epoch), or its shape with ``"cosine"``.
        The loss is the cross-entropy over the current classes only
        (``text_to_image_loss=False``), as InfLoRA and LibContinual.
    """

    def __init__(self, *, model, tokenizer, rank: int = 10, encoders: Sequence[str] = ("visual",),
                 targets: Sequence[str] = INFLORA_TARGETS, num_tasks: Optional[int] = None,
                 lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E, memory: str = "dual",
                 lr_schedule: str = "quarter_cosine", lr: float = 5e-4,
                 betas=(0.9, 0.999), weight_decay: float = 0.0, iterations: int = 500,
                 train_mb_size: int = 64, text_to_image_loss: bool = False, plugins=None, **kwargs):
        encoders, targets = _names(encoders), _names(targets)
        bad = [t for t in targets if t not in _ATTENTION_INPUT_TARGETS]
        if bad or not targets:
            raise ValueError(f"InfLoRA targets must be a non-empty subset of {_ATTENTION_INPUT_TARGETS} "
                             f"(projections of the attention input), got {targets}")
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {tuple(LR_SCHEDULES)}, got {lr_schedule!r}")
        if memory not in MEMORIES:
            raise ValueError(f"memory must be one of {MEMORIES} (DualGPM or plain GPM), got {memory!r}")
        _check_rank(model, encoders, rank)  # before the model is changed
        inject_lora(model, encoders=encoders, targets=targets, rank=rank)
        groups = {}
        for encoder in encoders:
            for name in target_linear_names(model, (encoder,), targets):
                group = name.rpartition(".")[0]
                entry = groups.setdefault(group, {"encoder": encoder, "layers": [], "dim": 0})
                entry["layers"].append(name)
                entry["dim"] = model.get_submodule(name).in_features
        for layer in lora_layers(model).values():
            layer.down.requires_grad_(False)  # designed per experience, never trained
        self.inflora_plugin = InfLoRAPlugin(groups, rank=rank, num_tasks=num_tasks,
                                            lambda_b=lambda_b, lambda_e=lambda_e, memory=memory)
        super().__init__(model=model, tokenizer=tokenizer, lr=lr, betas=betas, weight_decay=weight_decay,
                         iterations=iterations, train_mb_size=train_mb_size,
                         text_to_image_loss=text_to_image_loss,
                         plugins=[self.inflora_plugin, *(plugins or [])], **kwargs)
        self.lr_schedule = lr_schedule
        self.lr_factor = LR_SCHEDULES[lr_schedule]

    def checkpoint_model_state(self) -> dict:
        """The LoRA layers only: merged base weights and factors (CLIP's other weights never change)."""
        keys = {f"{name}.{suffix}" for name in lora_layers(self.model) for suffix in _CHECKPOINT_SUFFIXES}
        return {k: v for k, v in self.model.state_dict().items() if k in keys}

    def load_checkpoint_model_state(self, state: dict) -> None:
        expected = set(self.checkpoint_model_state())
        if set(state) != expected:
            missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
            raise ValueError(f"checkpoint LoRA state does not fit this model: missing {missing[:3]}, "
                             f"unexpected {unexpected[:3]} (same encoders, targets and rank?)")
        self.model.load_state_dict(state, strict=False)


def _check_rank(model, encoders, rank) -> None:
    """``1 <= rank <=`` the attention input size (LN1 width) of every block of ``encoders``."""
    for encoder in encoders:
        for name, block in residual_blocks(encoder_module(model, encoder)):
            width = block.ln_1.normalized_shape[-1]
            if not 1 <= rank <= width:
                raise ValueError(f"InfLoRA rank must be in 1..{width}, the attention input size of the "
                                 f"{encoder} encoder's block {name!r}, got rank={rank}")


def _names(given) -> tuple:
    return (given,) if isinstance(given, str) else tuple(given)


__all__ = ["InfLoRA", "InfLoRAPlugin", "input_covariances", "lora_layers"]
