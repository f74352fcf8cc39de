"""load_clip: real open_clip loading code, exercised with a tiny registered config."""

import pytest
import torch

from moram_avalanche.clip.load import WeightsUnavailableError, load_clip


def test_random_init_returns_model_transforms_and_tokenizer(tiny_clip_name):
    model, train_tf, eval_tf, tokenizer = load_clip(tiny_clip_name, pretrained=None)
    assert model.visual.image_size == (32, 32)
    tokens = tokenizer(["a photo of a cat."])
    assert tokens.shape == (1, 16)
    from PIL import Image
    image = Image.new("RGB", (40, 50), color=(10, 200, 30))
    assert eval_tf(image).shape == (3, 32, 32) and train_tf(image).shape == (3, 32, 32)


def test_local_weights_file_is_loaded(tiny_clip_name, tmp_path):
    source, *_ = load_clip(tiny_clip_name, pretrained=None)
    path = tmp_path / "weights.pt"
    torch.save(source.state_dict(), path)
    loaded, *_ = load_clip(tiny_clip_name, pretrained=str(path))
    for (name, a), (_, b) in zip(source.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_unknown_model_name():
    with pytest.raises(ValueError, match="unknown open_clip model 'ViT-Z-99'"):
        load_clip("ViT-Z-99", pretrained=None)


def test_unknown_tag_lists_known_tags_and_the_file_option():
    with pytest.raises(ValueError) as info:
        load_clip("ViT-B-16", pretrained="no-such-tag")
    message = str(info.value)
    assert "'openai'" in message and "pretrained='/path/to/weights.bin'" in message


def test_unavailable_download_says_which_weights_and_how_to_pass_a_file(monkeypatch):
    import open_clip

    def offline(*args, **kwargs):
        raise OSError("Name or service not known")

    monkeypatch.setattr(open_clip, "download_pretrained", offline)
    with pytest.raises(WeightsUnavailableError) as info:
        load_clip("ViT-B-16", pretrained="openai")
    message = str(info.value)
    assert "'ViT-B-16'" in message and "'openai'" in message
    assert "pretrained='/path/to/open_clip_pytorch_model.bin'" in message
    assert "force_quick_gelu=True" in message  # OpenAI weights use QuickGELU
