"""Shared fixtures: a tiny random-init open_clip model (no downloads)."""

import json

import pytest
import torch

TINY_NAME = "moram-test-tiny"
TINY_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 8, "head_width": 32},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


@pytest.fixture(scope="session")
def tiny_clip_name(tmp_path_factory):
    """Register a tiny model config with open_clip; returns its name."""
    import open_clip

    path = tmp_path_factory.mktemp("open_clip_configs") / f"{TINY_NAME}.json"
    path.write_text(json.dumps(TINY_CONFIG))
    open_clip.add_model_config(path)
    return TINY_NAME


@pytest.fixture
def tiny_clip():
    """A fresh random-init tiny open_clip CLIP in eval mode."""
    import open_clip

    torch.manual_seed(0)
    return open_clip.CLIP(**TINY_CONFIG).eval()
