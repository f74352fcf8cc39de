"""Decoding ignores the model folder's ``generation_config.json`` (issue 46): ``transformers``
fills every setting ``generate`` is not given from the model's own generation config, so a folder
whose file sets a repetition penalty, ``min_new_tokens``, suppressed tokens or ``top_k`` changed
what the library calls greedy decoding, and ``--set repetition_penalty=1.0`` could not switch a
folder's value off. Greedy answers are checked against a naive argmax loop that reads no
generation config at all.
"""

import pytest
import torch

from spies import spy_on_generate
from tiny_text import tiny_t5, word_tokenizer

PROMPTS = ["what is the topic of following paragraph", "choose one from option a b c"]
STEPS = 5
#: what a model folder's generation_config.json may say that changes greedy decoding
FOLDER_SETTINGS = dict(repetition_penalty=5.0, no_repeat_ngram_size=1, suppress_tokens=[16])  # 16: 'business'


def language_model(seed=4):  # a seed whose random tiny T5 answers words (most answer padding)
    from moram_avalanche.models.language_model import LanguageModel

    model = tiny_t5(seed)
    lm = LanguageModel(model, word_tokenizer())
    lm.eos_id = model.config.eos_token_id = model.generation_config.eos_token_id = None  # every answer STEPS long
    return lm


def naive_greedy(lm, prompt):
    """Argmax step by step from the decoder's start token: no generation config read."""
    model, tokenizer = lm.model, lm.tokenizer
    inputs = tokenizer([prompt], return_tensors="pt")
    encoded = model.get_encoder()(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    tokens = [[model.config.decoder_start_token_id]]
    with torch.no_grad():
        for _ in range(STEPS):
            logits = model(encoder_outputs=encoded, attention_mask=inputs["attention_mask"],
                           decoder_input_ids=torch.tensor(tokens)).logits
            tokens[0].append(int(logits[0, -1].argmax()))
    return tokenizer.decode([t for t in tokens[0][1:] if t != lm.pad_id], skip_special_tokens=True).strip()


def with_folder_settings(lm, **settings):
    for name, value in {**FOLDER_SETTINGS, **settings}.items():
        setattr(lm.model.generation_config, name, value)
    return lm


def test_greedy_answers_are_the_naive_loops_whatever_the_folders_generation_config_says():
    lm = with_folder_settings(language_model())
    kept = lm.model.generation_config
    expected = [naive_greedy(lm, prompt) for prompt in PROMPTS]
    assert all(expected)
    assert lm.generate(PROMPTS, STEPS) == expected
    assert lm.model.generation_config is kept  # the model's own config is given back
    # what transformers itself does with the folder's settings: other answers (the test can fail)
    inputs = lm.tokenizer([PROMPTS[0]], return_tensors="pt")
    with torch.no_grad():
        out = lm.model.generate(**inputs, max_new_tokens=STEPS, do_sample=False)
    assert lm.tokenizer.decode(out[0, 1:], skip_special_tokens=True).strip() != expected[0]


def test_a_penalty_of_one_switches_a_folders_penalty_off():
    from moram_avalanche.models.language_model import Decoding

    lm = with_folder_settings(language_model(), no_repeat_ngram_size=0, suppress_tokens=None)
    expected = [naive_greedy(lm, prompt) for prompt in PROMPTS]
    assert lm.generate(PROMPTS, STEPS, decoding=Decoding(repetition_penalty=1.0)) == expected
    penalised = lm.generate(PROMPTS, STEPS, decoding=Decoding(repetition_penalty=5.0))
    assert penalised != expected  # the option itself still reaches generate


def test_sampling_reads_no_top_k_from_the_folder():
    lm, plain = with_folder_settings(language_model(), top_k=1), language_model()
    torch.manual_seed(0)
    expected = plain.sample(PROMPTS, 4, STEPS)
    torch.manual_seed(0)
    assert lm.sample(PROMPTS, 4, STEPS) == expected
    assert len({tuple(answers) for answers in expected}) > 1 or len(set(expected[0])) > 1  # really sampled


def test_the_recorded_settings_are_the_ones_generate_receives():
    from moram_avalanche.models.language_model import Decoding

    lm = language_model()
    calls = spy_on_generate(lm)
    decoding = Decoding(repetition_penalty=1.2, no_repeat_ngram_size=3)
    lm.generate(PROMPTS, STEPS, decoding=decoding)
    settings = lm.greedy_settings(decoding)
    assert settings == {"do_sample": False, "num_beams": 1, "repetition_penalty": 1.2, "no_repeat_ngram_size": 3,
                        "pad_token_id": 0, "decoder_start_token_id": 0}  # EOS None: see language_model()
    assert {name: calls[0][name] for name in settings} == settings


@pytest.mark.parametrize("name", ["config", "generation_config", "tokenizer"])
def test_the_file_fingerprints_follow_the_folder(name, tmp_path):
    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.text.load import load_language_model

    folder = tmp_path / "model"
    tiny_t5().save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    before = LanguageModel(*load_language_model(str(folder))).file_fingerprints()
    assert set(before) == {"config", "generation_config", "tokenizer"}
    path = folder / {"config": "config.json", "generation_config": "generation_config.json",
                     "tokenizer": "tokenizer_config.json"}[name]
    path.write_text(path.read_text().replace("{", '{"edited": 1, ', 1))
    after = LanguageModel(*load_language_model(str(folder))).file_fingerprints()
    assert {key for key in before if before[key] != after[key]} == {name}


def test_a_model_built_in_memory_has_no_file_fingerprints():
    assert language_model().file_fingerprints() == {}


def test_a_peft_wrapped_model_decodes_without_its_base_models_generation_config():
    from peft import LoraConfig, get_peft_model

    from moram_avalanche.models.language_model import LanguageModel

    plain = with_folder_settings(language_model())
    expected = [naive_greedy(plain, prompt) for prompt in PROMPTS]  # LoRA starts at B = 0: the same function
    wrapped = get_peft_model(plain.model, LoraConfig(r=2, target_modules=["q", "v"]))
    lm = LanguageModel(wrapped, plain.tokenizer)
    lm.eos_id = None
    kept = wrapped.get_base_model().generation_config
    assert lm.generate(PROMPTS, STEPS) == expected
    assert wrapped.get_base_model().generation_config is kept and "generation_config" not in vars(wrapped)
