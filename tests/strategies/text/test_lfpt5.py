"""LFPT5 on tiny T5 / LLaMA models and the synthetic text stream: the step's loss against a naive
recomputation, the pseudo-samples' path, what trains, the added tokens, resume, bad options."""

import random
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from text_runs import benchmark, build, killed_and_resumed
from tiny_stream import FAMILIES, stream_tokenizer

SMALL = dict(prompt_length=4, pseudo_draws=6, pseudo_max_tokens=6)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_only_the_prompt_trains_and_the_checkpoint_is_the_prompt(family):
    from transformers.optimization import Adafactor

    strategy, _ = build("lfpt5", family, **SMALL)
    frozen = {k: v.clone() for k, v in strategy.model.model.state_dict().items()}
    prompt = strategy.model.prefix.weight.detach().clone()
    assert [n for n, p in strategy.model.named_parameters() if p.requires_grad] == ["prefix.weight"]
    bench = benchmark()
    for experience in list(bench.train_stream)[:2]:
        strategy.train(experience)
        assert isinstance(strategy.optimizer, Adafactor)  # LFPT5's optimizer, its settings
        group = strategy.optimizer.param_groups[0]
        assert (group["clip_threshold"], group["decay_rate"], group["relative_step"],
                group["scale_parameter"]) == (1.0, -0.8, False, False)
    state = strategy.model.model.state_dict()
    vocab = frozen["shared.weight" if family == "t5" else "model.embed_tokens.weight"].shape[0]
    for key, value in frozen.items():  # the model's own rows never change (added tokens' rows may follow)
        assert torch.equal(state[key][:vocab] if state[key].shape != value.shape else state[key], value), key
    assert not torch.equal(strategy.model.prefix.weight, prompt)
    assert list(strategy.checkpoint_model_state()) == ["prefix.weight"]


def test_adamw_when_asked_and_the_loops_lr_by_default_is_lfpt5s():
    strategy, _ = build("lfpt5", "t5", prompt_optimizer="adamw", **SMALL)
    strategy.train(benchmark().train_stream[0])
    assert isinstance(strategy.optimizer, torch.optim.AdamW)
    from moram_avalanche.strategies.options import strategy_parameters
    from moram_avalanche.strategies.text.lfpt5 import TextLFPT5

    defaults = {name: p.default for name, p in strategy_parameters(TextLFPT5).items()}
    assert (defaults["lr"], defaults["weight_decay"], defaults["prompt_length"]) == (0.5, 1e-5, 300)


def _naive_t5(model, embed_rows, prompt, targets):
    """T5 logits [B, L, V] and labels for rows of ids with ``prompt`` after each row's padded ids."""
    width, answer_width = max(map(len, embed_rows)), max(map(len, targets))
    ids = torch.tensor([row + [0] * (width - len(row)) for row in embed_rows])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in embed_rows])
    embeds = model.get_input_embeddings()(ids)
    embeds = torch.cat([embeds, prompt.unsqueeze(0).expand(len(embed_rows), -1, -1)], 1)
    mask = torch.cat([mask, torch.ones(len(embed_rows), prompt.shape[0], dtype=mask.dtype)], 1)
    labels = torch.tensor([row + [-100] * (answer_width - len(row)) for row in targets])
    return model(inputs_embeds=embeds, attention_mask=mask, labels=labels).logits, labels


def _mean_ce(logits, labels):
    keep = labels != -100
    return F.cross_entropy(logits[keep], labels[keep])


