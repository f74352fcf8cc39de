"""The language-model strategies, each a thin subclass of the generative loop
(:class:`~moram_avalanche.strategies.text_loop.TextStrategy`), registered for the ``"text"``
family (:data:`TEXT_STRATEGIES`; ``get_strategy(name, family="text")``):

================  ========================  ======================================================
name              class                     what trains
================  ========================  ======================================================
``moram``         :class:`TextMoRAM`        MoRAM atoms on the query and key projections, r new
                                            atoms per task, old ones frozen (the paper's method)
``moram-load-     :class:`TextMoRAMLoad     MoRAM plus the load-balancing term of the paper's
balance``         Balance`                  ablation (``tab:load_balance``, T5 columns)
``moram-replay``  :class:`TextMoRAMReplay`  MoRAM + a replay buffer of real samples (``tab:sapt``)
``finetune``      :class:`TextFineTune`     every weight of the model (SeqFT)
``seq-lora``      :class:`TextSeqLoRA`      one LoRA trained through the whole stream (SeqLoRA)
``inc-lora``      :class:`TextIncLoRA`      a new LoRA per task, the earlier ones frozen (IncLoRA)
``o-lora``        :class:`TextOLoRA`        IncLoRA + O-LoRA's orthogonality and L2 terms
``hidelora``      :class:`TextHiDeLoRA`     SeqLoRA + HiDeLoRA's row-contrastive term, as the
                                            TRACE-style code runs it (TRACE's row)
``mtl``           :class:`TextMTL`          every weight, jointly on every task so far (upper bound)
``ogd``           :class:`TextOGD`          every weight, its gradients projected orthogonally to
                                            earlier tasks' loss gradients (OGD, TRACE's row)
``treelora``      :class:`TextTreeLoRA`     one LoRA through the stream (as ``seq-lora``) + TreeLoRA's
                                            tree-searched regulariser (TRACE's row)
``lfpt5``         :class:`~.text_lfpt5.     one soft prompt of a frozen model, pseudo-samples of
                  TextLFPT5`                earlier tasks written by the model (LFPT5, the T5 tables')
================  ========================  ======================================================

Defaults: the loop's are the paper's classification setting (lr 1e-3 fixed, batch 64, one epoch
per task; paper Sec. 4, LLM settings); MoRAM's layer options are the paper's (r 8, top-k 4,
tau 0.1, delta 0.2, dropout 0.1: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`); the LoRA rows
use O-LoRA's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)`` (rank 8, the update scaled by
32 / 8 = 4, dropout 0.1 on its input: :data:`~moram_avalanche.text.lora_layers.OLORA_LORA`; the
release's TRACE baselines use the same), on the query and value projections (peft's default
targets for T5 and LLaMA, which O-LoRA's code keeps: :data:`LORA_TARGET_MODULES`; on TRACE the
release's q, k, v, o, set by the stream) and O-LoRA's lambdas (:mod:`moram_avalanche.algorithms.olora`;
one value, or one per task by name: the long sequences' ``scripts/long.sh``).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Tuple, Union

from ..algorithms.hidelora import HIDELORA_LAMBDA_CONTRAST, HIDELORA_LAMBDA_L2, HIDELORA_TEMPERATURE
from ..algorithms.olora import OLORA_LAMBDA_L2, OLORA_LAMBDA_ORTH, OLORA_POWER
from ..algorithms.treelora import TREELORA_REG
from ..layers.base import find_layers
from ..layers.lora import LoRALinear
from ..layers.moram import MoRAMLinear
from ..layers.replace import replace_linears
from ..layers.task_lora import TaskLoRALinear
from ..models.language_model import LanguageModel
from ..layers.moram_config import PAPER_LLM as LLM
from ..layers.moram_config import MoRAMLayerConfig
from ..layers.moram_variants import BALANCE_FORMS, MoRAMAblationLinear
from ..text.layer import PAPER_DROPOUT
from ..text.lora_layers import OLORA_LORA, DropoutLoRALinear, DropoutTaskLoRALinear, check_lora_dropout
from ..utils.checks import check_nonnegative_int, check_number, check_positive_int
from .needs import StrategyNeeds
from .plugins.growth import GrowthPlugin
from .plugins.hidelora import HiDeLoRAPlugin, check_hidelora_options
from .plugins.load_balance import SWITCH_ALPHA, LoadBalancePlugin
from .plugins.moram import MoRAMPlugin
from .plugins.ogd import OGD_GRADIENTS_PER_TASK, OGDPlugin
from .plugins.olora import OLoRAPlugin
from .plugins.treelora import TreeLoRAPlugin, check_reg, check_search
from .text_loop import TextStrategy

#: ``config.model_type`` -> the LoRA rows' targets: query and value (peft's
#: ``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``, the default O-LoRA's code keeps)
LORA_TARGET_MODULES: Mapping[str, Tuple[str, ...]] = {
    "t5": ("q", "v"), "mt5": ("q", "v"), "llama": ("q_proj", "v_proj"), "gemma": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"), "mistral": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
}
#: O-LoRA's LoRA rank for T5 (``--lora_dim 8``), scale (``lora_alpha / r`` = 32 / 8) and dropout
OLORA_RANK = OLORA_LORA["rank"]
OLORA_SCALE = OLORA_LORA["scale"]
OLORA_DROPOUT = OLORA_LORA["dropout"]
#: a lambda of O-LoRA: one value, or one per task name (``scripts/long.sh``)
Lambda = Union[float, Mapping[str, float]]

Targets = Union[str, Sequence[str], Mapping[str, Sequence[str]], None]


def wrap(model, tokenizer) -> LanguageModel:
    """``model`` as a :class:`LanguageModel` (a ``transformers`` model is wrapped with ``tokenizer``)."""
    return model if isinstance(model, LanguageModel) else LanguageModel(model, tokenizer)


def lora_targets(model: LanguageModel, targets: Targets, table=None, what: str = "LoRA") -> list:
    """Dotted names of the linears the LoRA rows wrap (``targets`` None: the model type's entry of
    ``table``, :data:`LORA_TARGET_MODULES` by default; ``what`` names the row in the error)."""
    from ..text.inject import model_type_of, target_names

    table = LORA_TARGET_MODULES if table is None else table
    if targets is None:
        model_type = model_type_of(model.model)
        if model_type not in table:
            raise ValueError(f"no {what} target modules known for model_type {model_type!r} (known: "
                             f"{', '.join(sorted(table))}); pass target_modules, e.g. ['q_proj', 'v_proj']")
        targets = list(table[model_type])
    return target_names(model.model, targets)


def check_text_adapter_options(options) -> None:
    """Value checks of the adapter options given in ``options``."""
    from ..text.inject import check_new_value_scale

    for name in ("rank", "atoms_per_task"):
        if name in options:
            check_positive_int(name, options[name])
    if "new_value_scale" in options:
        check_new_value_scale(options["new_value_scale"])
    if "scale" in options:
        check_number("scale", options["scale"], hint=f"O-LoRA: lora_alpha / r = {OLORA_SCALE:g}")
    if "dropout" in options:
        check_lora_dropout(options["dropout"])
    for name in ("lambda_orth", "lambda_l2"):
        if name in options:
            check_lambda(name, options[name])
    if "power" in options and options["power"] not in (1, 2):
        raise ValueError(f"power must be 1 (O-LoRA's code) or 2 (its paper), got {options['power']!r}")


def check_text_moram_options(options) -> None:
    """Value checks of :class:`TextMoRAM`'s own options given in ``options``: the layers'
    (:class:`~moram_avalanche.layers.moram_config.MoRAMLayerConfig`), the load balancing's and the
    adapters' others."""
    MoRAMLayerConfig(**{k: options[k] for k in ("atoms_per_task", "topk", "temperature", "threshold") if k in options})
    if "balance_coef" in options:
        check_number("balance_coef", options["balance_coef"], low=0,
                     hint=f"0: no load balancing (the method); the ablation's: {SWITCH_ALPHA:g}")
    if "balance_form" in options and options["balance_form"] not in BALANCE_FORMS:
        raise ValueError(f"balance_form must be one of {BALANCE_FORMS}, got {options['balance_form']!r}")
    check_text_adapter_options(options)


