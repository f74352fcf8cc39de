"""Small helpers every room uses: atomic files, name lookups, argument checks, endless loaders,
the errors the command line reports without a traceback, the one clock (device synchronised).

Pure Python: this room imports nothing else of the package.
"""

from .checks import check_nonnegative_int, check_number, check_positive_int
from .clock import Stopwatch, now, synchronize
from .devices import resolve_device
from .errors import OptionError, UserError, user_message
from .files import (atomic_write, atomic_write_bytes, atomic_write_text, check_output_folder,
                    remove_temporaries)
from .iteration import cycle
from .names import check_names, lookup

__all__ = ["OptionError", "Stopwatch", "UserError", "atomic_write", "atomic_write_bytes", "atomic_write_text",
           "check_names", "check_nonnegative_int", "check_number", "check_output_folder",
           "check_positive_int", "cycle", "lookup", "now", "remove_temporaries", "resolve_device", "synchronize",
           "user_message"]
