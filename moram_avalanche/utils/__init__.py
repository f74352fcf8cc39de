"""Small helpers every room uses: atomic files, name lookups, argument checks, endless loaders.

Pure Python: this room imports nothing else of the package.
"""

from .checks import check_positive_int
from .files import atomic_write, atomic_write_bytes, atomic_write_text
from .iteration import cycle
from .names import check_names, lookup

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "check_names",
           "check_positive_int", "cycle", "lookup"]
