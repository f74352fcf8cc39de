"""What a dataset holds, as one short hash: how a resumed run knows its data is the data it began with.

A run's record keeps one hash per split (:func:`split_hashes`: every experience's, in stream
order) and a resumed run whose data hash differs is refused
(:func:`~moram_avalanche.experiments.record.check_contents`): a data file edited since, with the
same number of items, is no longer continued silently.

What is hashed is what the stream *reads*, chosen to be cheap at every size:

* text streams: every (prompt, answer) pair, in order (:class:`~.text.stream.PromptAnswers`):
  an edited answer, prompt or order is seen;
* images on disk: every (file path, label) pair (:class:`~.images.datasets.ImageFiles`), not the image
  bytes (reading every image of X-TAIL's test sets would cost minutes): an image replaced under
  the same name is not seen, one renamed, added, removed or relabelled is;
* images in one array (MNIST's): the item indices, labels and the array's shape and source;
* the synthetic stream's generated images: their pixels (a few hundred 32 x 32 images).

A dataset of another kind (a user's own) has no ``fingerprint()`` and records no hash: its
data are not compared when the run resumes.
"""

from __future__ import annotations

from typing import Optional

from ..utils.digests import HASH_CHARS, digest


def fingerprint(dataset) -> Optional[str]:
    """The dataset's ``fingerprint()`` (module docstring), or None when it has none."""
    own = getattr(dataset, "fingerprint", None)
    return own() if callable(own) else None


def split_hashes(benchmark) -> dict:
    """``{"train": hash, "test": hash}``: each split's experiences' fingerprints (their
    ``fingerprint`` attribute, set by the stream builders), hashed in stream order; a split with
    an experience of unknown data is None (not compared)."""
    hashes = {}
    for split in ("train", "test"):
        stream = getattr(benchmark, f"{split}_stream", None)
        prints = [getattr(experience, "fingerprint", None) for experience in stream] if stream is not None else [None]
        hashes[split] = None if not prints or any(p is None for p in prints) else digest(prints)
    return hashes


__all__ = ["HASH_CHARS", "digest", "fingerprint", "split_hashes"]
