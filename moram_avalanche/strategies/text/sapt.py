"""``sapt``: SAPT-LoRA (Zhao et al., ACL 2024, "SAPT: A Shared Attentive Framework for
Parameter-Efficient Continual Learning of Large Language Models") on a T5 model, the MoRAM
paper's ``tab:sapt`` row "SAPT".

What runs (facts from circle-hit/SAPT, its T5 code and ``gen_script_superni_t5.py``):

* shared attentive learning and selection -- one LoRA block per task on the query and value
  projections of every attention block, mixed by an attention of a max-pooled, projected input
  embedding over one key per task (:mod:`moram_avalanche.layers.sapt`);
* attentive reflection -- from the second task on, a KL term pulls the attention weights of
  SAPT's pseudo-samples of each earlier task towards the weights that task ended with
  (:mod:`moram_avalanche.strategies.text.plugins.sapt`). The pseudo-samples are SAPT's generator's
  output, shipped by SAPT (``generated_data/lora_gen_superni_t5``): this strategy *reads* them
  from ``pseudo_data_root`` (:mod:`moram_avalanche.benchmarks.text.superni_pseudo`), it does not
  generate them -- so it runs on SAPT's SuperNI tasks (or any stream whose task names have a
  folder there);
* defaults (:class:`SAPTConfig`, which checks them): SAPT's SuperNI T5 script: LoRA rank 4,
  ``lora_alpha`` 32 (scale 8), dropout 0, ``kl_ratio`` 0.5, temperature ``sqrt(d_model)``
  (``attn_temperature = 1``), query width 100; the loop's (lr 3e-4, 8 x 4 prompts) come from the
  SuperNI stream's settings (:mod:`moram_avalanche.experiments.text.recipes`).

Where it differs from SAPT's runs: the reflection targets are the mean weights over the task's
training prompts, not its ``dev`` split (not read here); SAPT's 100 epochs with the best dev
checkpoint are the stream's one epoch without selection (every row of the table alike); SAPT's
LLaMA variant (a causal model, ``src/llama_prompt.py``) is not built: a causal model is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Optional

from ...layers.base import find_layers
from ...layers.replace import replace_linears
from ...layers.sapt import SAPT_QUERY_HIDDEN, SAPTLoRALinear, SAPTRouter
from ...utils.checks import check_number, check_positive_int
from ..needs import StrategyNeeds
from .adapters import Targets, lora_targets, wrap
from .loop import TextStrategy
from .plugins.sapt import SAPT_KL_RATIO, SAPTPlugin
from .settings import given_config


@dataclass(frozen=True)
class SAPTConfig:
    """SAPT's options (defaults: SAPT's SuperNI T5 script, :data:`SAPT_SETTING`).

    Attributes:
        rank: each task's LoRA rank (``gen_script_superni_t5.py``: ``lora_r = 4``).
        scale: the factor on the LoRA blocks, ``lora_alpha / r`` (``lora_alpha = 32``: 32 / 4).
        dropout: on the LoRA path's input (``lora_dropout = 0.``).
        kl_ratio: the reflection term's weight (:data:`~.plugins.sapt.SAPT_KL_RATIO`); 0 leaves
            attentive reflection out.
        temperature: of the attention over the tasks; None: ``sqrt(d_model)``
            (:func:`~moram_avalanche.layers.sapt.sapt_temperature`).
        query_hidden: the query projection's width (:data:`~moram_avalanche.layers.sapt.SAPT_QUERY_HIDDEN`).

    Checked once, when it is made: a ValueError naming the option, what was given and SAPT's value.
    """

    rank: int = 4
    scale: float = 32 / 4
    dropout: float = 0.0
    kl_ratio: float = SAPT_KL_RATIO
    temperature: Optional[float] = None
    query_hidden: int = SAPT_QUERY_HIDDEN

    def __post_init__(self) -> None:
        check_positive_int("rank", self.rank)
        check_positive_int("query_hidden", self.query_hidden)
        check_number("scale", self.scale, hint=f"SAPT: lora_alpha / r = {SAPTConfig.scale:g}")
        check_number("dropout", self.dropout, low=0, high=1, high_open=True, hint="SAPT: 0")
        check_number("kl_ratio", self.kl_ratio, low=0, hint=f"SAPT: {SAPT_KL_RATIO} (0: no reflection)")
        if self.temperature is not None:
            check_number("temperature", self.temperature, low=0, low_open=True, hint="SAPT: sqrt(d_model), None")


#: SAPT's SuperNI T5 setting: the defaults of :class:`SAPTConfig`
SAPT_SETTING = SAPTConfig()
#: 0.6's name of SAPT's LoRA (:data:`SAPT_SETTING`'s rank, scale and dropout), a read-only view; goes in 0.8
SAPT_LORA = MappingProxyType({name: getattr(SAPT_SETTING, name) for name in ("rank", "scale", "dropout")})


def check_sapt_options(options) -> None:
    """Value checks of :class:`TextSAPT`'s own options given in ``options``: its configuration
    (:class:`SAPTConfig`) and, when it reflects, where the pseudo-samples are (a folder's name)."""
    config = given_config(SAPTConfig, options)
    root = options.get("pseudo_data_root", "unset")
    if root != "unset" and config.kl_ratio > 0 and not isinstance(root, str):
        raise ValueError(f"sapt: pseudo_data_root must be the folder of SAPT's pseudo-samples "
                         f"(generated_data/lora_gen_superni_t5 of circle-hit/SAPT), got {root!r}; or kl_ratio=0 to "
                         "run without attentive reflection")


#: the refusal of a reflecting ``sapt`` without ``pseudo_data_root``
NO_PSEUDO_ROOT = ("sapt needs pseudo_data_root: the folder of SAPT's pseudo-samples "
                  "(generated_data/lora_gen_superni_t5 of circle-hit/SAPT); or kl_ratio=0 to run "
                  "without attentive reflection")


def check_pseudo_samples(options, benchmark) -> None:
    """One-line errors, before anything is built, for the pseudo-samples a reflecting ``sapt``
    (``kl_ratio`` > 0) will read on ``benchmark``: ``pseudo_data_root`` given and a folder, a
    readable file for every task reflection reads (each task but the last: task ``i`` reflects
    on the tasks before it), and none of them the stream's real data -- a task whose every
    training prompt is among its "pseudo-samples" was read from the data itself (e.g.
    ``pseudo_data_root`` at ``CL_Benchmark``, whose layout is the same), and SAPT's reflection would
    replay real examples of the earlier tasks, which SAPT's rehearsal-free setting never sees."""
    from ...benchmarks.text.superni_pseudo import PSEUDO_FIX, check_pseudo_data, pseudo_root, read_pseudo_prompts

    kl_ratio = options.get("kl_ratio")
    if (SAPT_SETTING.kl_ratio if kl_ratio is None else kl_ratio) == 0:
        return
    root = options.get("pseudo_data_root")
    if root is None:
        raise ValueError(NO_PSEUDO_ROOT)
    pseudo_root(root)  # a folder
    stream = list(benchmark.train_stream)
    names = [getattr(experience, "task_name", None) for experience in stream[:-1]]
    if any(name is None for name in names):
        return  # a stream without task names: read by name at its first task (SAPTPlugin)
    for report in check_pseudo_data(root, names):
        if not report.usable:
            raise ValueError(f"sapt: pseudo-samples of task {report.name!r} (read when the tasks after it train) "
                             f"{report.status} -- {' '.join(report.message.split())}")
    tasks = {task.name: task for task in getattr(benchmark, "tasks", ())}
    for name in names:
        if name not in tasks:
            continue
        real = {prompt for prompt, _ in tasks[name].train}
        if real <= set(read_pseudo_prompts(root, name)):
            raise ValueError(f"sapt: pseudo_data_root {root} holds the stream's own training prompts of task "
                             f"{name!r} (all {len(real)} of them) as its pseudo-samples: it is the real data, and "
                             f"reflection would replay real examples of the earlier tasks; {PSEUDO_FIX} (not "
                             "CL_Benchmark)")


def _encoder(model):
    get = getattr(model.model, "get_encoder", None)
    if not model.seq2seq or not callable(get):
        raise ValueError(f"sapt routes by the encoder's input (SAPT's T5 code); got a causal model "
                         f"({getattr(model.config, 'model_type', type(model.model).__name__)}): SAPT's LLaMA variant "
                         "is not built here -- use a T5 model")
    return get()


def install_router(model, hidden: int, temperature: Optional[float]) -> SAPTRouter:
    """The model's :class:`SAPTRouter` (made and attached to its encoder as ``sapt_router`` if it
    has none), with a pre-hook on the encoder that sets the batch's attention weights from its
    input's embeddings before every encoder pass (the decoder reuses them)."""
    encoder = _encoder(model)
    router = getattr(encoder, "sapt_router", None)
    if router is None:
        embed = model.model.get_input_embeddings()
        router = SAPTRouter(embed.embedding_dim, hidden, temperature).to(embed.weight.device)
        encoder.sapt_router = router
    handle = getattr(router, "hook_handle", None)
    if handle is not None:
        handle.remove()
    embed = model.model.get_input_embeddings()

    def select(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        embeddings = kwargs.get("inputs_embeds") if ids is None else embed(ids)
        router.select(embeddings)

    router.hook_handle = encoder.register_forward_pre_hook(select, with_kwargs=True)
    return router


class TextSAPT(TextStrategy):
    """SAPT-LoRA with attentive reflection (module docstring).

    Args (besides TextStrategy's): pseudo_data_root (SAPT's ``generated_data/lora_gen_superni_t5``;
    required unless ``kl_ratio`` is 0), rank (4), scale (8), dropout (0), kl_ratio (0.5),
    temperature (None: ``sqrt(d_model)``), query_hidden (100), target_modules (None: query and
    value, SAPT's ``lora_q`` / ``lora_v``), seed (of the pseudo-samples' draw).
    """

    #: one process: the pseudo-samples' draw and the router are not synchronised across processes
    needs = StrategyNeeds(data_parallel=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_sapt_options(options))

    @classmethod
    def check_benchmark(cls, options, benchmark) -> None:
        """The loop's checks against the stream, then the pseudo-samples reflection reads
        (:func:`check_pseudo_samples`), before the model loads."""
        super().check_benchmark(options, benchmark)
        check_pseudo_samples(options, benchmark)

    # defaults: SAPT's SuperNI T5 script, written once (SAPTConfig)
    def __init__(self, *, model, tokenizer=None, pseudo_data_root: Optional[str] = None,
                 rank: int = SAPT_SETTING.rank, scale: float = SAPT_SETTING.scale,
                 dropout: float = SAPT_SETTING.dropout, kl_ratio: float = SAPT_SETTING.kl_ratio,
                 temperature: Optional[float] = SAPT_SETTING.temperature,
                 query_hidden: int = SAPT_SETTING.query_hidden, target_modules: Targets = None, seed: int = 0,
                 plugins=None, **kwargs):
        from ...benchmarks.text.superni_pseudo import pseudo_root, read_pseudo_prompts

        #: the options, checked once (:class:`SAPTConfig`)
        self.config = config = SAPTConfig(rank, scale, dropout, kl_ratio, temperature, query_hidden)
        if config.kl_ratio > 0:  # what reflection reads, before anything is built
            if pseudo_data_root is None:
                raise ValueError(NO_PSEUDO_ROOT)
            pseudo_root(pseudo_data_root)  # a one-line error now when it is not a folder
        model = wrap(model, tokenizer)
        router = install_router(model, config.query_hidden, config.temperature)
        if not find_layers(model, SAPTLoRALinear):
            names = lora_targets(model, target_modules)
            model.requires_grad_(False)
            replace_linears(model.model, names, lambda linear: SAPTLoRALinear(
                linear, router.selection, config.rank, scale=config.scale, dropout=config.dropout))
        self.router = router
        reader = lru_cache(maxsize=None)(lambda task: read_pseudo_prompts(pseudo_data_root, task))
        self.sapt_plugin = SAPTPlugin(router, reader, config.kl_ratio, seed)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.sapt_plugin, *(plugins or [])], **kwargs)


__all__ = ["NO_PSEUDO_ROOT", "SAPTConfig", "SAPT_LORA", "SAPT_SETTING", "TextSAPT", "check_pseudo_samples",
           "check_sapt_options", "install_router"]
