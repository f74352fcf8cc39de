"""moram-avalanche: MoRAM (Mixture of Rank-1 Associative Memory, ICML 2026) for Avalanche.

The public face of the package. Every name is imported on first use, so ``import
moram_avalanche`` (and the command line's ``--help``) stays instant and pulls in neither
torch, Avalanche nor open_clip. The rooms behind it (see docs/architecture.md):

* :mod:`~moram_avalanche.layers` -- pure-torch adapter layers (MoRAMLinear, LoRA, MoE-LoRA,
  MoE-Adapters' experts), the adapter protocol and the one layer finder;
* :mod:`~moram_avalanche.clip` -- open_clip coupling: loading, attention split, injection;
* :mod:`~moram_avalanche.text` -- transformers and peft coupling: language models by name or
  folder, MoRAM's targets per architecture, MoRAM as a peft method (``MoRAMConfig``);
* :mod:`~moram_avalanche.algorithms` -- framework-free baseline math (DualGPM, DDAS, ...);
* :mod:`~moram_avalanche.strategies` -- Avalanche strategies, one file each, and their plugins;
* :mod:`~moram_avalanche.benchmarks` -- X-TAIL, MTIL and synthetic streams; the language-model
  streams (orders 1-6, a synthetic text stream) and their metrics;
* :mod:`~moram_avalanche.models` -- CLIP as an Avalanche model (``CLIPClassifier``);
* :mod:`~moram_avalanche.experiments` -- running, checkpointing, comparing, tables, the demo, the
  paper's figures from a run (``analyze``) and cost tables (``measure_cost``).
"""

import sys
from importlib import import_module

from .utils.after_import import after_import as _after_import
from .utils.moved import install as _install_moved_modules

__version__ = "0.7.15"
_install_moved_modules()  # 0.6's module paths, for one version (utils/moved.py)


def _register_with_peft(peft_module) -> None:
    """MoRAM as a peft method (``"MORAM"``) once peft is imported, before or after this package:
    ``PeftModel.from_pretrained`` of a saved MoRAM adapter then works after ``import moram_avalanche``
    alone (peft has no plugin registry: without that import it raises ``KeyError: 'MORAM'``)."""
    text = sys.modules.get(f"{__name__}.text")
    if text is not None and getattr(getattr(text, "__spec__", None), "_initializing", False):
        return  # the text room is importing peft itself, and registers MoRAM when it is done
    import_module(".text.peft_method", __name__)


_after_import("peft", _register_with_peft)