def check_lambda(name: str, value) -> None:
    """An O-LoRA lambda: a number >= 0, or a mapping of task names to such numbers."""
    hint = "O-LoRA: 0.5 (orthogonality), 0 (L2); or one per task, e.g. {'mnli': 0.5, 'cb': 0.5}"
    if isinstance(value, Mapping):
        if not value or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{name}: a mapping gives one value per task name, got {dict(value)!r} ({hint})")
        for key, item in value.items():
            check_number(f"{name}[{key!r}]", item, low=0, hint=hint)
        return
    check_number(name, value, low=0, hint=hint)


class TextMoRAM(TextStrategy):
    """MoRAM for language models (the paper's method; paper Sec. 4, LLM settings).

    :func:`~moram_avalanche.text.inject.inject_moram` puts
    :class:`~moram_avalanche.text.layer.DropoutMoRAMLinear` on the targets (default: the query
    and key projections, :data:`~moram_avalanche.text.targets.MORAM_TARGET_MODULES`); the
    :class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin` appends ``atoms_per_task``
    atoms per layer before each task and freezes them after it.

    Args (besides TextStrategy's): atoms_per_task (r, 8), topk (4), temperature (tau, 0.1),
    threshold (delta, 0.2), dropout (0.1), target_modules (None: the architecture's; names, a
    regular expression, or a mapping of ``model_type`` to names such as
    :data:`~moram_avalanche.text.targets.RELEASE_TARGET_MODULES`), self_attention_only (T5: leave
    cross-attention out), prune_mass (None: no pruning).

    The release's atom scaling, two options (both off by default: the paper's one scaling and
    no untrained atom in any evaluation; ``--preset trace-release`` turns both on):

    * ``new_value_scale`` -- factor on the trainable atoms' values in the forward (1; the
      release's ``lora_alpha / r`` = 2, :data:`~moram_avalanche.text.inject.RELEASE_NEW_VALUE_SCALE`):
      a task's atoms train at that scale and are read at scale 1 once frozen;
    * ``fresh_atoms_at_eval`` -- after each task the next task's r atoms (Kaiming keys, zero
      values) are appended before the evaluation and join its routing; the next task trains
      them (:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin`).

    The paper's load-balancing ablation (``tab:load_balance``): ``balance_coef`` > 0 (0, the
    method, by default) builds :class:`~moram_avalanche.text.layer.DropoutBalancedMoRAMLinear`
    layers and adds ``balance_coef`` times their mean load-balancing term of form
    ``balance_form`` (``"release"``: the release's ``R * sum_i Pbar_i^2``; ``"switch"``: Switch
    Transformer's) to the loss, through the CLIP row's
    :class:`~moram_avalanche.strategies.plugins.load_balance.LoadBalancePlugin`;
    :class:`TextMoRAMLoadBalance` is that row (``moram-load-balance``).
    """

    #: only adapters train: the weights can be sharded (--fsdp); its banks grow by atoms_per_task per task
    needs = StrategyNeeds(fsdp=True, atoms="atoms_per_task")
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_text_moram_options(options))

    # defaults: the paper's LLM setting, written once (moram_avalanche.layers.moram_config.PAPER_LLM)
    def __init__(self, *, model, tokenizer=None, atoms_per_task: int = LLM.atoms_per_task,
                 topk: Optional[int] = LLM.topk, temperature: Optional[float] = LLM.temperature,
                 threshold: float = LLM.threshold, dropout: float = PAPER_DROPOUT,
                 target_modules: Targets = None, self_attention_only: bool = False,
                 prune_mass: Optional[float] = None, new_value_scale: float = 1.0,
                 fresh_atoms_at_eval: bool = False, balance_coef: float = 0.0,
                 balance_form: str = BALANCE_FORMS[0], plugins=None, **kwargs):
        from ..text.inject import inject_moram

        #: the layers' options, checked once (:class:`~moram_avalanche.layers.moram_config.MoRAMLayerConfig`)
        self.config = MoRAMLayerConfig(atoms_per_task, topk, temperature, threshold)
        check_text_moram_options({"balance_coef": balance_coef, "balance_form": balance_form})
        load_balance = balance_form if balance_coef > 0 else False
        model = wrap(model, tokenizer)
        if not find_layers(model, MoRAMLinear):
            inject_moram(model.model, target_modules, self_attention_only=self_attention_only, **vars(self.config),
                         dropout=dropout, new_value_scale=new_value_scale, load_balance=load_balance)
        else:
            _check_balance(model, load_balance)
        for layer in find_layers(model, MoRAMLinear).values():
            layer.new_value_scale = float(new_value_scale)
        self.moram_plugin = MoRAMPlugin(prune_mass=prune_mass, fresh_atoms_at_eval=fresh_atoms_at_eval)
        own = [self.moram_plugin]
        self.balance_plugin = LoadBalancePlugin(balance_coef, balance_form) if load_balance else None
        if self.balance_plugin is not None:
            own.append(self.balance_plugin)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[*own, *(plugins or [])], **kwargs)


