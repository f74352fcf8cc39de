"""Compiled generation: a static KV cache whose decode step transformers compiles, MoRAM's layers traced whole."""


import pytest
import torch

from spies import spy_on_generate
from tiny_stream import FAMILIES, stream_tokenizer

PROMPTS = ["What is the colour of the following paragraph ? Answer:", "lorem ipsum Answer:",
           "dolor sit amet consectetur adipiscing elit sed do eiusmod Answer:"]


def with_moram(family, **options):
    """A tiny model of ``family`` with three tasks of MoRAM atoms (random values) in a LanguageModel."""
    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.text import add_task, inject_moram, moram_layers

    tokenizer = stream_tokenizer()
    model = FAMILIES[family](tokenizer)
    with torch.no_grad():  # a random tiny model answers with padding: spread its output over the vocabulary
        model.get_output_embeddings().weight.copy_(
            torch.randn(model.get_output_embeddings().weight.shape, generator=torch.Generator().manual_seed(1)))
    inject_moram(model)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        add_task(model)
        for layer in moram_layers(model).values():
            with torch.no_grad():
                layer.new_values.copy_(torch.randn(layer.new_values.shape, generator=generator))
    lm = LanguageModel(model.eval(), tokenizer, **options)
    # no end of sequence: every answer is max_new_tokens long (a random tiny T5 ends at once)
    lm.eos_id = model.generation_config.eos_token_id = model.config.eos_token_id = None
    return lm


def eager_compile_config():
    """transformers' compilation on the CPU, dynamo only (no inductor build), and a graph break an error."""
    from transformers import CompileConfig

    config = CompileConfig(backend="eager", mode=None, fullgraph=True)
    config._compile_all_devices = True  # transformers' own switch for compiling off the GPU (its tests')
    return config


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_the_compiled_decode_step_gives_the_answers_of_plain_generation(family):
    from moram_avalanche.layers.moram.paths import use_path
    from moram_avalanche.models.language_model import GENERATION_BUCKET

    torch._dynamo.reset()
    plain = with_moram(family, compile_generation=False)
    compiled = with_moram(family, compile_generation=True, compile_config=eager_compile_config())
    calls = spy_on_generate(compiled)
    with use_path("dense"):  # the GPU path, traced by dynamo (fullgraph: a break would raise)
        expected = plain.generate(PROMPTS, max_new_tokens=5)
        frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        answers = compiled.generate(PROMPTS, max_new_tokens=5)
        assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > frames  # the decode step was compiled
    assert answers == expected and any(answers)
    assert calls[0]["cache_implementation"] == "static"
    assert calls[0]["input_ids"].shape[1] % GENERATION_BUCKET == 0  # prompts padded to the bucket
    assert compiled.compile_failure is None


def test_auto_compiles_on_a_gpu_for_models_that_support_it_and_never_when_sharded(monkeypatch):
    from moram_avalanche.models.language_model import LanguageModel

    lm = with_moram("llama")
    assert lm.compile_generation == "auto" and not lm.compiles_generation  # the CPU: no
    monkeypatch.setattr(LanguageModel, "device", property(lambda self: torch.device("cuda")))
    assert lm.compiles_generation  # LLaMA: transformers' _can_compile_fullgraph
    monkeypatch.setattr(LanguageModel, "synced_generation", property(lambda self: True))
    assert not lm.compiles_generation  # sharded weights: every forward a collective
    monkeypatch.setattr(LanguageModel, "synced_generation", property(lambda self: False))
    monkeypatch.setattr(type(lm.model), "_can_compile_fullgraph", False)
    assert not lm.compiles_generation
    lm.compile_generation = False
    monkeypatch.setattr(type(lm.model), "_can_compile_fullgraph", True)
    assert not lm.compiles_generation


def test_auto_falls_back_once_with_a_warning_when_compiling_fails(monkeypatch):
    from moram_avalanche.models.language_model import LanguageModel

    lm = with_moram("llama")
    expected = lm.generate(PROMPTS, max_new_tokens=4)
    monkeypatch.setattr(LanguageModel, "device", property(lambda self: torch.device("cpu")))
    monkeypatch.setattr(LanguageModel, "compiles_generation",
                        property(lambda self: self.compile_generation == "auto" and self.compile_failure is None))
    calls = spy_on_generate(lm)
    generate = lm.model.generate

    def failing(**kwargs):
        if kwargs.get("cache_implementation") == "static":
            raise RuntimeError("Backend compiler failed\nlong trace")
        return generate(**kwargs)
    lm.model.generate = failing
    with pytest.warns(RuntimeWarning, match="compiled generation failed .RuntimeError: Backend compiler failed.; "
                                            "generating without a static cache"):
        assert lm.generate(PROMPTS, max_new_tokens=4) == expected
    assert lm.compile_failure == "RuntimeError: Backend compiler failed"
    assert lm.generate(PROMPTS, max_new_tokens=4) == expected  # no second attempt, no second warning
    assert len(calls) == 0 or all("cache_implementation" not in c for c in calls[1:])
    lm.compile_generation = True  # forced: the error goes through
    lm.compile_failure = None
    monkeypatch.setattr(LanguageModel, "compiles_generation", property(lambda self: True))
    with pytest.raises(RuntimeError, match="Backend compiler failed"):
        lm.generate(PROMPTS, max_new_tokens=4)


@pytest.mark.parametrize("value", ["always", 1, None, "True"])
def test_bad_values_are_refused_with_what_each_choice_means(value):
    from moram_avalanche.models.language_model import check_compile_generation

    with pytest.raises(ValueError, match="compile_generation takes 'auto' .* True .* or False"):
        check_compile_generation(value)


def test_the_text_loop_takes_the_option_and_checks_it_before_building():
    from moram_avalanche.strategies.text.loop import TextStrategy
    from moram_avalanche.utils.errors import OptionError

    lm = with_moram("llama")
    strategy = TextStrategy(model=lm, compile_generation=False, train_mb_size=2)
    assert strategy.model.compile_generation is False and not strategy.model.compiles_generation
    with pytest.raises(OptionError, match="compile_generation takes"):
        TextStrategy(model=lm, compile_generation="always", train_mb_size=2)
