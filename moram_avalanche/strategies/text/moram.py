"""MoRAM on a language model (``moram``, the paper's method) and its two variants: the load-balancing
ablation (``moram-load-balance``, ``tab:load_balance``) and MoRAM with replay (``moram-replay``,
``tab:sapt``).

Defaults: the loop's are the paper's classification setting (lr 1e-3 fixed, batch 64, one epoch
per task; paper Sec. 4, LLM settings); MoRAM's layer options are the paper's (r 8, top-k 4,
tau 0.1, delta 0.2, dropout 0.1: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`).
"""

from __future__ import annotations

from typing import Optional

from ...layers.base import find_layers
from ...layers.moram.config import PAPER_LLM as LLM
from ...layers.moram.config import MoRAMLayerConfig
from ...layers.moram.layer import MoRAMLinear
from ...layers.moram.variants import BALANCE_FORMS, MoRAMAblationLinear
from ...text.layer import PAPER_DROPOUT
from ...text.lora_layers import check_lora_dropout
from ...utils.checks import check_number, check_positive_int
from ..needs import StrategyNeeds
from ..plugins.load_balance import SWITCH_ALPHA, LoadBalancePlugin
from ..plugins.moram import MoRAMPlugin
from .adapters import Targets, wrap
from .loop import TextStrategy
from .settings import given_config


def check_text_moram_options(options) -> None:
    """Value checks of :class:`TextMoRAM`'s own options given in ``options``: the layers'
    (:class:`~moram_avalanche.layers.moram.config.MoRAMLayerConfig`), the load balancing's, the
    atoms' value scale and dropout."""
    from ...text.inject import check_new_value_scale

    given_config(MoRAMLayerConfig, options)
    if "balance_coef" in options:
        check_number("balance_coef", options["balance_coef"], low=0,
                     hint=f"0: no load balancing (the method); the ablation's: {SWITCH_ALPHA:g}")
    if "balance_form" in options and options["balance_form"] not in BALANCE_FORMS:
        raise ValueError(f"balance_form must be one of {BALANCE_FORMS}, got {options['balance_form']!r}")
    if "new_value_scale" in options:
        check_new_value_scale(options["new_value_scale"])
    if "dropout" in options:
        check_lora_dropout(options["dropout"])



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

    # defaults: the paper's LLM setting, written once (moram_avalanche.layers.moram.config.PAPER_LLM)
    def __init__(self, *, model, tokenizer=None, atoms_per_task: int = LLM.atoms_per_task,
                 topk: Optional[int] = LLM.topk, temperature: Optional[float] = LLM.temperature,
                 threshold: float = LLM.threshold, dropout: float = PAPER_DROPOUT,
                 target_modules: Targets = None, self_attention_only: bool = False,
                 prune_mass: Optional[float] = None, new_value_scale: float = 1.0,
                 fresh_atoms_at_eval: bool = False, balance_coef: float = 0.0,
                 balance_form: str = BALANCE_FORMS[0], plugins=None, **kwargs):
        from ...text.inject import inject_moram

        #: the layers' options, checked once (:class:`~moram_avalanche.layers.moram.config.MoRAMLayerConfig`)
        self.config = MoRAMLayerConfig(atoms_per_task, topk, temperature, threshold)
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

        self.replay_plugin = ReplayPlugin(mem_size=mem_size)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.replay_plugin, *(plugins or [])], **kwargs)


def check_moram_replay_options(options) -> None:
    """Value checks of :class:`TextMoRAMReplay`'s own options given in ``options`` (MoRAM's are
    :class:`TextMoRAM`'s check, run too)."""
    if "mem_size" in options:
        check_positive_int("mem_size", options["mem_size"])


__all__ = ["REPLAY_MEM_SIZE", "TextMoRAM", "TextMoRAMLoadBalance", "TextMoRAMReplay", "check_moram_replay_options",
           "check_text_moram_options"]
