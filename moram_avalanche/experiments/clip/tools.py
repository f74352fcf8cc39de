"""The CLIP family's own commands, from their checked command lines: ``analyze`` (the paper's
figures from a MoRAM CLIP run, :mod:`.analysis`) and ``cost`` (the paper's cost tables of the CLIP
strategies, :mod:`.cost`). The family record offers them (:attr:`~..family.Family.analysis`,
:attr:`~..family.Family.cost`); each package is imported when its command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Tuple

from ..family import Tool


def analyze_run(args) -> Path:
    """``analyze``: the figures of the run in ``--log-dir`` (:func:`~.analysis.report.analyze`);
    returns the report's path."""
    from .analysis import AnalysisOptions, analyze

    options = AnalysisOptions(encoder=args.encoder, layer=args.layer, projection=args.projection,
                              scenarios=args.scenarios, image=args.image, images=args.images,
                              share=args.share, maps=not args.no_maps)
    overrides = {k: v for k, v in (("model", args.model), ("pretrained", args.pretrained),
                                   ("benchmark", args.benchmark), ("cache_dir", args.cache_dir)) if v}
    return analyze(args.log_dir, data_root=args.data_root, options=options, settings=overrides,
                   device=args.device, progress=not args.no_progress, out=args.out)


def measure_costs(args) -> Tuple[str, list]:
    """``cost``: parameters, peak memory and time per image of each strategy
    (:func:`~.cost.measure.measure_cost`); returns the report (Markdown, with the paper's tables
    unless ``--no-paper``) and the results."""
    from .cost import CostOptions, cost_report, measure_cost

    options = CostOptions(
        model=args.model, pretrained=None if args.pretrained.lower() == "none" else args.pretrained,
        device=args.device, strategies=args.strategies, tasks=args.tasks, batch_size=args.batch_size,
        iterations=args.iterations, warmup=args.warmup, classes=args.classes, eval_images=args.eval_images,
        eval_batch_size=args.eval_batch_size, repeats=args.repeats, amp=args.amp, options=args.overrides,
        cache_dir=args.cache_dir, seed=args.seed, timing=not args.params_only)
    results = measure_cost(options, progress=not args.no_progress)
    return cost_report(results, paper=not args.no_paper), results


#: ``analyze`` of the CLIP family
ANALYSIS = Tool(run=analyze_run, about="the figures of CLIP runs (activation maps on image tokens, atoms per layer "
                                       "of the two towers)")
#: ``cost`` of the CLIP family
COST = Tool(run=measure_costs, about="the cost tables of the CLIP strategies (parameters, peak memory, time per "
                                     "image as tasks accumulate)")

__all__ = ["ANALYSIS", "COST", "analyze_run", "measure_costs"]
