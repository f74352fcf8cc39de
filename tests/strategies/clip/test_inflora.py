"""InfLoRA on the shared CLIP loop: covariance pass, designed factors, merge, end to end, resume."""

import copy
import math
import warnings

import open_clip
import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.algorithms.covariance import input_covariances
from moram_avalanche.algorithms.dualgpm import DualGPM
from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.clip.towers import blocks
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.lora import LoRALinear
from moram_avalanche.strategies import STRATEGIES, InfLoRA
from tiny_clip import TINY_CONFIG

warnings.filterwarnings("ignore", message="No loggers specified")


def quiet(**kwargs):
    return dict(evaluator=EvaluationPlugin(loggers=[]), progress=False, **kwargs)


def naive_ln1_covariances(model, encoder, run):
    """{attention name: mean x x^T} of every block's LN1 output, recorded with plain hooks."""
    outputs, handles = {}, []
    root_name = {m: n for n, m in model.named_modules()}
    for block in (b.module for b in blocks(model, encoder)):
        name = root_name[block.attn]
        handles.append(block.ln_1.register_forward_hook(
            lambda module, args, out, name=name: outputs.setdefault(name, []).append(out.reshape(-1, out.shape[-1]))))
    with torch.no_grad():
        run()
    for handle in handles:
        handle.remove()
    result = {}
    for name, chunks in outputs.items():
        x = torch.cat(chunks).double()
        result[name] = x.t() @ x / x.shape[0]
    return result


def test_the_covariance_pass_equals_a_naive_computation_from_the_ln1_outputs(tiny_clip, tokenizer):
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, rank=2, encoders=("visual", "text"), **quiet())
    groups = strategy.inflora_plugin.groups
    assert len(groups) == 4 and all(len(g["layers"]) == 2 for g in groups.values())  # k and v share a group
    layers = find_layers(tiny_clip, LoRALinear)
    recorded = {name: layers[g["layers"][0]] for name, g in groups.items()}
    gen = torch.Generator().manual_seed(5)
    images = [torch.randn(3, 3, 32, 32, generator=gen), torch.randn(2, 3, 32, 32, generator=gen)]
    prompts = ["a cat.", "a much longer prompt about a dog."]
    tokens = [tokenizer(prompts)]
    got = input_covariances(tiny_clip, recorded, images=images, tokens=tokens)
    expected = naive_ln1_covariances(tiny_clip, "visual", lambda: [tiny_clip.encode_image(x) for x in images])
    # text: every context position of every prompt counts, padding included (2 prompts x 16 tokens)
    expected.update(naive_ln1_covariances(tiny_clip, "text", lambda: tiny_clip.encode_text(tokens[0])))
    assert set(got) == set(expected) == set(groups)
    for name in groups:
        assert torch.allclose(got[name], expected[name], rtol=1e-5, atol=1e-6), name


class Spy(SupervisedPlugin):
    """Snapshots around InfLoRA's plugin: (inserted first) before merge, (appended) after design/merge."""

    def __init__(self, probe, record):
        super().__init__()
        self.probe, self.record = probe, record

    def after_training_exp(self, strategy, **kwargs):
        with torch.no_grad():
            self.record.append(strategy.model.encode_image(self.probe).clone())


