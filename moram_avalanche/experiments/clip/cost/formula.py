"""Trainable parameters per adapted weight matrix, as a formula and a count.

The formula is read off the adapter layer itself: the shapes of the parameters that train in
a task, written with the layer's symbols -- ``d_in`` / ``d_out`` of the wrapped matrix (``d`` when
they are equal, or the width of a block-level adapter) and ``r`` (atoms or rank per task) --
other sizes as numbers, equal terms collected. So it states what the code trains (the paper's
Table "trainable parameters per task": LoRA ``r (d_in + d_out)``, MoRAM ``r d_in + k d_out``
activated of ``r (d_in + d_out)`` stored), never what a table says it should.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from torch import nn

#: the paper's formulas (tab:supp_params), for reference beside ours
PAPER_FORMULAS = {
    "LoRA": "r (d_in + d_out)",
    "MoE-LoRA (1 expert/task)": "r (d_in + d_out) + d_in",
    "MoE-Adapter (2 experts/task)": "2 (r (d_in + d_out) + d_in)",
    "CoDyRA": "r (d_in + d_out) + r",
    "O-LoRA": "r (d_in + d_out)",
    "LB-CL": "r (d_in + d_out) + r",
    "MoRAM": "r d_in + k d_out (activated)",
}


@dataclass
class Formula:
    """Trainable parameters of one adapter layer in one task."""

    text: str  # e.g. "r·d_in + r·d_out"
    values: Dict[str, int]  # the symbols' values, e.g. {"r": 16, "d_in": 768, "d_out": 3072}
    count: int  # the parameters it counts
    unit: str  # "weight matrix" or "block"


def layer_symbols(layer: nn.Module) -> List[Tuple[str, int]]:
    """The named sizes of an adapter layer, in the order they are tried on a dimension."""
    symbols: List[Tuple[str, int]] = []
    if hasattr(layer, "in_features") and hasattr(layer, "out_features"):
        if layer.in_features == layer.out_features:
            symbols.append(("d", int(layer.in_features)))
        else:
            symbols += [("d_in", int(layer.in_features)), ("d_out", int(layer.out_features))]
    elif hasattr(layer, "width"):
        symbols.append(("d", int(layer.width)))
    for attribute in ("atoms_per_task", "rank"):
        if isinstance(getattr(layer, attribute, None), int):
            symbols.append(("r", int(getattr(layer, attribute))))
            break
    return symbols


def trainable_formula(layer: nn.Module) -> Optional[Formula]:
    """The formula of the parameters of ``layer`` that require grad now (None if none do)."""
    symbols = layer_symbols(layer)
    terms: Counter = Counter()
    count = 0
    for param in layer.parameters():
        if not param.requires_grad:
            continue
        count += param.numel()
        factor, names = 1, []
        for size in param.shape:
            name = next((s for s, value in symbols if value == size), None)
            if name is None:
                factor *= int(size)
            else:
                names.append(name)
        terms[tuple(sorted(names, key=_order))] += factor
    if not count:
        return None
    parts = []
    for names, factor in sorted(terms.items(), key=lambda item: (-len(item[0]), [_order(n) for n in item[0]])):
        body = "·".join(names)
        parts.append(body if factor == 1 and body else f"{factor}·{body}" if body else str(factor))
    used = {name for names in terms for name in names}
    unit = "weight matrix" if hasattr(layer, "in_features") else "block"
    return Formula(" + ".join(parts), {s: v for s, v in symbols if s in used}, count, unit)


def _order(name: str) -> int:
    return ["r", "d", "d_in", "d_out"].index(name) if name in ("r", "d", "d_in", "d_out") else 9


def representative(formulas: Dict[str, Formula]) -> Optional[Tuple[str, Formula]]:
    """The layer to show: one whose input and output widths differ (the MLP's first matrix,
    where ``d_in`` and ``d_out`` are told apart), else the first."""
    for name, formula in formulas.items():
        if "d_in" in formula.values and "d_out" in formula.values:
            return name, formula
    return next(iter(formulas.items()), None)


__all__ = ["Formula", "PAPER_FORMULAS", "layer_symbols", "representative", "trainable_formula"]
