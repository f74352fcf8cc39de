"""MTL (``mtl``), the upper bound of the language-model tables: every weight trained jointly on the tasks so far."""

from __future__ import annotations

from .finetune import TextFineTune


class TextMTL(TextFineTune):
    """MTL, the upper bound of the language-model tables: every weight trained jointly on the
    tasks (O-LoRA's and the MoRAM paper's "MTL" row).

    In a stream: at experience ``t`` the model restarts from the weights it was built with and
    trains on the union of the training sets of tasks ``0..t`` (read from the experience's
    stream, so a resumed run needs no stored data); the last row of the accuracy matrix is
    joint training on every task -- the number the tables report. The restart copy of the
    weights is kept on the CPU.
    """

    def __init__(self, *, model, tokenizer=None, **kwargs):
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)
        self.initial_state = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}

    def train_dataset_adaptation(self, **kwargs):
        """The union of the training sets of every task up to the current one."""
        from avalanche.benchmarks.utils import concat_datasets

        stream, index = self.experience.origin_stream, self.experience.current_experience
        self.adapted_dataset = concat_datasets([stream[i].dataset for i in range(index + 1)])

    def model_adaptation(self, model=None):
        """Restart from the weights the strategy was built with (before the optimizer is made)."""
        if self.is_training:
            self.model.load_state_dict(self.initial_state)
        return super().model_adaptation(model)



__all__ = ["TextMTL"]
