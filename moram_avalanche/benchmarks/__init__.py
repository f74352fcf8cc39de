"""Continual-learning streams for CLIP, selectable by name (``--benchmark``).

``xtail`` and ``mtil`` read the datasets from disk (:mod:`.streams`, :mod:`.domains`);
``synthetic`` draws an offline stream (:mod:`.synthetic`).
"""

from ..utils.names import lookup
from .clip_benchmark import LABEL_SPACES, Domain, clip_benchmark, label_offsets
from .images import BadImageError, BadImages
from .readers import DataError
from .streams import MTIL_ORDERS, XTAIL_ORDERS, mtil, xtail

#: options of the disk-backed streams (``--order``, ``--shots``, ...)
STREAM_OPTIONS = ("order", "shots", "seed", "prompts", "on_bad_image")
#: the ones the synthetic stream takes too (``--order shapes,digits``, ``--data-seed``)
SYNTHETIC_OPTIONS = ("order", "seed")


def _synthetic(data_root=None, **kwargs):
    from .synthetic import synthetic

    unsupported = sorted(k for k in kwargs if k in STREAM_OPTIONS and k not in SYNTHETIC_OPTIONS)
    if unsupported:
        raise ValueError(f"the synthetic benchmark takes no {unsupported} options")
    if isinstance(kwargs.get("order"), str):  # one domain
        kwargs["order"] = (kwargs["order"],)
    return synthetic(**kwargs)


#: ``--benchmark`` name -> builder(data_root, train_transform=..., eval_transform=..., ...)
BENCHMARKS = {"synthetic": _synthetic, "xtail": xtail, "mtil": mtil}


def get_benchmark(name: str):
    """The builder registered as ``name``; a clear error for unknown names."""
    return lookup(BENCHMARKS, name, "benchmark")


__all__ = ["BENCHMARKS", "BadImageError", "BadImages", "DataError", "Domain", "LABEL_SPACES",
           "MTIL_ORDERS", "STREAM_OPTIONS", "SYNTHETIC_OPTIONS", "XTAIL_ORDERS", "clip_benchmark", "get_benchmark",
           "label_offsets", "mtil", "xtail"]