def test_a_step_is_the_weighted_sum_of_its_parts_recomputed_by_hand():
    from moram_avalanche.strategies.text.plugins.lfpt5 import LFPT5Plugin
    from moram_avalanche.text.lfpt5_prompt import add_tokens

    torch.manual_seed(0)
    strategy, _ = build("lfpt5", "t5", **SMALL)
    plugin, model = strategy.lfpt5_plugin, strategy.model
    tokenizer, t5 = model.tokenizer, model.model
    add_tokens(t5, tokenizer, ["__ans__", "__colour__", "__mood__"])
    plugin.previous = model.prefix.weight.detach() + 0.5 * torch.randn_like(model.prefix.weight)
    tasks = [SimpleNamespace(name="colour", label_words=("red",)), SimpleNamespace(name="mood", label_words=())]
    prompts, answers = ["what is the colour", "the mood of lorem"], ["red", "good"]
    fake = SimpleNamespace(model=model, mb_x=prompts, mb_y=answers, mb_task_id=torch.tensor([0, 1]),
                           experience=SimpleNamespace(current_experience=1, tasks=tasks))
    fake.loss = model.loss(prompts, answers)
    LFPT5Plugin.before_backward(plugin, fake)

    # the same numbers from the tokens up: ids, EOS appended to targets, prompt after the input
    def ids(text, eos=False):
        return tokenizer(text)["input_ids"] + ([model.eos_id] if eos else [])

    prompt = model.prefix.weight
    logits, labels = _naive_t5(t5, [ids(p) for p in prompts], prompt, [ids(a, True) for a in answers])
    task = _mean_ce(logits, labels)
    lm_logits, lm_labels = _naive_t5(t5, [ids("__colour__"), ids("__mood__")], prompt,
                                     [ids(f"{p} __ans__ {a}", True) for p, a in zip(prompts, answers)])
    assert ids("a __ans__ b")[1] == tokenizer.convert_tokens_to_ids("__ans__")  # one added token
    lm = _mean_ce(lm_logits, lm_labels)
    # distillation: the earlier task's row (task 0 < 1) only, with the previous prompt as the teacher
    now, now_labels = _naive_t5(t5, [ids(prompts[0])], prompt, [ids(answers[0], True)])
    before, _ = _naive_t5(t5, [ids(prompts[0])], plugin.previous, [ids(answers[0], True)])
    p_before, p_now = before.softmax(-1)[0], now.softmax(-1)[0]
    kd = (p_before * (p_before.log() - p_now.log())).sum()
    expected = (task + 0.25 * lm) * 0.99 + 0.01 * kd
    assert float(fake.loss) == pytest.approx(float(expected), rel=1e-5)
    assert plugin.last == pytest.approx({"task": float(task), "lm": float(lm), "kd": float(kd)}, rel=1e-5)
    assert float(kd) > 0
    got, = torch.autograd.grad(fake.loss, model.prefix.weight, retain_graph=True)
    want, = torch.autograd.grad(expected, model.prefix.weight)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)
    assert got.abs().sum() > 0
    assert model.prefix.weight.requires_grad and not any(p.requires_grad for p in t5.parameters())


def _scripted_sampler(label_words):
    """A stand-in for the model's sampler: texts drawn with torch's generator (so seeding matters)
    from well- and ill-formed examples of the task asked for by its token."""
    def sample(self, model, token, *, seed, batch):
        assert token.startswith("__") and token.endswith("__")
        torch.manual_seed(seed)  # inside the plugin's fork_rng, as the real sampler's draws are
        words = label_words[token]
        pool = [f"text {i} __ans__ {words[i % len(words)]}" for i in range(8)]
        pool += ["no separator", f"x __ans__ {words[0]} __ans__ y", "y __ans__ notalabel"]
        picks = torch.randint(len(pool), (self.draws,)).tolist()
        return [pool[i] for i in picks]
    return sample


