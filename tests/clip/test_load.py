"""load_clip: real open_clip loading code, exercised with a tiny registered config."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

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
    assert "weights_origin='openai'" in message and "QuickGELU" in message  # OpenAI weights use QuickGELU


# ------------------------------------------------------------------ the activation of OpenAI's weights
def activations(model):
    """The activation module of every MLP of both towers."""
    return [block.mlp.gelu for tower in (model.visual.transformer, model.transformer)
            for block in tower.resblocks]


def test_openai_tag_runs_with_quick_gelu_in_both_towers(monkeypatch, tmp_path):
    """open_clip 3.3 builds nn.GELU for ("ViT-B-16", "openai") and only warns; the weights were
    trained with QuickGELU. The download is mocked to a local file of random weights."""
    import open_clip
    from open_clip.transformer import QuickGELU

    with torch.device("meta"):  # shapes only: no time spent initialising 150 M parameters
        shapes = open_clip.CLIP(**open_clip.get_model_config("ViT-B-16")).state_dict()
    generator = torch.Generator().manual_seed(0)
    weights = {k: torch.randn(v.shape, generator=generator, dtype=torch.float16).to(v.dtype)
               if v.is_floating_point() else torch.zeros(v.shape, dtype=v.dtype)
               for k, v in shapes.items()}
    path = tmp_path / "open_clip_pytorch_model.bin"
    torch.save(weights, path)
    downloads = []

    def download(config, cache_dir=None):
        downloads.append(config["url"])
        return str(path)

    monkeypatch.setattr(open_clip, "download_pretrained", download)
    monkeypatch.setattr(open_clip.factory, "download_pretrained", download)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # open_clip's QuickGELU-mismatch warning included
        model, *_ = load_clip("ViT-B-16", pretrained="openai")
    assert downloads and all("ViT-B-16.pt" in url for url in downloads)
    found = activations(model)
    assert len(found) == 24 and all(isinstance(a, QuickGELU) for a in found)
    first = model.visual.transformer.resblocks[0].mlp.c_fc.weight
    assert torch.equal(first, weights["visual.transformer.resblocks.0.mlp.c_fc.weight"])  # the file's


@pytest.fixture
def tiny_with_openai_tag(tiny_clip_name, monkeypatch, tmp_path):
    """The tiny model with a pretend "openai" tag (trained with QuickGELU, as OpenAI's) and a
    "-quickgelu" twin; returns a file of its random weights."""
    import json

    import open_clip
    from open_clip import pretrained

    from tiny_clip import TINY_CONFIG

    config = tmp_path / f"{tiny_clip_name}-quickgelu.json"
    config.write_text(json.dumps({**TINY_CONFIG, "quick_gelu": True}))
    open_clip.add_model_config(config)
    tags = {"openai": {"url": "", "hf_hub": "", "quick_gelu": True, "mean": (0.1, 0.2, 0.3),
                       "std": (0.5, 0.5, 0.5), "interpolation": "bicubic", "resize_mode": "shortest"},
            "plain": {"url": "", "hf_hub": "", "quick_gelu": False}}
    monkeypatch.setitem(pretrained._PRETRAINED, tiny_clip_name, tags)
    monkeypatch.setitem(pretrained._PRETRAINED, f"{tiny_clip_name}-quickgelu", {"openai": tags["openai"]})
    model, *_ = load_clip(tiny_clip_name, pretrained=None)
    path = tmp_path / "weights.pt"
    torch.save(model.state_dict(), path)
    return str(path)


def test_a_file_said_to_hold_openai_weights_runs_with_quick_gelu(tiny_clip_name, tiny_with_openai_tag):
    from open_clip.transformer import QuickGELU

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, _, eval_tf, _ = load_clip(tiny_clip_name, pretrained=tiny_with_openai_tag,
                                         weights_origin="openai")
    assert all(isinstance(a, QuickGELU) for a in activations(model))
    normalize = [t for t in eval_tf.transforms if type(t).__name__ == "Normalize"][0]
    assert tuple(normalize.mean) == (0.1, 0.2, 0.3)  # the origin tag's preprocessing
    # the -quickgelu name says it too, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, *_ = load_clip(f"{tiny_clip_name}-quickgelu", pretrained=tiny_with_openai_tag)
    assert all(isinstance(a, QuickGELU) for a in activations(model))
    # weights of another origin: GELU, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, *_ = load_clip(tiny_clip_name, pretrained=tiny_with_openai_tag, weights_origin="plain")
    assert not any(isinstance(a, QuickGELU) for a in activations(model))


def test_a_file_of_unknown_origin_warns_how_to_say_what_it_is(tiny_clip_name, tiny_with_openai_tag):
    from moram_avalanche.clip.load import UnknownWeightsOriginWarning

    with pytest.warns(UnknownWeightsOriginWarning) as caught:
        model, *_ = load_clip(tiny_clip_name, pretrained=tiny_with_openai_tag)
    message = str(caught[0].message)
    assert "['openai']" in message and "QuickGELU" in message
    assert "weights_origin='openai'" in message and "--weights-origin openai" in message
    assert f"{tiny_clip_name}-quickgelu" in message
    assert isinstance(activations(model)[0], torch.nn.GELU)  # built as the name says


def test_bad_weights_origin(tiny_clip_name, tiny_with_openai_tag):
    with pytest.raises(ValueError, match="weights_origin='laion' is not a pretrained tag"):
        load_clip(tiny_clip_name, pretrained=tiny_with_openai_tag, weights_origin="laion")
    with pytest.raises(ValueError, match="no pretrained weights are loaded"):
        load_clip(tiny_clip_name, pretrained=None, weights_origin="openai")


# ------------------------------------------------------------------ the package's own models, by name
def fresh_python(code: str, tmp_path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (nothing registered beforehand), the package's cache in ``tmp_path``."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "MORAM_AVALANCHE_CACHE": str(tmp_path / "cache"),
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)


def test_the_demos_tiny_clip_loads_by_name_in_a_fresh_process(tmp_path):
    out = fresh_python(
        "from moram_avalanche import load_clip\n"
        "model, train_tf, eval_tf, tokenizer = load_clip('moram-synthetic-tiny', pretrained=None)\n"
        "print(model.visual.image_size, len(model.visual.transformer.resblocks), len(model.transformer.resblocks),"
        " model.visual.transformer.width, model.transformer.width, model.text_projection.shape[1],"
        " tuple(tokenizer(['a cat']).shape))\n", tmp_path)
    assert out.returncode == 0, out.stderr
    # the config of moram_avalanche/clip/model_configs/moram-synthetic-tiny.json, as built by open_clip
    assert out.stdout.split("\n")[-2] == "(32, 32) 3 3 96 64 64 (1, 16)"
    assert not (tmp_path / "cache").exists()  # random weights: nothing made, nothing cached


def test_an_unknown_name_or_tag_is_a_clear_error_in_a_fresh_process(tmp_path):
    out = fresh_python(
        "from moram_avalanche import load_clip\n"
        "for name, tag in (('moram-synthetic-tinyy', None), ('moram-synthetic-tiny', 'openai')):\n"
        "    try:\n"
        "        load_clip(name, pretrained=tag)\n"
        "    except ValueError as error:\n"
        "        print(error)\n", tmp_path)
    assert out.returncode == 0, out.stderr
    unknown_name, unknown_tag = out.stdout.strip().splitlines()
    assert unknown_name.startswith("unknown open_clip model 'moram-synthetic-tinyy'; known names include ViT-B-16")
    assert unknown_name.endswith("and the package's own, moram-synthetic-tiny")
    assert unknown_tag.startswith("pretrained='openai' is neither a known tag for 'moram-synthetic-tiny' nor an "
                                  "existing file. Known tags for moram-synthetic-tiny: ['synthetic']")


def test_the_synthetic_tag_is_the_demos_cached_pretraining_as_on_the_command_line(tmp_path, monkeypatch):
    """``pretrained="synthetic"`` loads the file the demo's pre-training caches (here at the demo's
    quick settings, to take seconds), made once; ``--pretrained synthetic`` loads the same."""
    from argparse import Namespace

    from moram_avalanche.experiments.clip import demo
    from moram_avalanche.experiments.clip.loaders import clip_model_loader

    quick = demo.DemoConfig.quick()
    monkeypatch.setattr(demo, "DemoConfig", lambda: quick)  # synthetic_weights' settings
    cache = tmp_path / "cache"
    expected = demo.pretrained_tiny_clip(cache, quick, progress=False)
    stamp = expected.stat().st_mtime_ns
    saved = torch.load(expected, map_location="cpu", weights_only=True)
    model, *_ = load_clip("moram-synthetic-tiny", pretrained="synthetic", cache_dir=str(cache))
    args = Namespace(model="moram-synthetic-tiny", pretrained="synthetic", cache_dir=str(cache),
                     weights_origin=None, dtype=None, gradient_checkpointing=False, fsdp=False, preset=None,
                     benchmark="synthetic")
    command_line, *_ = clip_model_loader(args, "cpu")()
    for loaded in (model, command_line):
        state = loaded.state_dict()
        assert state.keys() == saved.keys() and all(torch.equal(state[k], saved[k]) for k in saved)
    assert sorted(p.name for p in cache.glob("*.pt")) == [expected.name] and expected.stat().st_mtime_ns == stamp
