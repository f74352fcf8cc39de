"""The image streams of the CLIP family: X-TAIL and MTIL read from disk (:mod:`.streams`,
:mod:`.domains`, :mod:`.readers` at the room's top), the offline synthetic stream
(:mod:`.synthetic`), one Avalanche experience per domain (:mod:`.clip_benchmark`), the label space
a sample is scored in (:mod:`.label_space`), prompts and class names of the protocols, few-shot
sampling, reference image and sentence sets (:mod:`.reference_sets`), what ``check-data`` reads
(:mod:`.check`, :mod:`.validate`, :mod:`.data_checks`), the lazily loaded image datasets
(:mod:`.datasets`) and the wing's entries in the benchmark registry (:mod:`.entries`).
Nothing here imports the text wing; importing the wing imports none of its modules (the registry
lists its benchmarks without NumPy or PIL).
"""

from importlib import import_module

#: 0.6's benchmarks/images.py is this wing's datasets module: its names stay importable from here
#: (imported on first use)
_DATASETS = ("ALPHA_MODES", "BAD_IMAGE_POLICIES", "IMAGE_ERRORS", "PLAIN_MODES", "SIXTEEN_BIT_MODES",
             "BadImageError", "BadImages", "ImageArrays", "ImageFiles", "UnsupportedImageError", "read_rgb", "to_rgb")


def __getattr__(name: str):
    if name in _DATASETS:
        value = getattr(import_module(".datasets", __name__), name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_DATASETS])


__all__ = list(_DATASETS)
