"""MoRAM as a peft method: ``get_peft_model(model, MoRAMConfig(...))`` on any Hugging Face model.

peft's method protocol (``peft/utils/peft_types.py`` ``register_peft_method``, its developer
guide ``contributing.md``, and small methods such as ``tuners/fourierft``): a config
(:class:`MoRAMConfig`, a ``PeftConfig`` dataclass validated once in ``__post_init__`` like
``LoraConfig``), a tuner (:class:`MoRAMModel`, a ``BaseTuner`` with ``prefix``,
``tuner_layer_cls``, ``target_module_mapping`` and ``_create_and_replace``) and a tuner layer
(:class:`~moram_avalanche.text.peft_layer.MoRAMTunerLayer`: ``base_layer`` plus one bank per
named adapter, ``moram_bank[name]``; the bank and steps 1-6 are :mod:`moram_avalanche.layers`').

Registration: peft 0.21's ``register_peft_method`` accepts only names listed in its closed
``PeftType`` enum, so a method living outside peft registers under its own ``str`` enum
(:class:`MoRAMPeftType`, value ``"MORAM"``) into the same tables that function fills
(``peft.mapping.PEFT_TYPE_TO_CONFIG_MAPPING`` / ``..._TUNER_MAPPING`` / ``..._PREFIX_MAPPING``);
a custom enum as ``peft_type`` is what peft's maintainers suggest for methods outside the
library (huggingface/peft#2634). Importing this module registers MoRAM once.

What peft users get, as with LoRA: several named adapters (``add_adapter``, ``set_adapter``,
``load_adapter(..., adapter_name=...)``, ``delete_adapter``; several active adapters add their
terms), ``modules_to_save`` (a classification head with ``task_type="SEQ_CLS"``),
``autocast_adapter_dtype`` (atoms of an fp16 / bf16 base kept in float32), ``low_cpu_mem_usage``
loading, FSDP state dicts, peft's missing-keys warning, ``disable_adapter``, ``unload``. What
differs from LoRA, by design:

* **Tasks.** ``get_peft_model`` creates the first task's atoms (trainable; values zero, so the
  model's outputs are unchanged until it trains). ``model.add_task()`` freezes every atom of an
  adapter and appends ``atoms_per_task`` new ones per layer (rebuild the optimizer afterwards;
  with ``transformers.Trainer`` use :func:`~moram_avalanche.text.trainer.start_task`);
  ``model.freeze_task()`` freezes them at the end of a task. Routing runs over every atom of
  every task of the adapter: from the second task on, the new keys join the routing (norm,
  top-k, softmax) at once, so the outputs change before training
  (:func:`~moram_avalanche.text.inject.add_task`).
* **Checkpoints.** ``save_pretrained`` writes each layer's bank under peft's names
  (``...q_proj.moram_bank.frozen_keys``, ``frozen_values``, ``new_keys``, ``new_values``,
  ``atom_task``; never the frozen base weights), and ``PeftModel.from_pretrained`` /
  ``load_adapter`` load a bank of any size, so a bank grown over several tasks round-trips.
  Adapter folders written by 0.5.0 (keys ``...q_proj.atom_keys``, ``atom_values``,
  ``num_frozen``, ``atom_task``) load unchanged, migrated on read. Import
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
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Dict, List, Optional, Union

import torch
from peft.config import PeftConfig
from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING, PEFT_TYPE_TO_PREFIX_MAPPING, PEFT_TYPE_TO_TUNER_MAPPING
from peft.tuners.tuners_utils import BaseTuner
from peft.utils import UPCAST_DTYPES
from peft.utils.other import AuxiliaryTrainingWrapper
from torch import nn

from ..layers.base import find_layers
from ..layers.moram.bank import AtomBank
from ..layers.moram.layer import routing_options
from .inject import PAPER_LLM_OPTIONS as LLM
from .inject import check_new_value_scale
from .layer import PAPER_DROPOUT, check_dropout
from .peft_layer import MERGE_REFUSED, MoRAMTunerLayer, base_features, base_template
from .targets import as_table

#: the state-dict keys of a bank in a 0.5.0 adapter folder (directly under the target's name)
LEGACY_KEYS = AtomBank.LAYER_KEYS


class MoRAMPeftType(str, enum.Enum):
    """MoRAM's ``peft_type`` (peft's ``PeftType`` is closed to methods outside peft)."""

    MORAM = "MORAM"


def _names(name: str, value):
    """``value`` as a set of module names, a regex string, or None; else a ValueError."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, set)) and value and all(isinstance(v, str) and v for v in value):
        return set(value)
    raise ValueError(f"{name} must be a non-empty list of module names or a regular expression "
                     f"string, got {value!r}")


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
            (query and key projections). ``nn.Linear`` (bitsandbytes' 4-bit and 8-bit linears
            included) and transformers' ``Conv1D`` (GPT-2: ``["c_attn"]``) can be targets.
        atoms_per_task: ``r``, atoms added per task and layer (paper: 8).
        topk: routing budget ``k`` (paper: 4; the release uses ``max(k, 2)``); None keeps all.
        temperature: softmax temperature ``tau`` (paper: 0.1); None means 1.
        threshold: eval-only relevance gate ``delta`` (paper: 0.2); 0 disables it.
        dropout: dropout on the atoms' input while training (paper: 0.1).
        new_value_scale: factor on the trainable atoms' values in the forward (1: the paper; the
            release's ``lora_alpha / r``: 2; :mod:`~moram_avalanche.text.inject`).
        exclude_modules: names or a regex of modules never to wrap (peft's field).
        modules_to_save: modules trained whole and saved beside the atoms (peft's field; with
            ``task_type="SEQ_CLS"`` peft adds the classification head, ``classifier`` / ``score``).
        init_weights: True (the paper): a task's new values are zero, so the outputs are
            unchanged until it trains; False draws them like the keys (peft's field of that name,
            for checks that need an adapter that changes the outputs at once).
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
    modules_to_save: Optional[List[str]] = field(default=None, metadata={
        "help": "Modules besides the atoms to train and save whole (e.g. a classification head)."})
    init_weights: bool = field(default=True, metadata={
        "help": "True: new values zero (the paper; outputs unchanged at a task's start); False: drawn like the keys."})

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
        self.target_modules = _names("target_modules", self.target_modules)
        self.exclude_modules = _names("exclude_modules", self.exclude_modules)
        if self.modules_to_save is not None:
            if (isinstance(self.modules_to_save, str) or not all(isinstance(m, str) and m for m in self.modules_to_save)):
                raise ValueError(f"modules_to_save must be a list of module names, got {self.modules_to_save!r}")
            self.modules_to_save = list(self.modules_to_save)
        if not isinstance(self.init_weights, bool):
            raise ValueError(f"init_weights must be True (new values zero, the paper) or False (drawn "
                             f"like the keys), got {self.init_weights!r}")

    @classmethod
    def check_kwargs(cls, **kwargs):
        """What an ``adapter_config.json`` read by ``MoRAMConfig.from_pretrained`` (peft's reader calls
        this with the file's fields) must say before a config is made: ``"peft_type": "MORAM"``.
        Without the field peft failed naming neither the file nor the fix; with another method's
        type it returned that method's config (a ``LoraConfig``) from ``MoRAMConfig.from_pretrained``."""
        kind = kwargs.get("peft_type")
        value = getattr(kind, "value", kind)
        if value is None:
            raise ValueError('adapter_config.json has no "peft_type": a MoRAM adapter\'s reads "peft_type": "MORAM" '
                             '(save_pretrained writes it); add that field to the file, or save the adapter again')
        if value != MoRAMPeftType.MORAM.value:
            raise ValueError(f'adapter_config.json is a {value} adapter\'s ("peft_type": "{value}"), not MoRAM\'s '
                             '("MORAM"): load it with peft (PeftModel.from_pretrained, or that method\'s config '
                             "class), not with MoRAMConfig")
        return super().check_kwargs(**kwargs)

    def routing_options(self) -> Dict[str, object]:
        """The bank's options (:class:`~moram_avalanche.layers.moram.layer.MoRAMAtoms`)."""
        return {"atoms_per_task": self.atoms_per_task, "topk": self.topk,
                "temperature": self.temperature, "threshold": self.threshold}

    def layer_options(self) -> Dict[str, object]:
        """The keyword arguments of :class:`~moram_avalanche.text.layer.DropoutMoRAMLinear`."""
        return {**self.routing_options(), "dropout": self.dropout}


class MoRAMModel(BaseTuner):
    """peft's tuner for MoRAM: wraps the targets in :class:`MoRAMTunerLayer`, one bank per adapter.

    Reached through the ``PeftModel`` as usual (``peft_model.add_task()``, ...).
    """

    prefix = "moram_"
    tuner_layer_cls = MoRAMTunerLayer
    target_module_mapping = as_table()

    # --------------------------------------------------------------- injection
    def inject_adapter(self, model: nn.Module, adapter_name: str, *args, **kwargs) -> None:
        """peft's injection (``get_peft_model``, ``add_adapter``, ``load_adapter``), after
        :func:`check_modules_to_save` of the adapter's config, before any module is wrapped."""
        check_modules_to_save(model, self.peft_config[adapter_name])
        super().inject_adapter(model, adapter_name, *args, **kwargs)

    def _create_and_replace(self, peft_config: MoRAMConfig, adapter_name: str, target: nn.Module,
                            target_name: str, parent: nn.Module, current_key: str,
                            parameter_name: Optional[str] = None) -> None:
        if isinstance(target, MoRAMTunerLayer):  # a further adapter on a wrapped layer
            target.update_layer(adapter_name, peft_config)
            target.train(target.base_layer.training)
            return
        base_features(target, repr(current_key))  # a clear TypeError for targets MoRAM cannot wrap
        layer = MoRAMTunerLayer(target, adapter_name, peft_config)
        layer.train(target.training)  # a model in eval mode stays in eval mode (no dropout, the eval gate)
        if adapter_name not in self.active_adapters:
            layer.requires_grad_(False)  # an added adapter is not trained until it is set active
        self._replace_module(parent, target_name, layer, target)

    def _cast_adapter_dtype(self, adapter_name: str, autocast_adapter_dtype: bool = True) -> None:
        """The banks of ``adapter_name`` in float32 when they are in a lower precision (peft's
        ``autocast_adapter_dtype``, its default: fp16 / bf16 bases train float32 atoms, as LoRA
        does), else in the base's dtype. Frozen rows (buffers) follow the trainable ones:
        peft's own ``cast_adapter_dtype`` casts parameters only."""
        low = {torch.float16, torch.bfloat16}
        low.update(d for d in (getattr(torch, name, None) for name in UPCAST_DTYPES) if d is not None)
        for layer in find_layers(self.model, MoRAMTunerLayer).values():
            if adapter_name in layer.moram_bank:
                bank = layer.moram_bank[adapter_name]
                dtype = base_template(layer.get_base_layer()).dtype
                if autocast_adapter_dtype:
                    dtype = torch.float32 if bank.dtype in low else bank.dtype
                if bank.dtype != dtype:
                    bank.to(dtype)

    # --------------------------------------------------------------- mixed-adapter batches
    @contextmanager
    def _enable_peft_forward_hooks(self, *args, **kwargs):
        """peft's mixed-adapter batch (``model(..., adapter_names=[...])``, ``model.generate(...,
        adapter_names=[...])``: one adapter name per row, ``"__base__"`` for the base model alone).
        ``PeftModel.forward`` and ``generate`` enter this context where the tuner has it (else they
        drop ``adapter_names``: ``peft/peft_model.py``, ``PeftModel._enable_peft_forward_hooks``);
        the contract is LoRA's (``peft/tuners/lora/model.py``, ``LoraModel._enable_peft_forward_hooks``).

        Without ``adapter_names`` nothing happens. Else it refuses a model in training mode, a
        ``adapter_names`` that is not a list or tuple or whose length is not the batch's (where the
        call's ``input_ids``, ``inputs_embeds`` or first tensor shows it), and names no MoRAM layer
        holds (``"__base__"`` aside), and while the context lasts a forward pre-hook hands the names to every
        :class:`MoRAMTunerLayer` (:meth:`~MoRAMTunerLayer.mixed_batch_forward`) and to peft's
        ``modules_to_save`` copies (``AuxiliaryTrainingWrapper``, which route rows themselves); the
        hooks are removed on the way out, an error's too. Beam search (``num_beams`` > 1 among the
        keyword arguments, as ``generate`` takes it): transformers repeats each input row
        ``num_beams`` times in place, so each name is repeated as many times, except for the layers
        of an encoder (``get_encoder()``), which still read the original rows."""
        adapter_names = kwargs.pop("adapter_names", None)
        if adapter_names is None:
            yield
            return
        if self.training:
            raise ValueError("adapter_names (a mixed-adapter batch) is for inference only and the model is in training "
                             "mode: call model.eval() first, or leave adapter_names out to train the active adapter")
        if not isinstance(adapter_names, (list, tuple)):
            raise TypeError(f"adapter_names must be a list of adapter names, one per row of the batch (\"__base__\" "
                            f"for the base model), got {type(adapter_names).__name__}")
        batch = _batch_rows(args, kwargs)
        if batch is not None and batch != len(adapter_names):
            raise ValueError(f"adapter_names names {len(adapter_names)} adapters, but the batch has {batch} rows: give "
                             "one adapter name (or \"__base__\") per row of the batch")
        layers = find_layers(self.model, MoRAMTunerLayer).values()
        held = {name for layer in layers for name in layer.moram_bank}
        unknown = sorted({name for name in adapter_names if name != "__base__"} - held)
        if unknown:
            raise ValueError(f"adapter_names names adapters no MoRAM layer of the model holds: {unknown}; the model's "
                             f"adapters are {sorted(held)}, and \"__base__\" selects the base model alone")
        rows = list(adapter_names)
        num_beams = kwargs.get("num_beams")
        encoder_modules = set()
        if isinstance(num_beams, int) and num_beams > 1:
            rows = [name for name in adapter_names for _ in range(num_beams)]
            encoder = self.model.get_encoder() if hasattr(self.model, "get_encoder") else None
            if encoder is not None and encoder is not self.model:  # (transformers 5: a model without one gives itself)
                encoder_modules = {id(module) for module in encoder.modules()}
        handles = []
        try:
            for module in self.model.modules():
                if isinstance(module, (MoRAMTunerLayer, AuxiliaryTrainingWrapper)):
                    names = list(adapter_names) if id(module) in encoder_modules else rows
                    handles.append(module.register_forward_pre_hook(
                        partial(_pass_adapter_names, adapter_names=names), with_kwargs=True))
            yield
        finally:
            for handle in handles:
                handle.remove()

    # --------------------------------------------------------------- tasks
    def moram_banks(self, adapter_name: Optional[str] = None) -> Dict[str, nn.Module]:
        """The banks of ``adapter_name`` (default: the active adapter) by layer name."""
        name = self._one_adapter(adapter_name)
        return {key: layer.moram_bank[name] for key, layer in find_layers(self.model, MoRAMTunerLayer).items()
                if name in layer.moram_bank}

    def add_task(self, adapter_name: Optional[str] = None) -> int:
        """Freeze every atom of ``adapter_name`` (default: the active adapter) and append
        ``atoms_per_task`` new trainable ones per layer; returns the atoms per layer.

        New values are zero, but from the second task on the new keys join every input's routing
        (L2 norm, top-k, softmax), so the outputs change before training
        (:func:`~moram_avalanche.text.inject.add_task`). Rebuild the optimizer: it must
        hold the new parameters (:func:`~moram_avalanche.text.trainer.start_task` does it for a
        ``transformers.Trainer``).
        """
        name = self._one_adapter(adapter_name)
        if self.peft_config[name].inference_mode:
            raise ValueError(
                f"adapter {name!r} is in inference mode (loaded with is_trainable=False, or "
                "inference_mode=True): its new atoms would not train. Load it with "
                "PeftModel.from_pretrained(..., is_trainable=True) to continue its tasks")
        banks = self.moram_banks(name)
        sizes = {bank.expand() for bank in banks.values()}
        trainable = name in self.active_adapters
        for bank in banks.values():
            bank.requires_grad_(trainable)
        return max(sizes)

    def freeze_task(self, adapter_name: Optional[str] = None) -> int:
        """Freeze the current task's atoms of ``adapter_name`` (end of a task); returns the atoms per layer."""
        banks = self.moram_banks(adapter_name)
        for bank in banks.values():
            bank.freeze()
        return max(bank.num_atoms for bank in banks.values())

    def _one_adapter(self, adapter_name: Optional[str]) -> str:
        if adapter_name is None:
            if len(self.active_adapters) != 1:
                raise ValueError(f"{len(self.active_adapters)} adapters are active "
                                 f"({self.active_adapters}): name the one whose tasks to change")
            adapter_name = self.active_adapters[0]
        if adapter_name not in self.peft_config:
            raise ValueError(f"no adapter named {adapter_name!r}; this model has {sorted(self.peft_config)}")
        return adapter_name

    def add_weighted_adapter(self, *args, **kwargs) -> None:
        raise NotImplementedError(WEIGHTED_REFUSED)

    # --------------------------------------------------------------- merging
    def merge_adapter(self, *args, **kwargs) -> None:
        raise ValueError(MERGE_REFUSED)

    def merge_and_unload(self, *args, **kwargs) -> nn.Module:
        raise ValueError(MERGE_REFUSED)

    def _check_merge_allowed(self):
        raise ValueError(MERGE_REFUSED)

    # --------------------------------------------------------------- checkpoints
    @classmethod
    def _remap_adapter_state_dict_for_load(cls, model: nn.Module, config: PeftConfig, adapter_name: str,
                                           state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Checkpoint keys -> the model's, by the model's structure (not by the keys the model
        holds now: a bank's keys depend on its size, e.g. ``new_keys`` exist only while a task
        trains): ``<layer>.moram_bank.<key>`` -> ``<layer>.moram_bank.<adapter>.<key>``. A 0.5.0
        adapter's ``<layer>.atom_keys`` (and ``atom_values``, ``num_frozen``, ``atom_task``) goes
        to ``<layer>.moram_bank.<adapter>.atom_keys``, which the bank reads as its old format.
        Other keys (modules to save) are peft's."""
        layers, hosts, held = set(), {}, {}
        for name, layer in find_layers(model, MoRAMTunerLayer).items():
            name = name.removeprefix("_fsdp_wrapped_module.").replace("._fsdp_wrapped_module", "")
            short = name.removeprefix("base_model.model.")
            layers.update({name, short, "base_model.model." + short})
            if adapter_name in layer.moram_bank:
                hosts[short] = name
                held[short] = layer.moram_bank[adapter_name].num_atoms
        bank = re.compile(r"^(?P<layer>.*)\.moram_bank\.(?P<key>[^.]+)$")
        legacy = re.compile(r"^(?P<layer>.*)\.(?P<key>" + "|".join(LEGACY_KEYS) + r")$")
        out, rest, loaded, strays, sizes = {}, {}, set(), set(), {}
        for key, value in state_dict.items():
            match = bank.match(key) or legacy.match(key)
            if match and match["layer"] in layers:
                out[f"{match['layer']}.moram_bank.{adapter_name}.{match['key']}"] = value
                loaded.add(match["layer"].removeprefix("base_model.model."))
                if match["key"] == "atom_task":  # one entry per atom, in both formats
                    sizes[match["layer"].removeprefix("base_model.model.")] = int(value.shape[0])
            else:
                if match:  # a MoRAM layer the model does not have (passed on: peft ignores it)
                    strays.add(match["layer"].removeprefix("base_model.model."))
                rest[key] = value
        warn_layer_mismatch(adapter_name, sorted(set(hosts) - loaded), sorted(strays), len(hosts))
        check_no_shrinking(adapter_name, held, sizes)
        check_no_base_keys(model, rest)
        if rest:
            out.update(super()._remap_adapter_state_dict_for_load(model, config, adapter_name, rest))
        return out


def _batch_rows(args: tuple, kwargs: dict) -> Optional[int]:
    """The rows of the batch a model's call or ``generate`` is given (``input_ids``,
    ``inputs_embeds``, or its first positional tensor), or None where none is seen."""
    for value in (kwargs.get("input_ids"), kwargs.get("inputs_embeds"), args[0] if args else None):
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            return value.shape[0]
    return None


def _pass_adapter_names(module: nn.Module, args: tuple, kwargs: dict, adapter_names: List[str]):
    """A forward pre-hook (``with_kwargs=True``) that hands ``adapter_names`` to the module's call."""
    kwargs["adapter_names"] = adapter_names
    return args, kwargs


#: where the state of an adapter lives in a peft model besides MoRAM's banks: peft's copies of the
#: ``modules_to_save`` and its trainable tokens (``peft/utils/other.py``: ``ModulesToSaveWrapper``,
#: ``TrainableTokensWrapper``); every other parameter or buffer of the model is the base's
ADAPTER_PARTS = (".moram_bank.", ".moram_dropout.", ".modules_to_save.", ".token_adapter.")
#: the heads peft adds to ``modules_to_save`` for a task type (``peft/peft_model.py``:
#: ``PeftModelForSequenceClassification`` ... ``classifier_module_names``, ``qa_module_names``); a
#: model has one of them, so the others may match nothing
PEFT_TASK_HEADS = {"SEQ_CLS": ("classifier", "score"), "TOKEN_CLS": ("classifier", "score"),
                   "QUESTION_ANS": ("qa_outputs",)}
#: why MoRAM adapters are not combined by ``add_weighted_adapter``
WEIGHTED_REFUSED = (
    "add_weighted_adapter cannot combine MoRAM adapters: LoRA sums the weighted B A products of "
    "its adapters (or concatenates their factors), one fixed matrix each, but a MoRAM adapter's "
    "update sum_i w_i(x) B_i A_i x weighs rank-1 atoms by routing (top-k, softmax over the "
    "adapter's own keys, eval gate), so no weighted sum of two adapters is a MoRAM adapter. Activate "
    "several adapters instead (set_adapter([...]): each adds its routed term), or train one "
    "adapter over the tasks (add_task)")


def check_modules_to_save(model: nn.Module, config: PeftConfig) -> None:
    """A ValueError naming the names of ``config.modules_to_save`` that match no module of ``model``
    (peft's rule: a module whose name ends with the name). peft's LoRA accepts them and trains and
    saves nothing for them; the heads peft adds itself for a task type (:data:`PEFT_TASK_HEADS`) may
    be absent, as peft allows."""
    task = getattr(config.task_type, "value", config.task_type)
    wanted = [name for name in (getattr(config, "modules_to_save", None) or ())
              if name not in PEFT_TASK_HEADS.get(str(task), ())]
    names = [name for name in find_layers(model, nn.Module) if name]  # every module, by name
    unknown = [want for want in wanted if not any(name.endswith(want) for name in names)]
    if unknown:
        raise ValueError(f"modules_to_save names {unknown}, which match no module of the model (peft matches a module "
                         f"whose name ends with the given name, e.g. {names[-1]!r}): name modules that exist, or "
                         "leave them out; nothing would be trained or saved for them")


def check_no_shrinking(adapter_name: str, held: Dict[str, int], loaded: Dict[str, int]) -> None:
    """A ValueError when a checkpoint holds fewer atoms for a layer (``loaded``, by layer name) than
    adapter ``adapter_name`` holds there now (``held``): the adapter has grown since (``add_task``),
    and loading the checkpoint would shrink its bank back, dropping the later tasks' atoms -- with
    ``transformers.Trainer``, a ``resume_from_checkpoint`` of an earlier task's checkpoint after
    :func:`~moram_avalanche.text.trainer.start_task`, which then trained 0 steps of the current
    task (its step count is already the earlier task's last). A bank is loaded at any size
    otherwise (a fresh adapter grows to the checkpoint's)."""
    for layer, atoms in sorted(loaded.items()):
        now = held.get(layer)
        if now is not None and atoms < now:
            raise ValueError(
                f"this checkpoint holds {atoms} atoms of {layer} and adapter {adapter_name!r} holds {now} now: it "
                "was saved before the adapter's later tasks (add_task), and loading it would shrink the bank back, "
                "dropping their atoms. Resume the current task from its own checkpoint (with transformers.Trainer: "
                "a checkpoint-N under the output_dir start_task set), or load it into a model rebuilt with that "
                "task's structure (get_peft_model, one add_task() per finished task) or under another adapter name")


def check_no_base_keys(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> None:
    """A ValueError naming the first key of ``state_dict`` (an adapter file's, beside the banks) that
    names a weight of the base model -- its wrapped name (``...q_proj.base_layer.weight``), or its
    name before wrapping (``...q_proj.weight``) -- instead of a module to save: loading the file would
    overwrite the pre-trained weights (peft's LoRA does so without a word)."""
    prefix = "base_model.model."
    base = set()
    for name, _ in [*model.named_parameters(), *model.named_buffers()]:
        name = name.removeprefix(prefix)
        if not any(part in f".{name}" for part in ADAPTER_PARTS):
            base.update({name, name.replace(".base_layer.", ".")})
    for key in state_dict:
        if key.removeprefix(prefix) in base:
            raise ValueError(f"the adapter file holds {key!r}, a weight of the base model: loading it would overwrite "
                             "the pre-trained weights. An adapter file holds MoRAM's atoms (...moram_bank.*) and the "
                             "modules_to_save only; remove that key from the file, or load such weights with the "
                             "base model's from_pretrained")


def warn_layer_mismatch(adapter_name: str, fresh: List[str], strays: List[str], layers: int) -> None:
    """One UserWarning when an adapter checkpoint and the model it loads into do not hold the
    same MoRAM layers: ``fresh`` layers of the model the checkpoint has no atoms for (a deeper
    model: they keep freshly initialised atoms), ``strays`` layers of the checkpoint the model
    does not have (a shallower or other model: their trained atoms are dropped). peft warns
    about missing keys in ``PeftModel.from_pretrained`` only; this warns in ``load_adapter``
    too, and for the atoms dropped."""
    if not fresh and not strays:
        return
    import warnings

    parts = []
    if fresh:
        parts.append(f"{len(fresh)} of the model's {layers} MoRAM layers have no atoms in the checkpoint and keep "
                     f"fresh, untrained ones (e.g. {fresh[0]})")
    if strays:
        parts.append(f"{len(strays)} layers of the checkpoint are not in the model and their atoms are dropped "
                     f"(e.g. {strays[0]})")
    warnings.warn(f"MoRAM adapter {adapter_name!r} does not fit this model: {'; '.join(parts)}; load it into the "
                  "base model it was trained on (adapter_config.json's base_model_name_or_path, same depth and "
                  "target modules)", UserWarning, stacklevel=3)


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

__all__ = ["ADAPTER_PARTS", "LEGACY_KEYS", "MERGE_REFUSED", "MoRAMConfig", "MoRAMModel", "MoRAMPeftType",
           "MoRAMTunerLayer", "PEFT_TASK_HEADS", "WEIGHTED_REFUSED", "check_modules_to_save", "check_no_base_keys",
           "check_no_shrinking", "register_moram",
           "warn_layer_mismatch"]
