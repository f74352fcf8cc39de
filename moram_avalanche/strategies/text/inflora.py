"""InfLoRA (Liang & Li, CVPR 2024) for language models: the ``inf-lora`` row of the T5 standard table.

:class:`TextInfLoRA` is the text loop with a :class:`~moram_avalanche.text.lora_layers.DropoutTaskLoRALinear`
on every target linear and a :class:`~moram_avalanche.strategies.text.plugins.inflora.TextInfLoRAPlugin`:
per task a new branch whose frozen down-projection is designed from the task's input covariance
projected off the DualGPM subspace of the earlier tasks, its up-projection the only trained
part; the memory updated after the task. The math is the CLIP row's
(:mod:`moram_avalanche.algorithms.dualgpm`, :mod:`moram_avalanche.algorithms.covariance`).

Settings, and where each comes from:

* InfLoRA's own: rank 10 [InfLoRA configs/cifar100_inflora.json, mimg10_inflora.json ``rank``];
  the update unscaled and no dropout on its input [models/vit_inflora.py: ``lora_B(lora_A(x))``
  added as is]; the threshold schedule lambda_b 0.95, lambda_e 1.0 [configs ``lamb``, ``lame``];
  DualGPM [methods/inflora.py].
* Targets: the query and value projections, as the table's other LoRA rows (IncLoRA, O-LoRA:
  peft's T5 default, :data:`~moram_avalanche.strategies.text.adapters.LORA_TARGET_MODULES`),
  so that the rows differ by method only. InfLoRA's own key and value are ViT's; the method
  needs nothing of a layer but its input covariance, and in T5's self-attention q, k and v read
  the same input. ``target_modules=["k", "v"]`` gives InfLoRA's choice.
* The loop's: AdamW lr 1e-3 constant, batch 64, one epoch per task (the paper's T5 setting,
  :class:`~moram_avalanche.strategies.text.loop.TextStrategy`), in place of InfLoRA's ViT
  optimisation (Adam 5e-4, 20 epochs, its cosine): the MoRAM paper does not give its InfLoRA
  settings, and the table's rows share the loop.
"""

from __future__ import annotations

from typing import Optional

from ...algorithms.dualgpm import LAMBDA_B, LAMBDA_E
from ...layers.base import find_layers
from ...layers.replace import replace_linears
from ...layers.task_lora import TaskLoRALinear
from ...text.lora_layers import DropoutTaskLoRALinear, check_lora_dropout
from ...utils.checks import check_number, check_positive_int
from ..needs import StrategyNeeds
from ..plugins.inflora import MEMORIES
from .adapters import Targets, lora_targets, wrap
from .loop import TextStrategy
from .plugins.inflora import TextInfLoRAPlugin

#: InfLoRA's rank [liangyanshuo/InfLoRA configs/cifar100_inflora.json, mimg10_inflora.json "rank": 10]
INFLORA_RANK = 10
#: InfLoRA's branch is added unscaled and reads the clean input [models/vit_inflora.py]
INFLORA_SCALE = 1.0
INFLORA_DROPOUT = 0.0


class TextInfLoRA(TextStrategy):
    """InfLoRA on a language model (module docstring).

    Args (besides TextStrategy's): rank (10), scale (1), dropout (0), target_modules (None: query
    and value, :data:`~moram_avalanche.strategies.text.adapters.LORA_TARGET_MODULES`; names, a
    regular expression or a mapping of ``model_type`` to names), num_tasks (``T`` of the
    threshold schedule; None: the experiences of the stream), lambda_b (0.95), lambda_e (1.0),
    memory (``"dual"``: DualGPM; ``"gpm"``: remove-only GPM of ``methods/inflora_domain.py``).
    """

    #: one process: the covariance pass and the memories are not run under torchrun or --fsdp here
    needs = StrategyNeeds(data_parallel=False, fsdp=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_text_inflora_options(options))

    def __init__(self, *, model, tokenizer=None, rank: int = INFLORA_RANK, scale: float = INFLORA_SCALE,
                 dropout: float = INFLORA_DROPOUT, target_modules: Targets = None, num_tasks: Optional[int] = None,
                 lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E, memory: str = "dual", plugins=None,
                 **kwargs):
        model = wrap(model, tokenizer)
        if not find_layers(model, TaskLoRALinear):
            names = lora_targets(model, target_modules)
            too_narrow = {n: model.model.get_submodule(n).in_features for n in names
                          if model.model.get_submodule(n).in_features < rank}
            if too_narrow:  # before the model is changed
                name, width = next(iter(too_narrow.items()))
                raise ValueError(f"InfLoRA rank must be at most the input size of every target linear, got "
                                 f"rank={rank} for {name!r} (input size {width}); pass rank <= {width}")
            model.requires_grad_(False)
            replace_linears(model.model, names,
                            lambda linear: DropoutTaskLoRALinear(linear, rank, scale=scale, dropout=dropout))
        dims = {name: layer.in_features for name, layer in find_layers(model, TaskLoRALinear).items()}
        self.inflora_plugin = TextInfLoRAPlugin(dims, rank=rank, num_tasks=num_tasks, lambda_b=lambda_b,
                                                lambda_e=lambda_e, memory=memory)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.inflora_plugin, *(plugins or [])],
                         **kwargs)


def check_text_inflora_options(options) -> None:
    """Value checks of :class:`TextInfLoRA`'s own options given in ``options`` (nothing built; the
    rank's upper bound, the targets' input size, is checked against the model)."""
    if "rank" in options:
        check_positive_int("rank", options["rank"])
    if "scale" in options:
        check_number("scale", options["scale"], hint=f"InfLoRA adds its branch unscaled: {INFLORA_SCALE:g}")
    if "dropout" in options:
        check_lora_dropout(options["dropout"])
    if options.get("num_tasks") is not None:
        check_positive_int("num_tasks", options["num_tasks"])
    for name in ("lambda_b", "lambda_e"):
        if name in options:
            check_number(name, options[name], low=0, high=1, low_open=True,
                         hint=f"DualGPM's threshold; InfLoRA: lambda_b {LAMBDA_B}, lambda_e {LAMBDA_E}")
    if "lambda_b" in options and "lambda_e" in options and options["lambda_b"] > options["lambda_e"]:
        raise ValueError(f"lambda_b must be <= lambda_e (the threshold grows from lambda_b to lambda_e), got "
                         f"{options['lambda_b']} > {options['lambda_e']}; InfLoRA: {LAMBDA_B} and {LAMBDA_E}")
    if "memory" in options and options["memory"] not in MEMORIES:
        raise ValueError(f"memory must be one of {MEMORIES} (DualGPM or plain GPM), got {options['memory']!r}")


__all__ = ["INFLORA_DROPOUT", "INFLORA_RANK", "INFLORA_SCALE", "TextInfLoRA", "check_text_inflora_options"]
