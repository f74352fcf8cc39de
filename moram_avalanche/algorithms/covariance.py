"""Input covariances ``C = mean over tokens of x x^T`` of chosen modules (pure torch; InfLoRA's memory).

InfLoRA's covariance pass [liangyanshuo/InfLoRA models/vit_inflora.py, ``cur_matrix``]: every
token of every input (for a ViT: the class token and the patch tokens of each image) counts
once; the last dimension is the feature dimension. Each batch's second moment is a float32
GEMM run with autocast disabled (inside an fp16 autocast region, CLIP's LN1 outliers squared
and summed over thousands of tokens could overflow fp16); the running sums across batches
are float64.

A ``token_mask`` (the text family: padding positions left out) picks the tokens that count: a
function of the module's key and its input ``x`` returning a boolean ``x.shape[:-1]`` mask, or None
for every token.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, Mapping, Optional

import torch
from torch import nn


class InputCovariance:
    """Context manager: while open, forward pre-hooks accumulate each module's input second moment.

    Args:
        modules: ``{key: module}``; the first positional input of each module is recorded.
        token_mask: ``(key, x) -> bool mask of x.shape[:-1]`` (or None: every token) choosing the
            tokens that count; None: every token of every input counts.

    After (or during) the pass, :meth:`covariances` gives ``{key: C}`` (float64, on the
    inputs' device); a key whose module saw no token raises.
    """

    def __init__(self, modules: Mapping[str, nn.Module],
                 token_mask: Optional[Callable[[str, torch.Tensor], Optional[torch.Tensor]]] = None) -> None:
        self.modules = dict(modules)
        self.token_mask = token_mask
        self.sums: Dict[str, torch.Tensor] = {}
        self.counts: Dict[str, int] = {key: 0 for key in self.modules}
        self._handles = []

    def __enter__(self) -> "InputCovariance":
        for key, module in self.modules.items():
            self._handles.append(module.register_forward_pre_hook(self._hook(key)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _hook(self, key):
        def record(module, args):
            x = args[0].detach()
            mask = self.token_mask(key, x) if self.token_mask is not None else None
            if mask is not None and tuple(mask.shape) != tuple(x.shape[:-1]):
                raise ValueError(f"the token mask of {key!r} has shape {tuple(mask.shape)}, its input "
                                 f"{tuple(x.shape)}: a mask gives one entry per token (the input's shape "
                                 "without its last dimension)")
            kept = x[mask.to(device=x.device, dtype=torch.bool)] if mask is not None else x
            tokens = kept.reshape(-1, x.shape[-1]).float()
            with torch.autocast(device_type=x.device.type, enabled=False):
                moment = (tokens.t() @ tokens).double()
            self.sums[key] = moment if key not in self.sums else self.sums[key] + moment
            self.counts[key] += tokens.shape[0]
        return record

    def covariances(self) -> Dict[str, torch.Tensor]:
        empty = [key for key, count in self.counts.items() if count == 0]
        if empty:
            raise RuntimeError(f"no input reached {empty[:3]} during the covariance pass")
        return {key: self.sums[key] / self.counts[key] for key in self.modules}


def input_covariances(
    model: nn.Module,
    recorded: Mapping[str, nn.Module],
    *,
    images: Iterable[torch.Tensor] = (),
    tokens: Iterable[torch.Tensor] = (),
) -> Dict[str, torch.Tensor]:
    """``{key: mean over tokens of x x^T}`` of the input of each ``recorded`` module (no grad).

    ``images`` batches go through ``model.encode_image``, ``tokens`` batches through
    ``model.encode_text`` (a CLIP model); each recorded module sees the tokens of the encoder
    it lives in. The model runs in eval mode (restored after).
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), InputCovariance(recorded) as recorder:
            for batch in images:
                model.encode_image(batch)
            for batch in tokens:
                model.encode_text(batch)
    finally:
        model.train(was_training)
    return recorder.covariances()


__all__ = ["InputCovariance", "input_covariances"]