class Designed(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.downs, self.ups, self.memories, self.optimized, self.images = [], [], [], [], []

    def before_training_exp(self, strategy, **kwargs):
        layers = find_layers(strategy.model, LoRALinear)
        self.downs.append({n: layer.down.detach().clone() for n, layer in layers.items()})
        self.ups.append({n: layer.up.detach().clone() for n, layer in layers.items()})
        self.memories.append({n: (m.basis.clone(), m.kind, m.updates)
                              for n, m in strategy.inflora_plugin.memories.items()})
        self.optimized.append({id(p) for g in strategy.optimizer.param_groups for p in g["params"]})
        self.images.append(torch.stack([strategy.adapted_dataset[i][0] for i in range(len(strategy.adapted_dataset))]))


def test_two_experiences_of_the_synthetic_stream(tiny_clip, tokenizer, monkeypatch):
    transform = open_clip.image_transform(32, is_train=False)
    benchmark = synthetic(("shapes", "colours"), train_size=8, test_size=6, train_transform=transform,
                          eval_transform=transform)
    merged = []  # (name, up, down) at every merge
    original_merge = LoRALinear.merge
    names = {}

    def spy_merge(layer):
        merged.append((names[id(layer)], layer.up.detach().clone(), layer.down.detach().clone()))
        return original_merge(layer)

    monkeypatch.setattr(LoRALinear, "merge", spy_merge)
    probe = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(9))
    before_merge, after_merge, designed = [], [], Designed()
    matrix = AccuracyMatrix()
    strategy = STRATEGIES["inflora"](model=tiny_clip, tokenizer=tokenizer, rank=3, iterations=2, lr=1e-2,
                                     train_mb_size=4, plugins=[designed, Spy(probe, after_merge)], progress=False,
                                     evaluator=EvaluationPlugin(matrix, loggers=[]))
    strategy.plugins.insert(0, Spy(probe, before_merge))
    initial = {k: v.clone() for k, v in tiny_clip.state_dict().items()}  # after injection
    layers = find_layers(tiny_clip, LoRALinear)
    names.update({id(layer): name for name, layer in layers.items()})
    assert len(layers) == 4 and all(n.startswith("visual.") for n in layers)  # image encoder only, k and v
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    result = matrix.result()
    assert result.shape == (2, 2) and torch.isfinite(torch.as_tensor(result)).all()

    plugin = strategy.inflora_plugin
    assert plugin.tasks_done == 2 and [h["threshold"] for h in plugin.history] == pytest.approx([0.95, 0.975])
    ups = {id(layer.up) for layer in layers.values()}
    for t in range(2):
        assert designed.optimized[t] == ups  # only the up-projections train
        assert all(torch.count_nonzero(u) == 0 for u in designed.ups[t].values())  # zero at the start
        downs = designed.downs[t]
        for g in plugin.groups.values():
            k, v = (downs[n] for n in g["layers"])
            assert torch.equal(k, v)  # one design per attention, for K and V
            assert torch.allclose(k.norm(dim=1), torch.full((3,), 1 / math.sqrt(3)), atol=1e-5)
    # experience 1's design avoids the old space that experience 0 left in the memory
    for group, (basis, kind, updates) in designed.memories[1].items():
        assert updates == 1
        down = designed.downs[1][plugin.groups[group]["layers"][0]].double()
        if kind == "remove":
            assert torch.allclose(down @ basis, torch.zeros(3, basis.shape[1], dtype=torch.float64), atol=1e-5)
        else:
            outside = torch.eye(basis.shape[0], dtype=torch.float64) - basis @ basis.t()
            assert torch.allclose(down @ outside, torch.zeros_like(down), atol=1e-5)
        assert torch.allclose(down @ down.t(), torch.eye(3, dtype=torch.float64) / 3, atol=1e-5)

    # merge: every layer merged once per experience; final weights = initial + sum of up @ down
    assert len(merged) == 2 * len(layers)
    state = tiny_clip.state_dict()
    for name, layer in layers.items():
        total = sum(up @ down for n, up, down in merged if n == name)
        assert torch.count_nonzero(total) > 0
        assert torch.allclose(state[f"{name}.base.weight"], initial[f"{name}.base.weight"] + total, atol=1e-6)
        assert torch.count_nonzero(layer.up) == 0
    for t in range(2):
        assert torch.allclose(before_merge[t], after_merge[t], atol=1e-5)  # merging changes no output
    assert not torch.allclose(before_merge[0], before_merge[1])
    # nothing outside the image encoder's k/v weights changed
    lora_keys = {f"{n}.{s}" for n in layers for s in ("base.weight", "down", "up")}
    assert all(torch.equal(v, initial[k]) for k, v in state.items() if k not in lora_keys)


