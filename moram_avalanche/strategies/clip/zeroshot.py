"""ZeroShot: the pre-trained CLIP model, never trained (the reference row of every table)."""

from __future__ import annotations

from ..needs import StrategyNeeds
from .loop import CLIPStrategy


class ZeroShot(CLIPStrategy):
    """Evaluates CLIP as it is: ``train`` runs the experience's callbacks with 0 iterations.

    All parameters are frozen, so the text embeddings are computed once and cached.
    """

    needs = StrategyNeeds(trains=False)
    check_values = staticmethod(lambda options: _check_untrained(options))

    def __init__(self, *, model, tokenizer, **kwargs):
        kwargs.pop("iterations", None)
        model.requires_grad_(False)
        super().__init__(model=model, tokenizer=tokenizer, iterations=0, **kwargs)


def _check_untrained(options) -> None:
    if options.get("iterations"):
        raise ValueError(f"ZeroShot does not train: leave iterations unset (got {options['iterations']!r})")


__all__ = ["ZeroShot"]
