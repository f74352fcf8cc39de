"""``lori-d`` and ``lori-s``: LoRI (Zhang et al., 2025, "LoRI: Reducing Cross-Task Interference in
Multi-Task Low-Rank Adaptation"), the baseline rows of the paper's CodeAlpaca comparison
(``tab:supp_humaneval``).

What runs (facts from juzhengz/LoRI, ``scripts/codealpaca_llama3_r_32.sh``, ``src/train_lori.py``,
``src/extract_mask.py``, ``src/apply_mask_in_backward.py``; the layer: :mod:`moram_avalanche.layers.lori`):

* ``lori-d`` (:class:`TextLoRID`): LoRA on every linear projection of each block (q, k, v, o, gate,
  up, down: the code's ``target_modules``), rank 32, ``lora_alpha`` 64 (scale 2), ``A`` drawn as
  peft draws it and frozen, ``B`` from zero the only trained factor; AdamW at lr 5e-5, constant
  (``warmup_steps`` 0), batch 32, 2 epochs; no dropout (the code builds ``lora_dropout=0.05`` and
  then sets every dropout to 0, ``disable_dropout``);
* ``lori-s`` (:class:`TextLoRIS`): the script's two stages, inside one strategy on each task
  that has no mask yet: LoRI-D as above (lr ``dense_lr`` 5e-5), then the model-wide 90 %
  magnitude mask of the trained ``B`` (``sparsity`` 0.9), then ``B`` again from zero with the
  same frozen ``A`` and its gradient masked, at lr 5e-4 for the same epochs (the script's second
  ``train_lori.py`` call: a fresh adapter, ``mask_path`` set). Later tasks of a stream train under
  the first task's mask. The mask is in the checkpoint, so a resumed run does not redo stage 1.
  An ``iterations`` budget (a smoke run, a rehearsal) applies to each stage: twice the steps.

The loss is the code's: each example's answer tokens' cross-entropies summed (its negative
log-likelihood), averaged over the examples (``src/mask_trainers.py:294,299,307``:
``_get_batch_logps(..., average_log_prob=False)``, ``losses = -policy_chosen_logps``,
``losses.mean()``; :data:`LORI_LOSS`), not the mean over the batch's tokens the other rows take:
with the clipping below, that changes the updates, not only their scale. ``loss_reduction=
"token-mean"`` gives the token mean (0.6's).

Each ``B``'s gradient is clipped to norm ``max_grad_norm`` (1) on its own before each step, as the
code does (``max_grad_norm=1``, ``grad_norm_strategy=even``: per parameter, not global), on the
float32 gradient the step reads (the code trains float32 weights, ``config/model/llama3.yaml``
``policy_dtype: float32``; here the float32 masters of bf16 weights,
:mod:`~moram_avalanche.algorithms.mixed_precision`), once per optimizer step (with
``accumulation_steps`` > 1, the accumulated gradient). Where this differs from the code: it draws
``A`` from torch's default generator before any seed is set (the same ``A`` in both calls); here
``A`` comes from the run's seed, the same in both stages (it is never redrawn).
"""

from __future__ import annotations

from typing import Optional

from ...algorithms.mixed_precision import GradientClip
from ...layers.base import find_layers
from ...layers.lori import LoRILinear, clip_each_gradient, magnitude_masks
from ...layers.replace import replace_linears
from ...models.language_model import LOSS_REDUCTIONS
from ...utils.checks import check_choice, check_number, check_positive_int
from ..needs import StrategyNeeds
from .adapters import Targets, lora_targets, wrap
from .loop import TextStrategy

_SCRIPT = "juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh"
#: LoRI's CodeAlpaca (Llama-3) settings (:data:`_SCRIPT`): rank, ``lora_alpha / r``, the two stages'
#: learning rates, epochs, batch, and LoRI-S's sparsity of B
LORI_CODEALPACA = {"rank": 32, "scale": 64 / 32, "dense_lr": 5e-5, "sparse_lr": 5e-4, "epochs": 2,
                   "train_mb_size": 32, "sparsity": 0.9, "max_grad_norm": 1.0}
