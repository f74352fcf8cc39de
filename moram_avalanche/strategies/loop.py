"""ContinualLoop: the loop harness every family's strategy specialises.

One ``SupervisedTemplate`` subclass holds what a loop of this package does the same way for
every model family (the update side of Avalanche's ``SupervisedTemplate`` = problem mixin +
update mixin, ``training/templates/common_templates.py``):

* the one check of a strategy's options, before anything is built (:meth:`ContinualLoop.__new__`,
  :func:`~moram_avalanche.strategies.options.check_strategy_options`), and the options as given
  (:attr:`~ContinualLoop.given_options`, which a run folder records);
* the run checkpoint's model state: the declared state of the model's adapter layers when it
  has any (:func:`~moram_avalanche.layers.base.trained_state_dict`), else the whole model;
* a fresh AdamW for every experience over the parameters that require grad then (growth
  plugins added theirs before it is built; the MoRAM release's habit, and O-LoRA's Trainer
  per task), with ``foreach=True`` (CUDA's default implementation, also on the CPU, where it
  gives the per-tensor loop's numbers bit for bit, faster);
* mixed precision as DeepSpeed's bf16 mode does it
  (:mod:`~moram_avalanche.algorithms.mixed_precision`): the optimizer steps float32 master
  copies of the trainable parameters held in bf16 / fp16 (:attr:`~ContinualLoop.master_weights`),
  each step's gradients clipped on their float32 copies first
  (:attr:`~ContinualLoop.max_grad_norm`; a family declares its own clipping,
  :meth:`~ContinualLoop.gradient_clip`); a float32 model with no clipping steps the plain AdamW;
* training batches of ``train_mb_size`` in ``DataLoader(shuffle=True)``'s order, each split
  between the data-parallel processes
  (:class:`~moram_avalanche.algorithms.data_parallel.ShardedBatches`);
* the data-parallel guard: in a process group, a loop without the
  :class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` plugin is refused before
  it trains (every process would train its own model).

A family supplies what differs (the problem side): its model, its loss and its evaluation --
:class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy` (CLIP's scoring,
:mod:`~moram_avalanche.models.scoring`) and :class:`~moram_avalanche.strategies.text.loop.TextStrategy`
(a :class:`~moram_avalanche.models.language_model.LanguageModel`'s token loss and generation) --
and its budget (iterations with a cosine schedule; epochs or iterations at a constant rate).
"""

from __future__ import annotations

import inspect
from typing import Optional

import torch
from avalanche.training.templates import SupervisedTemplate
from torch.utils.data import DataLoader

from ..algorithms.data_parallel import ShardedBatches, world_size
from ..algorithms.mixed_precision import GradientClip, training_optimizer
from ..layers.base import load_trained_state_dict, trained_state_dict
from ..utils.devices import resolve_device
from .needs import StrategyNeeds
from .options import check_strategy_options
from .plugins.data_parallel import DataParallel
from .plugins.validate import check_plugins


