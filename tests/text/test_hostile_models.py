"""Language models that are not what they claim to be, refused before their weights load (issue 35,
class 1), and peft adapters loaded into a model of another depth (class 8).

Each case builds a tiny model folder (config.json, model.safetensors, tokenizer files) as
``save_pretrained`` writes it, breaks one thing, and asserts the error's type, that its message
names the file and the fix, that it is one line where the command line prints it, and that the
folder is unchanged. No weight is read: the checks run with ``from_pretrained`` replaced by a
loader that fails (only transformers' meta-device report, which reads no memory into a model, is
let through for names that differ).
"""

import json
import shutil
import struct
import warnings

import pytest
import torch

from tiny_text import LLAMA_KWARGS, T5_KWARGS, tiny_llama, tiny_t5, word_tokenizer


# ---------------------------------------------------------------- folders
@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """Pristine tiny T5 and LLaMA folders (copied by each case before it breaks something)."""
    root = tmp_path_factory.mktemp("models")
    for name, model in (("t5", tiny_t5()), ("llama", tiny_llama())):
        model.save_pretrained(root / name)
        word_tokenizer().save_pretrained(root / name)
    return root


def folder(t, origin, kind="llama"):
    target = t / "model"
    shutil.copytree(origin / kind, target)
    return target


def edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))
    return path


def tree(root):
    return sorted((str(p.relative_to(root)), p.lstat().st_size) for p in root.rglob("*"))


def no_weights_loaded(monkeypatch):
    """``from_pretrained`` of any model fails unless it builds on the meta device (no weights in memory)."""
    from transformers import PreTrainedModel

    real = PreTrainedModel.from_pretrained.__func__

    def guarded(cls, *args, **kwargs):
        if kwargs.get("device_map") != "meta":
            raise AssertionError("the check loaded the weights")
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(guarded))


def check(path, **kwargs):
    from moram_avalanche.text.check import check_language_model

    return check_language_model(str(path), **kwargs)


# ---------------------------------------------------------------- the cases
def no_tokenizer(t, o):
    path = folder(t, o, "t5")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).unlink()
    return path


def tokenizer_config_only(t, o):
    path = folder(t, o)
    (path / "tokenizer.json").unlink()
    (path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizerFast"}))
    return path


def config_of_another_architecture(t, o):
    path = folder(t, o)
    shutil.copy(o / "t5" / "config.json", path / "config.json")
    return path


def causal_config_over_t5_weights(t, o):
    path = folder(t, o, "t5")
    shutil.copy(o / "llama" / "config.json", path / "config.json")
    return path


def config_of_another_size(t, o):
    return (edit_config(folder(t, o), intermediate_size=LLAMA_KWARGS["intermediate_size"] + 3))


def config_deeper_than_the_weights(t, o):
    return (edit_config(folder(t, o), num_hidden_layers=3))


def t5_config_of_another_width(t, o):
    return (edit_config(folder(t, o, "t5"), d_ff=T5_KWARGS["d_ff"] * 2))


def tokenizer_larger_than_the_embedding(t, o):
    path = folder(t, o)
    word_tokenizer([f"w{i}" for i in range(120)]).save_pretrained(path)
    return path


def truncated_weights(t, o):
    path = folder(t, o)
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    return path


def weights_one_byte_short(t, o):
    path = folder(t, o, "t5")
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[:-1])
    return path


def weights_not_safetensors(t, o):
    path = folder(t, o)
    (path / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\n")
    return path


def weights_header_not_json(t, o):
    path = folder(t, o)
    header = b"{not json}"
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return path


def shard_missing(t, o):
    path = folder(t, o)
    (path / "model.safetensors").rename(path / "model-00001-of-00002.safetensors")
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                                             "lm_head.weight": "model-00002-of-00002.safetensors"}}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    return path


def no_weights(t, o):
    path = folder(t, o)
    (path / "model.safetensors").unlink()
    return path