def test_the_first_design_is_the_top_singular_vectors_of_the_experience_covariance(tiny_clip, tokenizer,
                                                                                   make_stream):
    fresh = copy.deepcopy(tiny_clip)  # the untouched model (open_clip's own attention)
    designed = Designed()
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, rank=2, iterations=1, train_mb_size=4,
                       plugins=[designed], **quiet())
    strategy.train(make_stream("all").train_stream[0])
    images = designed.images[0]
    expected = naive_ln1_covariances(fresh, "visual", lambda: fresh.encode_image(images))
    for group, g in strategy.inflora_plugin.groups.items():
        u, _, _ = torch.linalg.svd(expected[group])
        down = designed.downs[0][g["layers"][0]].double()
        projector = 3 * down.t() @ down
        assert torch.allclose(projector, u[:, :2] @ u[:, :2].t(), atol=1e-4), group


def test_defaults_and_errors(tiny_clip, tokenizer, make_stream):
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, **quiet())
    assert (strategy.lr, strategy.betas, strategy.weight_decay, strategy.iterations, strategy.train_mb_size) == (
        5e-4, (0.9, 0.999), 0.0, 500, 64)
    assert not strategy.text_to_image_loss and strategy.label_smoothing == 0 and strategy.warmup == 0
    plugin = strategy.inflora_plugin
    assert plugin.rank == 10 and (plugin.lambda_b, plugin.lambda_e) == (0.95, 1.0) and plugin.num_tasks is None
    layers = find_layers(tiny_clip, LoRALinear)
    assert sorted(n.rpartition(".")[2] for n in layers) == ["k_proj", "k_proj", "v_proj", "v_proj"]
    assert all(layer.scale == 1.0 and not layer.down.requires_grad and layer.up.requires_grad
               for layer in layers.values())
    with pytest.raises(ValueError, match="subset of \\('q', 'k', 'v'\\)"):
        InfLoRA(model=open_clip.CLIP(**TINY_CONFIG), tokenizer=tokenizer, targets=("k", "out"))
    short = InfLoRA(model=open_clip.CLIP(**TINY_CONFIG), tokenizer=tokenizer, rank=2, iterations=1, train_mb_size=4,
                    num_tasks=1, **quiet())
    stream = make_stream("all").train_stream
    short.train(stream[0])
    with pytest.raises(ValueError, match="more experiences than num_tasks=1"):
        short.train(stream[1])


def test_the_text_encoder_option_trains_and_merges_text_lora(tiny_clip, tokenizer, make_stream):
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, rank=2, iterations=2, lr=1e-2, train_mb_size=4,
                       encoders=("visual", "text"), **quiet())
    initial = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    strategy.train(make_stream("all").train_stream[0])
    state = tiny_clip.state_dict()
    text_keys = [k for k in state if k.startswith("transformer.") and k.endswith("base.weight")]
    assert len(text_keys) == 4 and all(not torch.equal(state[k], initial[k]) for k in text_keys)
    assert all(m.updates == 1 for m in strategy.inflora_plugin.memories.values())


def fresh_run(make_stream, tokenizer):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    metric = AccuracyMatrix()
    strategy = InfLoRA(model=model, tokenizer=tokenizer, rank=2, iterations=2, lr=1e-2, train_mb_size=4,
                       evaluator=EvaluationPlugin(metric, loggers=[]), progress=False)
    return strategy, make_stream("all", train_sizes=(4, 4, 4), test_size=4), metric


