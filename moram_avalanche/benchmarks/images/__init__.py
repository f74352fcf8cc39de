"""The image streams of the CLIP family: X-TAIL and MTIL read from disk (:mod:`.streams`,
:mod:`.domains`, :mod:`.readers` at the room's top), the offline synthetic stream
(:mod:`.synthetic`), one Avalanche experience per domain (:mod:`.clip_benchmark`), the label space
a sample is scored in (:mod:`.label_space`), prompts and class names of the protocols, few-shot
sampling, reference image and sentence sets (:mod:`.reference_sets`), what ``check-data`` reads
(:mod:`.check`, :mod:`.validate`) and the lazily loaded image datasets (:mod:`.datasets`).
Nothing here imports the text wing."""

# 0.6's benchmarks/images.py is this wing's datasets module: its names stay importable from here
from .datasets import (
                       ALPHA_MODES,
                       BAD_IMAGE_POLICIES,
                       IMAGE_ERRORS,
                       PLAIN_MODES,
                       SIXTEEN_BIT_MODES,
                       BadImageError,
                       BadImages,
                       ImageArrays,
                       ImageFiles,
                       UnsupportedImageError,
                       read_rgb,
                       to_rgb,
)

__all__ = ["ALPHA_MODES", "BAD_IMAGE_POLICIES", "IMAGE_ERRORS", "PLAIN_MODES", "SIXTEEN_BIT_MODES", "BadImageError",
           "BadImages", "ImageArrays", "ImageFiles", "UnsupportedImageError", "read_rgb", "to_rgb"]
