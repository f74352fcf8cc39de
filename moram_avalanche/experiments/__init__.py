"""The experiment application: run a strategy over a stream, checkpoint and resume, compare
strategies, summarise accuracy matrices into the paper's tables, draw them, and the demo.

Nothing below this room imports it (import-linter contract in setup.cfg).
"""

from .checkpoint import load_run_state, save_checkpoint, save_run_state
from .compare import run_comparison
from .fingerprints import model_fingerprints, weights_fingerprint
from .metrics import AccuracyMatrix, summarize
from .record import read_record
from .run import Setup, run_one, run_single
from .runner import run_stream

__all__ = ["AccuracyMatrix", "Setup", "load_run_state", "model_fingerprints", "read_record", "run_comparison", "run_one",
           "run_single", "run_stream", "save_checkpoint", "save_run_state", "summarize", "weights_fingerprint"]