#: LoRI's loss: each example's summed token cross-entropy, averaged over the examples (module docstring)
LORI_LOSS = "example-sum"
#: where :data:`LORI_LOSS` comes from
LORI_LOSS_SOURCE = ("juzhengz/LoRI src/mask_trainers.py:294,299,307 (-_get_batch_logps(average_log_prob=False), "
                    "losses.mean())")


def lori_targets(model, targets: Targets) -> list:
    """Dotted names of the linears LoRI wraps (``targets`` None: every projection of each block,
    :data:`~moram_avalanche.text.targets.ALL_LINEAR_TARGET_MODULES`, the code's seven)."""
    from ...text.targets import ALL_LINEAR_TARGET_MODULES

    return lora_targets(model, targets, ALL_LINEAR_TARGET_MODULES, "LoRI (every projection of a block)")


def check_lori_options(options) -> None:
    """Value checks of LoRI's own options given in ``options`` (one line each, naming the option)."""
    if "rank" in options:
        check_positive_int("rank", options["rank"])
    if "scale" in options:
        check_number("scale", options["scale"], hint=f"lora_alpha / r; {_SCRIPT}: 64 / 32 = 2")
    if "dense_lr" in options:
        check_number("dense_lr", options["dense_lr"], low=0, low_open=True,
                     hint=f"the LoRI-D stage's learning rate; {_SCRIPT}: 5e-5")
    if options.get("max_grad_norm") is not None:
        check_number("max_grad_norm", options["max_grad_norm"], low=0, low_open=True,
                     hint=f"each B's gradient norm bound; {_SCRIPT}: max_grad_norm=1; None: no clipping")
    if "sparsity" in options:
        check_number("sparsity", options["sparsity"], low=0, high=1, high_open=True,
                     hint=f"the fraction of B's entries masked out; {_SCRIPT}: 0.9")
    if "loss_reduction" in options:
        check_choice("loss_reduction", options["loss_reduction"], LOSS_REDUCTIONS,
                     hint=f"LoRI's src/mask_trainers.py: {LORI_LOSS!r}")


def check_lori_s_options(options) -> None:
    """The constant learning rates of LoRI-S's two stages (LoRI-D's checks, :func:`check_lori_options`,
    run too: they are :class:`TextLoRID`'s)."""
    if options.get("lr_schedule", "constant") != "constant":
        raise ValueError(f"lori-s trains two stages per task at constant learning rates: lr_schedule must be "
                         f"'constant' ({_SCRIPT}: warmup_steps 0), got {options['lr_schedule']!r}")


class TextLoRID(TextStrategy):
    """LoRI-D: frozen random ``A``, trained dense ``B`` (module docstring; juzhengz/LoRI).

    Args (besides TextStrategy's, whose lr / epochs / train_mb_size default to LoRI-D's 5e-5 / 2 /
    32 here): rank (32), scale (2: ``lora_alpha`` 64 / 32), target_modules (None: every projection
    of each block; names, a regular expression or a mapping of ``model_type`` to names),
    max_grad_norm (1: each trained parameter's gradient clipped on its own; None: no clipping),
    loss_reduction (``"example-sum"``: LoRI's; ``"token-mean"``: the other rows', 0.6's; set on
    the model, :attr:`~moram_avalanche.models.language_model.LanguageModel.loss_reduction`).
    """

    #: a gradient hook masks B (LoRI-S): not through FSDP's flattened parameters
    needs = StrategyNeeds(fsdp=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_lori_options(options))

    def __init__(self, *, model, tokenizer=None, rank: int = LORI_CODEALPACA["rank"],
                 scale: float = LORI_CODEALPACA["scale"], target_modules: Targets = None,
                 lr: float = LORI_CODEALPACA["dense_lr"], epochs=LORI_CODEALPACA["epochs"],
                 train_mb_size: int = LORI_CODEALPACA["train_mb_size"],
                 max_grad_norm: Optional[float] = LORI_CODEALPACA["max_grad_norm"], loss_reduction: str = LORI_LOSS,
                 **kwargs):
        model = wrap(model, tokenizer)
        if not find_layers(model, LoRILinear):
            names = lori_targets(model, target_modules)
            model.requires_grad_(False)
            replace_linears(model.model, names, lambda linear: LoRILinear(linear, rank, scale=scale))
        model.loss_reduction = loss_reduction
        super().__init__(model=model, tokenizer=tokenizer, lr=lr, epochs=epochs, train_mb_size=train_mb_size,
                         max_grad_norm=max_grad_norm, **kwargs)

    def gradient_clip(self):
        """Each trained parameter's (float32) gradient clipped to ``max_grad_norm`` on its own
        before each step (:func:`~moram_avalanche.layers.lori.clip_each_gradient`), not their global norm."""
        return None if self.max_grad_norm is None else GradientClip(self.max_grad_norm, clip_each_gradient)

    @staticmethod
    def adapter_parameters(shapes, options):
        """The parameter columns of this row (:func:`~moram_avalanche.text.adapter_params.lori_parameters`):
        ``B``'s entries, as LoRI counts its trainable parameters."""
        from ...text.adapter_params import lori_parameters

        return lori_parameters(shapes, options.get("rank", LORI_CODEALPACA["rank"]))


