"""Put MoRAM's layer on the target linears of a Hugging Face model, without peft.

:func:`inject_moram` finds the targets by name (peft's matching rules, names per architecture
from :mod:`.targets`) and swaps them for
:class:`~moram_avalanche.text.layer.DropoutMoRAMLinear` through the shared injection step
(:func:`~moram_avalanche.layers.replace.replace_linears`). The same layer is what the peft
method (:mod:`.peft_method`) runs (its tuner layer keeps one bank per named adapter, with the
same steps); use that one for ``save_pretrained`` / ``PeftModel.from_pretrained``, this one
inside the library's own loops.

Growth per task: :func:`add_task` (freeze every atom, append ``atoms_per_task`` new trainable
ones per layer) and :func:`freeze_task` (freeze them at the end of the task). Rebuild the
optimizer after :func:`add_task`: it adds new parameters.

The release's atom scaling (:data:`RELEASE_NEW_VALUE_SCALE`): ``new_value_scale`` multiplies the
trainable atoms' values in the forward (``MoRAMBank.new_value_scale``; values are stored
unscaled, frozen atoms are read unscaled). 1, the default, is the paper's single scaling. The
release trains its new atoms at ``lora_alpha / r`` with ``lora_alpha = 2 r``
(``TRACE/training/main.py``: ``lora_alpha=max(1, 2 * args.moram_rank)``; ``utils/my_peft/
tuners/moram.py``: ``W_B_new = loranew_B * scale``) and reads them unscaled once
``increment_task()`` has moved them into the frozen bank.

Defaults are the paper's classification setting (paper Sec. 4, LLM settings; reference
``language_models.md``): r = 8 new atoms per task, top-k 4, tau 0.1, delta 0.2, dropout 0.1.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Union

from torch import nn

from ..layers.base import find_layers
from ..layers.moram.config import PAPER_LLM, PAPER_TRACE, RELEASE_TRACE, MoRAMLayerConfig
from ..layers.moram.layer import MoRAMLinear
from ..layers.moram.variants import balance_form
from ..layers.replace import replace_linears
from ..utils.checks import check_number
from .layer import PAPER_DROPOUT, DropoutBalancedMoRAMLinear, DropoutMoRAMLinear, check_dropout
from .targets import matches, resolve_targets, target_modules

#: the paper's classification setting for language models, as keyword arguments (the layer's
#: options: :data:`~moram_avalanche.layers.moram.config.PAPER_LLM`; its dropout: :data:`~.layer.PAPER_DROPOUT`)
PAPER_LLM_OPTIONS = {**PAPER_LLM.options(), "dropout": PAPER_DROPOUT}
#: the paper's TRACE setting for MoRAM (:data:`~moram_avalanche.layers.moram.config.PAPER_TRACE`; the
#: loop's lr, batch and context: ``experiments.text_recipes.TRACE_LOOP``)
PAPER_TRACE_OPTIONS = PAPER_TRACE.options()
#: the release's shipped TRACE run for MoRAM (:data:`~moram_avalanche.layers.moram.config.RELEASE_TRACE`):
#: not the paper's paragraph; a named preset (``--preset trace-release``)
RELEASE_TRACE_OPTIONS = RELEASE_TRACE.options()
#: the release's factor on the trainable atoms' values: ``lora_alpha / r`` with ``lora_alpha = 2 r``
#: (``TRACE/training/main.py``), whatever ``r`` is
RELEASE_NEW_VALUE_SCALE = 2.0


def check_new_value_scale(scale) -> float:
    """``scale`` if it is a positive number; else a ValueError naming the paper's and the release's values."""
    return float(check_number("new_value_scale", scale, low=0, low_open=True,
                              hint=f"1: the paper's single scaling; the release's lora_alpha / r: "
                                   f"{RELEASE_NEW_VALUE_SCALE:g}"))


def model_type_of(model: nn.Module) -> str:
    """``model.config.model_type`` of a Hugging Face model; a ValueError for other modules."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if not isinstance(model_type, str):
        raise ValueError(f"{type(model).__name__} has no config.model_type (not a Hugging Face "
                         "model?): pass target_modules explicitly")
    return model_type


def target_names(model: nn.Module, targets: Union[str, Sequence[str], Mapping[str, Sequence[str]], None] = None,
                 self_attention_only: bool = False) -> List[str]:
    """Dotted names of the ``nn.Linear`` modules of ``model`` that ``targets`` selects.

    ``targets`` None: the architecture's row of :data:`~.targets.MORAM_TARGET_MODULES`; a
    mapping of ``model_type`` to names: the model's row (:data:`~.targets.RELEASE_TARGET_MODULES`,
    the release's TRACE targets). A target name that matches no linear at all is a ValueError
    (a typo would otherwise train nothing), listing a few linear names of the model.
    """
    if targets is None:
        targets = target_modules(model_type_of(model), self_attention_only)
    elif isinstance(targets, Mapping):
        targets = resolve_targets(targets, model_type_of(model))
    if not isinstance(targets, str):
        targets = list(targets)
        if not targets or not all(isinstance(t, str) and t for t in targets):
            raise ValueError(f"target_modules must be a non-empty list of module names or a "
                             f"regular expression, got {targets!r}")
    linears = list(find_layers(model, nn.Linear))
    names = [name for name in linears if matches(name, targets)]
    unmatched = ([] if isinstance(targets, str) else
                 [t for t in targets if not any(matches(name, [t]) for name in linears)])
    if not names or unmatched:
        raise ValueError(f"target_modules {targets!r} match no nn.Linear of {type(model).__name__}"
                         + (f" (unmatched: {unmatched})" if unmatched and names else "")
                         + f"; its linear layers include {linears[:6]}")
    return names


