"""FIX (ICL): the frozen model answers each prompt after solved examples of its own task.

The "FIX (ICL)" row of the paper's TRACE table (``tab:llm_cl``): nothing trains; when a task
arrives, its first ``shots`` training examples (in file order) become that task's
demonstrations, and every later evaluation of the task puts them before each prompt, each as
``prompt + answer + "\\n\\n"`` (the MoRAM release's in-context prompt, ``TRACE/utils/data/
data_collator.py``: ``demonstration["prompt"] + demonstration["answer"] + "\\n\\n"``). A task
not seen yet is answered without demonstrations. Demonstrations that would push a prompt past
``max_source_length`` tokens are left out, last first, so the question itself is never cut.

Run checkpoints hold the demonstrations (the model's weights never change), so a resumed run
answers as an uninterrupted one.
"""

from __future__ import annotations

import json
from typing import Dict, List, Sequence

import torch

from .needs import StrategyNeeds
from .text_loop import TextStrategy, sample_scores
from .text_strategies import wrap

#: demonstrations per task (TRACE's ICL evaluations use a few; the paper does not say how many)
ICL_SHOTS = 3


def check_shots(shots) -> int:
    """``shots`` if it is a non-negative integer; else a ValueError."""
    if isinstance(shots, bool) or not isinstance(shots, int) or shots < 0:
        raise ValueError(f"shots must be a non-negative integer (demonstrations per task; default "
                         f"{ICL_SHOTS}), got {shots!r}")
    return shots


class TextICL(TextStrategy):
    """FIX (ICL): in-context examples, no training (module docstring).

    Args (besides TextStrategy's evaluation options): shots (demonstrations per task, 3).
    """

    needs = StrategyNeeds(trains=False)
    check_values = staticmethod(lambda options: check_shots(options.get("shots", ICL_SHOTS)))

    def __init__(self, *, model, tokenizer=None, shots: int = ICL_SHOTS, **kwargs):
        model = wrap(model, tokenizer)
        model.requires_grad_(False)
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)
        self.shots = shots
        #: task index -> its demonstrations, in order
        self.demonstrations: Dict[int, List[str]] = {}

    # ------------------------------------------------------------------ "training": remember
    def make_optimizer(self, **kwargs):
        self.optimized_param_id = {}
        self.optimizer = None

    def training_epoch(self, **kwargs):
        data = self.experience.dataset
        picks = [data[i] for i in range(min(self.shots, len(data)))]
        self.demonstrations[self.experience.current_experience] = [f"{p}{a}\n\n" for p, a, _ in picks]

    # ------------------------------------------------------------------ answers
    def with_demonstrations(self, prompts: Sequence[str], task: int) -> List[str]:
        """Each prompt after its task's demonstrations that fit ``max_source_length`` tokens."""
        shown = self.demonstrations.get(task, [])
        out = []
        for prompt in prompts:
            kept = list(shown)
            while kept and len(self.model._ids([("".join(kept)) + prompt], 10 ** 9)[0]) > self.model.max_source_length:
                kept.pop()
            out.append("".join(kept) + prompt)
        return out

    def forward(self):
        if self.is_training:  # not reached: nothing trains
            raise RuntimeError("TextICL does not train")
        prompts = self.with_demonstrations(self.mb_x, self.experience.current_experience)
        self.mb_predictions = self.model.generate(prompts, self.max_new_tokens)
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


__all__ = ["ICL_SHOTS", "TextICL", "check_shots"]
