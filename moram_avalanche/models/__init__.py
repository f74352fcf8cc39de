"""CLIP as an Avalanche model: the room between the benchmarks and the strategies.

:class:`~.classifier.CLIPClassifier` is an Avalanche ``DynamicModule`` (it imports Avalanche,
so it cannot live in :mod:`moram_avalanche.clip`) that reads the label space a benchmark of
:mod:`moram_avalanche.benchmarks` declares; :mod:`.scoring` lays logits out in that space,
for it and for :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`.
:class:`~.language_model.LanguageModel` is the language-model family's: token loss for
training, greedy generation for evaluation.
"""

from .classifier import OMITTED, CLIPClassifier
from .language_model import LanguageModel
from .scoring import MASK_VALUE, masked_columns, own_domain_logits

__all__ = ["MASK_VALUE", "OMITTED", "CLIPClassifier", "LanguageModel", "masked_columns", "own_domain_logits"]