def test_pseudo_samples_are_parsed_selected_and_trained_on_with_distillation(monkeypatch):
    from avalanche.core import SupervisedPlugin

    from moram_avalanche.algorithms.lfpt5 import parse_pseudo, select_pseudo
    from moram_avalanche.strategies.text.plugins.lfpt5 import LFPT5Plugin

    bench = benchmark()
    tasks = bench.train_stream[0].tasks
    labels = {f"__{t.name}__": t.label_words for t in tasks}
    monkeypatch.setattr(LFPT5Plugin, "sample", _scripted_sampler(labels))

    class Recorder(SupervisedPlugin):
        def __init__(self):
            super().__init__()
            self.rows, self.kd, self.sizes = [], [], []

        def before_training_epoch(self, strategy, **kwargs):
            self.sizes.append(len(strategy.adapted_dataset))

        def after_backward(self, strategy, **kwargs):
            self.rows.append(strategy.mb_task_id.tolist())
            self.kd.append(strategy.lfpt5_plugin.last["kd"])

    recorder = Recorder()
    strategy, _ = build("lfpt5", "t5", plugins=[recorder], iterations=None, epochs=1, pseudo_draws=40,
                        prompt_length=4)
    plugin = strategy.lfpt5_plugin
    for index, experience in enumerate(list(bench.train_stream)[:3]):
        recorder.rows.clear()
        strategy.train(experience)
        # by hand: the scripted texts of each earlier task, parsed and selected with the plugin's seeds
        expected = []
        for earlier in range(index):
            texts = _scripted_sampler(labels)(plugin, None, f"__{tasks[earlier].name}__",
                                              seed=42 + 1000 * index + earlier, batch=0)
            parsed = [p for p in (parse_pseudo(t, tasks[earlier].label_words) for t in texts) if p]
            expected += [(p, a, earlier) for p, a in select_pseudo(parsed, 2, random.Random(42 + 1000 * index + earlier))]
        assert plugin.pseudo == expected
        assert all(answer in tasks[t].label_words for _, answer, t in plugin.pseudo)
        seen = [t for rows in recorder.rows for t in rows]
        assert len(seen) == recorder.sizes[-1] == len(experience.dataset) + len(expected)  # one epoch: all rows
        assert sorted(t for t in seen if t < index) == sorted(t for _, _, t in expected)
        if index == 0:
            first_task_steps = len(recorder.kd)
    assert len(expected) >= 4  # two per label of two earlier tasks were found
    assert recorder.kd[:first_task_steps] == [0.0] * first_task_steps  # no pseudo-samples, nothing distilled
    assert any(k > 0 for k in recorder.kd[first_task_steps:])  # once the prompt moved, they are distilled


def test_sampling_is_seeded_asks_for_the_official_settings_and_leaves_torchs_generator_alone():
    from moram_avalanche.text.lfpt5_prompt import add_tokens

    strategy, _ = build("lfpt5", "t5", prompt_length=4, pseudo_draws=5, pseudo_max_tokens=5)
    model, plugin = strategy.model, strategy.lfpt5_plugin
    add_tokens(model.model, model.tokenizer, ["__ans__", "__colour__"])
    calls = []
    original = model.sample

    def spy(prompts, n, max_new_tokens, **kwargs):
        calls.append((list(prompts), n, max_new_tokens, kwargs))
        return original(prompts, n, max_new_tokens, **kwargs)

    model.sample = spy
    state = torch.get_rng_state()
    first = plugin.sample(model, "__colour__", seed=3, batch=2)
    assert torch.equal(torch.get_rng_state(), state)
    assert plugin.sample(model, "__colour__", seed=3, batch=2) == first and len(first) == 5
    assert [c[:3] for c in calls[:3]] == [(["__colour__"], 2, 5), (["__colour__"], 2, 5), (["__colour__"], 1, 5)]
    assert calls[0][3] == {"top_k": 64, "repetition_penalty": 2.5}


@pytest.mark.parametrize("architecture", ["t5", "llama"])
def test_added_tokens_are_single_ids_and_grown_rows_are_the_same_in_a_rebuilt_model(architecture):
    from moram_avalanche.text.lfpt5_prompt import add_tokens
    from moram_avalanche.text.tiny import tiny_language_model, word_tokenizer

    rows = []
    for seed in (0, 1):
        tokenizer = word_tokenizer(["a b c d e f g"])  # 10 ids: the tiny model has no spare row
        model = tiny_language_model(architecture, tokenizer, seed=0)  # the same model, rebuilt
        before = model.get_input_embeddings().weight.shape[0]
        torch.manual_seed(seed + 10)  # the global generator must not matter
        add_tokens(model, tokenizer, ["__ans__", "__x__", "__ans__"])
        assert len(tokenizer) == before + 2 == model.get_input_embeddings().weight.shape[0]
        assert len(tokenizer("a __ans__ b")["input_ids"]) == 3
        new = [model.get_input_embeddings().weight[before:].clone()]
        if architecture == "llama":  # untied output rows are set too
            new.append(model.get_output_embeddings().weight[before:].clone())
        rows.append(new)
        assert not any(p.requires_grad for p in model.parameters())
    assert all(torch.equal(x, y) for x, y in zip(*rows))


