"""AnalyticHead: RAIL's regression head on frozen CLIP image features, as a stateful plugin.

Holds the head of :mod:`moram_avalanche.algorithms.analytic` -- primal (a fixed random ReLU
expansion + :class:`~moram_avalanche.algorithms.analytic.RecursiveRidge`) or dual
(:class:`~moram_avalanche.algorithms.analytic.KernelRidge`) -- and its class count; the RAIL
strategies (:mod:`moram_avalanche.strategies.clip.rail`) feed it and read it. Being a plugin with
``state_dict`` / ``load_state_dict``, its state goes into the run checkpoint
(:mod:`moram_avalanche.experiments.checkpoint`), so a run resumes to the same head. It has no
Avalanche hooks of its own.
"""

from __future__ import annotations

from typing import Optional

import torch
from avalanche.core import SupervisedPlugin

from ....algorithms.analytic import (
    DUAL_REGULARIZATION,
    HIDDEN_DIM,
    KERNELS,
    PRIMAL_REGULARIZATION,
    RBF_GAMMA,
    KernelRidge,
    RandomFeatures,
    RecursiveRidge,
)

#: the two forms of RAIL [linghan1997/Regression-based-Analytic-Incremental-Learning primal_RAIL.py, dual_RAIL.py]
FORMS = ("primal", "dual")


class AnalyticHead(SupervisedPlugin):
    """The analytic head of RAIL, fed one task at a time.

    Per task: :meth:`begin_task` (its number of new classes), :meth:`observe` for every batch of
    normalised image features and one-hot targets over all classes learned so far, then
    :meth:`end_task`. :meth:`scores` gives the head's regression outputs ``[batch, classes]``.

    Args:
        form: "primal" or "dual".
        feature_dim: the CLIP image-feature size (512 for ViT-B/16).
        hidden_dim: primal only: the random expansion's size (RAIL: 15000); None: no expansion,
            the ridge runs on the features themselves (RAIL's ``feature_expansion: 0``).
        regularization: the ridge ``lambda`` (None: 0.1 primal, 0.001 dual).
        kernel, gamma: dual only: "rbf" (``exp(-gamma ||x - x'||^2)``, gamma 0.1) or "linear".
        generator: for the random expansion (None: torch's global RNG).
        dtype: of the ridge state (None: float32 primal, as the original; float64 dual, as its
            numpy solve). device: of the state.
    """

    def __init__(self, form: str, feature_dim: int, *, hidden_dim: Optional[int] = HIDDEN_DIM,
                 regularization: Optional[float] = None, kernel: str = "rbf", gamma: float = RBF_GAMMA,
                 generator: Optional[torch.Generator] = None, dtype: Optional[torch.dtype] = None,
                 device=None) -> None:
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        self.form = form
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.classes = 0
        self.expansion: Optional[RandomFeatures] = None
        self._pending = []
        if form == "primal":
            if hidden_dim is not None:
                self.expansion = RandomFeatures(feature_dim, hidden_dim, generator=generator).to(self.device)
            dim = feature_dim if hidden_dim is None else hidden_dim
            self.ridge = RecursiveRidge(dim, PRIMAL_REGULARIZATION if regularization is None else regularization,
                                        dtype=dtype or torch.float32, device=self.device)
        else:
            self.ridge = KernelRidge(kernel, gamma, DUAL_REGULARIZATION if regularization is None else regularization,
                                     dtype=dtype or torch.float64)

    # ------------------------------------------------------------------ feeding
    def begin_task(self, new_classes: int) -> None:
        """A task with ``new_classes`` classes starts: they take the next columns of the head."""
        self.classes += new_classes
        if self.form == "primal":
            self.ridge.add_classes(new_classes)
        self._pending = []

    @torch.no_grad()
    def observe(self, features: torch.Tensor, targets: torch.Tensor) -> None:
        """One batch: features ``[b, feature_dim]`` (normalised) and targets ``[b, classes]``."""
        features = features.to(self.device)
        if self.form == "primal":
            self.ridge.update(self._expand(features), targets.to(self.device))
        else:
            self._pending.append((features.float(), targets.float().to(self.device)))

    def end_task(self) -> None:
        """Primal: nothing left (every batch was taken in); dual: memory += the task's batches, solve."""
        if self.form == "dual" and self._pending:
            self.ridge.add(torch.cat([f for f, _ in self._pending]).to(self.device),
                           torch.cat([t for _, t in self._pending]).to(self.device))
            self.ridge.fit()
        self._pending = []

    @torch.no_grad()
    def scores(self, features: torch.Tensor) -> torch.Tensor:
        """The head's outputs ``[batch, classes]`` for normalised features."""
        features = features.to(self.device)
        if self.form == "primal":
            return self.ridge.predict(self._expand(features)).float()
        return self.ridge.predict(features).float()

    def _expand(self, features: torch.Tensor) -> torch.Tensor:
        return self.expansion(features.float()) if self.expansion is not None else features.float()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        state = {"form": self.form, "classes": self.classes,
                 "ridge": {k: v.detach().cpu() for k, v in self.ridge.state_dict().items()}}
        if self.expansion is not None:
            state["expansion"] = self.expansion.weight.detach().cpu()
        return state

    def load_state_dict(self, state: dict) -> None:
        if state["form"] != self.form:
            raise ValueError(f"the checkpoint holds a {state['form']} RAIL head, this strategy is "
                             f"{self.form}: use the strategy that wrote it")
        if ("expansion" in state) != (self.expansion is not None):
            raise ValueError("the checkpoint's RAIL head was built with another hidden_dim "
                             "(with/without the random expansion): use the run's settings")
        if self.expansion is not None:
            if state["expansion"].shape != self.expansion.weight.shape:
                raise ValueError(f"the checkpoint's expansion is {tuple(state['expansion'].shape)}, this "
                                 f"head's is {tuple(self.expansion.weight.shape)}: use the run's hidden_dim")
            self.expansion.weight.copy_(state["expansion"])
        ridge = {k: v.to(self.device) for k, v in state["ridge"].items()}
        self.ridge.load_state_dict(ridge)
        self.classes = int(state["classes"])
        self._pending = []

    def held_bytes(self) -> int:
        """Bytes of the head's state (:class:`~moram_avalanche.strategies.plugins.memory.PeakMemory`)."""
        tensors = list(self.ridge.state_dict().values())
        if self.expansion is not None:
            tensors.append(self.expansion.weight)
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)


__all__ = ["FORMS", "AnalyticHead"]
