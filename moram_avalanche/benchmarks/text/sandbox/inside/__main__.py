"""The sandboxed interpreter's entry point: ``python -I <this file>`` loads this folder as the
package ``moram_sandbox_harness`` (its modules import one another relatively) and runs
:func:`~.main.main`. Never imported."""

import importlib.util
import os
import sys

__all__ = ["load_harness"]


def load_harness():
    """This folder as a package of its own name (the package ``__init__`` says why)."""
    folder = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("moram_sandbox_harness", os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(spec.name + ".main")


if __name__ == "__main__":
    load_harness().main()
