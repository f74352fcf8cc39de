"""What ``reproduce`` was asked for the CLIP tables (:class:`ReproduceSettings`), and what it means for
their runs: the CLIP each run loads, the shorter budget of smoke runs and rehearsals, the data
and files the plan needs, and what the plan says of them. The pipeline that reads it is
:mod:`~moram_avalanche.experiments.paper` (written once for every family).

From Python::

    from moram_avalanche.experiments.reproduce import reproduce
    from moram_avalanche.experiments.clip.reproduce import ReproduceSettings
    results = reproduce("xtail", ReproduceSettings(data_root="~/data", device="cuda"))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...strategies.registry import get_strategy
from ..paper.needs import data_status
from ..paper.settings import REHEARSAL_ITERATIONS, ReproductionSettings
from .recipes import short_budget_options

#: rehearsals (``--rehearse``): test images per class (the steps per experience:
#: :data:`~moram_avalanche.experiments.paper.settings.REHEARSAL_ITERATIONS`)
REHEARSAL_TEST_SHOTS = 2


@dataclass
class ReproduceSettings(ReproductionSettings):
    """What ``reproduce`` was asked (the command line's options).

    Attributes:
        data_root: the folder holding the datasets (and, by default, the reference data).
        out: where the runs and the tables go.
        seeds: the seeds of every table; None: each table's own (42; the robustness table 42,
            43, 44).
        device: torch device of the runs.
        model, pretrained, weights_origin: the CLIP (the paper: ViT-B-16, OpenAI's weights --
            QuickGELU; a local file of them needs ``weights_origin="openai"``).
        ref_images, ref_sentences: reference data for every strategy that takes it, instead of
            each strategy's paper location under ``data_root`` (an image folder or
            "synthetic"; a sentence file or "synthetic").
        iterations: a shorter budget per experience (smoke runs; not the paper's); with it each
            strategy shortens what scales with the budget (warm-up, averaging, DDAS autoencoders).
        rehearse: 2 iterations per experience and 2 test images per class, at real model size,
            under ``out/rehearsal``: a missing file or a crash shows in minutes.
        num_workers, progress: DataLoader workers; progress bars.
    """

    data_root: Optional[str] = None
    out: str = "runs/reproduce"
    seeds: Optional[Tuple[int, ...]] = None
    device: str = "cpu"
    model: str = "ViT-B-16"
    pretrained: Optional[str] = "openai"
    weights_origin: Optional[str] = None
    ref_images: Optional[str] = None
    ref_sentences: Optional[str] = None
    iterations: Optional[int] = None
    rehearse: bool = False
    num_workers: int = 0
    progress: bool = True

    rehearsal = (f"{REHEARSAL_ITERATIONS} iterations per experience, {REHEARSAL_TEST_SHOTS} test images per "
                 "class")

    @property
    def test_shots(self) -> Optional[int]:
        return REHEARSAL_TEST_SHOTS if self.rehearse else None

    @property
    def weights(self) -> Optional[str]:
        """``pretrained`` as open_clip takes it (None: random init)."""
        return None if not self.pretrained or self.pretrained.lower() == "none" else self.pretrained

    # ------------------------------------------------------------------ the model
    def model_lines(self) -> List[str]:
        return [f"  model: {self.model}, weights {self.pretrained!r}"
                + (f" (origin {self.weights_origin!r})" if self.weights_origin else "")
                + f"; activation: {self._activation()}"]

    def _activation(self) -> str:
        from ...clip.load import trained_with_quick_gelu

        tag = self.weights_origin or self.pretrained
        if tag and tag.lower() != "none" and trained_with_quick_gelu(self.model, tag):
            return "QuickGELU, as these weights were trained"
        return "the model config's"

    def model_record(self, run) -> Dict[str, Any]:
        return {"model": self.model, "pretrained": self.pretrained, "weights_origin": self.weights_origin}

    def load_model(self, run) -> tuple:
        from ...clip.load import load_clip

        return load_clip(self.model, pretrained=self.weights, device=self.device, weights_origin=self.weights_origin)

    def setup_arguments(self) -> Dict[str, Any]:
        return {"num_workers": self.num_workers}

    def budget_options(self, run, options: Dict[str, Any]) -> Dict[str, Any]:
        """A training strategy's ``iterations`` and what it shortens with them (warm-up, averaging,
        DDAS autoencoders: :data:`~.recipes.SHORT_BUDGET`); nothing for an evaluation-only one."""
        if not get_strategy(run.strategy).needs.trains:
            return {}
        return {"iterations": self.budget, **short_budget_options(run.strategy, self.budget)}

    # ------------------------------------------------------------------ the data
    def plan_header(self, specs: Sequence[Any], planned: Sequence[Any]) -> List[str]:
        """Per stream of the plan, what it is and which of its domains the data root holds."""
        lines = []
        for protocol in dict.fromkeys(entry.run.protocol for entry in planned):
            lines.append(f"  data: {protocol.builder} under {self.data_root or '<data-root>'}: "
                         f"{protocol.description}")
            lines.append(f"    {self._domains_status(protocol)}")
        return lines

    def _domains_status(self, protocol) -> str:
        """Which of the protocol's domains the data root holds (``check-data``'s verdict)."""
        from ...benchmarks.images.check import check_data

        def reports():
            return [r for r in check_data(self.data_root, protocol.benchmark, progress=False)
                    if r.name in protocol.domains]

        return "domains: " + data_status(self.data_root, reports, hint=f" (moram-avalanche check-data --root "
                                         f"{self.data_root} --benchmark {protocol.benchmark})")

    def problems(self, specs: Sequence[Any], planned: Sequence[Any]) -> List[str]:
        """The model and its weights, every domain of every stream, every file a run reads."""
        from ...benchmarks.images.check import check_data

        root = Path(self.data_root).expanduser()
        problems = self._model_problems()
        for kind in dict.fromkeys(entry.run.protocol.benchmark for entry in planned):
            reports = check_data(root, kind, progress=self.progress)
            problems += [f"{kind} domain {r.name}: {r.status} -- {r.message.splitlines()[0] if r.message else ''}"
                         for r in reports if not r.usable]
        for entry in planned:
            for what, path in entry.run.protocol.files_needed(entry.run, self).items():
                if not Path(path).expanduser().exists():
                    problems.append(f"{what}: {path} does not exist")
        return problems

    def _model_problems(self) -> List[str]:
        """The model name and its weights: a known name; a known tag or an existing file."""
        import open_clip

        if self.model not in open_clip.list_models():
            return [f"model {self.model!r} is not an open_clip model name (the paper: ViT-B-16)"]
        pretrained = self.pretrained
        if not pretrained or pretrained.lower() == "none" or open_clip.get_pretrained_cfg(self.model, pretrained):
            return []
        if not Path(pretrained).expanduser().is_file():
            return [f"--pretrained {pretrained}: neither a tag of {self.model} "
                    f"({', '.join(open_clip.list_pretrained_tags_by_model(self.model)) or 'none'}) "
                    "nor an existing file"]
        return []

    def needs_hint(self, specs: Sequence[Any], root: Path) -> str:
        return (f"\n`moram-avalanche check-data --root {root}` details the datasets; `reproduce --dry-run` "
                "lists everything each run reads (--ref-images / --ref-sentences give the reference "
                "data elsewhere).")


__all__ = ["REHEARSAL_TEST_SHOTS", "ReproduceSettings"]