class TextMoRAMLoadBalance(TextMoRAM):
    """The paper's load-balancing row on a language model (``tab:load_balance``, T5 columns):
    :class:`TextMoRAM` with ``balance_coef`` = Switch Transformer's alpha, 0.01
    (:data:`~moram_avalanche.strategies.plugins.load_balance.SWITCH_ALPHA`; the paper gives none,
    the CLIP row uses the same), and the release's term ``R * sum_i Pbar_i^2``; every other
    setting is MoRAM's (overridable)."""

    def __init__(self, *, model, tokenizer=None, balance_coef: float = SWITCH_ALPHA, **kwargs):
        super().__init__(model=model, tokenizer=tokenizer, balance_coef=balance_coef, **kwargs)


def _check_balance(model, load_balance) -> None:
    """Refuse a model whose MoRAM layers balance the load otherwise than asked (a silently
    different row would run)."""
    for name, layer in find_layers(model, MoRAMLinear).items():
        have = layer.load_balance if isinstance(layer, MoRAMAblationLinear) else None
        if have != (load_balance or None):
            raise ValueError(f"the model already carries MoRAM layers with load_balance={have!r} ({name}), this "
                             f"strategy asks for {load_balance or None!r}: pass a model without MoRAM layers (the "
                             "strategy injects them) or the balance_coef / balance_form they were built with")


