"""moram-avalanche: MoRAM (Mixture of Rank-1 Associative Memory, ICML 2026) for Avalanche.

Importing the package is light: the torch-only pieces are imported here; names that need
avalanche-lib (strategies, metrics, benchmarks) are imported on first use.
"""

from importlib import import_module

from .atoms import MoRAMLinear
from .clip.attention import SplitAttention
from .clip.inject import inject_moram, replace_linears
from .clip.load import load_clip

__version__ = "0.1.0"

_LAZY = {
    "CLIPStrategy": "strategies",
    "MoRAM": "strategies",
    "MoRAMPlugin": "strategies",
    "FineTune": "strategies",
    "ZeroShot": "strategies",
    "WiSEFT": "strategies",
    "LwF": "strategies",
    "LwFVR": "strategies",
    "ZSCL": "strategies",
    "InfLoRA": "strategies",
    "InfLoRAPlugin": "strategies",
    "SeqLoRA": "strategies",
    "MoELoRA": "strategies",
    "MoRAMExternalRouter": "strategies",
    "MoRAMSelfActivation": "strategies",
    "MoRAMSelfTopK": "strategies",
    "MoRAMSelfTemperature": "strategies",
    "MoRAMSelfThreshold": "strategies",
    "MoRAMLoadBalance": "strategies",
    "LoadBalancePlugin": "strategies",
    "ROUTING_ABLATIONS": "strategies",
    "MoELoRALinear": "moe_lora",
    "MoEAdapters": "strategies",
    "inject_moe_adapters": "clip.moe_adapters",
    "DDAS": "ddas",
    "AccuracyMatrix": "metrics",
    "Domain": "benchmarks",
    "clip_benchmark": "benchmarks",
    "synthetic": "benchmarks.synthetic",
    "xtail": "benchmarks",
    "mtil": "benchmarks",
    "check_data": "benchmarks.check",
    "run_stream": "runner",
    "save_run_state": "checkpoint",
    "load_run_state": "checkpoint",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MoRAMLinear", "SplitAttention", "inject_moram", "replace_linears", "load_clip",
           "__version__", *_LAZY]
