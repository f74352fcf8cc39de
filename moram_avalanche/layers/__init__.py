"""Pure-torch adapter layers: no Avalanche, no open_clip.

The adapter-layer protocol and the one layer finder (:mod:`.base`), MoRAM's options checked once
and the paper's settings of them (:mod:`.moram_config`), MoRAM's layer, the paper's
six steps (:mod:`.moram`) over its bank of atoms (:mod:`.moram_bank`), run on the path chosen per
device (:mod:`.moram_paths`: ``use_path`` forces one): the CPU's sparse paths with their
hand-written backward (:mod:`.moram_fused`) and compiled CPU routing (:mod:`.routing_kernel`,
built by ``routing_kernel.load()``, PyTorch until then), the GPU path without host
synchronisation (:mod:`.moram_dense`) and its routing fused by Triton (:mod:`.moram_triton`,
kernels in :mod:`.triton_routing`, imported on first use), the routing-ablation
variant (:mod:`.moram_variants`), the method written the obvious way (:mod:`.naive`), and the
baselines' layers: LoRA (:mod:`.lora`), CoDyRA's gated LoRA (:mod:`.gated_lora`), MoE-LoRA (:mod:`.moe_lora`) and MoE-Adapters' experts
and per-task routers (:mod:`.moe_adapter`).
"""

from .base import (AdapterLayer, GrowingAdapter, LinearWrapper, adapter_state_dict, find_layers,
                   load_adapter_state_dict)
from .gated_lora import GatedLoRALinear
from .lora import LoRALinear
from .moe_adapter import Expert, MoEAdapterMixture, add_router, num_routers, routing
from .moe_lora import MoELoRALinear
from .moram import MoRAMLinear, routing_options
from .moram_config import PAPER_CLIP, PAPER_LLM, PAPER_TRACE, RELEASE_TRACE, MoRAMLayerConfig
from .moram_backward import MoRAMFunction
from .moram_paths import PATHS, use_path
from .moram_variants import BALANCE_FORMS, MoRAMAblationLinear, moram_layer_type
from .naive import NaiveMoRAMLinear, naive_moram

__all__ = ["BALANCE_FORMS", "AdapterLayer", "Expert", "GatedLoRALinear", "GrowingAdapter", "LinearWrapper", "LoRALinear",
           "MoEAdapterMixture", "MoELoRALinear", "MoRAMAblationLinear", "MoRAMLayerConfig", "MoRAMFunction", "MoRAMLinear",
           "PAPER_CLIP", "PAPER_LLM", "PAPER_TRACE", "PATHS", "RELEASE_TRACE", "use_path",
           "NaiveMoRAMLinear", "adapter_state_dict", "add_router", "find_layers",
           "load_adapter_state_dict", "moram_layer_type", "naive_moram", "num_routers", "routing",
           "routing_options"]