class ContinualLoop(SupervisedTemplate):
    """The loop harness of every family (module docstring); not a strategy by itself.

    Args (keyword-only; the rest go to ``SupervisedTemplate``): model; lr, betas, weight_decay
    (AdamW's; each family declares its paper's defaults); progress (bars, where a family shows
    any); train_mb_size, eval_mb_size, train_epochs, device (a torch device, or ``"auto"``: a
    CUDA GPU when there is one; a device this machine lacks is a ValueError), plugins,
    evaluator, eval_every.
    """

    #: what the strategy takes from the app (:mod:`~moram_avalanche.strategies.needs`)
    needs = StrategyNeeds()
    #: the ranges of a class's own options, on the given options alone (ValueError naming the
    #: option); None: none beyond the types. Run with its bases' by
    #: :func:`~moram_avalanche.strategies.options.check_strategy_options`, before anything is built
    check_values = None
    #: how the family's items become a training batch (None: the dataset's own ``collate_fn``);
    #: the DataParallel plugin's evaluation shards read it too
    batch_collate = None
    #: the bound on the global L2 norm of each step's gradients (None: no clipping; the text loop
    #: takes it as an option, default 1.0); read when an experience's optimizer is built
    max_grad_norm: Optional[float] = None
    #: whether trainable parameters in bf16 / fp16 are stepped through float32 master copies
    #: (:class:`~moram_avalanche.algorithms.mixed_precision.MasterWeights`); False: pure low-precision
    #: weights. Nothing changes for float32 parameters
    master_weights: bool = True

    def __new__(cls, *args, **kwargs):
        """Check the keyword options (names, types, ranges; nothing built yet) and keep them.

        The one check of a strategy's options (:func:`~moram_avalanche.strategies.options.check_strategy_options`):
        constructors trust them afterwards."""
        check_strategy_options(cls, kwargs)
        check_plugins(kwargs.get("plugins"))  # as given, before a subclass adds its own to the list
        self = super().__new__(cls)
        #: the keyword arguments this strategy was built with, as given
        self.given_options = dict(kwargs)
        return self

    def __init__(self, *, model, lr, betas, weight_decay: float, progress: bool, train_mb_size: int,
                 eval_mb_size: int, device, plugins, evaluator, eval_every: int, train_epochs: int = 1,
                 **base_kwargs):
        super().__init__(model=model, optimizer=None, train_mb_size=train_mb_size, train_epochs=train_epochs,
                         eval_mb_size=eval_mb_size, device=resolve_device(device), plugins=plugins,
                         evaluator=evaluator, eval_every=eval_every, **base_kwargs)
        self.lr = lr
        self.betas = tuple(betas)
        self.weight_decay = weight_decay
        self.progress = progress

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_model_state(self) -> dict:
        """What of the model a run checkpoint holds: its adapters' declared state, or all of it.

        With adapter layers (MoRAM, LoRA, MoE-LoRA, MoE-Adapters) only what they declare
        (:func:`~moram_avalanche.layers.base.adapter_state_dict`): the pre-trained weights never
        change. Without (full fine-tuning and its relatives) the whole state dict.
        """
        return trained_state_dict(self.model)

    def load_checkpoint_model_state(self, state: dict) -> None:
        load_trained_state_dict(self.model, state)

    # ------------------------------------------------------------------ data
    def make_train_dataloader(self, num_workers=0, shuffle=True, pin_memory=None, persistent_workers=False,
                              drop_last=False, **kwargs):
        """The experience's batches in ``DataLoader(shuffle=True)``'s order, this process's share of each
        (:class:`~moram_avalanche.algorithms.data_parallel.ShardedBatches`): one process draws exactly
        the batches of Avalanche's training loader for one task; data-parallel processes split each
        of those batches, so each process's share is contiguous."""
        data = self.adapted_dataset
        sampler = ShardedBatches(len(data), self.train_mb_size, shuffle=shuffle, drop_last=drop_last)
        self.dataloader = DataLoader(
            data, batch_sampler=sampler, num_workers=num_workers,
            collate_fn=self.batch_collate or getattr(data, "collate_fn", None),
            pin_memory=self.device.type == "cuda" if pin_memory is None else pin_memory,
            persistent_workers=bool(persistent_workers) and num_workers > 0)

    # ------------------------------------------------------------------ optimisation
    # override: a fresh AdamW per experience (Avalanche's make_optimizer keeps one)
    def make_optimizer(self, **kwargs):
        """A fresh optimizer over the parameters that require grad now (:meth:`training_optimizer`);
        None when there are none (:meth:`nothing_to_train` says whether that is a mistake)."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimized_param_id = {}  # tells Avalanche the optimizer is initialised
        self.optimizer = self.training_optimizer(params) if params else None
        if self.optimizer is None:
            self.nothing_to_train()

    def training_optimizer(self, params):
        """What steps ``params``: :meth:`fresh_optimizer` over float32 master copies of those in
        bf16 / fp16 (:attr:`master_weights`), the step's gradients clipped first by
        :meth:`gradient_clip` (:func:`~moram_avalanche.algorithms.mixed_precision.training_optimizer`;
        a family may wrap it)."""
        return training_optimizer(params, self.fresh_optimizer, clip=self.gradient_clip(),
                                  master_weights=self.master_weights)

    def gradient_clip(self) -> Optional[GradientClip]:
        """The clipping of each step's (float32) gradients: their global L2 norm bounded by
        :attr:`max_grad_norm`; None without (a strategy may clip otherwise)."""
        return None if self.max_grad_norm is None else GradientClip(self.max_grad_norm)

    def fresh_optimizer(self, params):
        """AdamW over ``params`` (float32: the masters of low-precision parameters) at
        :meth:`experience_lr` (a strategy may build another optimizer)."""
        return torch.optim.AdamW(params, lr=self.experience_lr(), betas=self.betas, weight_decay=self.weight_decay,
                                 foreach=True)

    def experience_lr(self) -> float:
        """The learning rate of the current experience's optimizer (:attr:`lr`; a family may read
        it per experience)."""
        return self.lr

    def nothing_to_train(self) -> None:
        """Called when no parameter requires grad as an experience starts: a family whose
        experience would train raises here (the default trains nothing then, silently)."""

    # ------------------------------------------------------------------ experience boundaries
    # override: in a process group without DataParallel, refuse before anything changes
    def _before_training(self, **kwargs):
        if world_size() > 1 and not any(isinstance(p, DataParallel) for p in self.plugins):
            raise RuntimeError(
                f"{type(self).__name__} runs in a process group of {world_size()} but has no "
                "DataParallel plugin: without it every process would train its own model. Pass "
                "plugins=[DataParallel()] (moram-avalanche run adds it under torchrun)")
        super()._before_training(**kwargs)


# Avalanche wraps every template subclass's __init__ with a check of the keyword names against
# *that* class's bases; the harness sits above Avalanche's strategies mixed into a family's loop
# (Avalanche's EWC, ... on the text loop: strategies/text_builtins.py), whose arguments pass
# through it: the final class's check covers every base
ContinualLoop.__init__ = inspect.unwrap(ContinualLoop.__init__)

__all__ = ["ContinualLoop"]