#: the replay buffer of ``moram-replay``: Avalanche's ``Replay`` / ``ReplayPlugin`` default (200
#: samples, balanced over the tasks seen), the ``avalanche.replay`` row's; the MoRAM paper gives none
REPLAY_MEM_SIZE = 200


class TextMoRAMReplay(TextMoRAM):
    """MoRAM with replay (the MoRAM paper's ``tab:sapt`` row "MoRAM with replay"): :class:`TextMoRAM`
    plus Avalanche's ``ReplayPlugin`` -- real training samples of the earlier tasks, stored in a
    buffer of ``mem_size`` samples balanced over the tasks and mixed into every training batch.

    Which replay: the paper's table puts this row beside SAPT (which replays pseudo-samples its
    own generator writes, ``generated_data/`` of circle-hit/SAPT) and the "Replay" baseline (real
    stored samples). MoRAM has no generator, and the paper names none; stored real samples are
    what the library's replay is (``avalanche.replay``), so both replay rows here use the same
    buffer. Replaying SAPT's shipped pseudo-samples instead is not built.

    Args (besides TextMoRAM's): mem_size (:data:`REPLAY_MEM_SIZE`).
    """

    #: run checkpoints are Avalanche's whole strategy: the replay buffer must survive a resume
    lean_checkpoints = False
    #: not with --fsdp: the whole-strategy checkpoint pickles the model, and each process would
    #: keep a buffer of its own (as the ``avalanche.*`` rows, refused there too)
    needs = StrategyNeeds(fsdp=False, atoms="atoms_per_task")
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_moram_replay_options(options))

    def __init__(self, *, model, tokenizer=None, mem_size: int = REPLAY_MEM_SIZE, plugins=None, **kwargs):
        from avalanche.training.plugins import ReplayPlugin

        check_positive_int("mem_size", mem_size)
        self.replay_plugin = ReplayPlugin(mem_size=mem_size)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.replay_plugin, *(plugins or [])], **kwargs)


