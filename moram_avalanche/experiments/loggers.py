"""Avalanche's W&B logger, working with the wandb release this package installs.

Avalanche 0.6.0's ``avalanche.logging.WandBLogger`` calls two wandb names that wandb 0.31
(the version ``constraints.txt`` pins) no longer has: ``wandb.util.generate_id`` when it starts
a run without an id, and ``wandb.viz.CustomChart`` in every ``log_single_metric`` (an
``AttributeError`` at the first metric). :class:`WandBLogger` is Avalanche's logger with those
two steps done without them; everything else (arguments, checkpoint artifacts, the step axis)
is Avalanche's. Offline runs (``params={"mode": "offline"}`` or ``WANDB_MODE=offline``) write
under ``dir`` and sync later with ``wandb sync``.
"""

from __future__ import annotations

import uuid

import numpy as np
from avalanche.evaluation.metric_results import AlternativeValues, TensorImage
from avalanche.logging import WandBLogger as AvalancheWandBLogger
from matplotlib.figure import Figure
from PIL.Image import Image
from torch import Tensor


class WandBLogger(AvalancheWandBLogger):
    """``avalanche.logging.WandBLogger`` for wandb >= 0.19 (same arguments; see the module docstring).

    A run without an ``id`` (in ``params`` or ``WANDB_RUN_ID``) gets a random one. Metric values
    are logged by type as Avalanche does: numbers as scalars, tensors as histograms, PIL images,
    ``TensorImage`` and matplotlib figures as images, other types skipped.
    """

    def before_run(self):
        self.init_kwargs = dict(self.init_kwargs or {})
        self.init_kwargs.setdefault("id", uuid.uuid4().hex[:8])
        super().before_run()

    def log_single_metric(self, name, value, x_plot):
        if name.startswith("WeightCheckpoint"):  # Avalanche's artifact logging, unchanged
            return super().log_single_metric(name, value, x_plot)
        self.step = x_plot
        if isinstance(value, AlternativeValues):
            value = value.best_supported_value(Image, Tensor, TensorImage, Figure, float, int)
        wandb = self.wandb
        if isinstance(value, (bool, np.bool_)):
            return
        if isinstance(value, (int, float, np.number)):
            logged = float(value) if isinstance(value, np.number) else value
        elif isinstance(value, Tensor):
            logged = wandb.Histogram(np_histogram=np.histogram(value.detach().cpu().reshape(-1).numpy()))
        elif isinstance(value, (Image, Figure)):
            logged = wandb.Image(value)
        elif isinstance(value, TensorImage):
            logged = wandb.Image(np.array(value))
        else:
            return
        wandb.log({name: logged}, step=self.step)


__all__ = ["WandBLogger"]
