"""moram-avalanche: MoRAM (Mixture of Rank-1 Associative Memory, ICML 2026) for Avalanche.

Importing the package is light: torch-only pieces are imported here; anything that needs
avalanche-lib or open_clip is imported when first used.
"""

from .atoms import MoRAMLinear
from .clip.attention import SplitAttention
from .clip.inject import inject_moram, replace_linears
from .clip.load import load_clip

__version__ = "0.1.0"

__all__ = [
    "MoRAMLinear",
    "SplitAttention",
    "inject_moram",
    "replace_linears",
    "load_clip",
    "__version__",
]