def check_moram_replay_options(options) -> None:
    check_text_moram_options(options)
    if "mem_size" in options:
        check_positive_int("mem_size", options["mem_size"])


class TextFineTune(TextStrategy):
    """SeqFT: every weight of the model trains on each task in turn (no adapters)."""

    def __init__(self, *, model, tokenizer=None, **kwargs):
        model = wrap(model, tokenizer)
        if find_layers(model):
            raise ValueError("TextFineTune trains the model's own weights: give a model without adapters")
        model.requires_grad_(True)
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)


class TextSeqLoRA(TextStrategy):
    """SeqLoRA: one rank-``rank`` LoRA per target linear, trained through the whole stream.

    Args (besides TextStrategy's): rank (8), scale (4 = lora_alpha / r) and dropout (0.1): O-LoRA's
    and the release's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``; target_modules (None:
    the query and value projections, :data:`LORA_TARGET_MODULES`; names, a regular expression or a
    mapping of ``model_type`` to names).
    """

    needs = StrategyNeeds(fsdp=True)  # only adapters train: the weights can be sharded (--fsdp)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_text_adapter_options(options))

    def __init__(self, *, model, tokenizer=None, rank: int = OLORA_RANK, scale: float = OLORA_SCALE,
                 dropout: float = OLORA_DROPOUT, target_modules: Targets = None, **kwargs):
        model = wrap(model, tokenizer)
        if not find_layers(model, LoRALinear):
            names = lora_targets(model, target_modules)
            model.requires_grad_(False)
            replace_linears(model.model, names,
                            lambda linear: DropoutLoRALinear(linear, rank, scale=scale, dropout=dropout))
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)


class TextIncLoRA(TextStrategy):
    """IncLoRA: a new rank-``rank`` LoRA per task on every target linear, the earlier ones frozen
    (:class:`~moram_avalanche.layers.task_lora.TaskLoRALinear`, grown by a
    :class:`~moram_avalanche.strategies.plugins.growth.GrowthPlugin`).

    Args (besides TextStrategy's): rank (8), scale (4), dropout (0.1) -- O-LoRA's LoraConfig, as
    :class:`TextSeqLoRA` -- and target_modules (None: query and value).
    """

    needs = StrategyNeeds(fsdp=True)  # only adapters train: the weights can be sharded (--fsdp)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_text_adapter_options(options))

    def __init__(self, *, model, tokenizer=None, rank: int = OLORA_RANK, scale: float = OLORA_SCALE,
                 dropout: float = OLORA_DROPOUT, target_modules: Targets = None, plugins=None, **kwargs):
        model = wrap(model, tokenizer)
        if not find_layers(model, TaskLoRALinear):
            names = lora_targets(model, target_modules)
            model.requires_grad_(False)
            replace_linears(model.model, names,
                            lambda linear: DropoutTaskLoRALinear(linear, rank, scale=scale, dropout=dropout))
        self.growth_plugin = GrowthPlugin(TaskLoRALinear)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.growth_plugin, *(plugins or [])],
                         **kwargs)