def test_resume_is_bit_identical_and_the_checkpoint_is_lean(make_stream, tokenizer, tmp_path):
    strategy, benchmark, metric = fresh_run(make_stream, tokenizer)
    assert run_stream(strategy, benchmark, tmp_path / "whole", progress=False) == 3
    expected_matrix, expected_state = metric.result(), strategy.model.state_dict()
    expected_memories = strategy.inflora_plugin.state_dict()["memories"]

    strategy, benchmark, metric = fresh_run(make_stream, tokenizer)
    assert run_stream(strategy, benchmark, tmp_path / "cut", max_experiences=1, progress=False) == 1
    checkpoint = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=True)
    assert set(checkpoint["model"]) == {f"{n}.{s}" for n in find_layers(strategy.model, LoRALinear)
                                        for s in ("base.weight", "down", "up")}
    torch.rand(1000)  # a new process: new objects, and the global RNG moved on
    strategy, benchmark, metric = fresh_run(make_stream, tokenizer)
    assert run_stream(strategy, benchmark, tmp_path / "cut", progress=False) == 3
    assert metric.result().tolist() == expected_matrix.tolist()
    state = strategy.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected_state.items())
    memories = strategy.inflora_plugin.state_dict()["memories"]
    assert all(torch.equal(memories[g]["basis"], expected_memories[g]["basis"]) for g in memories)
    assert strategy.inflora_plugin.tasks_done == 3


class PostTraining(SupervisedPlugin):
    """Inserted before InfLoRA's plugin: the trained model's LN1 covariances on the experience's data."""

    def __init__(self):
        super().__init__()
        self.covariances, self.lrs, self.memories = [], [], []

    def after_update(self, strategy, **kwargs):
        self.lrs.append(strategy.optimizer.param_groups[0]["lr"])

    def after_training_exp(self, strategy, **kwargs):
        data = strategy.adapted_dataset
        images = torch.stack([data[i][0] for i in range(len(data))])
        model = strategy.model
        model.eval()
        self.covariances.append(naive_ln1_covariances(model, "visual", lambda: model.encode_image(images)))
        model.train()


class Memories(SupervisedPlugin):
    """Appended after InfLoRA's plugin: the memories after each experience."""

    def __init__(self):
        super().__init__()
        self.states = []

    def after_training_exp(self, strategy, **kwargs):
        self.states.append({n: (m.basis.clone(), m.kind) for n, m in strategy.inflora_plugin.memories.items()})


def old_space(basis, kind):
    p = basis @ basis.t()
    return torch.eye(basis.shape[0], dtype=p.dtype) - p if kind == "retain" else p


def test_the_memory_takes_the_post_training_covariance_and_the_lr_follows_the_quarter_cosine(
        tiny_clip, tokenizer, make_stream, monkeypatch):
    import moram_avalanche.strategies.plugins.inflora as inflora_module
    workers = []

    def recording_loader(*args, num_workers=0, **kwargs):
        workers.append(num_workers)
        return torch.utils.data.DataLoader(*args, num_workers=0, **kwargs)

    monkeypatch.setattr(inflora_module, "DataLoader", recording_loader)
    untrained = copy.deepcopy(tiny_clip)
    spy, memories, designed = PostTraining(), Memories(), Designed()
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, rank=2, iterations=4, lr=5e-2, train_mb_size=4,
                       plugins=[designed, memories], **quiet())
    strategy.plugins.insert(0, spy)
    make_train_dataloader = strategy.make_train_dataloader  # keep training in-process (fast)
    strategy.make_train_dataloader = lambda num_workers=0, **kw: make_train_dataloader(num_workers=0, **kw)
    stream = make_stream("all").train_stream
    for experience in (stream[0], stream[1]):
        strategy.train(experience, num_workers=2)
    assert workers == [2, 2, 2, 2]  # both covariance passes of both experiences use train's workers
    # per iteration s of S = 4: lr * cos(99 pi s / (200 (S - 1))) [InfLoRA utils/schedulers.py]
    expected_lrs = [5e-2 * math.cos(99 * math.pi * s / 600) for s in range(4)]
    assert spy.lrs == pytest.approx(expected_lrs * 2) and spy.lrs[3] == pytest.approx(5e-2 * 0.01571, rel=1e-3)
    # the memories equal a fresh DualGPM fed the trained model's covariances, step by step
    plugin = strategy.inflora_plugin
    reference = {g: DualGPM(group["dim"]) for g, group in plugin.groups.items()}
    thresholds = [h["threshold"] for h in plugin.history]
    assert thresholds == pytest.approx([0.95, 0.95 + 0.05 / 3])  # T = 3 domains
    for t, eps in enumerate(thresholds):
        for g in plugin.groups:
            reference[g].update(spy.covariances[t][g], eps)
            basis, kind = memories.states[t][g]
            assert kind == reference[g].kind, (t, g)
            assert torch.allclose(old_space(basis, kind), old_space(reference[g].basis, reference[g].kind),
                                  atol=1e-4), (t, g)
    # the check can fail: the pre-training covariance of experience 0 gives another memory in
    # the second block (the first block's input, the patch embeddings, does not depend on LoRA)
    images = designed.images[0]
    before = naive_ln1_covariances(untrained, "visual", lambda: untrained.encode_image(images))
    second = sorted(plugin.groups)[1]
    wrong = DualGPM(plugin.groups[second]["dim"])
    wrong.update(before[second], thresholds[0])
    basis, kind = memories.states[0][second]
    assert (old_space(basis, kind) - old_space(wrong.basis, wrong.kind)).abs().max() > 1e-2