def test_the_prompt_goes_after_the_tokens_or_before_them():
    from moram_avalanche.text.lfpt5_prompt import AppendedSoftPrompt
    from moram_avalanche.text.soft_prompt import SoftPrompt

    init = torch.arange(6.0).view(2, 3)
    embeds, mask = -torch.ones(1, 2, 3), torch.tensor([[1, 0]])
    out, out_mask = AppendedSoftPrompt(2, 3, init=init)(embeds, mask)
    assert torch.equal(out[0], torch.cat([embeds[0], init])) and out_mask.tolist() == [[1, 0, 1, 1]]
    before = AppendedSoftPrompt(2, 3, init=init, position="before")(embeds, mask)
    reference = SoftPrompt(2, 3, init=init)(embeds, mask)
    assert all(torch.equal(x, y) for x, y in zip(before, reference))
    with pytest.raises(ValueError, match="prompt_position must be one of"):
        AppendedSoftPrompt(2, 3, position="middle")


@pytest.mark.parametrize("option,value,match", [
    ("lm_lambda", -1.0, "lm_lambda must be"), ("kd_lambda", 1.5, "kd_lambda must be"),
    ("pseudo_draws", 0, "pseudo_draws must be an int in"), ("pseudo_per_label", -1, "pseudo_per_label must be"),
    ("pseudo_top_k", -1, "pseudo_top_k must be"), ("pseudo_repetition_penalty", 0, "pseudo_repetition_penalty"),
    ("prompt_length", 0, "prompt_length must be"), ("prompt_position", "middle", "prompt_position must be one of"),
    ("prompt_optimizer", "sgd", "prompt_optimizer must be one of"), ("lm_target_length", 0, "lm_target_length must be"),
    ("prompt_init", "zeros", "prompt_init must be one of"),
])
def test_bad_options_are_refused_in_one_line(option, value, match):
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    model = FAMILIES["t5"](tokenizer)
    with pytest.raises(ValueError, match=match) as error:
        get_strategy("lfpt5", family="text")(model=model, tokenizer=tokenizer, **{option: value})
    assert "\n" not in str(error.value)


def test_a_model_with_another_prefix_is_refused():
    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.text.soft_prompt import SoftPrompt

    tokenizer = stream_tokenizer()
    model = LanguageModel(FAMILIES["t5"](tokenizer), tokenizer)
    model.prefix = SoftPrompt(2, 32)
    with pytest.raises(ValueError, match="prefix of another kind"):
        build_from(model)


def build_from(model):
    from moram_avalanche.strategies.registry import get_strategy

    return get_strategy("lfpt5", family="text")(model=model, **SMALL)


def test_a_killed_run_resumes_to_the_same_matrix_prompt_and_pseudo_samples(tmp_path, monkeypatch):
    from moram_avalanche.strategies.text.plugins.lfpt5 import LFPT5Plugin

    tasks = benchmark().train_stream[0].tasks
    monkeypatch.setattr(LFPT5Plugin, "sample", _scripted_sampler({f"__{t.name}__": t.label_words for t in tasks}))

    def fresh():
        torch.manual_seed(0)
        return build("lfpt5", "t5", **SMALL)

    strategy, _, resumed = killed_and_resumed(fresh, tmp_path, kill_after=2)
    assert torch.equal(resumed.model.prefix.weight, strategy.model.prefix.weight)
    assert resumed.lfpt5_plugin.pseudo == strategy.lfpt5_plugin.pseudo != []
    assert torch.equal(resumed.lfpt5_plugin.previous, strategy.lfpt5_plugin.previous)


