"""One run of ``reproduce`` as the run path takes it: its :class:`~moram_avalanche.experiments.run.Setup`
(:func:`run_setup`), whose comparison folder holds the run."""

from __future__ import annotations

from ..run import Setup
from .runs import Run, run_options, run_settings


def run_setup(run: Run, settings) -> Setup:
    """The :class:`~moram_avalanche.experiments.run.Setup` of one run: the model of the
    settings' family, the protocol's stream, the run's options (with what the protocol adds once
    the model's transform is known), its record and seed."""
    options, protocol = run_options(run, settings), run.protocol
    return Setup(make_model=lambda: settings.load_model(run), make_benchmark=protocol.make_benchmark(run, settings),
                 options=lambda name, eval_transform: protocol.run_arguments(run, settings, options, eval_transform),
                 settings=run_settings(run, settings), seed=run.seed, device=settings.device,
                 **settings.setup_arguments())


__all__ = ["run_setup"]
