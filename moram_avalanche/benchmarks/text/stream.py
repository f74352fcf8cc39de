"""Text streams as Avalanche benchmarks: one experience per task, prompts in, answers out.

Every item is ``(prompt, answer, task_label)``: two strings (the model's room tokenizes them)
and the task index, so a sample carries its task wherever it goes (a replay buffer mixes
tasks in a batch). The dataset's ``targets`` are the answer's index among the task's label
words (what class-balanced buffers read), -1 for an answer outside them (generation tasks).

Every experience (train and test) carries:

* ``task_name`` -- the task; ``label_words`` -- its answers in label order (empty for open
  generation); ``metric`` -- the name of its metric in
  :mod:`~moram_avalanche.benchmarks.text.metrics` ("exact_match" for the classification
  tasks, O-LoRA ``src/compute_metrics.py``);
* ``tasks`` -- every :class:`TextStreamTask` of the stream (names, label words, metrics, and
  how a long prompt of the task is cut: :attr:`TextStreamTask.prompt_limit`,
  :attr:`TextStreamTask.keep`; how its in-context examples are laid out: :class:`ICLFormat`);
  ``domains`` (the same) and ``domain`` (the task's name): what the run path's accuracy matrix
  and progress lines read on every stream.

Builders: :func:`text_benchmark` (from any pairs), :func:`lm_cl` (the paper's orders 1-6 from
either data layout, :mod:`.tasks`), :func:`~.trace.trace` (TRACE's eight tasks) and
:func:`~.synthetic.synthetic_text`.
Avalanche has no text benchmarks of its own (issues #1128, #1248); this follows its
``examples/nlp.py``: plain datasets whose items a strategy unpacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Tuple

from torch.utils.data import Dataset

from .metrics import TEXT_METRICS
from .tasks import pair_problem, read_tasks

#: which end of a prompt longer than its limit is kept
KEEP = ("tail", "head")


@dataclass(frozen=True)
class ICLFormat:
    """How in-context examples of a task are laid out before a prompt (the MoRAM release's
    ``utils/data/data_collator.py`` with demonstrations; :class:`~moram_avalanche.strategies.text.icl.TextICL`):
    ``header`` + ``note`` + (``example_prefix`` + example + answer + "\n\n") per example +
    ``example_prefix`` + the prompt, each example and the prompt without the task's
    ``instruction``; ``demonstrations=False``: the prompt alone (the release shows MeetingBank
    no examples)."""

    header: str = ""
    example_prefix: str = ""
    demonstrations: bool = True
    note: str = ""


@dataclass(frozen=True)
class TextStreamTask:
    """One task of a text stream: name, (prompt, answer) pairs, label words and metric.

    ``prompt_limit`` (tokens) and ``keep`` say how a long prompt of this task is cut when it is
    not the model's (``prompt_limit=None``: the model's ``max_source_length``; ``keep=None``: the
    model's end -- a causal model's tail, where it reads the cue, T5's head, O-LoRA's right
    truncation; ``"tail"`` / ``"head"``: that end whatever the model, MeetingBank's head in the
    release, SuperNI's in SAPT).
    ``instruction`` is the text every prompt of the task starts with; ``icl`` the layout of
    in-context examples (None: examples then the prompt, as they are).
    """

    name: str
    train: Tuple[Tuple[str, str], ...]
    test: Tuple[Tuple[str, str], ...]
    label_words: Tuple[str, ...] = field(default=())
    metric: str = "exact_match"
    prompt_limit: Optional[int] = None
    keep: Optional[str] = None
    instruction: str = ""
    icl: Optional[ICLFormat] = None

    def __post_init__(self):
        for split in ("train", "test"):
            pairs = tuple(tuple(pair) for pair in getattr(self, split))
            if not pairs or not all(len(p) == 2 and all(isinstance(s, str) for s in p) for p in pairs):
                raise ValueError(f"task {self.name!r}: {split} must be a non-empty sequence of "
                                 "(prompt, answer) string pairs")
            object.__setattr__(self, split, pairs)
        object.__setattr__(self, "label_words", tuple(self.label_words))
        if self.metric not in TEXT_METRICS:
            raise ValueError(f"task {self.name!r}: unknown metric {self.metric!r}; known: "
                             f"{', '.join(TEXT_METRICS)}")
        for split in ("train", "test"):
            for index, (prompt, answer) in enumerate(getattr(self, split)):
                problem = pair_problem(prompt, answer, self.metric)
                if problem:
                    raise ValueError(f"task {self.name!r}: item {index} of its {split} split cannot be used: "
                                     f"{problem}; drop or fix that item")
        if self.keep is not None and self.keep not in KEEP:
            raise ValueError(f"task {self.name!r}: keep must be one of {KEEP} or None (which end of a long prompt "
                             f"is kept; None: the model's), got {self.keep!r}")
        limit = self.prompt_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"task {self.name!r}: prompt_limit must be a positive number of tokens or None "
                             f"(the model's limit), got {limit!r}")


class PromptAnswers(Dataset):
    """``(prompt, answer)`` items; ``targets`` = the answer's index in ``label_words`` (-1 if none)."""

    def __init__(self, pairs: Sequence[Tuple[str, str]], label_words: Sequence[str] = ()) -> None:
        self.pairs = tuple(pairs)
        index = {word: i for i, word in enumerate(label_words)}
        self.targets = [index.get(answer, -1) for _, answer in self.pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]

    def fingerprint(self) -> str:
        """Every (prompt, answer) pair, in order (:mod:`~..fingerprint`)."""
        from ..fingerprint import digest

        return digest(self.pairs)