class TextOLoRA(TextIncLoRA):
    """O-LoRA (Wang et al., 2023): IncLoRA plus ``lambda_orth * L_orth + lambda_l2 * L2`` on the
    new LoRA (:class:`~moram_avalanche.strategies.plugins.olora.OLoRAPlugin`).

    Args (besides TextIncLoRA's): lambda_orth (0.5), lambda_l2 (0) -- each one value, or one per
    task name (the long sequences' per-task values of O-LoRA's ``scripts/long.sh``,
    :data:`~moram_avalanche.algorithms.olora.OLORA_LONG_LAMBDAS`) -- and power (1: the code's
    absolute values; 2: the paper's squares) -- :mod:`moram_avalanche.algorithms.olora`.
    """

    def __init__(self, *, model, tokenizer=None, lambda_orth: Lambda = OLORA_LAMBDA_ORTH,
                 lambda_l2: Lambda = OLORA_LAMBDA_L2, power: int = OLORA_POWER, plugins=None, **kwargs):
        self.olora_plugin = OLoRAPlugin(lambda_orth, lambda_l2, power)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.olora_plugin, *(plugins or [])],
                         **kwargs)


class TextHiDeLoRA(TextSeqLoRA):
    """HiDeLoRA as the TRACE-style language-model code runs it (ZinYY/TreeLoRA and the MoRAM
    release, ``model/Regular/HideLoRA.py``; TRACE's row of the paper's ``tab:llm_cl``):
    :class:`TextSeqLoRA`'s one LoRA trained through the whole stream and used for every task,
    plus ``lambda_contrast * sum_layers CE(D D^T / temperature, I) + lambda_l2 * sum ||theta||_2``
    (:class:`~moram_avalanche.strategies.plugins.hidelora.HiDeLoRAPlugin`).

    That code has no task-specific LoRAs, no task-shared one and no task-identity inference: the
    HiDe-PET paper's hierarchical decomposition (ViTs) is not what produced the TRACE number;
    :mod:`moram_avalanche.algorithms.hidelora` says what differs.

    Args (besides TextSeqLoRA's: rank 8, scale 4, dropout 0.1, the code's
    ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``): lambda_contrast (``lamda_1`` 0.5),
    lambda_l2 (``lamda_2`` 0), temperature (0.8).
    """

    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_hidelora_strategy_options(options))

    def __init__(self, *, model, tokenizer=None, lambda_contrast: float = HIDELORA_LAMBDA_CONTRAST,
                 lambda_l2: float = HIDELORA_LAMBDA_L2, temperature: float = HIDELORA_TEMPERATURE, plugins=None,
                 **kwargs):
        self.hidelora_plugin = HiDeLoRAPlugin(lambda_contrast, lambda_l2, temperature)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.hidelora_plugin, *(plugins or [])],
                         **kwargs)


def check_hidelora_strategy_options(options) -> None:
    check_hidelora_options(options)
    check_text_adapter_options({k: v for k, v in options.items() if k != "lambda_l2"})


class TextOGD(TextFineTune):
    """OGD (Farajtabar et al., 2020) as TRACE's baseline runs it: every weight trains, each
    gradient projected orthogonally to the stored loss gradients of the earlier tasks
    (:class:`~moram_avalanche.strategies.plugins.ogd.OGDPlugin`, whose docstring says what is
    TRACE's and what differs).

    Args (besides TextStrategy's): gradients_per_task (1: minibatch loss gradients stored after
    each task; this library's choice).
    """

    #: run checkpoints are the whole strategy: the basis must survive a resume
    lean_checkpoints = False
    #: one process: the basis and its stored gradients are not synchronised across processes
    needs = StrategyNeeds(data_parallel=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_ogd_options(options))

    def __init__(self, *, model, tokenizer=None, gradients_per_task: int = OGD_GRADIENTS_PER_TASK, plugins=None,
                 **kwargs):
        self.ogd_plugin = OGDPlugin(gradients_per_task)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.ogd_plugin, *(plugins or [])], **kwargs)


def check_ogd_options(options) -> None:
    if "gradients_per_task" in options:
        check_positive_int("gradients_per_task", options["gradients_per_task"])