def weights_a_dangling_link(t, o):
    path = folder(t, o)
    (path / "model.safetensors").unlink()
    (path / "model.safetensors").symlink_to(t / "blobs" / "gone")
    return path


def config_field_of_the_wrong_type(t, o):
    return edit_config(folder(t, o), num_attention_heads="four")


def config_of_a_negative_size(t, o):
    return edit_config(folder(t, o), hidden_size=-32)


def broken_config(t, o):
    path = folder(t, o)
    (path / "config.json").write_text('{"model_type": "llama", ')
    return path


def config_without_model_type(t, o):
    path = folder(t, o)
    (path / "config.json").write_text(json.dumps(["llama"]))
    return path


def unknown_model_type(t, o):
    return (edit_config(folder(t, o), model_type="frobnicator"))


def not_a_language_model(t, o):
    from transformers import ViTConfig

    path = folder(t, o)
    ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37).save_pretrained(path)
    return path


def sentencepiece_without_the_package(t, o, monkeypatch):
    import importlib.util

    path = folder(t, o, "t5")
    (path / "tokenizer.json").unlink()
    (path / "spiece.model").write_bytes(b"\x0a\x05hello")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sentencepiece"
                        else find_spec(name, *a))
    return path


def broken_tokenizer_json(t, o):
    path = folder(t, o)
    (path / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "WordLevel"')
    return path


def causal_tokenizer_without_pad_or_eos(t, o):
    path = folder(t, o)
    word_tokenizer(eos=False).save_pretrained(path)
    return path


def sound(t, o):
    return folder(t, o)


HOSTILE = [
    ("no tokenizer files", no_tokenizer, OSError,
     ["no tokenizer files in", "model", "every word as <unk>", "tokenizer.save_pretrained("]),
    ("tokenizer_config.json alone", tokenizer_config_only, OSError, ["no tokenizer files in", "tokenizer.json"]),
    ("a T5 config.json over LLaMA weights", config_of_another_architecture, ValueError,
     ["config.json describes a 't5' model", "model.safetensors", "initialise them at random",
      "put the config.json saved with these weights beside them"]),
    ("a LLaMA config.json over T5 weights", causal_config_over_t5_weights, ValueError,
     ["config.json describes a 'llama' model", "are not in", "model.safetensors"]),
    ("config.json of another width", config_of_another_size, ValueError,
     ["6 weights in", "model.safetensors have other sizes",
      "model.layers.0.mlp.down_proj.weight: (32, 37) in the file, (32, 40) by config.json"]),
    ("config.json deeper than the weights", config_deeper_than_the_weights, ValueError,
     ["are not in", "model.layers.2."]),
    ("a T5 config.json of another width", t5_config_of_another_width, ValueError,
     ["other sizes", "DenseReluDense"]),
    ("a tokenizer larger than the embedding", tokenizer_larger_than_the_embedding, ValueError,
     ["ids up to 122", "embedding 99 rows", "IndexError", "resize_token_embeddings"]),
    ("truncated weights", truncated_weights, ValueError,
     ["model.safetensors is truncated", "copy or download it again"]),
    ("weights one byte short", weights_one_byte_short, ValueError, ["model.safetensors is truncated"]),
    ("a Git LFS pointer for weights", weights_not_safetensors, ValueError,
     ["model.safetensors is not a safetensors file or is truncated"]),
    ("a weights header that is not JSON", weights_header_not_json, ValueError,
     ["model.safetensors has an unreadable safetensors header"]),
    ("a missing shard", shard_missing, ValueError,
     ["model.safetensors.index.json lists 1 weights file(s)", "model-00002-of-00002.safetensors"]),
    ("no weights", no_weights, OSError, ["no weights in", "expected model.safetensors"]),
    ("weights that are a dangling link", weights_a_dangling_link, OSError,
     ["the weights model.safetensors in", "are links to files that are not there", "download or copy the weights"]),
    ("a config field of the wrong type", config_field_of_the_wrong_type, ValueError,
     ["config.json does not load", "num_attention_heads", "restore the config.json"]),
    ("a config of a negative size", config_of_a_negative_size, ValueError,
     ["describes a 'llama' model that cannot be built", "negative dimension", "restore the config.json"]),
    ("a broken config.json", broken_config, ValueError,
     ["config.json is not valid JSON (line 1, column 25", "restore the config.json"]),
    ("config.json without model_type", config_without_model_type, ValueError, ["config.json names no model_type"]),
    ("an unknown model_type", unknown_model_type, ValueError,
     ["model_type 'frobnicator'", "pip install -U transformers"]),
    ("a vision model's config.json", not_a_language_model, ValueError,
     ["describes a 'vit' model", "no causal language model"]),
    ("a SentencePiece tokenizer without sentencepiece", sentencepiece_without_the_package, ValueError,
     ["SentencePiece model (spiece.model", "pip install sentencepiece"]),
    ("a broken tokenizer.json", broken_tokenizer_json, ValueError,
     ["the tokenizer in", "does not load", "tokenizer.save_pretrained("]),
    ("a causal tokenizer without pad or EOS", causal_tokenizer_without_pad_or_eos, ValueError,
     ["neither a pad nor an EOS token", "set tokenizer.pad_token"]),
    ("dtype float16", sound, ValueError,
     ["float16 is refused", "loss scaling", "NaN at any learning rate", "bfloat16"], {"dtype": "float16"}),
    ("dtype int8", sound, ValueError, ["dtype must be one of float32, bfloat16", "'int8'"], {"dtype": "int8"}),
]


@pytest.mark.parametrize("build, error, fragments, options", [(c + ({},))[1:5] for c in HOSTILE],
                         ids=[c[0] for c in HOSTILE])
def test_a_model_that_is_not_what_it_claims_is_refused_before_its_weights_load(build, error, fragments, options,
                                                                              origin, tmp_path, monkeypatch):
    import inspect

    from moram_avalanche.arguments import is_user_error, report_error

    extra = (monkeypatch,) if "monkeypatch" in inspect.signature(build).parameters else ()
    path = build(tmp_path, origin, *extra)
    before = tree(path)
    no_weights_loaded(monkeypatch)
    with pytest.raises(error) as info:
        check(path, **options)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert is_user_error(info.value), type(info.value)  # the command line prints it, no traceback
    assert "\n" not in report_error("run", info.value), message
    assert tree(path) == before  # nothing written into the model's folder


def test_float16_on_the_command_line_names_the_option_and_the_fix():
    from moram_avalanche.text.check import check_dtype

    with pytest.raises(ValueError, match=r"--dtype float16 is refused: .* use --dtype bfloat16 .* or --dtype float32"):
        check_dtype("float16", "--dtype")
    assert check_dtype("bfloat16") == "bfloat16" and check_dtype("float32") == "float32"


@pytest.mark.parametrize("kind", ["t5", "llama"])
def test_a_sound_model_passes_the_check_without_its_weights_loading(kind, origin, monkeypatch):
    """The check decides from the headers: no weight is loaded, not even on the meta device."""
    from transformers import PreTrainedModel

    from moram_avalanche.text.check import check_language_model

    def fail(*args, **kwargs):
        raise AssertionError("from_pretrained was called")

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(fail))
    checked = check_language_model(str(origin / kind))
    assert checked.folder == origin / kind and checked.seq2seq == (kind == "t5")
    assert checked.tokenizer("what is the topic")["input_ids"][:4] == [3, 4, 5, 6]  # the folder's own words


