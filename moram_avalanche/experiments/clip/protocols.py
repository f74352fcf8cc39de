"""The streams of the MoRAM paper's CLIP tables, as protocols of ``reproduce``'s runs
(:class:`Protocol`: X-TAIL order 1 and 2, 5-shot MTIL), and what a run on one reads.

A run's keyword arguments are the strategy's own paper settings on the protocol
(:data:`~moram_avalanche.experiments.clip.recipes.PAPER_OPTIONS`) and the row's options; the
reference data a strategy takes (ImageNet, TinyImageNet, Conceptual Captions) is read from its
paper location under ``--data-root`` (:data:`~.recipes.REFERENCE_PATHS`) unless
``--ref-images`` / ``--ref-sentences`` say otherwise. A run's folder is named by its strategy
and its row's options: ``moram+prune_mass=0.99``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...benchmarks import MTIL_ORDERS, XTAIL_ORDERS, benchmark_entry
from ...strategies.registry import get_strategy
from ..paper.protocol import PaperProtocol
from ..paper.runs import run_options
from .recipes import PAPER_SOURCES, REFERENCE_PATHS, paper_options

#: a stream kind -> its domain orders
STREAM_ORDERS = {"xtail": XTAIL_ORDERS, "mtil": MTIL_ORDERS}
#: the optimisation settings every plan line shows first (when the strategy has them)
SHOWN_FIRST = ("iterations", "lr", "train_mb_size", "warmup", "label_smoothing", "betas", "weight_decay")


@dataclass(frozen=True)
class Protocol(PaperProtocol):
    """A stream as the paper runs it.

    Attributes:
        key: folder name of its runs.
        builder: the ``--benchmark`` name that builds it (``xtail``, ``mtil-5shot``).
        benchmark: the stream kind, ``"xtail"`` or ``"mtil"`` (what a strategy's paper
            settings read, :data:`~moram_avalanche.experiments.clip.recipes.PAPER_OPTIONS`).
        order, shots, prompts: the stream's options.
        description: what it is, in words.
    """

    key: str
    builder: str
    benchmark: str
    order: Union[int, str]
    shots: int
    prompts: str
    description: str

    @property
    def domains(self) -> Tuple[str, ...]:
        return tuple(STREAM_ORDERS[self.benchmark][self.order])

    def stream_options(self) -> Dict[str, Any]:
        """The builder's keyword arguments (the seed is the run's)."""
        return {"order": self.order, "shots": self.shots, "prompts": self.prompts}

    # ------------------------------------------------------------------ a run on it
    def run_name(self, strategy: str, options: Tuple[Tuple[str, Any], ...]) -> str:
        return strategy + "".join(f"+{k}={_short(v)}" for k, v in options)

    def own_options(self, strategy: str, options: Tuple[Tuple[str, Any], ...]) -> Tuple[Tuple[str, Any], ...]:
        """The row's options that differ from the strategy's paper setting, sorted: an option equal
        to the paper's setting is no option, so the same run serves both rows."""
        paper = paper_options(strategy, self)
        return tuple(sorted((k, v) for k, v in options if k not in paper or paper[k] != v))

    def paper_options(self, run, settings) -> Dict[str, Any]:
        return paper_options(run.strategy, self)

    def stream_record(self, run, settings) -> Dict[str, Any]:
        return {**self.stream_options(), "seed": run.seed, "test_shots": settings.test_shots}

    def record_extras(self, run, settings) -> Dict[str, Any]:
        return {"references": reference_sources(run, settings)}

    def benchmark_arguments(self, run, settings) -> Dict[str, Any]:
        """The builder's keyword arguments of ``run`` (a rehearsal's few test images per class too)."""
        stream = {**self.stream_options(), "seed": run.seed}
        if settings.test_shots is not None:
            stream["test_shots"] = settings.test_shots
        return stream

    def make_benchmark(self, run, settings) -> Callable[[Any, Any], Any]:
        from ...benchmarks import get_benchmark

        builder, stream = get_benchmark(self.builder), self.benchmark_arguments(run, settings)
        return lambda train_tf, eval_tf: builder(settings.data_root, train_transform=train_tf, eval_transform=eval_tf,
                                                 **stream)

    def run_arguments(self, run, settings, options: Dict[str, Any], eval_transform) -> Dict[str, Any]:
        """``options`` and the strategy's reference data, loaded with the model's ``eval_transform``."""
        from ...benchmarks.images.reference_sets import reference_data

        arguments, sources = dict(options), reference_sources(run, settings)
        if sources:
            arguments.update(get_strategy(run.strategy).needs.reference_arguments(
                **reference_data(eval_transform, **sources)))
        return arguments

    def files_needed(self, run, settings) -> Dict[str, str]:
        """``{what: path}`` of every file or folder ``run`` reads besides the benchmark's domains."""
        needs = get_strategy(run.strategy).needs
        files = {f"reference {kind} ({run.strategy})": path
                 for kind, path in reference_sources(run, settings).items() if path not in ("synthetic", "none")}
        files.update(needs.files_needed(run_options(run, settings)))
        if settings.pretrained and settings.pretrained.lower() != "none" and _is_path(settings.pretrained):
            files["CLIP weights"] = settings.pretrained
        return files

    def plan_lines(self, run, used_by: Sequence[str], settings) -> List[str]:
        """Every setting of one run, what it reads from disk, and the rows it serves."""
        needs = get_strategy(run.strategy).needs
        options = run_options(run, settings)
        shown = [k for k in SHOWN_FIRST if k in options] + sorted(k for k in options if k not in SHOWN_FIRST)
        lines = [
            f"  {run.name} (seed {run.seed}) -> {run.folder(settings.root / 'runs')}",
            f"    protocol: {self.builder}, order {self.order} ({', '.join(self.domains)}), "
            f"{self.shots} shots per class"
            + (f", {settings.test_shots} test images per class (rehearsal)" if settings.test_shots else "")
            + f", prompts {self.prompts!r}, seed {run.seed} (training and few-shot subsets)",
            "    settings: " + (", ".join(f"{k}={shown_setting(options[k], self)}" for k in shown)
                                or "none (evaluation only)"),
            f"    source: {PAPER_SOURCES.get(run.strategy) or 'the strategy defaults'}",
        ]
        if settings.budget is not None and needs.trains:
            lines.append(f"    NOT the paper's budget: {settings.budget} iterations per experience "
                         + ("(rehearsal)" if settings.rehearse else "(--iterations)"))
        for what, path in self.files_needed(run, settings).items():
            lines.append(f"    needs {what}: {path}{_status(path)}")
        lines.append(f"    used by: {'; '.join(used_by)}")
        return lines


