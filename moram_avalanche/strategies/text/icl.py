"""FIX (ICL): the frozen model answers each prompt after solved examples of its own task.

The "FIX (ICL)" row of the paper's TRACE table (``tab:llm_cl``), as TRACE and the MoRAM release
build it (``inference/ICL.py``, ``get_random_demonstrations``; ``utils/data/data_collator.py``;
TRACE ``scripts/ICL.sh``: ``--demonstrations_num 6 --max_prompt_len 3584``; reference
``language_models.md``). Nothing trains. When a task arrives, ``shots`` examples are drawn at
random from its data:

* each example's prompt loses the task's instruction (the text every prompt of the task starts
  with, :attr:`~moram_avalanche.benchmarks.text.stream.TextStreamTask.instruction`), and its
  prompt and answer together must fit ``budget / (2 * shots)`` tokens, where the budget is
  ``max_source_length`` less the tokens of the header and the note;
* label balance: a task with label words (TRACE's C-STANCE and FOMC: A, B, C) takes an answer
  fewer than ``shots / len(label_words)`` times (6 shots: 2 of each), any other task takes
  distinct answers only;
* at most 10,000 draws; a task whose layout shows no examples (MeetingBank) gets none.

Every later evaluation of the task puts them before each prompt in the task's layout
(:class:`~moram_avalanche.benchmarks.text.stream.ICLFormat`): header, note ("We will give you
several examples ..."), then ``example_prefix + example + answer + "\\n\\n"`` per example, then
``example_prefix`` and the prompt without its instruction; a task of a stream that declares no
layout gets ``example + answer + "\\n\\n"`` per example and the prompt as it is. The whole is cut
as every prompt is (:mod:`~moram_avalanche.models.language_model`: a causal model keeps the end,
so an over-long prompt loses its header and first examples, never the question). A task not seen
yet is answered without examples.

Ours draws from the task's training data; TRACE's ``inference/ICL.py`` draws from the test split
it then answers (an example can be the question itself): our choice, so no answer under test is
shown. The draws are seeded by ``seed`` and the task's name.

Run checkpoints hold the examples (the model's weights never change), so a resumed run answers
as an uninterrupted one.
"""

from __future__ import annotations

import json
import random
from typing import Dict, List, Optional, Sequence

import torch

from ...utils.checks import check_nonnegative_int
from ..needs import StrategyNeeds
from .adapters import wrap
from .loop import TextStrategy, sample_scores

#: demonstrations per task (TRACE ``scripts/ICL.sh``: ``--demonstrations_num 6``; the release's
#: ``inference/infer_part.py``: ``args.demonstrations_num = 6``)
ICL_SHOTS = 6
#: draws before giving up on finding ``shots`` examples (``get_random_demonstrations``)
ICL_DRAWS = 10_000
#: the seed of the draws when none is given (TRACE ``scripts/ICL.sh``: ``--seed 1234``)
ICL_SEED = 1234


def check_shots(shots) -> int:
    """``shots`` if it is a non-negative integer; else a ValueError."""
    if isinstance(shots, bool) or not isinstance(shots, int) or shots < 0:
        raise ValueError(f"shots must be a non-negative integer (demonstrations per task; default "
                         f"{ICL_SHOTS}), got {shots!r}")
    return shots


def check_icl_options(options) -> None:
    check_shots(options.get("shots", ICL_SHOTS))
    if "seed" in options:
        check_nonnegative_int("seed", options["seed"])


def strip_instruction(prompt: str, instruction: str) -> str:
    """``prompt`` without the task's ``instruction`` when it starts with it."""
    return prompt[len(instruction):] if instruction and prompt.startswith(instruction) else prompt


def draw_demonstrations(pairs: Sequence, task, shots: int, budget: int, count_tokens, rng: random.Random,
                        draws: int = ICL_DRAWS) -> List[tuple]:
    """Up to ``shots`` ``(example, answer)`` pairs drawn from ``pairs`` by TRACE's rule (module
    docstring); ``count_tokens(text)`` counts a text's tokens, ``budget`` is the prompt's tokens
    left for the examples."""
    layout = getattr(task, "icl", None)
    if not shots or not pairs or (layout is not None and not layout.demonstrations):
        return []
    per_example = budget / (2 * shots)
    labels = tuple(getattr(task, "label_words", ()) or ())
    instruction = getattr(task, "instruction", "")
    chosen: List[tuple] = []
    for _ in range(draws):
        prompt, answer = pairs[rng.randrange(len(pairs))][:2]
        example = strip_instruction(prompt, instruction)
        if count_tokens(example) + count_tokens(answer) > per_example:
            continue
        taken = [a for _, a in chosen]
        if (taken.count(answer) < shots / len(labels)) if labels else (answer not in taken):
            chosen.append((example, answer))
        if len(chosen) == shots:
            break
    return chosen


