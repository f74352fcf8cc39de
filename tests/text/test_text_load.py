"""Loading language models by folder, offline; the class from the config; the tokenizer's padding."""

import pytest
import torch

from tiny_text import tiny_llama, tiny_t5, word_tokenizer


def save(model, folder, eos=True):
    model.save_pretrained(folder)
    word_tokenizer(eos=eos).save_pretrained(folder)
    return str(folder)


def checkpointing(model) -> bool:
    """Whether transformers recomputes ``model``'s activations, by the name of the installed
    version: ``is_activation_checkpointing`` (5.2x) or ``is_gradient_checkpointing`` (older 5.x)."""
    newer = hasattr(type(model), "is_activation_checkpointing")
    return getattr(model, "is_activation_checkpointing" if newer else "is_gradient_checkpointing")


def test_seq2seq_and_causal_models_load_from_a_folder(tmp_path, monkeypatch):
    from moram_avalanche.text import load_language_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t5, tokenizer = load_language_model(save(tiny_t5(), tmp_path / "t5"))
    assert type(t5).__name__ == "T5ForConditionalGeneration" and not t5.training
    assert tokenizer.padding_side == "right" and tokenizer.pad_token is None  # seq2seq: unchanged
    llama, tokenizer = load_language_model(save(tiny_llama(), tmp_path / "llama"), dtype="bfloat16",
                                           gradient_checkpointing=True)
    assert type(llama).__name__ == "LlamaForCausalLM"
    assert llama.dtype == torch.bfloat16 and checkpointing(llama)
    assert tokenizer.pad_token == tokenizer.eos_token == "</s>" and tokenizer.padding_side == "left"
    ids = tokenizer(["answer", "what is the topic"], padding=True)["input_ids"]
    assert ids[0][:3] == [tokenizer.pad_token_id] * 3  # short prompt padded on the left


def test_missing_models_name_the_folder_and_the_fix(tmp_path, monkeypatch):
    from moram_avalanche.text import ModelNotFound, load_language_model
    from moram_avalanche.utils.errors import UserError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFound, match=r"no model folder at .*nowhere.*config.json.*does not exist"):
        load_language_model(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFound, match="holds no config.json"):
        load_language_model(str(tmp_path / "empty"))
    with pytest.raises(ModelNotFound, match=r"'moram-test/not-cached'.*Hugging Face cache.*HF_HUB_OFFLINE") as info:
        load_language_model("moram-test/not-cached")
    assert isinstance(info.value, UserError)
    folder = tmp_path / "config-only"
    tiny_t5().config.save_pretrained(folder)
    with pytest.raises(ModelNotFound, match=r"no weights in .*config-only: expected model.safetensors"):
        load_language_model(str(folder))
    with pytest.raises(ValueError, match="dtype must be one of"):
        load_language_model(str(folder), dtype="int8")


def test_a_causal_tokenizer_without_pad_or_eos_is_refused():
    from moram_avalanche.text import prepare_tokenizer

    with pytest.raises(ValueError, match="neither a pad nor an EOS token"):
        prepare_tokenizer(word_tokenizer(eos=False), seq2seq=False)


def test_gradient_checkpointing_takes_the_older_transformers_name_where_the_new_one_is_missing():
    """transformers 5.2x calls it ``activation_checkpointing_enable``; older 5.x (a GPU image's 5.17)
    only ``gradient_checkpointing_enable``: either is used, and the inputs' embeddings require grad."""
    from moram_avalanche.text.load import enable_gradient_checkpointing

    class Older:
        def __init__(self):
            self.calls = []

        def gradient_checkpointing_enable(self):
            self.calls.append("gradient_checkpointing_enable")

        def enable_input_require_grads(self):
            self.calls.append("enable_input_require_grads")

    class Newer(Older):
        def activation_checkpointing_enable(self):
            self.calls.append("activation_checkpointing_enable")

    older, newer = Older(), Newer()
    enable_gradient_checkpointing(older)
    enable_gradient_checkpointing(newer)
    assert older.calls == ["gradient_checkpointing_enable", "enable_input_require_grads"]
    assert newer.calls == ["activation_checkpointing_enable", "enable_input_require_grads"]