def _writing_t5_state():
    """A tiny T5 without spare embedding rows (LFPT5's tokens grow it, as they do a tokenizer that fills its
    model's vocabulary) taught to write ``"<word> __ans__ <label>"`` after each task's generation token, so
    that real sampling gives parsable pseudo-samples: its state with the grown rows cut off (the strategy
    grows the same rows again, :func:`~moram_avalanche.text.lfpt5_prompt.add_tokens`)."""
    from transformers import T5Config, T5ForConditionalGeneration

    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.text.lfpt5_prompt import add_tokens
    from tiny_text import T5_KWARGS

    tokenizer = stream_tokenizer()
    rows = len(tokenizer)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(**{**T5_KWARGS, "vocab_size": rows}))
    tasks = benchmark().train_stream[0].tasks
    add_tokens(model, tokenizer, ["__ans__", *(f"__{task.name}__" for task in tasks)])
    model.requires_grad_(True).get_input_embeddings().requires_grad_(False)  # the grown rows stay the seeded ones
    pairs = [(f"__{task.name}__", f"{word} __ans__ {label}") for task in tasks for word in ("sit", "elit", "lorem")
             for label in task.label_words]
    teacher = LanguageModel(model.train(), tokenizer)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(50):
        optimizer.zero_grad()
        teacher.loss([p for p, _ in pairs], [t for _, t in pairs]).backward()
        optimizer.step()
    return {key: value[:rows] if value.shape[:1] == (len(tokenizer),) else value
            for key, value in model.state_dict().items()}, rows


def test_a_killed_run_with_real_pseudo_samples_resumes_bit_for_bit(tmp_path):
    """No scripted sampler: the model writes the pseudo-samples, its embeddings grow when the tokens are
    added (at the first task, or at the first task after a resume), T5's dropout draws from torch's
    generator; the killed and resumed run's last checkpoint equals the uninterrupted one's in every tensor,
    random generators' states included (:func:`text_runs.assert_same_run_states`)."""
    from transformers import T5Config, T5ForConditionalGeneration

    from moram_avalanche.strategies.registry import get_strategy
    from tiny_text import T5_KWARGS

    state, rows = _writing_t5_state()

    def fresh():
        from avalanche.training.plugins import EvaluationPlugin

        from moram_avalanche.experiments.metrics import AccuracyMatrix

        torch.manual_seed(0)
        tokenizer = stream_tokenizer()
        model = T5ForConditionalGeneration(T5Config(**{**T5_KWARGS, "vocab_size": rows}))
        model.load_state_dict(state)
        matrix = AccuracyMatrix()
        strategy = get_strategy("lfpt5", family="text")(
            model=model.eval(), tokenizer=tokenizer, evaluator=EvaluationPlugin(matrix, loggers=[]),
            train_mb_size=4, iterations=2, max_new_tokens=2, prompt_length=4, pseudo_draws=12, pseudo_max_tokens=4)
        return strategy, matrix

    whole, _, resumed = killed_and_resumed(fresh, tmp_path, kill_after=1)
    assert resumed.model.model.get_input_embeddings().weight.shape[0] > rows  # the tokens grew the embeddings
    assert resumed.lfpt5_plugin.pseudo == whole.lfpt5_plugin.pseudo
    assert whole.lfpt5_plugin.pseudo  # sampled by the model and parsed
    assert torch.equal(resumed.model.prefix.weight, whole.model.prefix.weight)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_first_task_starts_the_prompt_from_the_official_word_rows(family):
    bench = benchmark()
    task = bench.train_stream[0].tasks[0]
    strategy, _ = build("lfpt5", family, prompt_length=8, iterations=0)  # nothing trains: the start is kept
    built = strategy.model.prefix.weight.detach().clone()
    strategy.train(bench.train_stream[0])
    embedding, tokenizer = strategy.model.model.get_input_embeddings().weight, strategy.model.tokenizer
    texts = ["sentence classification", task.name, *task.label_words]  # official getpromptembedding's order
    for row, text in enumerate(texts):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        expected = torch.stack([embedding[i] for i in ids]).mean(0)
        torch.testing.assert_close(strategy.model.prefix.weight[row], expected)
    assert torch.equal(strategy.model.prefix.weight[len(texts):], built[len(texts):])  # frequent-token rows
    vocabulary, _ = build("lfpt5", family, prompt_length=8, iterations=0, prompt_init="vocabulary")
    start = vocabulary.model.prefix.weight.detach().clone()
    vocabulary.train(bench.train_stream[0])
    assert torch.equal(vocabulary.model.prefix.weight, start)