def reference_sources(run, settings) -> Dict[str, str]:
    """``{kind: path or "synthetic"}`` of the reference data ``run``'s strategy takes."""
    needs = get_strategy(run.strategy).needs
    paths = REFERENCE_PATHS.get(run.strategy, {})
    given = {"images": settings.ref_images, "sentences": settings.ref_sentences}
    sources = {}
    for kind in needs.references:
        if given[kind] is not None:
            sources[kind] = given[kind]
        elif kind in paths and settings.data_root is not None:
            sources[kind] = str(Path(settings.data_root).expanduser() / paths[kind])
        else:
            sources[kind] = f"<data-root>/{paths.get(kind, '?')}"
    return sources


def shown_setting(value, protocol: Optional[Protocol] = None) -> str:
    """A setting as the plan shows it; a per-domain learning rate as its value on each domain
    of ``protocol`` that differs from its default."""
    if isinstance(value, float):
        return f"{value:g}"
    if protocol is not None and callable(value) and hasattr(value, "default"):
        special = [f"{d} {value(d):g}" for d in protocol.domains if value(d) != value.default]
        return f"{value.default:g}" + (f" ({', '.join(special)})" if special else "")
    return repr(value)


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _is_path(value: str) -> bool:
    return os.sep in value or value.endswith((".bin", ".pt", ".pth", ".safetensors"))


def _status(path: str) -> str:
    if path.startswith("<"):
        return ""
    return "  [found]" if Path(path).expanduser().exists() else "  [MISSING]"


XTAIL_ORDER1 = Protocol(
    "xtail-order1-16shot", "xtail", "xtail", 1, 16, "moram",
    f"{benchmark_entry('xtail').protocol}; order 1 ({', '.join(XTAIL_ORDERS[1])}); the release's "
    "per-domain prompts")
XTAIL_ORDER2 = Protocol(
    "xtail-order2-16shot", "xtail", "xtail", 2, 16, "moram",
    f"X-TAIL, 16 shots per class, order 2 ({', '.join(XTAIL_ORDERS[2])}), every domain's classes "
    "at test; the release's per-domain prompts")
MTIL_5SHOT = Protocol(
    "mtil-orderI-5shot", "mtil-5shot", "mtil", "I", 5, "zscl",
    f"{benchmark_entry('mtil-5shot').protocol}; order I ({', '.join(MTIL_ORDERS['I'])}); ZSCL's "
    "prompts (train on the first template, evaluate each domain with its template ensemble)")

__all__ = ["MTIL_5SHOT", "Protocol", "SHOWN_FIRST", "STREAM_ORDERS", "XTAIL_ORDER1", "XTAIL_ORDER2",
           "reference_sources", "shown_setting"]
