"""InfLoRAPlugin: InfLoRA's per-task procedure (designed down-projections, DualGPM memory, merge)."""

from __future__ import annotations

import warnings
from typing import Dict, List, Mapping, Optional

import torch
from torch.utils.data import DataLoader

from ...algorithms.covariance import input_covariances
from ...algorithms.dualgpm import LAMBDA_B, LAMBDA_E, DualGPM, design_down_projection, threshold
from ...benchmarks.images.clip_benchmark import domain_of
from ...layers.lora import LoRALinear
from .growth import GrowthPlugin

#: memory kinds: DualGPM [InfLoRA methods/inflora.py] or plain GPM [methods/inflora_domain.py]
MEMORIES = ("dual", "gpm")


class InfLoRAPlugin(GrowthPlugin, supports_distributed=True):
    """InfLoRA's per-task procedure around the shared CLIP loop (baselines reference, section 3.2).

    Layers are grouped by attention module ("group" = the LoRA'd q/k/v projections of one
    attention, which share their input, the LN1 output): one covariance and one
    :class:`~moram_avalanche.algorithms.dualgpm.DualGPM` memory per group. ``memory="dual"``: the DualGPM
    of the class-incremental ``methods/inflora.py`` (default: X-TAIL and MTIL add new classes
    with every domain); ``"gpm"``: the remove-only GPM of the official domain-incremental
    variant ``methods/inflora_domain.py``. Both protect the same space up to ties at the
    threshold (:mod:`~moram_avalanche.algorithms.dualgpm`); they store different bases.

    * :meth:`grow` (once the experience's data is adapted, before the optimizer is built): covariance pass
      over the experience's training data with the current (merged) model; each group's
      down-projection = the top-``rank`` left singular vectors of the covariance projected out
      of the old input space, / sqrt(3), identical for all its layers
      (:func:`~moram_avalanche.algorithms.dualgpm.design_down_projection`); rows beyond
      the numerical rank of the projected covariance are filled from the free space (our
      guard; the original keeps arbitrary null-space vectors, which may lie in the old space);
      if the free space has fewer than ``rank`` directions, a warning says how many rows fall
      in the old space. up = 0, and only ``up`` trains.
    * :meth:`settle` (after the experience): covariance pass with the trained model, DualGPM update with
      ``eps_t = lambda_b + (lambda_e - lambda_b) t / T`` (``t`` = experiences trained before,
      ``T`` = ``num_tasks`` or the number of domains of the stream), then every LoRA layer
      merges its update into the base weight (its up-projection returns to zero).

    Covariance data: the experience's training set as the strategy trains on it (its train
    transform), in order, in batches of ``eval_mb_size``, loaded with the ``num_workers`` that
    ``strategy.train`` was given (:attr:`~moram_avalanche.strategies.plugins.growth.GrowthPlugin.loader_options`)
    -- the original uses its training loader [InfLoRA methods/inflora.py]. Text
    groups (``encoders`` with "text") see the tokenized prompts of the experience's classes
    (its ``template``), every one of the ``context_length`` positions counting, padding
    included, as LibContinual's CLIP port [LibContinual core/model/InfLoRA_opt.py].

    The steps are methods a model family overrides where it differs (:meth:`covariances`,
    :meth:`install`, :meth:`finish`, :meth:`stream_tasks`, :meth:`experience_name`; the language
    models' :class:`~moram_avalanche.strategies.text.plugins.inflora.TextInfLoRAPlugin`), while
    :meth:`design` and :meth:`remember` hold the method's math, once.

    Attributes:
        memories: ``{group: DualGPM}``. tasks_done: experiences taken into the memories.
        history: per experience ``{"domain", "threshold", "old_space": {group: dims},
            "kind": {group: "remove"|"retain"}}``.
        shapes_only: grow every task's layers with the right shapes and nothing else: no
            covariance pass, no SVD, no memory update (the down-projection is the first ``rank``
            unit vectors). For counting parameters (``moram-avalanche cost --params-only``), never
            for training: the adapters it grows are not InfLoRA's.
    """

    #: the adapters it designs: CLIP's mergeable one-LoRA layers (the text family's subclass: one LoRA per task)
    layer_type = LoRALinear

    def __init__(self, groups: Mapping[str, Mapping], *, rank: int, num_tasks: Optional[int] = None,
                 lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E, memory: str = "dual") -> None:
        super().__init__()
        if num_tasks is not None and num_tasks < 1:
            raise ValueError(f"num_tasks must be a positive int or None, got {num_tasks}")
        if memory not in MEMORIES:
            raise ValueError(f"memory must be one of {MEMORIES} (DualGPM or plain GPM), got {memory!r}")
        threshold(0, 1, lambda_b, lambda_e)  # validates the lambdas
        self.groups = {name: {"encoder": g.get("encoder"), "layers": list(g["layers"]), "dim": int(g["dim"])}
                       for name, g in groups.items()}
        self.rank = rank
        self.num_tasks = num_tasks
        self.lambda_b, self.lambda_e = lambda_b, lambda_e
        too_wide = {name: g["dim"] for name, g in self.groups.items() if not 1 <= rank <= g["dim"]}
        if too_wide:
            raise ValueError(f"rank must be in 1..the layer input size, got rank={rank} for input sizes "
                             f"{too_wide}; pick a rank <= {min(too_wide.values())}")
        self.memory = memory
        self.memories = {name: DualGPM(g["dim"], dual=memory == "dual") for name, g in self.groups.items()}
        self.tasks_done = 0
        self.history: List[dict] = []
        self.shapes_only = False

    # ------------------------------------------------------------------ growth
    def grow(self, strategy) -> None:
        self._threshold(strategy.experience)  # fail before any work if the stream is too long
        layers = self.layers(strategy.model)
        if self.shapes_only:
            downs = {name: torch.eye(self.rank, g["dim"]) for name, g in self.groups.items()}
        else:
            downs = self.design(self.covariances(strategy, num_workers=self.loader_options.get("num_workers", 0)))
        for name, down in downs.items():
            for layer_name in self.groups[name]["layers"]:
                self.install(layers[layer_name], down)

    def settle(self, strategy) -> None:
        eps = self._threshold(strategy.experience)
        if self.shapes_only:
            self.tasks_done += 1
        else:
            covariances = self.covariances(strategy, num_workers=self.loader_options.get("num_workers", 0))
            self.remember(covariances, eps, self.experience_name(strategy.experience))
        for layer in self.layers(strategy.model).values():
            self.finish(layer)

    # ------------------------------------------------------------------ the method's steps
    def design(self, covariances: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """``{group: down}``: each group's designed down-projection ``[rank, dim]`` from its input
        covariance projected out of its memory's old input space (a warning when the free space
        is narrower than the rank)."""
        downs = {}
        for name in self.groups:
            memory = self.memories[name]
            if memory.free_dim < self.rank:
                warnings.warn(
                    f"InfLoRA, experience {self.tasks_done}, layer group {name}: the memory leaves "
                    f"only {memory.free_dim} free input directions for rank {self.rank}, so "
                    f"{self.rank - memory.free_dim} rows of the new down-projection lie in the old "
                    "tasks' input space and may interfere with them; use a smaller rank or lambda_b", stacklevel=2)
            projected = memory.project_away(covariances[name])
            downs[name] = design_down_projection(projected, self.rank, free=memory.free_basis())
        return downs

    def install(self, layer, down: torch.Tensor) -> None:
        """Put the designed ``down`` in ``layer`` (frozen) and restart its up-projection at zero (trained)."""
        layer.set_down(down.to(layer.down.dtype))
        with torch.no_grad():
            layer.up.zero_()
        layer.down.requires_grad_(False)
        layer.up.requires_grad_(True)

    def remember(self, covariances: Mapping[str, torch.Tensor], eps: float, name: str = "") -> None:
        """Every group's memory takes the post-training covariance with threshold ``eps``; the
        experience (``name``) joins :attr:`history`."""
        for group, memory in self.memories.items():
            memory.update(covariances[group], eps)
        self.tasks_done += 1
        self.history.append({
            "domain": name, "threshold": eps,
            "old_space": {group: m.old_space_dim for group, m in self.memories.items()},
            "kind": {group: m.kind for group, m in self.memories.items()},
        })

    def finish(self, layer) -> None:
        """After the experience: merge the update into the base weight (its up-projection back to zero)."""
        layer.merge()

    @staticmethod
    def experience_name(experience) -> str:
        return str(getattr(experience, "domain", ""))

    # ------------------------------------------------------------------ pieces
    def covariances(self, strategy, num_workers: int = 0) -> Dict[str, torch.Tensor]:
        """The input covariance of every group on the current experience's training data.

        ``num_workers``: loader processes for the images (0: the main process).
        """
        layers = self.layers(strategy.model)
        recorded = {name: layers[g["layers"][0]] for name, g in self.groups.items()}
        encoders = {g["encoder"] for g in self.groups.values()}
        images = tokens = ()
        if "visual" in encoders:
            dataset = strategy.adapted_dataset
            loader = DataLoader(dataset, batch_size=strategy.eval_mb_size, shuffle=False,
                                num_workers=num_workers, collate_fn=getattr(dataset, "collate_fn", None))
            images = (batch[0].to(strategy.device) for batch in loader)
        if "text" in encoders:
            prompts = domain_of(strategy.experience).prompts()
            size = strategy.text_head.batch_size
            tokens = (strategy.tokenizer(prompts[i:i + size]).to(strategy.device)
                      for i in range(0, len(prompts), size))
        return input_covariances(strategy.model, recorded, images=images, tokens=tokens)

    def _threshold(self, experience) -> float:
        total = self.num_tasks if self.num_tasks is not None else self.stream_tasks(experience)
        if total < 1:
            raise ValueError("InfLoRA needs the number of tasks T for its threshold schedule: the "
                             "experience does not say how many its stream holds; pass num_tasks")
        return threshold(self.tasks_done, total, self.lambda_b, self.lambda_e)

    @staticmethod
    def stream_tasks(experience) -> int:
        """``T`` when ``num_tasks`` is None: the number of domains of the CLIP benchmark (0: unknown)."""
        return len(getattr(experience, "domains", ()))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {"tasks_done": self.tasks_done, "history": self.history,
                "memories": {name: m.state_dict() for name, m in self.memories.items()}}

    def load_state_dict(self, state: dict) -> None:
        if set(state["memories"]) != set(self.memories):
            raise ValueError("the checkpoint's DualGPM memories are for other layers: "
                             f"{sorted(state['memories'])[:3]} vs {sorted(self.memories)[:3]}")
        for name, memory_state in state["memories"].items():
            self.memories[name].load_state_dict(memory_state)
        self.tasks_done = int(state["tasks_done"])
        self.history = list(state["history"])


__all__ = ["MEMORIES", "InfLoRAPlugin"]
