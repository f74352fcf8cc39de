"""InfLoRA on language models (``inf-lora``): the covariance pass over real tokens, the designed
down-projection against a naive numpy reference of the official formula, its orthogonality to
the earlier tasks' DualGPM space, what trains, the threshold schedule and bad options."""

import math

import numpy as np
import pytest
import torch
from avalanche.core import SupervisedPlugin

from text_runs import FAST, benchmark, build
from tiny_stream import FAMILIES, stream_tokenizer


def samples(experience):
    items = [experience.dataset[i] for i in range(len(experience.dataset))]
    return [item[0] for item in items], [item[1] for item in items]


def naive_covariances(lm, names, prompts, answers):
    """mean of x x^T over every token a linear reads, one sample at a time (a batch of one has no
    padding, so every token is real), in numpy float64."""
    sums = {name: 0.0 for name in names}
    counts = {name: 0 for name in names}

    def hook(name):
        def record(module, args):
            x = args[0].detach().double().reshape(-1, args[0].shape[-1]).numpy()
            sums[name] = sums[name] + x.T @ x
            counts[name] += x.shape[0]
        return record

    handles = [lm.get_submodule(name).register_forward_pre_hook(hook(name)) for name in names]
    was_training = lm.training
    lm.eval()
    try:
        with torch.no_grad():
            for prompt, answer in zip(prompts, answers):
                inputs, labels = lm.teacher_forced([prompt], [answer])
                assert inputs["attention_mask"].all()  # no padding at all
                assert not lm.seq2seq or (labels != -100).all()  # (a causal model's prompt is no label)
                if lm.seq2seq:
                    lm.model(**inputs, labels=labels)
                else:
                    lm.model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
        lm.train(was_training)
    return {name: sums[name] / counts[name] for name in names}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_batched_covariances_count_real_tokens_only(family):
    from moram_avalanche.algorithms.covariance import InputCovariance
    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.models.token_covariance import token_input_covariances

    tokenizer = stream_tokenizer()
    lm = LanguageModel(FAMILIES[family](tokenizer), tokenizer)
    names = [n for n, m in lm.named_modules() if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in
             ("q", "k", "v", "o", "q_proj", "v_proj", "o_proj", "wi", "gate_proj")]
    if family == "t5":  # the cross-attention's k / v read the encoder output, its q the decoder
        assert any("EncDecAttention.k" in n for n in names) and any("EncDecAttention.q" in n for n in names)
    prompts, answers = samples(benchmark().train_stream[0])
    prompts = [p + " extra words" * (i % 3) for i, p in enumerate(prompts)]  # rows of different lengths
    inputs, labels = lm.teacher_forced(prompts[:4], answers[:4])
    assert not inputs["attention_mask"].all()  # the batches below hold padding
    batches = [(prompts[i:i + 4], answers[i:i + 4], None) for i in range(0, len(prompts), 4)]
    got = token_input_covariances(lm, {n: lm.get_submodule(n) for n in names}, batches)
    want = naive_covariances(lm, names, prompts, answers)
    for name in names:
        np.testing.assert_allclose(got[name].numpy(), want[name], rtol=1e-4, atol=1e-6, err_msg=name)
    # the same batches with padding counted give other covariances (the mask is what makes them equal)
    with torch.no_grad(), InputCovariance({n: lm.get_submodule(n) for n in names}) as everything:
        for batch_prompts, batch_answers, _ in batches:
            batch_inputs, batch_labels = lm.teacher_forced(batch_prompts, batch_answers)
            lm.model(**batch_inputs, labels=batch_labels) if lm.seq2seq else lm.model(**batch_inputs)
    unmasked = everything.covariances()
    assert any(not np.allclose(unmasked[n].numpy(), want[n], rtol=1e-3, atol=1e-5) for n in names)


def test_a_mask_of_the_wrong_shape_is_refused():
    from moram_avalanche.algorithms.covariance import InputCovariance

    layer = torch.nn.Linear(3, 2)
    x = torch.randn(2, 4, 3)
    mask = torch.tensor([[True, False, True, True], [False, False, True, False]])
    with torch.no_grad(), InputCovariance({"l": layer}, token_mask=lambda key, t: mask) as recorder:
        layer(x)
    kept = x[mask].double().numpy()  # 4 tokens chosen by hand
    np.testing.assert_allclose(recorder.covariances()["l"].numpy(), kept.T @ kept / 4, rtol=1e-6)
    with pytest.raises(ValueError, match="token mask of 'l' has shape"), \
            InputCovariance({"l": layer}, token_mask=lambda key, t: mask[:, :3]):
        layer(x)


