"""The package's own open_clip models and made weights, registered once (clip/registry.py)."""

import configparser
import importlib
import inspect
from pathlib import Path

import pytest

from moram_avalanche.clip import registry
from moram_avalanche.clip.registry import (
    MADE_WEIGHTS,
    TINY_CONFIG,
    TINY_NAME,
    made_tags,
    made_weights,
    model_config,
    registered_models,
    resolve_pretrained,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_tiny_clip_is_the_demos_model_config():
    # the demo's cached weights are keyed by this config: a change would pre-train the demo again
    assert TINY_NAME == "moram-synthetic-tiny" and registered_models() == (TINY_NAME,)
    assert TINY_CONFIG == model_config(TINY_NAME) == {
        "embed_dim": 64,
        "vision_cfg": {"image_size": 32, "layers": 3, "width": 96, "patch_size": 8, "head_width": 32},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 3},
    }
    with pytest.raises(ValueError, match="'ViT-B-16' is not a model the package registers with open_clip; "
                                         "its models: moram-synthetic-tiny"):
        model_config("ViT-B-16")


def test_registering_makes_the_names_open_clip_names():
    import open_clip

    assert registry.register_model_configs() == (TINY_NAME,)
    assert TINY_NAME in open_clip.list_models() and open_clip.get_model_config(TINY_NAME) == TINY_CONFIG


def test_every_made_weights_function_exists_and_takes_the_cache_and_progress():
    # named by a dotted path (this room may not import the experiments room): a stale name fails here
    for name, tags in MADE_WEIGHTS.items():
        assert name in registered_models()
        for tag, target in tags.items():
            module, _, function = target.partition(":")
            make = getattr(importlib.import_module(module), function)
            assert list(inspect.signature(make).parameters) == ["cache_dir", "progress"], (name, tag)
    assert made_tags(TINY_NAME) == ("synthetic",) and made_tags("ViT-B-16") == ()


def test_only_made_tags_are_resolved(tmp_path):
    for given in (None, "openai", str(tmp_path / "weights.pt"), "Synthetic"):
        assert resolve_pretrained(TINY_NAME, given, tmp_path) == given
    assert resolve_pretrained("ViT-B-16", "synthetic", tmp_path) == "synthetic"  # open_clip says what is wrong
    assert list(tmp_path.iterdir()) == []  # nothing made
    with pytest.raises(ValueError, match="the package makes no weights tagged 'openai' for 'moram-synthetic-tiny'; "
                                         "it makes moram-synthetic-tiny: synthetic"):
        made_weights(TINY_NAME, "openai", tmp_path)


def test_the_model_configs_ship_with_the_package():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert setup["options.package_data"]["moram_avalanche.clip"].strip() == "model_configs/*.json"
    assert registry.MODEL_CONFIGS == ROOT / "moram_avalanche" / "clip" / "model_configs"
