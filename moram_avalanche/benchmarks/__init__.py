"""Continual-learning streams for CLIP, selectable by name (``--benchmark``)."""

from ..registry import lookup
from .clip_benchmark import LABEL_SPACES, Domain, clip_benchmark, label_offsets


def _synthetic(data_root=None, **kwargs):
    from .synthetic import synthetic

    return synthetic(**kwargs)


#: ``--benchmark`` name -> builder(data_root, train_transform=..., eval_transform=..., ...)
BENCHMARKS = {"synthetic": _synthetic}


def get_benchmark(name: str):
    """The builder registered as ``name``; a clear error for unknown names."""
    return lookup(BENCHMARKS, name, "benchmark")


__all__ = ["BENCHMARKS", "Domain", "LABEL_SPACES", "clip_benchmark", "get_benchmark", "label_offsets"]