class Watch(SupervisedPlugin):
    """What is trainable and in the optimizer at the first iteration of every experience."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def before_training_iteration(self, strategy, **kwargs):
        if len(self.seen) == strategy.clock.train_exp_counter:
            from moram_avalanche.layers.base import find_layers
            from moram_avalanche.layers.task_lora import TaskLoRALinear

            optimized = {id(p) for group in strategy.optimizer.param_groups for p in group["params"]}
            trainable = {id(p) for p in strategy.model.parameters() if p.requires_grad}
            layers = find_layers(strategy.model, TaskLoRALinear).values()
            self.seen.append({"optimized": optimized, "trainable": trainable,
                              "new_ups": {id(layer.ups[-1]) for layer in layers}})


def test_designed_branch_follows_the_official_formula_and_avoids_the_old_space():
    from moram_avalanche.algorithms.dualgpm import DualGPM
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.task_lora import TaskLoRALinear

    rank = 2
    watch = Watch()
    strategy, _ = build("inf-lora", "t5", rank=rank, plugins=[watch])
    bench = benchmark()
    initial = {k: v.clone() for k, v in strategy.model.state_dict().items() if ".downs." not in k and ".ups." not in k}
    strategy.train(bench.train_stream[0])
    layers = find_layers(strategy.model, TaskLoRALinear)
    after_first = {name: (layer.downs[0].clone(), layer.ups[0].clone()) for name, layer in layers.items()}
    memories = {}
    for name, memory in strategy.inflora_plugin.memories.items():
        memories[name] = DualGPM(memory.dim)
        memories[name].load_state_dict(memory.state_dict())
    prompts, answers = samples(bench.train_stream[1])
    covariances = naive_covariances(strategy.model, list(layers), prompts, answers)  # before task 2 trains

    strategy.train(bench.train_stream[1])
    checked = 0
    for name, layer in layers.items():
        memory = memories[name]
        basis = memory.basis.numpy()
        c = covariances[name]
        projected = basis @ (basis.T @ c) if memory.retain else c - basis @ (basis.T @ c)  # InfLoRA's formula
        u, s, _ = np.linalg.svd(projected)
        assert s[rank - 1] - s[rank] > 1e-6 * s[0]  # distinct: the top-rank space is defined
        want = u[:, :rank].T / math.sqrt(3)
        got = layer.downs[1].detach().double().numpy()
        signs = np.sign(np.sum(got * want, axis=1, keepdims=True))  # singular vectors up to sign
        np.testing.assert_allclose(got, signs * want, atol=1e-5, err_msg=name)
        # the rows avoid the old tasks' input space: nothing of them outside the free space
        assert memory.free_dim >= rank
        free = memory.free_basis().numpy()
        np.testing.assert_allclose(got - got @ free @ free.T, 0, atol=1e-6, err_msg=name)
        # earlier branch untouched by task 2; every other weight by both tasks
        assert torch.equal(layer.downs[0], after_first[name][0]) and torch.equal(layer.ups[0], after_first[name][1])
        assert layer.ups[1].abs().sum() > 0  # the new up-projection trained
        checked += 1
    assert checked == 12  # T5's q and v: 2 encoder + 2 x 2 decoder attentions, over 2 blocks
    for key, value in strategy.model.state_dict().items():
        if key in initial:
            assert torch.equal(value, initial[key]), key
    # only the new up-projections were trainable and optimized, at every task
    assert len(watch.seen) == 2
    for seen in watch.seen:
        assert seen["optimized"] == seen["trainable"] == seen["new_ups"]


def test_threshold_schedule_runs_over_the_streams_tasks_and_state_round_trips():
    from moram_avalanche.strategies.text.plugins.inflora import TextInfLoRAPlugin

    strategy, _ = build("inf-lora", "llama")
    for experience in benchmark().train_stream:
        strategy.train(experience)
    plugin = strategy.inflora_plugin
    # lambda_b + (lambda_e - lambda_b) t / T, T = 3 tasks: 0.95, 0.95 + 0.05 / 3, 0.95 + 0.1 / 3
    assert [h["threshold"] for h in plugin.history] == pytest.approx([0.95, 0.95 + 0.05 / 3, 0.95 + 0.1 / 3])
    assert [h["domain"] for h in plugin.history] == ["colour", "mood", "size"]
    fresh = TextInfLoRAPlugin({name: g["dim"] for name, g in plugin.groups.items()}, rank=plugin.rank)
    fresh.load_state_dict(plugin.state_dict())
    assert fresh.tasks_done == 3 and fresh.history == plugin.history
    for name, memory in plugin.memories.items():
        assert torch.equal(fresh.memories[name].basis, memory.basis)
        assert fresh.memories[name].retain == memory.retain


def test_registered_for_the_text_family_beside_clips_inflora():
    from moram_avalanche.strategies.clip.inflora import InfLoRA
    from moram_avalanche.strategies.registry import get_strategy
    from moram_avalanche.strategies.text.inflora import TextInfLoRA

    assert get_strategy("inf-lora", family="text") is TextInfLoRA
    assert get_strategy("inflora") is InfLoRA


@pytest.mark.parametrize("options,message", [
    (dict(rank=0), "rank must be a positive int"),
    (dict(rank=33), "InfLoRA rank must be at most the input size of every target linear, got rank=33"),
    (dict(lambda_b=0), "lambda_b must be a finite number in"),
    (dict(lambda_b=0.99, lambda_e=0.9), "lambda_b must be <= lambda_e"),
    (dict(memory="gem"), "memory must be one of"),
    (dict(dropout=1.0), "dropout must be a finite number"),
    (dict(num_tasks=0), "num_tasks must be a positive int"),
])
def test_bad_options_are_refused_in_one_line_before_the_model_changes(options, message):
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    model = FAMILIES["t5"](tokenizer)  # d_model 32
    with pytest.raises(ValueError, match=message) as error:
        get_strategy("inf-lora", family="text")(model=model, tokenizer=tokenizer, **{**FAST, **options})
    assert "\n" not in str(error.value)
    assert not find_layers(model)  # nothing injected