def test_load_language_model_refuses_what_the_check_refuses_and_loads_what_it_passes(origin, tmp_path, monkeypatch):
    from moram_avalanche.text import ModelRefused, load_language_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = folder(tmp_path, origin)
    shutil.copy(origin / "t5" / "config.json", path / "config.json")
    with pytest.raises(ModelRefused, match="config.json describes a 't5' model"):
        load_language_model(str(path))
    with pytest.raises(ValueError, match="float16 is refused"):
        load_language_model(str(origin / "llama"), dtype="float16")
    model, tokenizer = load_language_model(str(origin / "llama"), dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and tokenizer.padding_side == "left"


def test_weights_in_a_bin_file_of_another_architecture_are_refused_once_loaded(origin, tmp_path, monkeypatch):
    """``*.bin`` weights are read whole by torch: their fit is judged from transformers' own
    loading report, before the model is returned."""
    from moram_avalanche.text import ModelRefused, load_language_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = tmp_path / "bin"
    shutil.copytree(origin / "llama", path)
    (path / "model.safetensors").unlink()
    torch.save(tiny_llama().state_dict(), path / "pytorch_model.bin")
    model, _ = load_language_model(str(path))  # the right architecture loads
    assert torch.equal(model.lm_head.weight, tiny_llama().lm_head.weight)
    shutil.copy(origin / "t5" / "config.json", path / "config.json")
    with pytest.raises(ModelRefused, match=r"config.json describes a 't5' model \(T5Config\), but \d+ of its weights are "
                                           r"not in the weights of"):
        load_language_model(str(path))


# ---------------------------------------------------------------- peft adapters of another depth (class 8)
def llama(layers):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**{**LLAMA_KWARGS, "num_hidden_layers": layers})).eval()


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    path = tmp_path_factory.mktemp("adapter")
    get_peft_model(llama(2), MoRAMConfig(init_weights=False)).save_pretrained(path)
    return path


