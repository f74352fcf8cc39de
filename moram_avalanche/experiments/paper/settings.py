"""What ``reproduce`` was asked, as every family's settings share it: the output folder, the seeds,
a shorter budget and rehearsals (:class:`ReproductionSettings`), and what the pipeline asks of a
family's settings -- the model its runs load, the budget they run, what must be on disk and
what the plan says of them (the hooks below; :class:`~..clip.reproduce.ReproduceSettings`,
:class:`~..text.reproduce.TextReproduceSettings`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

#: rehearsals (``--rehearse``): optimizer steps per experience (or task)
REHEARSAL_ITERATIONS = 2


def checked_budget_and_seeds(iterations: Optional[int], seeds) -> Optional[Tuple[int, ...]]:
    """A reproduction's ``iterations`` (None or positive) checked; its ``seeds`` as a tuple of
    distinct seeds (None: each table's own)."""
    if iterations is not None and (isinstance(iterations, bool) or iterations < 1):
        raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
    if seeds is None:
        return None
    seeds = tuple(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    return seeds


def parse_seeds(text: str) -> Tuple[int, ...]:
    """``"42,43,44"`` -> ``(42, 43, 44)``; a clear error for anything else."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"--seeds must be comma-separated non-negative integers, e.g. 42,43,44; got {text!r}")
    return tuple(int(part) for part in parts)


class ReproductionSettings(ABC):
    """What every family's reproduction settings share (a dataclass with at least ``data_root``,
    ``out``, ``seeds``, ``device``, ``iterations``, ``rehearse`` and ``progress``): ``seeds`` and
    ``iterations`` checked, the budget and the output folder read the same way; and the hooks
    through which the pipeline asks what the family's model and budget mean for a run.

    Class attributes:
        rehearsal: a rehearsal, in words (the plan's first line).
        data_wanted, data_sources: the data ``reproduce`` needs and where it comes from, in words
            (the error when ``--data-root`` is not given).
    """

    rehearsal: ClassVar[str] = ""
    data_wanted: ClassVar[str] = "the datasets"
    data_sources: ClassVar[str] = ""

    def __post_init__(self):
        self.seeds = checked_budget_and_seeds(self.iterations, self.seeds)

    @property
    def budget(self) -> Optional[int]:
        """The shortened iterations per experience (None: the paper's)."""
        return REHEARSAL_ITERATIONS if self.rehearse else self.iterations

    @property
    def root(self) -> Path:
        """Where this reproduction's runs and tables go (rehearsals apart)."""
        return Path(self.out) / "rehearsal" if self.rehearse else Path(self.out)

    # ------------------------------------------------------------------ what a family says
    def model_lines(self) -> List[str]:
        """The plan's lines on the model, before the device (none: each table says its own)."""
        return []

    @abstractmethod
    def plan_header(self, specs: Sequence[Any], planned: Sequence[Any]) -> List[str]:
        """The plan's lines after the device: the data the tables read and what of it is found."""

    @abstractmethod
    def problems(self, specs: Sequence[Any], planned: Sequence[Any]) -> List[str]:
        """Everything the plan needs that is missing (the data under ``data_root``, the model's
        files), one line each; [] when nothing is."""

    @abstractmethod
    def needs_hint(self, specs: Sequence[Any], root: Path) -> str:
        """What the error naming the missing things ends with: where to look next."""

    @abstractmethod
    def model_record(self, run) -> Dict[str, Any]:
        """The model part of a run's record (JSON-able; checked when the run resumes)."""

    @abstractmethod
    def budget_options(self, run, options: Dict[str, Any]) -> Dict[str, Any]:
        """The options a shorter budget (:attr:`budget`) sets for ``run`` on top of ``options``,
        its paper settings (a rehearsal's caps with them)."""

    @abstractmethod
    def load_model(self, run) -> tuple:
        """``(model, train_transform, eval_transform, tokenizer)`` of ``run``, on the device."""

    def setup_arguments(self) -> Dict[str, Any]:
        """What the family's runs set in their :class:`~moram_avalanche.experiments.run.Setup`
        beyond the run's own (its family, its tables, data workers); {} by default."""
        return {}


__all__ = ["REHEARSAL_ITERATIONS", "ReproductionSettings", "checked_budget_and_seeds", "parse_seeds"]
