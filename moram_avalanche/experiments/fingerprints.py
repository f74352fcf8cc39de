"""What a run reads besides its data, as short hashes: the base model's weights by their bytes and
its files (a language model's ``config.json``, tokenizer files and ``generation_config.json``),
recorded in the run's ``contents`` and compared when it resumes
(:func:`~moram_avalanche.experiments.record.check_contents`).

The weights are hashed as the run holds them, not as files (:func:`weights_fingerprint`): every
parameter's and buffer's name, dtype, shape and raw bytes, in name order. One function serves
CLIP and language models, and weights that come from no file (random weights drawn from the
seed, a model built in Python for ``run_stream``); a re-saved or re-sharded file of the same
weights is the same run, and a cast (``--dtype bfloat16``) is not. It costs what reading the
files once costs (the same bytes, hashed once per load, after the weights are in memory anyway);
a file hash would need one finder per family (open_clip's cache, the Hugging Face cache, the
package's own cache) and would miss weights made in memory. Unlike 0.7's weights checksum (the
sum of ``|w|``), a sign flipped, two rows or two projections swapped are seen.

A model's own files come from its ``file_fingerprints()`` when it has one
(:meth:`~moram_avalanche.models.language_model.LanguageModel.file_fingerprints`); the run path
knows no family.
"""

from __future__ import annotations

from typing import Dict

from ..utils.digests import digest

#: what each fingerprint of ``contents`` is called in messages (the record's keys, in order)
FINGERPRINTS = {
    "weights": "the weights' bytes",
    "config": "config.json",
    "tokenizer": "the tokenizer files",
    "generation_config": "generation_config.json",
    "decoding": "the decoding settings",
}


def _tensor_parts(name: str, tensor):
    """A tensor's name, dtype and shape, then its raw bytes (the whole tensor: a sharded one is
    gathered, a collective every process makes)."""
    import torch

    whole = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    data = whole.detach().contiguous().cpu().reshape(-1)
    yield [name, str(tensor.dtype).replace("torch.", ""), list(tensor.shape)]
    yield data.view(torch.uint8).numpy().data if data.numel() else b""


def weights_fingerprint(model) -> str:
    """A short hash of ``model``'s weights (module docstring): each parameter and buffer (a tied
    weight once, under its first name), its name, dtype, shape and bytes, in name order."""
    import torch

    tensors = dict(model.named_parameters())
    tensors.update((name, buffer) for name, buffer in model.named_buffers() if name not in tensors)
    with torch.no_grad():
        return digest(part for name in sorted(tensors) for part in _tensor_parts(name, tensors[name]))


def model_fingerprints(model) -> Dict[str, str]:
    """``{"weights": hash, ...}``: :func:`weights_fingerprint` and the model's own file hashes
    (its ``file_fingerprints()``, module docstring)."""
    files = getattr(model, "file_fingerprints", None)
    return {"weights": weights_fingerprint(model), **(dict(files()) if callable(files) else {})}


__all__ = ["FINGERPRINTS", "model_fingerprints", "weights_fingerprint"]