def collate_text(items):
    """``[prompts, answers, task labels]`` of a list of ``(prompt, answer, task)`` items (the
    DataLoader collate of the text streams)."""
    import torch

    prompts, answers, tasks = zip(*items)
    return [list(prompts), list(answers), torch.tensor(tasks, dtype=torch.long)]


def capped(pairs: Sequence[Tuple[str, str]], limit: Optional[int], seed: int, name: str = ""):
    """At most ``limit`` of ``pairs``: a random subset seeded by ``seed`` and the task's name (so
    each task draws its own), in file order; ``pairs`` themselves when ``limit`` is None or not
    smaller."""
    if limit is None or limit >= len(pairs):
        return tuple(pairs)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"a per-task example limit must be a positive integer or None, got {limit!r}")
    import random
    import zlib

    keep = sorted(random.Random(seed * 1_000_003 + zlib.crc32(name.encode())).sample(range(len(pairs)), limit))
    return tuple(pairs[i] for i in keep)


def text_benchmark(tasks: Sequence[TextStreamTask]):
    """An Avalanche benchmark with one experience per task (see the module docstring)."""
    from avalanche.benchmarks.scenarios.dataset_scenario import benchmark_from_datasets
    from avalanche.benchmarks.scenarios.task_aware import with_task_labels
    from avalanche.benchmarks.utils import AvalancheDataset
    from avalanche.benchmarks.utils.data_attribute import DataAttribute, TaskLabels
    from avalanche.benchmarks.utils.flat_data import ConstantSequence

    from ..fingerprint import digest

    tasks = tuple(tasks)
    if not tasks or not all(isinstance(task, TextStreamTask) for task in tasks):
        raise ValueError("text_benchmark needs a non-empty sequence of TextStreamTask")
    names = [task.name for task in tasks]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"task names must be distinct (they key the accuracy matrix and the logs), "
                         f"got {repeated} more than once")

    def wrap(pairs, index, task):
        raw = PromptAnswers(pairs, task.label_words)
        return AvalancheDataset([raw], data_attributes=[
            DataAttribute(raw.targets, "targets"),
            TaskLabels(ConstantSequence(index, len(raw)))])

    benchmark = with_task_labels(benchmark_from_datasets(
        train=[wrap(task.train, i, task) for i, task in enumerate(tasks)],
        test=[wrap(task.test, i, task) for i, task in enumerate(tasks)]))
    for stream, split in ((benchmark.train_stream, "train"), (benchmark.test_stream, "test")):
        for experience in stream:
            task = tasks[experience.current_experience]
            pairs = getattr(task, split)
            experience.fingerprint = digest([task.name, PromptAnswers(pairs).fingerprint()])
            experience.task_name = task.name
            experience.label_words = task.label_words
            experience.metric = task.metric
            experience.tasks = tasks
            # the names the run path reads (the accuracy matrix's columns, progress lines)
            experience.domain = task.name
            experience.domains = tasks
    benchmark.tasks = tasks
    return benchmark


def lm_cl(data_root, order=1, *, layout: str = "auto", instructions: Optional[Mapping[str, str]] = None,
          task_prefix: bool = True, train_limit: Optional[int] = None, test_limit: Optional[int] = None,
          seed: int = 0):
    """The paper's classification streams: orders 1-3 (four tasks) and 4-6 (fifteen).

    Args:
        data_root: O-LoRA's ``CL_Benchmark`` folder or the release's ``LLM-CL-Benchmark_500``.
        order: 1-6 (the paper's, :data:`~.tasks.ORDERS`) or a list of task names.
        layout: "olora", "moram" or "auto" (O-LoRA when category folders are found).
        instructions, task_prefix: O-LoRA layout only (:func:`~.tasks.read_task`); the
            "Task:/Dataset:" prefix is on, as in every O-LoRA script.
        train_limit, test_limit: at most this many examples per task (a seeded random subset,
            file order kept; None: every example, as the paper). For rehearsals and smoke runs.
        seed: the subsets' seed.
    """
    layout, data = read_tasks(data_root, order, layout, instructions=instructions, task_prefix=task_prefix)
    benchmark = text_benchmark([
        TextStreamTask(name, capped(d.train, train_limit, seed, name), capped(d.test, test_limit, seed, name),
                       d.labels, d.task.metric)
        for name, d in data.items()])
    benchmark.layout = layout
    return benchmark



def lm_cl_from_options(data_root, order=1, *, layout: str = "auto", instructions: Optional[Mapping[str, str]] = None,
                       task_prefix: bool = False):
    """``--benchmark lm-cl``: :func:`lm_cl` from the stream options a run gives (``--order 1`` as the
    number 1; no "Task:/Dataset:" prefix unless asked, as the MoRAM release's runs)."""
    if isinstance(order, str) and order.isdigit():  # the command line's --order 1
        order = int(order)
    return lm_cl(data_root, order, layout=layout, instructions=instructions, task_prefix=task_prefix)

__all__ = ["ICLFormat", "KEEP", "PromptAnswers", "TextStreamTask", "capped", "collate_text", "lm_cl", "lm_cl_from_options", "text_benchmark"]