class TextTreeLoRA(TextSeqLoRA):
    """TreeLoRA (Qian et al., ICML 2025) as its code runs on TRACE (ZinYY/TreeLoRA): one LoRA per
    target linear trained through the whole stream, never frozen nor re-initialised (its
    ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)`` with ``r_sum=0``: only ``loranew_A/B``
    exist and train, ``training/main.py``), plus the tree-searched regulariser on the LoRAs'
    down-projections (:class:`~moram_avalanche.strategies.plugins.treelora.TreeLoRAPlugin`, whose
    docstring and :mod:`moram_avalanche.algorithms.treelora` say what is the code's and what differs).

    Args (besides TextSeqLoRA's: rank 8, scale 4, dropout 0.1, target_modules): reg (0.5, its
    TRACE script; 0: SeqLoRA), search ("sample": the code's draws; "greedy": the most probable
    task), seed (None: the run's, ``torch.initial_seed()``).
    """

    #: run checkpoints are the whole strategy: the stored matrices and the tree must survive a resume
    lean_checkpoints = False
    #: one process: the plugin's store is not synchronised across processes (and not with --fsdp)
    needs = StrategyNeeds(data_parallel=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_treelora_options(options))

    def __init__(self, *, model, tokenizer=None, reg: float = TREELORA_REG, search: str = "sample",
                 seed: Optional[int] = None, plugins=None, **kwargs):
        self.treelora_plugin = TreeLoRAPlugin(reg, search, seed)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.treelora_plugin, *(plugins or [])],
                         **kwargs)


def check_treelora_options(options) -> None:
    check_text_adapter_options(options)
    if "reg" in options:
        check_reg(options["reg"])
    if "search" in options:
        check_search(options["search"])
    if "seed" in options and options["seed"] is not None:
        check_nonnegative_int("seed", options["seed"])


#: ``--strategy`` name -> language-model strategy class (the ``"text"`` family)
TEXT_STRATEGIES = {"moram": TextMoRAM, "moram-replay": TextMoRAMReplay, "moram-load-balance": TextMoRAMLoadBalance,
                   "finetune": TextFineTune, "seq-lora": TextSeqLoRA, "inc-lora": TextIncLoRA, "o-lora": TextOLoRA,
                   "hidelora": TextHiDeLoRA, "ogd": TextOGD, "treelora": TextTreeLoRA}


__all__ = ["LORA_TARGET_MODULES", "OLORA_DROPOUT", "OLORA_RANK", "OLORA_SCALE", "REPLAY_MEM_SIZE", "TEXT_STRATEGIES",
           "TextMoRAMLoadBalance", "TextMoRAMReplay", "check_moram_replay_options", "check_lambda", "TextFineTune",
           "TextHiDeLoRA", "TextIncLoRA", "TextMoRAM", "TextOGD", "TextOLoRA", "TextTreeLoRA", "check_hidelora_strategy_options", "check_ogd_options", "check_treelora_options", "TextSeqLoRA", "check_text_adapter_options",
           "check_text_moram_options", "lora_targets", "wrap"]


class TextMTL(TextFineTune):
    """MTL, the upper bound of the language-model tables: every weight trained jointly on the
    tasks (O-LoRA's and the MoRAM paper's "MTL" row).

    In a stream: at experience ``t`` the model restarts from the weights it was built with and
    trains on the union of the training sets of tasks ``0..t`` (read from the experience's
    stream, so a resumed run needs no stored data); the last row of the accuracy matrix is
    joint training on every task -- the number the tables report. The restart copy of the
    weights is kept on the CPU.
    """

    def __init__(self, *, model, tokenizer=None, **kwargs):
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)
        self.initial_state = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}

    def train_dataset_adaptation(self, **kwargs):
        """The union of the training sets of every task up to the current one."""
        from avalanche.benchmarks.utils import concat_datasets

        stream, index = self.experience.origin_stream, self.experience.current_experience
        self.adapted_dataset = concat_datasets([stream[i].dataset for i in range(index + 1)])

    def model_adaptation(self, model=None):
        """Restart from the weights the strategy was built with (before the optimizer is made)."""
        if self.is_training:
            self.model.load_state_dict(self.initial_state)
        return super().model_adaptation(model)


TEXT_STRATEGIES["mtl"] = TextMTL
__all__.append("TextMTL")


from .text_lfpt5 import TextLFPT5  # noqa: E402 (imports this module's loop only)

TEXT_STRATEGIES["lfpt5"] = TextLFPT5
__all__.append("TextLFPT5")
