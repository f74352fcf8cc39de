"""The offline demo, written once for every family: a tiny pre-trained model and its strategies on a
synthetic stream, as one resumable comparison.

A family's demo record (:class:`~moram_avalanche.experiments.family.Demo`: CLIP's tiny CLIP on
the synthetic image stream, :data:`.clip.demo.DEMO`; the language models' tiny T5 on the synthetic
text stream, :data:`.text.demo.TEXT_DEMO`) says how its model is pre-trained (once, then cached), what its runs
read and which tables it writes; :func:`run_family_demo` runs it through
:func:`~moram_avalanche.experiments.compare.run_comparison`: every strategy writes its run
folder under ``out_dir/<strategy>/`` and its TensorBoard log under ``out_dir/tensorboard/``, and
the table, summary and matrices are written at the top. Run again, finished strategies are not
run again and others join the table; a folder holding this demo made with other settings is
started over, with a warning; a folder holding other runs (another family's demo, a comparison)
is refused, since starting over would delete them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, Optional, Sequence

from ..utils.cache import default_cache_dir
from .family import Demo

logger = logging.getLogger(__name__)


def run_family_demo(demo: Demo, out_dir, *, cache_dir=None, config=None, strategies: Optional[Sequence[str]] = None,
                    progress: bool = True, device: str = "cpu") -> Dict[str, dict]:
    """Run a family's ``demo`` into ``out_dir``; returns ``{strategy: results.json content +
    {"memory": ..., "time": ...}}``.

    ``config``: the demo's settings (default: its full-size ones); ``strategies``: the names to
    compare (default: the demo's); ``cache_dir``: where the pre-trained model is cached (default:
    :func:`default_cache_dir`).
    """
    from ..utils.devices import resolve_device
    from .compare import run_comparison

    config = config or demo.config()
    device = resolve_device(device)
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    with demo.context(config):
        setup = demo.prepare(config, cache_dir, device, progress)
        resume = resumes(out_dir, setup, demo)
        return run_comparison(setup, strategies or demo.strategies, out_dir, progress=progress, resume=resume)


def resumes(out_dir, setup, demo: Demo) -> bool:
    """Whether to resume ``demo`` in ``out_dir``: True when it is new or holds this demo's runs;
    False (start over, with a warning) when it holds this demo made with other settings; a
    ValueError when it holds runs of another command (their records have no ``run.<demo.key>``),
    which starting over would delete."""
    from .compare import check_comparison
    from .run import recorded_runs

    others = sorted(name for name, record in recorded_runs(out_dir).items()
                    if demo.key not in dict(record.get("run") or {}))
    if others:
        raise ValueError(f"{out_dir} holds runs that are not {demo.title}'s ({', '.join(others)}): give "
                         f"{demo.title} another --out (default: {demo.out})")
    try:
        check_comparison(out_dir, setup)
        return True
    except ValueError:
        logger.warning("%s holds a demo made with other settings: starting it over", out_dir)
        return False


__all__ = ["default_cache_dir", "resumes", "run_family_demo"]