def inject_moram(model: nn.Module, targets: Union[str, Sequence[str], None] = None, *,
                 self_attention_only: bool = False, freeze_model: bool = True,
                 atoms_per_task: int = PAPER_LLM.atoms_per_task, topk: Optional[int] = PAPER_LLM.topk,
                 temperature: Optional[float] = PAPER_LLM.temperature, threshold: float = PAPER_LLM.threshold,
                 dropout: float = PAPER_DROPOUT,
                 new_value_scale: float = 1.0,
                 load_balance: Union[bool, str] = False) -> Dict[str, DropoutMoRAMLinear]:
    """Wrap the target linears of ``model`` in :class:`~.layer.DropoutMoRAMLinear`.

    Options are checked before the model changes; a model that already holds MoRAM layers is
    refused. With ``freeze_model`` every existing parameter is frozen first, so only atoms
    train. ``new_value_scale``: the factor on the trainable atoms' values (module docstring; 1:
    the paper). ``load_balance`` (a form of
    :data:`~moram_avalanche.layers.moram.variants.BALANCE_FORMS`, or True for the release's):
    :class:`~.layer.DropoutBalancedMoRAMLinear` layers, which record the load-balancing term of the
    paper's ablation for a ``LoadBalancePlugin`` (with ``new_value_scale`` 1 only). The layers
    start empty (the model computes exactly what it did): call :func:`add_task` before training
    the first task. Returns ``{dotted name: layer}``.
    """
    MoRAMLayerConfig(atoms_per_task, topk, temperature, threshold)
    check_dropout(dropout)
    new_value_scale = check_new_value_scale(new_value_scale)
    load_balance = balance_form(load_balance)
    if load_balance and new_value_scale != 1:
        raise ValueError(f"load_balance={load_balance!r} needs new_value_scale 1, got {new_value_scale:g}: the "
                         "release's atom scaling and the load-balancing ablation are not combined")
    if find_layers(model, MoRAMLinear):
        raise ValueError(f"{type(model).__name__} already holds MoRAM layers: inject them once per model")
    names = target_names(model, targets, self_attention_only)
    if freeze_model:
        model.requires_grad_(False)
    options = dict(atoms_per_task=atoms_per_task, topk=topk, temperature=temperature, threshold=threshold,
                   dropout=dropout)
    layers = replace_linears(model, names, (lambda linear: DropoutBalancedMoRAMLinear(
        linear, **options, load_balance=load_balance)) if load_balance else (
        lambda linear: DropoutMoRAMLinear(linear, **options)))
    for layer in layers.values():
        layer.new_value_scale = new_value_scale
    return layers


def moram_layers(model: nn.Module) -> Dict[str, MoRAMLinear]:
    """Every MoRAM layer :func:`inject_moram` put on ``model``, by dotted name; a ValueError if none.

    A peft model (``get_peft_model`` with a ``MoRAMLayerConfig``) keeps one bank per adapter in its
    tuner layers instead: it grows with ``peft_model.add_task()``.
    """
    layers = find_layers(model, MoRAMLinear)
    if not layers:
        raise ValueError(f"{type(model).__name__} holds no MoRAM layers of inject_moram: inject them first "
                         "(inject_moram; a peft model grows with peft_model.add_task() / freeze_task())")
    return layers


def peft_tasks(model: nn.Module, method: str):
    """``model.add_task`` / ``model.freeze_task`` of a MoRAM peft model (``PeftModel`` or its tuner),
    or None for a model without them (duck-typed: this module does not import the peft method)."""
    if find_layers(model, MoRAMLinear):
        return None
    call = getattr(model, method, None)
    return call if callable(call) else None


def add_task(model: nn.Module) -> int:
    """Start a task: every MoRAM layer freezes its atoms and appends ``atoms_per_task`` new ones.

    New keys are Kaiming-uniform, new values zero. On the first task the model's outputs do not
    change until it trains (every atom's value is zero). Once a bank exists they do: the new
    keys join the routing of every input -- the L2 norm over all atoms' scores (the old atoms'
    normalised scores shrink), the top-k (a new atom can take an old one's slot) and the
    softmax (the new atoms take part of the mass) -- while their zero values add nothing, so the
    old atoms' weighted contribution changes before any training. (The release evaluates every
    task in that state: :class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin`'s
    ``fresh_atoms_at_eval``.) Returns the number of atoms per layer after growing. Rebuild the
    optimizer. On a MoRAM peft model this is ``peft_model.add_task()`` (its active adapter).
    """
    grow = peft_tasks(model, "add_task")
    if grow is not None:
        return grow()
    sizes = {layer.expand() for layer in moram_layers(model).values()}
    return max(sizes)


def freeze_task(model: nn.Module) -> int:
    """End a task: freeze the trainable atoms of every MoRAM layer; returns the atoms per layer."""
    freeze = peft_tasks(model, "freeze_task")
    if freeze is not None:
        return freeze()
    layers = moram_layers(model)
    for layer in layers.values():
        layer.freeze()
    return max(layer.num_atoms for layer in layers.values())


__all__ = ["PAPER_LLM_OPTIONS", "PAPER_TRACE_OPTIONS", "RELEASE_NEW_VALUE_SCALE", "RELEASE_TRACE_OPTIONS", "add_task",
           "check_new_value_scale", "freeze_task", "inject_moram", "model_type_of",
           "moram_layers", "target_names"]
