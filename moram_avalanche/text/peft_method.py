"""MoRAM as a peft method: ``get_peft_model(model, MoRAMConfig(...))`` on any Hugging Face model.

peft's method protocol (``peft/utils/peft_types.py`` ``register_peft_method``, its developer
guide ``contributing.md``, and small methods such as ``tuners/fourierft``): a config
(:class:`MoRAMConfig`, a ``PeftConfig`` dataclass validated once in ``__post_init__`` like
``LoraConfig``), a tuner (:class:`MoRAMModel`, a ``BaseTuner`` with ``prefix``,
``tuner_layer_cls``, ``target_module_mapping`` and ``_create_and_replace``) and a tuner layer
(:class:`MoRAMTunerLayer`). The layer IS the library's MoRAM layer
(:class:`~moram_avalanche.text.layer.DropoutMoRAMLinear`, i.e.
:class:`~moram_avalanche.layers.moram.MoRAMLinear` with dropout on the atoms' input) with
peft's ``BaseTunerLayer`` mixed in; no second implementation of the method.

Registration: peft 0.21's ``register_peft_method`` accepts only names listed in its closed
``PeftType`` enum, so a method living outside peft registers under its own ``str`` enum
(:class:`MoRAMPeftType`, value ``"MORAM"``) into the same four tables that function fills
(``peft.mapping.PEFT_TYPE_TO_CONFIG_MAPPING`` / ``..._TUNER_MAPPING`` / ``..._PREFIX_MAPPING``);
a custom enum as ``peft_type`` is what peft's maintainers suggest for methods outside the
library (huggingface/peft#2634). Importing this module registers MoRAM once.

What differs from LoRA, by design:

* **One adapter per model.** MoRAM learns a continual stream inside one adapter: each task
  adds atoms to the same bank (:meth:`MoRAMModel.add_task`), and routing runs over every atom
  of every task. A second adapter name is refused with a message saying so.
* **Tasks.** ``get_peft_model`` creates the first task's atoms (trainable; values zero, so the
  model's outputs are unchanged until it trains). ``model.add_task()`` freezes every atom and
  appends ``atoms_per_task`` new ones per layer (rebuild the optimizer afterwards); from the
  second task on, the new keys join the routing (norm, top-k, softmax) at once, so the outputs
  change before training (:func:`~moram_avalanche.text.inject.add_task`).
  ``model.freeze_task()`` freezes them at the end of a task.
* **Checkpoints.** ``save_pretrained`` writes each layer's declared state (``atom_keys``,
  ``atom_values``, ``num_frozen``, ``atom_task``; never the frozen base weights), and
  ``PeftModel.from_pretrained`` loads a bank of any size, so a bank grown over several tasks
  round-trips. ``is_trainable=False`` (peft's default) freezes the loaded atoms. Import
  :mod:`moram_avalanche.text` (or use ``moram_avalanche.MoRAMConfig``) before
  ``PeftModel.from_pretrained``: the import registers ``"MORAM"`` with peft.
* **No merging.** MoRAM's update ``sum_i w_i(x) B_i A_i x`` depends on the input through the
  routing weights ``w(x)`` (top-k, softmax, eval gate), so it is not a fixed matrix that could
  be added to ``W``: ``merge_adapter`` and ``merge_and_unload`` refuse. ``unload()`` (drop the
  atoms, keep the base) works.
* **One scaling** by default: frozen atoms contribute as they did while training.
  ``new_value_scale`` (:class:`MoRAMConfig`) multiplies the trainable atoms' values only: the
  release's ``lora_alpha / r = 2``, which halves an atom's contribution once ``add_task()``
  freezes it; calling ``add_task()`` before evaluating, as the release's
  ``model/Regular/MoRAM.py`` does, also puts r fresh atoms into every evaluation's routing
  (see :mod:`~moram_avalanche.text.layer`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

import torch
from peft.config import PeftConfig
from peft.mapping import (PEFT_TYPE_TO_CONFIG_MAPPING, PEFT_TYPE_TO_PREFIX_MAPPING,
                          PEFT_TYPE_TO_TUNER_MAPPING)
from peft.tuners.tuners_utils import BaseTuner, BaseTunerLayer
from torch import nn

from ..layers.base import find_layers
from ..layers.moram import MoRAMLinear, routing_options
from .inject import PAPER_LLM_OPTIONS as LLM
from .inject import add_task, check_new_value_scale, freeze_task
from .layer import PAPER_DROPOUT, DropoutMoRAMLinear, check_dropout
from .targets import as_table

MERGE_REFUSED = (
    "MoRAM cannot be merged into the base weights: its update sum_i w_i(x) B_i A_i x depends on "
    "the input through the routing weights w(x) (top-k, softmax, eval gate), so it is no fixed "
    "matrix to add to W. Keep the adapter (PeftModel) for inference, or call unload() to get the "
    "base model back without the atoms.")


class MoRAMPeftType(str, enum.Enum):
    """MoRAM's ``peft_type`` (peft's ``PeftType`` is closed to methods outside peft)."""

    MORAM = "MORAM"


@dataclass
class MoRAMConfig(PeftConfig):
    """Configuration of MoRAM as a peft method; every field is checked once, here.

    Defaults are the MoRAM paper's classification setting for language models (T5-large and
    LLaMA2-7B on the standard CL benchmark; paper Sec. 4, LLM settings; reference
    ``language_models.md``): r = 8 new atoms per task, top-k 4, tau 0.1, delta 0.2, dropout
    0.1, on the query and key projections of the attention layers.

    Args:
        target_modules: module names (peft's suffix matching) or a regular expression; None
            picks the architecture's row of :data:`~moram_avalanche.text.targets.MORAM_TARGET_MODULES`
            (query and key projections).
        atoms_per_task: ``r``, atoms added per task and layer (paper: 8).
        topk: routing budget ``k`` (paper: 4; the release uses ``max(k, 2)``); None keeps all.
        temperature: softmax temperature ``tau`` (paper: 0.1); None means 1.
        threshold: eval-only relevance gate ``delta`` (paper: 0.2); 0 disables it.
        dropout: dropout on the atoms' input while training (paper: 0.1).
        new_value_scale: factor on the trainable atoms' values in the forward (1: the paper; the
            release's ``lora_alpha / r``: 2; :mod:`~moram_avalanche.text.inject`).
        exclude_modules: names or a regex of modules never to wrap (peft's field).
    """

    target_modules: Optional[Union[List[str], str]] = field(default=None, metadata={
        "help": "Module names (suffix match) or a regex to wrap; None: query and key projections "
                "of the architecture (moram_avalanche.text.targets)."})
    exclude_modules: Optional[Union[List[str], str]] = field(default=None, metadata={
        "help": "Module names or a regex never to wrap."})
    # the paper's LLM setting, written once (moram_avalanche.text.inject.PAPER_LLM_OPTIONS)
    atoms_per_task: int = field(default=LLM["atoms_per_task"], metadata={"help": "r, atoms per task and layer (paper: 8)"})
    topk: Optional[int] = field(default=LLM["topk"], metadata={"help": "routing budget k (paper: 4)"})
    temperature: Optional[float] = field(default=LLM["temperature"], metadata={"help": "softmax temperature tau (paper: 0.1)"})
    threshold: float = field(default=LLM["threshold"], metadata={"help": "eval gate delta (paper: 0.2)"})
    dropout: float = field(default=PAPER_DROPOUT, metadata={"help": "dropout on the atoms' input (paper: 0.1)"})
    new_value_scale: float = field(default=1.0, metadata={
        "help": "factor on the trainable atoms' values (1: the paper; the release's lora_alpha / r: 2)"})

    def __post_init__(self):
        super().__post_init__()
        self.peft_type = MoRAMPeftType.MORAM
        # the checks of the layer itself, run once before any model changes
        options = routing_options(self.atoms_per_task, self.topk,
                                  1.0 if self.temperature is None else self.temperature, self.threshold)
        self.atoms_per_task, self.topk = options["atoms_per_task"], options["topk"]
        self.threshold = options["threshold"]
        if self.temperature is not None:
            self.temperature = options["temperature"]
        self.dropout = check_dropout(self.dropout)
        self.new_value_scale = check_new_value_scale(self.new_value_scale)
        for name in ("target_modules", "exclude_modules"):
            value = getattr(self, name)
            if value is None or isinstance(value, str):
                continue
            if isinstance(value, (list, tuple, set)) and value and all(isinstance(v, str) and v for v in value):
                setattr(self, name, set(value))
            else:
                raise ValueError(f"{name} must be a non-empty list of module names or a regular "
                                 f"expression string, got {value!r}")

    def layer_options(self) -> Dict[str, object]:
        """The keyword arguments of :class:`~moram_avalanche.text.layer.DropoutMoRAMLinear`."""
        return {"atoms_per_task": self.atoms_per_task, "topk": self.topk,
                "temperature": self.temperature, "threshold": self.threshold, "dropout": self.dropout}


class MoRAMTunerLayer(DropoutMoRAMLinear, BaseTunerLayer):
    """The MoRAM layer as a peft tuner layer (one adapter; ``base_layer`` is the wrapped linear).

    Everything on the layer except ``base`` belongs to the adapter; the declared state
    (:attr:`state_keys`) is what ``save_pretrained`` writes.
    """

    adapter_layer_names = ()  # the bank is no per-adapter dict: one adapter per model
    other_param_names = ("atoms_per_task", "topk", "temperature", "threshold", "dropout", "new_value_scale")

    def __init__(self, base_layer: nn.Linear, adapter_name: str, config: MoRAMConfig) -> None:
        DropoutMoRAMLinear.__init__(self, base_layer, **config.layer_options())
        self.new_value_scale = config.new_value_scale
        self._active_adapter = adapter_name
        self.merged_adapters = []
        self.inference_mode = bool(config.inference_mode)

    @property
    def base_layer(self) -> nn.Module:
        """peft's name for the wrapped module (``self.base``)."""
        return self.base

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if self.disable_adapters:
            return self.base(x)
        return super().forward(x)

    def set_adapter(self, adapter_names, inference_mode: bool = False) -> None:
        names = [adapter_names] if isinstance(adapter_names, str) else list(adapter_names)
        self.inference_mode = bool(inference_mode)
        for param in self.atom_parameters():
            param.requires_grad_(not inference_mode)
        self._active_adapter = names

    def _load_from_state_dict(self, *args, **kwargs):
        # loading may replace the trainable atoms by new parameters: keep inference mode frozen
        super()._load_from_state_dict(*args, **kwargs)
        if self.inference_mode:
            for param in self.atom_parameters():
                param.requires_grad_(False)

    def atom_parameters(self) -> List[nn.Parameter]:
        """The trainable atoms (everything trainable on the layer; the base is not)."""
        return [param for name, param in self.named_parameters() if not name.startswith("base.")]

    def merge(self, safe_merge: bool = False, adapter_names=None) -> None:
        raise ValueError(MERGE_REFUSED)

    def unmerge(self) -> None:
        raise ValueError(MERGE_REFUSED)


class MoRAMModel(BaseTuner):
    """peft's tuner for MoRAM: wraps the target linears in :class:`MoRAMTunerLayer`.

    Reached through the ``PeftModel`` as usual (``peft_model.add_task()``, ...).
    """

    prefix = "moram_"
    tuner_layer_cls = MoRAMTunerLayer
    target_module_mapping = as_table()

    # --------------------------------------------------------------- injection
    def _check_new_adapter_config(self, config: PeftConfig) -> None:
        if len(self.peft_config) > 1:
            raise ValueError(
                f"MoRAM keeps one adapter per model (found {sorted(self.peft_config)}): a continual "
                "stream grows one bank of atoms task by task (add_task()), and routing runs over "
                "every atom, so tasks are not separate adapters. Use another base model for a second one.")

    def _create_and_replace(self, peft_config: MoRAMConfig, adapter_name: str, target: nn.Module,
                            target_name: str, parent: nn.Module, current_key: str,
                            parameter_name: Optional[str] = None) -> None:
        if isinstance(target, MoRAMLinear):
            raise ValueError(f"{current_key} already holds MoRAM atoms: inject MoRAM once per model")
        if type(target) is not nn.Linear:
            raise TypeError(
                f"MoRAM wraps torch.nn.Linear layers, but target {current_key!r} is "
                f"{type(target).__name__}; choose target_modules that name linear layers "
                "(e.g. the attention's query and key projections)")
        if target.weight.device.type == "meta":
            raise ValueError(
                f"target {current_key!r} has its weights on the meta device (low_cpu_mem_usage=True, "
                "or a model not yet materialised): MoRAM draws its first task's keys when it is "
                "injected, so load the base model's weights first and use low_cpu_mem_usage=False")
        layer = MoRAMTunerLayer(target, adapter_name, peft_config)
        layer.expand()  # the first task's atoms: values zero, the model is unchanged
        self._replace_module(parent, target_name, layer, target)

    def _mark_only_adapters_as_trainable(self, model: nn.Module) -> None:
        model.requires_grad_(False)
        for module in model.modules():
            if isinstance(module, MoRAMTunerLayer):
                for param in module.atom_parameters():
                    param.requires_grad_(not module.inference_mode)

    # --------------------------------------------------------------- tasks
    def add_task(self) -> int:
        """Freeze every atom and append ``atoms_per_task`` new trainable ones per layer.

        Returns the atoms per layer. New values are zero, but from the second task on the new
        keys join every input's routing (L2 norm, top-k, softmax), so the outputs change before
        training (:func:`~moram_avalanche.text.inject.add_task`); rebuild the optimizer: it must
        hold the new parameters.
        """
        return add_task(self.model)

    def freeze_task(self) -> int:
        """Freeze the current task's atoms (end of a task); returns the atoms per layer."""
        return freeze_task(self.model)

    # --------------------------------------------------------------- merging
    def merge_adapter(self, *args, **kwargs) -> None:
        raise ValueError(MERGE_REFUSED)

    def merge_and_unload(self, *args, **kwargs) -> nn.Module:
        raise ValueError(MERGE_REFUSED)

    def _check_merge_allowed(self):
        raise ValueError(MERGE_REFUSED)

    # --------------------------------------------------------------- checkpoints
    @classmethod
    def _get_adapter_state_dict(cls, model: nn.Module, config: PeftConfig, adapter_name: str,
                                state_dict: Dict[str, torch.Tensor], unwanted_adapter_names) -> Dict[str, torch.Tensor]:
        """The declared state of every MoRAM layer (atoms, never the frozen base weights)."""
        out = {}
        for name, module in find_layers(model, MoRAMTunerLayer).items():
            for key in module.state_keys:
                full = f"{name}.{key}" if name else key
                if full in state_dict:
                    out[full] = state_dict[full].contiguous()
        return out


def register_moram() -> None:
    """Make ``"MORAM"`` known to peft (config, tuner, prefix); a no-op when it already is."""
    peft_type = MoRAMPeftType.MORAM
    known = PEFT_TYPE_TO_CONFIG_MAPPING.get(peft_type)
    if known is MoRAMConfig:
        return
    if known is not None:
        raise KeyError(f"peft already has a method registered as {peft_type.value!r} "
                       f"({known.__name__}); MoRAM cannot register under that name")
    PEFT_TYPE_TO_CONFIG_MAPPING[peft_type] = MoRAMConfig
    PEFT_TYPE_TO_TUNER_MAPPING[peft_type] = MoRAMModel
    PEFT_TYPE_TO_PREFIX_MAPPING[peft_type] = MoRAMModel.prefix


register_moram()

__all__ = ["MERGE_REFUSED", "MoRAMConfig", "MoRAMModel", "MoRAMPeftType", "MoRAMTunerLayer",
           "register_moram"]