def test_the_half_cosine_option_and_bad_options(tiny_clip, tokenizer, make_stream):
    spy = PostTraining()
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, rank=2, iterations=4, lr=1e-2, train_mb_size=4,
                       lr_schedule="cosine", memory="gpm", **quiet())
    strategy.plugins.append(spy)
    strategy.train(make_stream("all").train_stream[0])
    assert spy.lrs == pytest.approx([1e-2 * 0.5 * (1 + math.cos(math.pi * s / 4)) for s in range(4)])
    assert all(not m.dual for m in strategy.inflora_plugin.memories.values())
    for bad, match in [(dict(lr_schedule="step"), "lr_schedule must be one of"),
                       (dict(memory="ogd"), "memory must be one of"),
                       (dict(rank=65), "rank must be in 1..64"), (dict(rank=0), "rank must be a positive int, got 0")]:
        model = open_clip.CLIP(**TINY_CONFIG)
        with pytest.raises(ValueError, match=match):
            InfLoRA(model=model, tokenizer=tokenizer, **bad)
        assert not find_layers(model, LoRALinear)  # refused before the model was changed


def test_a_memory_with_too_few_free_directions_warns_and_the_free_ones_come_first(tiny_clip, tokenizer,
                                                                                  make_stream):
    designed = Designed()
    strategy = InfLoRA(model=tiny_clip, tokenizer=tokenizer, rank=3, iterations=1, train_mb_size=4,
                       plugins=[designed], **quiet())
    stream = make_stream("all").train_stream
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the first experience has the whole space
        strategy.train(stream[0])
    plugin = strategy.inflora_plugin
    free = torch.eye(64, dtype=torch.float64)[:, 10:12]  # a retain memory: 2 free directions
    for memory in plugin.memories.values():
        memory.load_state_dict({"basis": free, "retain": torch.tensor(True), "updates": torch.tensor(1)})
    with pytest.warns(UserWarning) as caught:
        strategy.train(stream[1])
    texts = [str(w.message) for w in caught if "free input directions" in str(w.message)]
    assert len(texts) == len(plugin.groups) == 2
    for group, g in plugin.groups.items():
        assert sum(group in t and "only 2 free input directions for rank 3" in t and "1 rows" in t
                   for t in texts) == 1
        rows = math.sqrt(3) * designed.downs[1][g["layers"][0]].double().t()
        assert torch.allclose(rows[:, :2] @ rows[:, :2].t(), free @ free.t(), atol=1e-5)
        assert torch.allclose(rows.t() @ rows, torch.eye(3, dtype=torch.float64), atol=1e-5)