#: public name -> the module that defines it
_PUBLIC = {
    # layers (pure torch)
    "MoRAMLinear": "layers.moram.layer",
    "MoRAMAblationLinear": "layers.moram.variants",
    "LoRALinear": "layers.lora",
    "MoELoRALinear": "layers.moe_lora",
    "MoEAdapterMixture": "layers.moe_adapter",
    "AdapterLayer": "layers.base",
    "GrowingAdapter": "layers.base",
    "find_layers": "layers.base",
    "adapter_state_dict": "layers.base",
    "load_adapter_state_dict": "layers.base",
    # clip (open_clip coupling)
    "load_clip": "clip.load",
    "SplitAttention": "clip.attention",
    "split_attention": "clip.attention",
    "inject_moram": "clip.inject",
    "inject_lora": "clip.inject",
    "inject_moe_lora": "clip.inject",
    "inject_adapters": "clip.inject",
    "replace_linears": "clip.inject",
    "inject_moe_adapters": "clip.block_taps",
    "TextHead": "clip.head",
    # text (transformers and peft coupling)
    "MoRAMConfig": "text.peft_method",
    "start_task": "text.trainer",
    "MoRAMTaskCallback": "text.trainer",
    "load_language_model": "text.load",
    "MORAM_TARGET_MODULES": "text.targets",
    # algorithms
    "DDAS": "algorithms.ddas",
    "DualGPM": "algorithms.dualgpm",
    "DomainLR": "algorithms.schedules",
    # strategies and plugins
    "CLIPStrategy": "strategies.clip.loop",
    "StrategyNeeds": "strategies.needs",
    "MoRAM": "strategies.clip.moram",
    "MoRAMExternalRouter": "strategies.clip.moram",
    "MoRAMSelfActivation": "strategies.clip.moram",
    "MoRAMSelfTopK": "strategies.clip.moram",
    "MoRAMSelfTemperature": "strategies.clip.moram",
    "MoRAMSelfThreshold": "strategies.clip.moram",
    "MoRAMLoadBalance": "strategies.clip.moram",
    "ROUTING_ABLATIONS": "strategies.clip.moram",
    "MORAM": "strategies.moram_setting",
    "MoRAMSetting": "strategies.moram_setting",
    "DataParallel": "strategies.plugins.data_parallel",
    "IterationBudget": "strategies.plugins.budget",
    "IterationSchedule": "strategies.plugins.schedule",
    "BUILTINS": "strategies.clip.builtins",
    "ZeroShot": "strategies.clip.zeroshot",
    "FineTune": "strategies.clip.finetune",
    "FineTuneAlone": "strategies.clip.finetune_alone",
    "ZSCLFineTune": "strategies.clip.zscl_finetune",
    "WiSEFT": "strategies.clip.wiseft",
    "LwF": "strategies.clip.lwf",
    "LwFVR": "strategies.clip.lwf",
    "ZSCL": "strategies.clip.zscl",
    "MoEAdapters": "strategies.clip.moe_adapters",
    "InfLoRA": "strategies.clip.inflora",
    "SeqLoRA": "strategies.clip.lora_baselines",
    "MoELoRA": "strategies.clip.lora_baselines",
    "STRATEGIES": "strategies.registry",
    "get_strategy": "strategies.registry",
    "GrowthPlugin": "strategies.plugins.growth",
    "MoRAMPlugin": "strategies.plugins.moram",
    "LoadBalancePlugin": "strategies.plugins.load_balance",
    "InfLoRAPlugin": "strategies.plugins.inflora",
    "MoEAdaptersPlugin": "strategies.clip.plugins.moe_adapters",
    # models (CLIP as an Avalanche model)
    "CLIPClassifier": "models.classifier",
    # language models: the model, the generative loop and its strategies
    "LanguageModel": "models.language_model",
    "TextStrategy": "strategies.text.loop",
    "TextMoRAM": "strategies.text.moram",
    "TextMoRAMLoadBalance": "strategies.text.moram",
    "TextFineTune": "strategies.text.finetune",
    "TextSeqLoRA": "strategies.text.seq_lora",
    "TextIncLoRA": "strategies.text.inc_lora",
    "TextOLoRA": "strategies.text.olora",
    "TextMTL": "strategies.text.mtl",
    "TextInfLoRA": "strategies.text.inflora",
    "TextInfLoRAPlugin": "strategies.text.plugins.inflora",
    "OLoRAPlugin": "strategies.text.plugins.olora",
    "TaskLoRALinear": "layers.task_lora",
    # benchmarks
    "Domain": "benchmarks.images.clip_benchmark",
    "LabelSpace": "benchmarks.images.label_space",
    "clip_benchmark": "benchmarks.images.clip_benchmark",
    "xtail": "benchmarks.images.streams",
    "mtil": "benchmarks.images.streams",
    "mtil_5shot": "benchmarks.images.streams",
    "synthetic": "benchmarks.images.synthetic",
    "check_data": "benchmarks.images.check",
    "lm_cl": "benchmarks.text.stream",
    "text_benchmark": "benchmarks.text.stream",
    "synthetic_text": "benchmarks.text.synthetic",
    "check_text_data": "benchmarks.text.tasks",
    "exact_match": "benchmarks.text.metrics",
    "rouge_l": "benchmarks.text.metrics",
    "edit_similarity": "benchmarks.text.metrics",
    "sari": "benchmarks.text.metrics",
    "op_bwt": "benchmarks.text.metrics",
    "release_bwt": "benchmarks.text.metrics",
    "answer_letter_accuracy": "benchmarks.text.metrics",
    "option_letter_accuracy": "benchmarks.text.metrics",
    "math_accuracy": "benchmarks.text.metrics",
    "code_similarity": "benchmarks.text.metrics",
    "trace": "benchmarks.text.trace",
    "superni": "benchmarks.text.superni",
    "ap_ft": "benchmarks.text.metrics",
    "rouge_l_stemmed": "benchmarks.text.metrics",
    "TextReproduceSettings": "experiments.text.reproduce",
    # experiments
    "AccuracyMatrix": "experiments.metrics",
    "run_stream": "experiments.runner",
    "save_run_state": "experiments.checkpoint",
    "load_run_state": "experiments.checkpoint",
    "save_checkpoint": "experiments.checkpoint",
    "Setup": "experiments.run",
    "run_comparison": "experiments.compare",
    "run_one": "experiments.run",
    "run_single": "experiments.run",
    "read_record": "experiments.record",
    "StopOnDivergence": "strategies.plugins.divergence",
    "TrainingDiverged": "strategies.plugins.divergence",
    "run_demo": "experiments.clip.demo",
    "WandBLogger": "experiments.loggers",
    "accuracy_matrix_of": "experiments.metrics",
    "seed_everything": "experiments.seeding",
    "reproduce": "experiments.reproduce",
    "ReproduceSettings": "experiments.clip.reproduce",
    "analyze": "experiments.clip.analysis",
    "AnalysisOptions": "experiments.clip.analysis",
    "measure_cost": "experiments.clip.cost",
    "CostOptions": "experiments.clip.cost",
}


def __getattr__(name):
    if name in _PUBLIC:
        value = getattr(import_module(f".{_PUBLIC[name]}", __name__), name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_PUBLIC])


__all__ = ["__version__", *_PUBLIC]
