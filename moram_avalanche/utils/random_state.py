"""Every global random generator a run draws from, read, set and kept, in one place.

A run checkpoint stores the state of torch's CPU generator, every CUDA device's, Python's
``random`` and NumPy's global generator (:func:`rng_state`), and a resumed run sets them back
(:func:`set_rng_state`), so that it draws the numbers an uninterrupted run draws. That holds only
if what a resumed run does that an uninterrupted one did at another time, or not at all, draws
nothing from them: work done once per process (an embedding grown when tokens are first added,
a kernel built before the first experience), or sampling from a seed of its own. Such work runs
inside :func:`kept_rng_state`, which puts every generator back as it found it.

torch is imported when a state is read or set, not when this module is (the room stays light).
"""

from __future__ import annotations

import contextlib
import random
from typing import Iterator


def rng_state(*, cuda: bool = True) -> dict:
    """``{"torch", "python", "numpy"[, "cuda"]}``: the state of every global generator, tensors and
    plain values only (a checkpoint loads it with ``torch.load(weights_only=True)``). ``cuda``:
    every CUDA device's state when CUDA is available (True, initialising it) or only when it is
    initialised already (False: a process that never used the GPU does not start it)."""
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)}}
    if torch.cuda.is_available() if cuda else torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Set every global generator to ``state`` (:func:`rng_state`'s); CUDA's when it holds one and
    CUDA is available."""
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def kept_rng_state() -> Iterator[None]:
    """Every global generator put back on exit as it was on entry (module docstring): what the
    block draws, or seeds (``torch.manual_seed`` seeds every CUDA device), leaves no trace.
    ``torch.random.fork_rng`` keeps torch's alone, and of the CUDA devices only those it is given."""
    state = rng_state(cuda=False)
    try:
        yield
    finally:
        set_rng_state(state)


__all__ = ["kept_rng_state", "rng_state", "set_rng_state"]
