"""A small offline text stream drawn from a seed: tests and a future offline text demo.

Each task is a toy classification task in O-LoRA's prompt format: a "paragraph" of random
filler words with one cue word planted in it, and the label word that cue belongs to. A model
must learn, per task, which cue words map to which label; the tasks share the format but not
the cues, so later tasks can overwrite earlier ones (forgetting is measurable). Deterministic
in ``seed``; no files, no downloads.
"""

from __future__ import annotations

import random
from typing import Dict, Sequence, Tuple

from .stream import TextStreamTask, text_benchmark
from .tasks import olora_prompt

#: task name -> (instruction, label words); each label word gets its own cue words
SYNTHETIC_TASKS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "colour": ("What is the colour of the following paragraph? Choose one from the option.\n",
               ("red", "green", "blue")),
    "mood": ("What is the sentiment of the following paragraph? Choose one from the option.\n",
             ("good", "bad")),
    "topic": ("What is the topic of the following paragraph? Choose one from the option.\n",
              ("sports", "business", "science")),
    "size": ("What is the size of the following paragraph? Choose one from the option.\n",
             ("small", "large")),
    "animal": ("Which animal does the following paragraph describe? Choose one from the option.\n",
               ("cat", "dog", "bird")),
}
FILLER = tuple("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
               "incididunt ut labore et dolore magna aliqua".split())
CUES_PER_LABEL = 3


def synthetic_text_tasks(order: Sequence[str] = tuple(SYNTHETIC_TASKS), *, seed: int = 0,
                         train_per_label: int = 8, test_per_label: int = 4,
                         words: int = 8) -> Tuple[TextStreamTask, ...]:
    """The tasks of :func:`synthetic_text` as :class:`~.stream.TextStreamTask` (no Avalanche)."""
    order = (order,) if isinstance(order, str) else tuple(order)
    unknown = [name for name in order if name not in SYNTHETIC_TASKS]
    if unknown or not order:
        raise ValueError(f"unknown synthetic text task(s) {unknown or list(order)}; tasks: "
                         f"{', '.join(SYNTHETIC_TASKS)}")
    for name, value in (("train_per_label", train_per_label), ("test_per_label", test_per_label),
                        ("words", words)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    tasks = []
    for index, name in enumerate(order):
        rng = random.Random(f"{seed}:{name}")
        instruction, labels = SYNTHETIC_TASKS[name]
        cues = {label: [f"{name}{index}{label}{k}" for k in range(CUES_PER_LABEL)] for label in labels}

        train = _draw(rng, instruction, labels, cues, words, train_per_label)
        test = _draw(rng, instruction, labels, cues, words, test_per_label)
        tasks.append(TextStreamTask(name, train, test, labels))
    return tuple(tasks)


def _draw(rng: random.Random, instruction: str, labels, cues, words: int, per_label: int) -> tuple:
    """``per_label`` pairs per label of one task, drawn from ``rng`` in order, then shuffled by it."""
    pairs = []
    for _ in range(per_label):
        for label in labels:
            sentence = [rng.choice(FILLER) for _ in range(words)]
            sentence.insert(rng.randrange(words + 1), rng.choice(cues[label]))
            pairs.append((olora_prompt(instruction, labels, " ".join(sentence)), label))
    rng.shuffle(pairs)
    return tuple(pairs)


def synthetic_text(order: Sequence[str] = tuple(SYNTHETIC_TASKS), *, seed: int = 0, **sizes):
    """An Avalanche text benchmark of up to five toy tasks (module docstring), one experience each."""
    return text_benchmark(synthetic_text_tasks(order, seed=seed, **sizes))



def synthetic_text_from_options(data_root=None, order=None, *, seed: int = 0, **sizes):
    """``--benchmark synthetic-text``: :func:`synthetic_text` from the stream options a run gives (no
    data root; ``order`` None: every task)."""
    return synthetic_text(**({} if order is None else {"order": order}), seed=seed, **sizes)

__all__ = ["SYNTHETIC_TASKS", "synthetic_text", "synthetic_text_from_options", "synthetic_text_tasks"]
