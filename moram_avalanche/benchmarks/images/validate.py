"""What makes a domain read from disk unusable, found by one function that the stream builders
and ``check-data`` share (so they cannot disagree).

:func:`domain_problems` lists every problem of a domain at once -- empty splits, classes
without training images (an empty class folder, a class listed without a folder), test classes
absent from training, labels outside the class list, two labels with one class name (one of
them can never be predicted) -- each naming the domain, the split, the class and, where the
layout has one, the class's folder. :func:`check_domain` raises them together as one
:class:`~moram_avalanche.benchmarks.readers.DataError`.
"""

from __future__ import annotations

from collections import Counter
from typing import List

from ..readers import DataError

SHOWN = 5  # classes named per problem


def _names(items, classnames) -> str:
    shown = [f"{label} {classnames[label]!r}" if 0 <= label < len(classnames) else str(label)
             for label in items[:SHOWN]]
    return ", ".join(shown) + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def domain_problems(data) -> List[str]:
    """Every problem of ``data`` (a :class:`~moram_avalanche.benchmarks.images.domains.DomainData`),
    as one sentence each; empty when the domain can be trained and evaluated."""
    problems = []
    classnames = tuple(data.classnames)
    sources = tuple(getattr(data, "class_sources", None) or ())
    if not classnames:
        return [f"{data.name}: no classes found under {data.folder}"]
    counts = {}
    for split in ("train", "test"):
        dataset = getattr(data, split)
        targets = [int(t) for t in getattr(dataset, "targets", [])]
        counts[split] = Counter(targets)
        if not targets:
            problems.append(f"{data.name} {split}: no images (the domain is empty) under {data.folder}")
            continue
        stray = sorted(t for t in counts[split] if not 0 <= t < len(classnames))
        if stray:
            problems.append(f"{data.name} {split}: labels {stray[:SHOWN]} are outside the "
                            f"{len(classnames)} classes 0..{len(classnames) - 1}")
    if counts["train"]:
        untrained = [c for c in range(len(classnames)) if not counts["train"][c]]
        in_test = [c for c in untrained if counts["test"][c]]
        empty = [c for c in untrained if not counts["test"][c]]
        if in_test:
            problems.append(f"{data.name} test: class(es) {_names(in_test, classnames)} have test images "
                            "but no training images")
        if empty:
            where = ""
            if sources:
                where = " (" + ", ".join(str(sources[c]) for c in empty[:SHOWN]) + ")"
            problems.append(f"{data.name} train: class(es) {_names(empty, classnames)} have no images "
                            f"at all{where}: an empty class folder, or a class listed without one")
    labels_of = {}
    for label, name in enumerate(classnames):
        labels_of.setdefault(name, []).append(label)
    for name, labels in labels_of.items():
        if len(labels) > 1:
            problems.append(f"{data.name}: labels {labels} are all named {name!r}: the prompts are "
                            "identical, so all but one can never be predicted")
    return problems


def check_domain(data, fix: str = "") -> None:
    """A "malformed" :class:`DataError` listing every problem of ``data``; nothing when none."""
    problems = domain_problems(data)
    if problems:
        raise DataError(data.name, f"{len(problems)} problem(s) in {data.folder}: " + "; ".join(problems),
                        status="malformed",
                        fix=fix or f"repair the dataset under {data.folder} (moram-avalanche check-data "
                                   "lists every problem), or leave the domain out with --order")


__all__ = ["check_domain", "domain_problems"]
