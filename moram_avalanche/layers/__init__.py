"""Pure-torch adapter layers: no Avalanche, no open_clip.

The adapter-layer protocol and the one layer finder (:mod:`.base`); MoRAM's layer as one package
(:mod:`.moram`): the layer, the paper's six steps over its bank of atoms (:mod:`.moram.layer`,
:mod:`.moram.bank`), its options checked once and the paper's settings of them
(:mod:`.moram.config`), the routing-ablation variant (:mod:`.moram.variants`), the hand-written
backward (:mod:`.moram.backward`), the method written the obvious way (:mod:`.moram.naive`), and
the paths that run the six steps on each device (:mod:`.moram.paths`: the reference, which states
them once, the compiled CPU kernel, dense, Triton; one chooser, and one switch whose
``use_path`` forces one); and the baselines' layers: LoRA (:mod:`.lora`), CoDyRA's gated LoRA
(:mod:`.gated_lora`), MoE-LoRA (:mod:`.moe_lora`) and MoE-Adapters' experts and per-task routers
(:mod:`.moe_adapter`).
"""

from .base import AdapterLayer, GrowingAdapter, LinearWrapper, adapter_state_dict, find_layers, load_adapter_state_dict
from .gated_lora import GatedLoRALinear
from .lora import LoRALinear
from .moe_adapter import Expert, MoEAdapterMixture, add_router, num_routers, routing
from .moe_lora import MoELoRALinear
from .moram.backward import MoRAMFunction
from .moram.config import PAPER_CLIP, PAPER_LLM, PAPER_TRACE, RELEASE_TRACE, MoRAMLayerConfig
from .moram.layer import MoRAMLinear, routing_options
from .moram.naive import NaiveMoRAMLinear, naive_moram
from .moram.paths import PATHS, use_path
from .moram.variants import BALANCE_FORMS, MoRAMAblationLinear, moram_layer_type

__all__ = ["BALANCE_FORMS", "AdapterLayer", "Expert", "GatedLoRALinear", "GrowingAdapter", "LinearWrapper", "LoRALinear",
           "MoEAdapterMixture", "MoELoRALinear", "MoRAMAblationLinear", "MoRAMLayerConfig", "MoRAMFunction", "MoRAMLinear",
           "PAPER_CLIP", "PAPER_LLM", "PAPER_TRACE", "PATHS", "RELEASE_TRACE", "use_path",
           "NaiveMoRAMLinear", "adapter_state_dict", "add_router", "find_layers",
           "load_adapter_state_dict", "moram_layer_type", "naive_moram", "num_routers", "routing",
           "routing_options"]
