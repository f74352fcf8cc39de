"""Input covariances of a language model's linears over real tokens only (InfLoRA's memory, text family).

InfLoRA records ``C = mean over tokens of x x^T`` of each adapted linear's input while its
training data runs through the model [liangyanshuo/InfLoRA models/vit_inflora.py, ``cur_matrix``:
a ViT has no padding, every token counts]. A language model's batches are padded, and a padding
position's input (a layer-normed hidden state, not zero) is no input of the task: here a token
counts when it is a real one of the sequence the linear reads, the rest are left out.

The batches are fed as training feeds them (:meth:`LanguageModel.teacher_forced
<moram_avalanche.models.language_model.LanguageModel.teacher_forced>`, model in eval mode, no
gradient):

* a causal model reads one sequence: its ``attention_mask`` (the prompt and answer tokens) is
  the mask of every linear;
* a seq2seq model (T5) reads two: the encoder's linears, and a decoder linear fed the encoder's
  output (T5's cross-attention ``k`` and ``v``), read the prompt tokens (``attention_mask``);
  the other decoder linears read the decoder positions, real where the label is an answer token
  (``labels != IGNORE_INDEX``: the position that predicts it). Which one a decoder linear
  reads is told by its input itself: the encoder's output tensor (the same storage, as T5's
  ``T5Attention`` passes ``key_value_states`` to ``k`` and ``v``), or not.

A mask whose shape does not fit a linear's input is an error (never a silent guess).
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from ..algorithms.covariance import InputCovariance
from .language_model import IGNORE_INDEX, LanguageModel, PromptCut

#: one batch of the pass: prompts, answers, and how each prompt is cut (None: the model's way)
Batch = Tuple[Sequence[str], Sequence[str], Optional[Sequence[PromptCut]]]


def token_input_covariances(model: LanguageModel, recorded: Mapping[str, nn.Module],
                            batches: Iterable[Batch]) -> Dict[str, torch.Tensor]:
    """``{key: mean over real tokens of x x^T}`` (float64) of the input of each ``recorded``
    linear of ``model``, over ``batches`` (module docstring). The model runs in eval mode
    (restored after)."""
    masks = _Masks()
    was_training = model.training
    model.eval()
    handles = []
    try:
        if model.seq2seq:
            encoder = model.model.get_encoder()
            handles.append(encoder.register_forward_pre_hook(lambda module, args: masks.enter_encoder()))
            handles.append(encoder.register_forward_hook(lambda module, args, output: masks.leave_encoder(output)))
        with torch.no_grad(), InputCovariance(recorded, token_mask=masks.of) as recorder:
            for prompts, answers, cuts in batches:
                inputs, labels = model.teacher_forced(prompts, answers, cuts)
                if model.seq2seq:
                    masks.start(inputs["attention_mask"], labels != IGNORE_INDEX)
                    model.model(**inputs, labels=labels)
                else:
                    masks.start(inputs["attention_mask"], None)
                    model.model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return recorder.covariances()


class _Masks:
    """The masks of the batch being run and which sequence a linear's input belongs to."""

    def __init__(self) -> None:
        self.source: Optional[torch.Tensor] = None
        self.target: Optional[torch.Tensor] = None
        self.in_encoder = False
        self.encoder_output: Optional[torch.Tensor] = None

    def start(self, source: torch.Tensor, target: Optional[torch.Tensor]) -> None:
        self.source, self.target = source.bool(), (target.bool() if target is not None else None)
        self.in_encoder, self.encoder_output = False, None

    def enter_encoder(self) -> None:
        self.in_encoder = True

    def leave_encoder(self, output) -> None:
        self.in_encoder = False
        hidden = output[0] if isinstance(output, (tuple, list)) else getattr(output, "last_hidden_state", output)
        self.encoder_output = hidden

    def _reads_encoder_output(self, x: torch.Tensor) -> bool:
        out = self.encoder_output
        return (out is not None and x.shape == out.shape and x.data_ptr() == out.data_ptr()
                and x.stride() == out.stride())

    def of(self, key: str, x: torch.Tensor) -> torch.Tensor:
        if self.target is None or self.in_encoder or self._reads_encoder_output(x):
            mask, which = self.source, "prompt"
        else:
            mask, which = self.target, "answer"
        if mask is None or tuple(mask.shape) != tuple(x.shape[:-1]):
            raise RuntimeError(
                f"the covariance pass cannot tell which tokens {key!r} reads: its input has shape "
                f"{tuple(x.shape)}, the batch's {which} mask {None if mask is None else tuple(mask.shape)}; "
                "InfLoRA's text pass supports linears fed the prompt or answer sequence (T5's and causal "
                "models' attention and MLP projections)")
        return mask


__all__ = ["Batch", "token_input_covariances"]
