"""Everything that knows open_clip's module tree: loading, attention split, injection, text head.

No Avalanche here; pure-torch layers come from :mod:`moram_avalanche.layers`.
"""

from .attention import ATTENTION_SPLITTERS, SplitAttention, split_attention
from .block_taps import MixtureAdd, StreamTap, inject_moe_adapters
from .head import TextHead
from .inject import (
                     TARGET_PATHS,
                     inject_adapters,
                     inject_lora,
                     inject_moe_lora,
                     inject_moram,
                     replace_linears,
                     target_linear_names,
)
from .load import WeightsUnavailableError, load_clip
from .towers import ENCODERS, Block, blocks, encoder_module

__all__ = ["ATTENTION_SPLITTERS", "ENCODERS", "TARGET_PATHS", "Block", "MixtureAdd", "SplitAttention",
           "StreamTap", "TextHead", "WeightsUnavailableError", "blocks", "encoder_module",
           "inject_adapters", "inject_lora", "inject_moe_adapters", "inject_moe_lora", "inject_moram",
           "load_clip", "replace_linears", "split_attention", "target_linear_names"]
