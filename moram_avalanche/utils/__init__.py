"""Small helpers every room uses: atomic files, name lookups, argument checks, endless loaders,
the errors the command line reports without a traceback, the one clock (device synchronised),
every global random generator's state (read, set, kept).

Pure Python: this room imports nothing else of the package.
"""

from .checks import check_nonnegative_int, check_number, check_positive_int
from .clock import Stopwatch, now, synchronize
from .devices import check_device, resolve_device
from .errors import OptionError, UserError, user_message
from .files import atomic_write, atomic_write_bytes, atomic_write_text, check_output_folder, remove_temporaries
from .iteration import cycle
from .lock import FolderLockedError, RunFolderLock
from .memory import atom_bank_bytes, check_atom_banks_fit, check_fits
from .names import check_names, lookup
from .paths import PathError, check_compare_path, check_input_path, check_run_path, is_new_folder
from .random_state import kept_rng_state, rng_state, set_rng_state

__all__ = ["FolderLockedError", "OptionError", "PathError", "RunFolderLock", "Stopwatch", "UserError",
           "atom_bank_bytes", "atomic_write", "atomic_write_bytes", "atomic_write_text", "check_atom_banks_fit",
           "check_compare_path", "check_device", "check_fits", "check_input_path", "check_names",
           "check_nonnegative_int", "check_number", "check_output_folder", "check_positive_int",
           "check_run_path", "cycle", "is_new_folder", "kept_rng_state", "lookup", "now", "remove_temporaries",
           "resolve_device", "rng_state", "set_rng_state", "synchronize",
           "user_message"]