class TextLoRIS(TextLoRID):
    """LoRI-S: LoRI-D, its model-wide magnitude mask of ``B``, then ``B`` retrained from zero
    under the mask (module docstring; the script's two stages, run in one strategy).

    Args (besides TextLoRID's; lr defaults to LoRI-S's 5e-4): dense_lr (5e-5, the LoRI-D
    stage's), sparsity (0.9: the fraction of ``B``'s entries, over the whole model, masked out).
    """

    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_lori_s_options(options))

    def __init__(self, *, model, tokenizer=None, dense_lr: float = LORI_CODEALPACA["dense_lr"],
                 sparsity: float = LORI_CODEALPACA["sparsity"], lr: float = LORI_CODEALPACA["sparse_lr"], **kwargs):
        super().__init__(model=model, tokenizer=tokenizer, lr=lr, **kwargs)
        self.dense_lr = float(dense_lr)
        self.sparsity = float(sparsity)

    @staticmethod
    def adapter_parameters(shapes, options):
        """The entries of ``B`` the mask keeps (:func:`~moram_avalanche.text.adapter_params.lori_parameters`)."""
        from ...text.adapter_params import lori_parameters

        return lori_parameters(shapes, options.get("rank", LORI_CODEALPACA["rank"]),
                               options.get("sparsity", LORI_CODEALPACA["sparsity"]))

    def lori_layers(self):
        return find_layers(self.model, LoRILinear)

    def masked(self) -> bool:
        """Whether the layers train under a mask (LoRI-S's stage; False before the first task's mask)."""
        return any(bool(layer.masked) for layer in self.lori_layers().values())

    def experience_lr(self) -> float:
        """``dense_lr`` while no mask is set (the LoRI-D stage), then ``lr``."""
        return self.lr if self.masked() else self.dense_lr

    def _train_exp(self, experience, eval_streams=None, **kwargs):
        """With no mask yet: the LoRI-D stage (the optimizer Avalanche built is at ``dense_lr``),
        the mask of its ``B``, and the model adapted again -- a fresh optimizer at ``lr``, built by
        Avalanche's ``check_model_and_optimizer`` as at an experience's start. Then the sparse stage."""
        if not self.masked():
            super()._train_exp(experience, eval_streams, **kwargs)
            layers = self.lori_layers()
            masks = magnitude_masks({name: layer.up for name, layer in layers.items()}, self.sparsity)
            for name, layer in layers.items():
                layer.set_mask(masks[name])
            self.check_model_and_optimizer()
        super()._train_exp(experience, eval_streams, **kwargs)


__all__ = ["LORI_CODEALPACA", "LORI_LOSS", "LORI_LOSS_SOURCE", "TextLoRID", "TextLoRIS", "check_lori_options", "check_lori_s_options", "lori_targets"]
