"""The label space a CLIP stream declares: which classes a sample is scored against, and where.

Every experience of a :func:`~moram_avalanche.benchmarks.images.clip_benchmark.clip_benchmark`
stream carries its stream's domains and the label space; :meth:`LabelSpace.of` reads them.
Both spaces lay the logits out in a fixed number of columns, :attr:`LabelSpace.width`, so
that samples of several domains fit one batch (a replay buffer mixes them) and stored logits
keep their shape across experiences (Avalanche's DER):

* ``"all"`` (X-TAIL): one column per class of every domain of the stream, domain ``d``'s
  classes at ``offsets[d] .. offsets[d] + C_d``; the dataset labels are these global indices.
* ``"domain"`` (MTIL): each sample is scored against its own domain's classes only, in columns
  ``0 .. C_d`` of ``max_d C_d``; the dataset labels are local.

Prompts (method reference, "evaluation protocols"): training uses each class's training
prompt (``domain.template``); evaluation in the "domain" space averages the domain's
``eval_templates`` (MTIL's ensemble), and in the "all" space keeps one prompt per class with
its domain's template (X-TAIL).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import torch

from .clip_benchmark import LABEL_SPACES, Domain, label_offsets

#: the experience attributes a label space is read from
REQUIRED = ("domains", "label_space", "current_experience")


@dataclass(frozen=True)
class LabelSpace:
    """The label space of a CLIP stream (see the module docstring).

    Attributes:
        kind: "all" or "domain".
        domains: every domain of the stream, in stream order (the index is the task label).
    """

    kind: str
    domains: Tuple[Domain, ...]

    def __post_init__(self):
        if self.kind not in LABEL_SPACES:
            raise ValueError(f"label space must be one of {LABEL_SPACES}, got {self.kind!r}")
        if not self.domains:
            raise ValueError("a label space needs at least one domain")

    @classmethod
    def of(cls, experience) -> "LabelSpace":
        """The label space an experience of a CLIP stream declares (a clear error otherwise)."""
        missing = [name for name in REQUIRED if not hasattr(experience, name)]
        if missing:
            raise AttributeError(
                f"experience {getattr(experience, 'current_experience', '?')} lacks {missing}: "
                "CLIP models and strategies need the benchmarks of moram_avalanche.benchmarks "
                "(xtail, mtil, synthetic or clip_benchmark), which attach them")
        return cls(experience.label_space, tuple(experience.domains))

    @property
    def offsets(self) -> List[int]:
        """First column of each domain: cumulative class counts ("all"), zeros ("domain")."""
        if self.kind == "all":
            return label_offsets(self.domains)
        return [0] * len(self.domains)

    @property
    def width(self) -> int:
        """Columns of the logits: every class ("all") or the largest domain ("domain")."""
        sizes = [len(d.classnames) for d in self.domains]
        return sum(sizes) if self.kind == "all" else max(sizes)

    def columns(self, task: int) -> slice:
        """Where domain ``task``'s classes sit in the logits."""
        start = self.offsets[task]
        return slice(start, start + len(self.domains[task].classnames))

    def local_labels(self, labels: torch.Tensor, tasks: torch.Tensor) -> torch.Tensor:
        """Dataset labels -> each sample's class index within its own domain (``0..C_d-1``)."""
        if self.kind == "domain":
            return labels
        offsets = torch.tensor(self.offsets, dtype=labels.dtype, device=labels.device)
        return labels - offsets[tasks.long()]

    def templates(self, task: int, training: bool) -> Tuple[str, ...]:
        """The templates domain ``task``'s classifier averages (one unless evaluating MTIL-style)."""
        domain = self.domains[task]
        if training or self.kind == "all":
            return (domain.template,)
        return domain.eval_templates

    def prompt_sets(self, task: int, training: bool) -> List[List[str]]:
        """``[template][class]`` prompts of domain ``task`` (see :meth:`templates`)."""
        domain = self.domains[task]
        return [domain.prompts(template) for template in self.templates(task, training)]


__all__ = ["REQUIRED", "LabelSpace"]
