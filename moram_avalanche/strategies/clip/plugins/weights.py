"""Parameter-space plugins of the ZSCL code: WiSE-FT merging, weight ensembling, the L2 anchor.

Each keeps one :class:`~moram_avalanche.algorithms.weight_copy.WeightCopy` (on the CPU by
default, ``on="model"`` for the model's device and dtype). All of their state is
reconstructed from the model when an experience starts (or, for a zero-shot anchor, when the
plugin is built), so a run checkpoint of the model between experiences is enough to resume.
"""

from __future__ import annotations

from avalanche.core import SupervisedPlugin
from torch import nn

from ....algorithms.weight_copy import WeightCopy, check_place

ANCHORS = ("start", "zeroshot")


class WiSEMerge(SupervisedPlugin, supports_distributed=True):
    """At the end of each experience, ``theta <- alpha * theta + (1 - alpha) * theta_anchor``.

    ZSCL's ``--wise_merge`` (WiSE-FT, Wortsman et al., CVPR 2022, applied once per task):
    ``alpha`` 0.8 (``--wise_ft_alpha`` in WiSE_finetune.sh); the anchor is the model at the
    start of the experience -- the previous experience's merged model, or the pre-trained one
    for the first (``--wise_ft_model n``, the script's choice) -- or the zero-shot model
    (``--wise_ft_model zeroshot``) [ZSCL mtil/src/models/finetune.py, mtil/scripts/WiSE_finetune.sh].

    Args:
        alpha: weight of the fine-tuned model, in [0, 1].
        anchor: "start" or "zeroshot".
        zeroshot: the zero-shot model (needed for ``anchor="zeroshot"``); its weights are
            copied now, so pass it before training.
        on: where the anchor copy lives ("cpu" or "model").
    """

    def __init__(self, alpha: float = 0.8, anchor: str = "start", zeroshot: nn.Module | None = None,
                 on: str = "cpu") -> None:
        super().__init__()
        if not 0 <= alpha <= 1:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if anchor not in ANCHORS:
            raise ValueError(f"anchor must be one of {ANCHORS}, got {anchor!r}")
        if (anchor == "zeroshot") != (zeroshot is not None):
            raise ValueError("pass the zero-shot model exactly when anchor='zeroshot'")
        self.alpha, self.anchor, self.on = alpha, anchor, check_place(on)
        self.copy: WeightCopy | None = WeightCopy(zeroshot, on) if zeroshot is not None else None

    def before_training_exp(self, strategy, **kwargs):
        if self.anchor == "start":
            self.copy = WeightCopy(strategy.model, self.on)
        else:
            self.copy.place_like(strategy.model)

    def after_training_exp(self, strategy, **kwargs):
        self.copy.blend_into(strategy.model, self.alpha)
        if self.anchor == "start":
            self.copy = None

    def held_bytes(self) -> int:
        return 0 if self.copy is None else self.copy.nbytes


class WeightEnsemble(SupervisedPlugin, supports_distributed=True):
    """ZSCL's weight ensembling (``--we --avg_freq 100``): a uniform running average of the weights.

    When an experience starts, the average is the current weights (one point). After the
    first optimizer step, after every ``every``-th and after the last, the current weights join
    it: ``avg <- (n * avg + theta) / (n + 1)``, ``n <- n + 1`` (``merge_we``). Training goes on
    from the raw weights; when the experience ends the average *becomes* the model (ZSCL saves
    ``we_model`` and loads it as the next task's start and L2 anchor) [ZSCL
    mtil/src/models/finetune.py, helpers.py].

    The reference runs ``iterations + 1`` steps (0..N) and averages after steps 0, 100, ..., N;
    this loop runs N steps (0..N-1), so the snapshot after the last step stands in for the
    reference's snapshot at N: 1 + N/every + 1 points when ``every`` divides N, as there.
    """

    def __init__(self, every: int = 100, on: str = "cpu") -> None:
        super().__init__()
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every, self.on = every, check_place(on)
        self.average: WeightCopy | None = None
        self.count = 0
        self._step = 0

    def before_training_exp(self, strategy, **kwargs):
        self.average = WeightCopy(strategy.model, self.on)
        self.count, self._step = 1, 0

    def after_training_iteration(self, strategy, **kwargs):
        step, self._step = self._step, self._step + 1
        if step % self.every == 0 or self._step == strategy.iterations:
            self.average.average_in(strategy.model, self.count)
            self.count += 1

    def after_training_exp(self, strategy, **kwargs):
        self.average.load_into(strategy.model)
        self.average = None

    def held_bytes(self) -> int:
        return 0 if self.average is None else self.average.nbytes


class RestartFrom(SupervisedPlugin, supports_distributed=True):
    """Every experience starts from the weights ``model`` has now (e.g. zero-shot CLIP).

    Each domain is then learned on its own -- the per-domain upper bound of a stream (the
    "Fine-tune" row of the X-TAIL table): row ``t`` of the accuracy matrix is the model fine-tuned
    on domain ``t`` alone, so its diagonal is each domain's own fine-tuned accuracy.

    Args:
        model: the model whose current weights every experience restarts from.
        on: where the copy lives ("cpu" or "model").
    """

    def __init__(self, model: nn.Module, on: str = "cpu") -> None:
        super().__init__()
        self.copy = WeightCopy(model, check_place(on))

    def before_training_exp(self, strategy, **kwargs):
        self.copy.place_like(strategy.model)
        self.copy.load_into(strategy.model)

    def held_bytes(self) -> int:
        return self.copy.nbytes


class L2Anchor(SupervisedPlugin, supports_distributed=True):
    """``weight * sum_p ||theta_p - theta_p^start||^2`` added to the loss (ZSCL's ``--l2``).

    ``theta^start`` is the model when the experience starts (ZSCL: the previous task's final,
    weight-ensembled model); squared differences are summed over every parameter
    (``l2_loss``), weight 1 in ZSCL.sh [ZSCL mtil/src/models/helpers.py, finetune.py].
    """

    def __init__(self, weight: float = 1.0, on: str = "cpu") -> None:
        super().__init__()
        if weight < 0:
            raise ValueError(f"weight must be >= 0, got {weight}")
        self.weight, self.on = weight, check_place(on)
        self.anchor: WeightCopy | None = None
        self.last_loss = None

    def before_training_exp(self, strategy, **kwargs):
        self.anchor = WeightCopy(strategy.model, self.on)

    def before_backward(self, strategy, **kwargs):
        self.last_loss = self.weight * self.anchor.squared_distance(strategy.model)
        strategy.loss += self.last_loss

    def after_training_exp(self, strategy, **kwargs):
        self.anchor = None
        self.last_loss = None

    def held_bytes(self) -> int:
        return 0 if self.anchor is None else self.anchor.nbytes


__all__ = ["ANCHORS", "L2Anchor", "RestartFrom", "WeightEnsemble", "WiSEMerge"]
