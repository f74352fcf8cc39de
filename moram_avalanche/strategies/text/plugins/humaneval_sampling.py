"""HumanEvalSampling: sampled HumanEval completions after each evaluation, scored as pass@k."""

from __future__ import annotations

import json
from typing import Dict, List, Sequence, Tuple

from avalanche.core import SupervisedPlugin

from ....algorithms.data_parallel import all_gather_objects, shard_indices, world_size
from ....algorithms.fsdp import holds_sharded_weights
from ....benchmarks.text.code_sandbox import TIMEOUT
from ....benchmarks.text.humaneval import (
    STOP_SEQUENCES,
    completion_of,
    evaluate_completions,
    harness_value,
    merge_reports,
)
from ....models.language_model import prompt_cuts
from ...plugins.data_parallel import padded_eval_batches
from ...plugins.run_hooks import RunHooks

#: LoRI's HumanEval sampling (juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh through bigcode-evaluation-harness):
#: 20 samples per problem at temperature 0.2, top-p 0.95 and no top-k cut (the harness's defaults); each value
#: and its source in :data:`~moram_avalanche.benchmarks.text.humaneval.BIGCODE_HUMANEVAL`
LORI_SAMPLING = {name: harness_value(name) for name in ("n", "temperature", "top_p", "top_k")}


class HumanEvalSampling(SupervisedPlugin, RunHooks):
    """After every evaluation of a HumanEval test experience (``experience.metric == "humaneval"``,
    :mod:`~moram_avalanche.benchmarks.text.codealpaca`): ``n`` sampled completions per problem
    (:meth:`~moram_avalanche.models.language_model.LanguageModel.sample`; each prompt cut and its
    samples bounded as its task declares, :func:`~moram_avalanche.models.language_model.prompt_cuts`: the
    harness's ``max_length`` of prompt and completion for the codealpaca stream's HumanEval; each sample
    stopped early once it holds a stop sequence), each cut as a completion at the first stop sequence
    (:func:`~moram_avalanche.benchmarks.text.humaneval.completion_of`, the greedy metric's cut too) and run
    in the sandbox after its problem's prompt, then pass@k for ``ks``
    (:func:`~moram_avalanche.benchmarks.text.humaneval.evaluate_completions`).

    The run path writes :attr:`report` to the run folder as ``humaneval.json`` (its hook
    :meth:`run_reports`, :class:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks`).

    Data-parallel (``torchrun``): each process samples and runs its contiguous share of the
    problems (:func:`~moram_avalanche.algorithms.data_parallel.shard_indices`), and the shares'
    samples and results are gathered into one report on every process
    (:func:`~moram_avalanche.benchmarks.text.humaneval.merge_reports`: pass@k recomputed over all
    problems, the one-process report). With sharded weights (``--fsdp``) every ``sample`` call is a
    collective, so a process with fewer batches samples padding batches (problem 0) whose
    completions are thrown away (:func:`~...plugins.data_parallel.padded_eval_batches`, the evaluation's).

    Args:
        n, temperature, top_p, top_k: the sampling (:data:`LORI_SAMPLING`; top_k 0: no cut).
        ks: the k of pass@k (those with ``k <= n``).
        max_new_tokens: the longest completion (the task's ``max_length`` bounds prompt and completion
            together). batch: prompts per ``generate`` call.
        timeout: seconds per program. workers: programs run at once.
    """

    run_files = ("humaneval.json",)

    def __init__(self, *, n: int = LORI_SAMPLING["n"], temperature: float = LORI_SAMPLING["temperature"],
                 top_p: float = LORI_SAMPLING["top_p"], top_k: int = LORI_SAMPLING["top_k"],
                 ks: Sequence[int] = (1, 5, 10), max_new_tokens: int = 512, batch: int = 1, timeout: float = TIMEOUT,
                 workers: int = 4) -> None:
        super().__init__()
        self.n, self.temperature, self.top_p, self.top_k = n, temperature, top_p, top_k
        self.ks: Tuple[int, ...] = tuple(k for k in ks if k <= n)
        self.max_new_tokens, self.batch, self.timeout, self.workers = max_new_tokens, batch, timeout, workers
        #: the last evaluation's pass@k, samples and results (empty before one)
        self.report: Dict[str, object] = {}

    def __repr__(self) -> str:  # recorded in the run's folder: the settings, never an address
        return (f"HumanEvalSampling(n={self.n}, temperature={self.temperature}, top_p={self.top_p}, top_k={self.top_k}, "
                f"ks={self.ks}, max_new_tokens={self.max_new_tokens}, timeout={self.timeout})")

    def after_eval_exp(self, strategy, **kwargs):
        experience = strategy.experience
        if getattr(experience, "metric", None) != "humaneval" or experience.origin_stream.name != "test":
            return
        items = [experience.dataset[i] for i in range(len(experience.dataset))]
        pairs = [item[:2] for item in items]
        tasks = getattr(experience, "tasks", None)
        cuts = prompt_cuts(tasks, [int(item[2]) for item in items]) if tasks else None
        problems = {}
        for _, answer in pairs:
            problem = json.loads(answer)
            problems[problem["task_id"]] = problem
        completions: Dict[str, list] = {}
        model = strategy.model
        batches, real = self.share_batches(len(pairs), model)
        for number, indices in enumerate(batches):
            chunk = [pairs[i] for i in indices]
            samples = model.sample([prompt for prompt, _ in chunk], self.n, self.max_new_tokens,
                                   temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                                   cuts=None if cuts is None else [cuts[i] for i in indices],
                                   stop_sequences=STOP_SEQUENCES)
            if number >= real:  # a padding batch (sharded weights): sampled with the others, thrown away
                continue
            for (_, answer), texts in zip(chunk, samples):
                completions[json.loads(answer)["task_id"]] = [completion_of(text) for text in texts]
        mine = (evaluate_completions(problems, completions, self.ks, timeout=self.timeout, workers=self.workers)
                if completions else {})
        report = merge_reports(all_gather_objects(mine), self.ks)
        self.report = {"sampling": {"n": self.n, "temperature": self.temperature, "top_p": self.top_p,
                                    "top_k": self.top_k, "max_new_tokens": self.max_new_tokens},
                       "after_task": strategy.clock.train_exp_counter, **report}

    def share_batches(self, count: int, model) -> Tuple[List[List[int]], int]:
        """``(batches, real)``: this process's problems (indices into the experience) in batches of
        :attr:`batch`, the first ``real`` of them real; every problem when there is one process."""
        if world_size() > 1 and holds_sharded_weights(model):
            return padded_eval_batches(count, self.batch)
        mine = shard_indices(count)
        batches = [mine[i:i + self.batch] for i in range(0, len(mine), self.batch)]
        return batches, len(batches)

    def run_reports(self) -> Dict[str, dict]:
        """``{"humaneval.json": report}`` after an evaluation ({} before)."""
        return {"humaneval.json": self.report} if self.report else {}


__all__ = ["HumanEvalSampling", "LORI_SAMPLING"]