@pytest.mark.parametrize("how", ["from_pretrained", "load_adapter"])
def test_an_adapter_loaded_into_a_deeper_model_warns_naming_the_fresh_layers(adapter, how):
    from peft import PeftModel, get_peft_model

    from moram_avalanche.text import MoRAMConfig

    with pytest.warns(UserWarning, match=r"MoRAM adapter '(default|other)' does not fit this model: 4 of the model's 8 "
                                         r"MoRAM layers have no atoms in the checkpoint and keep fresh, untrained ones "
                                         r"\(e\.g\. model\.layers\.2\.self_attn\.k_proj\); load it into the base model"):
        if how == "from_pretrained":
            PeftModel.from_pretrained(llama(4), adapter)
        else:
            get_peft_model(llama(4), MoRAMConfig()).load_adapter(adapter, adapter_name="other")


def test_an_adapter_loaded_into_a_shallower_model_warns_that_atoms_are_dropped(adapter):
    from peft import PeftModel

    with pytest.warns(UserWarning, match=r"2 layers of the checkpoint are not in the model and their atoms are dropped "
                                         r"\(e\.g\. model\.layers\.1\.self_attn\.k_proj\)"):
        PeftModel.from_pretrained(llama(1), adapter)


def test_an_adapter_loaded_into_its_own_architecture_does_not_warn(adapter):
    from peft import PeftModel

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*MoRAM adapter.*")
        warnings.filterwarnings("error", message=".*missing adapter keys.*")
        loaded = PeftModel.from_pretrained(llama(2), adapter)
    assert loaded.base_model.model.model.layers[1].self_attn.k_proj.moram_bank["default"].num_atoms == 8


def test_a_hub_name_in_the_cache_is_checked_like_a_folder(origin, tmp_path, monkeypatch):
    """``--model org/name`` found in the Hugging Face cache: its snapshot folder gets every check."""
    import huggingface_hub.constants

    from moram_avalanche.text.check import ModelNotFound, check_language_model

    snapshot = tmp_path / "hub" / "models--moram-test--tiny" / "snapshots" / "abc123"
    shutil.copytree(origin / "llama", snapshot)
    (tmp_path / "hub" / "models--moram-test--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--moram-test--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert check_language_model("moram-test/tiny").folder == snapshot
    (snapshot / "tokenizer.json").unlink()
    with pytest.raises(ModelNotFound, match=r"no tokenizer files in .*models--moram-test--tiny/snapshots/abc123"):
        check_language_model("moram-test/tiny")
    with pytest.raises(ModelNotFound, match=r"'moram-test/other'.*Hugging Face cache.*huggingface-cli download"):
        check_language_model("moram-test/other")