class TextICL(TextStrategy):
    """FIX (ICL): in-context examples, no training (module docstring).

    Args (besides TextStrategy's evaluation options): shots (examples per task, 6), seed (of the
    draws, 1234); on TRACE the prompt budget ``max_source_length`` is TRACE's 3,584 tokens (set
    by the stream, ``experiments/recipes.py``).
    """

    needs = StrategyNeeds(trains=False)
    check_values = staticmethod(check_icl_options)

    def __init__(self, *, model, tokenizer=None, shots: int = ICL_SHOTS, seed: int = ICL_SEED, **kwargs):
        model = wrap(model, tokenizer)
        model.requires_grad_(False)
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)
        self.shots, self.seed = shots, seed
        #: task index -> its demonstrations, each ``example_prefix + example + answer + "\n\n"``
        self.demonstrations: Dict[int, List[str]] = {}

    # ------------------------------------------------------------------ "training": remember
    def make_optimizer(self, **kwargs):
        self.optimized_param_id = {}
        self.optimizer = None

    def training_epoch(self, **kwargs):
        experience = self.experience
        task = self.task_of(experience.current_experience)
        layout = getattr(task, "icl", None)
        header = "" if layout is None else layout.header + layout.note
        data = experience.dataset
        pairs = [data[i][:2] for i in range(len(data))]
        budget = self.model.max_source_length - (self.model.count_tokens(header) if header else 0)
        rng = random.Random(f"{self.seed}:{getattr(experience, 'task_name', experience.current_experience)}")
        picks = draw_demonstrations(pairs, task, self.shots, budget, self.model.count_tokens, rng)
        prefix = "" if layout is None else layout.example_prefix
        self.demonstrations[experience.current_experience] = [f"{prefix}{e}{a}\n\n" for e, a in picks]

    def task_of(self, index: int):
        tasks = getattr(self.experience, "tasks", None) or ()
        return tasks[index] if index < len(tasks) else None

    # ------------------------------------------------------------------ answers
    def with_demonstrations(self, prompts: Sequence[str], task: int, stream_task: Optional[object] = None) -> List[str]:
        """Each prompt after its task's demonstrations, in the task's layout (module docstring)."""
        shown = self.demonstrations.get(task, [])
        layout = getattr(stream_task, "icl", None)
        if not shown:
            return list(prompts)
        if layout is None:
            return ["".join(shown) + prompt for prompt in prompts]
        instruction = getattr(stream_task, "instruction", "")
        return [layout.header + layout.note + "".join(shown) + layout.example_prefix
                + strip_instruction(prompt, instruction) for prompt in prompts]

    def forward(self):
        if self.is_training:  # not reached: nothing trains
            raise RuntimeError("TextICL does not train")
        index = self.experience.current_experience
        prompts = self.with_demonstrations(self.mb_x, index, self.task_of(index))
        self.mb_predictions = self.model.generate(prompts, self.max_new_tokens, self.mb_prompt_cuts, self.decoding)
        return sample_scores(self.mb_predictions, self.mb_y, self.experience.metric, self.device,
                             sources=self.mb_x)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_model_state(self) -> dict:
        """The demonstrations (the weights never change), one tensor per task: the UTF-8 bytes
        of its demonstrations as JSON (run checkpoints hold tensors only)."""
        return {f"demonstrations.{task}": torch.tensor(list(json.dumps(shown).encode("utf-8")), dtype=torch.uint8)
                for task, shown in self.demonstrations.items()}

    def load_checkpoint_model_state(self, state: dict) -> None:
        self.demonstrations = {int(key.rpartition(".")[2]): json.loads(bytes(value.tolist()).decode("utf-8"))
                               for key, value in state.items() if key.startswith("demonstrations.")}


__all__ = ["ICL_DRAWS", "ICL_SEED", "ICL_SHOTS", "TextICL", "check_icl_options", "check_shots", "draw_demonstrations",
           "strip_instruction"]
