"""The CLIP models and weights the package adds to open_clip's own, each registered once.

* **Model configs**: ``model_configs/*.json`` beside this module, in open_clip's own format (its
  ``open_clip/model_configs/*.json``: ``embed_dim``, ``vision_cfg``, ``text_cfg``), added to
  open_clip's registry by :func:`register_model_configs` with ``open_clip.add_model_config``.
  :func:`~moram_avalanche.clip.load.load_clip` registers them before it looks a name up, so each
  loads by name in any process: ``load_clip("moram-synthetic-tiny", pretrained=None)``. One
  today, :data:`TINY_NAME`: the demo's tiny CLIP (a ViT of 3 blocks of width 96 on 32-pixel
  images, patches of 8; a text tower of 3 blocks of width 64 reading 16 tokens; 64-d embeddings),
  small enough to train on a laptop CPU in seconds.
* **Weights the package makes** instead of downloading (:data:`MADE_WEIGHTS`): a tag of a model,
  named as open_clip names its pretrained tags, whose weights a function makes once and caches
  (:func:`made_weights`). ``synthetic`` of the tiny CLIP is its brief contrastive pre-training on
  a synthetic world of captioned shapes, at the demo's default settings
  (:func:`~moram_avalanche.experiments.clip.demo.synthetic_weights`), so that
  ``load_clip(TINY_NAME, pretrained="synthetic")`` from Python and ``--pretrained synthetic`` on
  the command line load the same cached file. The function is named by its dotted path,
  ``module:attribute`` as packaging's entry points name an object, and imported when the weights
  are first asked for: the pre-training reads the synthetic benchmark's images and runs in the
  experiments room, which this room may not import.
"""

from __future__ import annotations

import functools
import importlib
import json
from pathlib import Path
from typing import Dict, Optional, Tuple

from ..utils.cache import default_cache_dir

#: the folder of the package's open_clip model configs (one JSON file per model, named by it)
MODEL_CONFIGS = Path(__file__).with_name("model_configs")
#: the demo's tiny CLIP (``--model moram-synthetic-tiny``)
TINY_NAME = "moram-synthetic-tiny"

#: the weights the package makes: model name -> tag -> the ``module:function`` that makes them,
#: ``(cache_dir, progress) -> the path of the saved state dict`` (made once, then read from the cache)
MADE_WEIGHTS: Dict[str, Dict[str, str]] = {
    TINY_NAME: {"synthetic": "moram_avalanche.experiments.clip.demo:synthetic_weights"},
}


def registered_models() -> Tuple[str, ...]:
    """The names of the models the package registers with open_clip (:data:`MODEL_CONFIGS`)."""
    return tuple(sorted(path.stem for path in MODEL_CONFIGS.glob("*.json")))


def model_config(name: str) -> dict:
    """The open_clip config of model ``name``, one the package registers, as its JSON file holds it;
    a ValueError naming the package's models for any other name."""
    path = MODEL_CONFIGS / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"{name!r} is not a model the package registers with open_clip; its models: "
                         f"{', '.join(registered_models())}")
    return json.loads(path.read_text())


#: the tiny CLIP's config (``open_clip.CLIP(**TINY_CONFIG)`` builds it without registering anything)
TINY_CONFIG = model_config(TINY_NAME)


@functools.lru_cache(maxsize=None)
def register_model_configs() -> Tuple[str, ...]:
    """Add the package's model configs to open_clip's registry, once per process; returns their
    names. Afterwards ``open_clip.create_model(TINY_NAME)`` works as for open_clip's own names."""
    import open_clip

    open_clip.add_model_config(MODEL_CONFIGS)
    return registered_models()


def made_tags(name: str) -> Tuple[str, ...]:
    """The tags of model ``name`` whose weights the package makes (:data:`MADE_WEIGHTS`)."""
    return tuple(MADE_WEIGHTS.get(name, {}))


def made_weights(name: str, tag: str, cache_dir=None, progress: bool = True) -> Path:
    """The file of the weights the package makes as ``tag`` of model ``name``: made on first use
    (``progress``: a bar on a terminal), then read from ``cache_dir`` (default: the package's
    cache, :func:`~moram_avalanche.utils.cache.default_cache_dir`). A ValueError listing the
    tags it makes for any other ``(name, tag)``."""
    if tag not in made_tags(name):
        made = "; ".join(f"{model}: {', '.join(tags)}" for model, tags in MADE_WEIGHTS.items())
        raise ValueError(f"the package makes no weights tagged {tag!r} for {name!r}; it makes {made}")
    module, _, function = MADE_WEIGHTS[name][tag].partition(":")
    make = getattr(importlib.import_module(module), function)
    return Path(make(Path(cache_dir) if cache_dir is not None else default_cache_dir(), progress=progress))


def resolve_pretrained(name: str, pretrained: Optional[str], cache_dir=None, progress: bool = True
                       ) -> Optional[str]:
    """``pretrained`` as open_clip loads it: a tag whose weights the package makes becomes the
    path of their file (:func:`made_weights`, cached in ``cache_dir``); anything else -- an
    open_clip tag, a file, None -- is returned as given."""
    if pretrained is None or pretrained not in made_tags(name):
        return pretrained
    return str(made_weights(name, pretrained, cache_dir, progress))


__all__ = ["MADE_WEIGHTS", "MODEL_CONFIGS", "TINY_CONFIG", "TINY_NAME", "made_tags", "made_weights", "model_config",
           "register_model_configs", "registered_models", "resolve_pretrained"]
