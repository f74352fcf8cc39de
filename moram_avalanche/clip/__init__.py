"""Everything that knows open_clip's module tree (no Avalanche here)."""

from .attention import SplitAttention
from .inject import inject_moram, replace_linears, split_attention, target_linear_names
from .load import WeightsUnavailableError, load_clip

__all__ = [
    "SplitAttention",
    "inject_moram",
    "replace_linears",
    "split_attention",
    "target_linear_names",
    "load_clip",
    "WeightsUnavailableError",
]
