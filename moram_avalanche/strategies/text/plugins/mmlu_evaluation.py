"""MMLUEvaluation: MMLU accuracy of the adapted model through lm-evaluation-harness, after each evaluation."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from avalanche.core import SupervisedPlugin

from ...plugins.run_hooks import RunHooks


class MMLUEvaluation(SupervisedPlugin, RunHooks):
    """After every evaluation that follows training, the model as it is (adapters in place) is
    wrapped in ``lm-eval``'s ``HFLM`` and scored on MMLU by ``lm_eval.simple_evaluate``
    (multiple-choice loglikelihood, accuracy), subject by subject; ``MMLU`` is the mean over
    questions (``lm-eval``'s size-weighted group mean). Written to the run folder as ``mmlu.json``
    (its hook :meth:`run_reports`, :class:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks`).

    Args:
        folder: a local MMLU copy (:func:`~moram_avalanche.benchmarks.text.mmlu.mmlu_folder`), prompted as
            ``lm-eval``'s registered tasks prompt the same questions (the subject's description header
            included, :func:`~moram_avalanche.benchmarks.text.mmlu.local_tasks`); None: ``lm-eval``'s registered
            ``mmlu_<subject>`` tasks (Hugging Face ``cais/mmlu``).
        subjects: the subjects (None: every one: the local copy's, or ``lm-eval``'s ``mmlu`` group).
        num_fewshot: examples before each question (0: ``lm-eval``'s default for MMLU; the paper
            does not say).
        batch_size: questions per forward. limit: at most this many questions per subject.
    """

    run_files = ("mmlu.json",)

    def __init__(self, *, folder: Optional[str] = None, subjects: Optional[Sequence[str]] = None,
                 num_fewshot: int = 0, batch_size: int = 8, limit: Optional[int] = None) -> None:
        super().__init__()
        self.folder, self.subjects = folder, None if subjects is None else tuple(subjects)
        self.num_fewshot, self.batch_size, self.limit = num_fewshot, batch_size, limit
        #: the last evaluation's accuracies (%), by subject and overall (empty before one)
        self.report: Dict[str, object] = {}

    def __repr__(self) -> str:  # recorded in the run's folder
        return (f"MMLUEvaluation(folder={self.folder!r}, subjects={self.subjects!r}, num_fewshot={self.num_fewshot}, "
                f"limit={self.limit})")

    def after_eval(self, strategy, **kwargs):
        if strategy.clock.train_exp_counter == 0:  # an evaluation before any training
            return
        from lm_eval import simple_evaluate
        from lm_eval.models.huggingface import HFLM

        from ....benchmarks.text.mmlu import local_tasks

        if self.folder is not None:
            tasks = local_tasks(self.folder, self.subjects)
        else:
            tasks = [f"mmlu_{s}" for s in self.subjects] if self.subjects else ["mmlu"]
        model = strategy.model
        was_training = model.training
        model.eval()
        lm = HFLM(pretrained=model.model, tokenizer=model.tokenizer, backend="causal", device=str(strategy.device),
                  batch_size=self.batch_size)
        out = simple_evaluate(model=lm, tasks=tasks, num_fewshot=self.num_fewshot, limit=self.limit,
                              log_samples=False, bootstrap_iters=0)
        model.train(was_training)
        results, sizes = out["results"], out.get("n-samples", {})
        groups = set(out.get("group_subtasks", {}))
        subjects = {}
        for name, values in results.items():
            if name in groups or "acc,none" not in values:
                continue
            subject = name.removeprefix("mmlu_local_").removeprefix("mmlu_")
            count = (sizes.get(name) or {}).get("effective") or values.get("sample_len")
            subjects[subject] = {"acc": 100.0 * float(values["acc,none"]), "questions": count}
        total = sum(v["questions"] or 0 for v in subjects.values())
        overall = sum(v["acc"] * (v["questions"] or 0) for v in subjects.values()) / total if total else None
        self.report = {"num_fewshot": self.num_fewshot, "after_task": strategy.clock.train_exp_counter,
                       "subjects": subjects, "mmlu": overall, "questions": total}

    def run_reports(self) -> Dict[str, dict]:
        """``{"mmlu.json": report}`` after an evaluation ({} before)."""
        return {"mmlu.json": self.report} if self.report else {}


__all__ = ["MMLUEvaluation"]
