"""The language-model strategies end to end on tiny T5 / LLaMA models and the synthetic text stream.

Mechanics, not learning: a handful of iterations per task, so each run takes seconds.
"""

import math

import numpy as np
import pytest
import torch

from text_runs import FAST, SIZES, benchmark, build, run  # noqa: F401
from tiny_stream import FAMILIES, TASKS, stream_tokenizer


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("name", ["moram", "finetune", "seq-lora", "inc-lora", "o-lora", "hidelora", "mtl"])
def test_three_tasks_end_to_end(name, family):
    bench = benchmark()
    strategy, matrix = build(name, family)
    run(strategy, bench)
    result = matrix.result()
    assert result.shape == (3, 3) and not np.isnan(result).any()
    assert ((result >= 0) & (result <= 100)).all()
    assert matrix.domains == list(TASKS)
    assert len(strategy.mb_predictions) > 0 and all(isinstance(p, str) for p in strategy.mb_predictions)


def test_registry_keeps_clip_by_default_and_names_families():
    from moram_avalanche.strategies.clip.loop import CLIPStrategy
    from moram_avalanche.strategies.registry import get_strategy
    from moram_avalanche.strategies.text.loop import TextStrategy

    assert issubclass(get_strategy("moram"), CLIPStrategy)
    assert issubclass(get_strategy("moram", family="text"), TextStrategy)
    with pytest.raises(ValueError, match="unknown model family 'audio'"):
        get_strategy("moram", family="audio")
    with pytest.raises(ValueError, match="unknown strategy 'zscl'.*o-lora"):
        get_strategy("zscl", family="text")


def test_options_checked_before_the_model_changes():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    model = FAMILIES["t5"](tokenizer)
    with pytest.raises(TypeError, match="takes no option 'atom_per_task'.*atoms_per_task"):
        get_strategy("moram", family="text")(model=model, tokenizer=tokenizer, atom_per_task=4)
    with pytest.raises(ValueError, match="epochs"):
        get_strategy("inc-lora", family="text")(model=model, tokenizer=tokenizer, epochs=0)
    assert not find_layers(model)


def test_moram_atoms_of_task_one_bit_identical_after_task_two():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    bench = benchmark()
    strategy, _ = build("moram", "t5")
    run(strategy, bench, tasks=1)
    layers = find_layers(strategy.model, MoRAMLinear)
    assert layers and all(layer.num_atoms == 8 for layer in layers.values())
    first = {name: {k: v.clone() for k, v in layer.state_dict().items() if k.startswith("atom_")}
             for name, layer in layers.items()}
    assert any(v["atom_values"].abs().sum() > 0 for v in first.values())  # task 1 trained its values
    run(strategy, list_of(bench, 1))
    for name, layer in layers.items():
        assert layer.num_atoms == 16
        state = layer.state_dict()
        assert torch.equal(state["atom_keys"][:8], first[name]["atom_keys"]), name  # [R, d_in]
        assert torch.equal(state["atom_values"][:, :8], first[name]["atom_values"]), name  # [d_out, R]


def list_of(bench, index):
    """A stand-in benchmark holding only experience ``index`` of the train stream."""
    class One:
        train_stream = [bench.train_stream[index]]
        test_stream = bench.test_stream
    return One


def test_inc_lora_frozen_adapters_unchanged_after_next_task():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.task_lora import TaskLoRALinear

    bench = benchmark()
    strategy, _ = build("inc-lora", "llama")
    run(strategy, bench, tasks=1)
    layers = find_layers(strategy.model, TaskLoRALinear)
    assert layers and all(layer.num_tasks == 1 for layer in layers.values())
    saved = {name: (layer.downs[0].detach().clone(), layer.ups[0].detach().clone()) for name, layer in layers.items()}
    assert any(up.abs().sum() > 0 for _, up in saved.values())
    run(strategy, list_of(bench, 1))
    for name, layer in layers.items():
        assert layer.num_tasks == 2 and not layer.downs[0].requires_grad
        assert torch.equal(layer.downs[0], saved[name][0]) and torch.equal(layer.ups[0], saved[name][1])
    assert any(layer.ups[1].abs().sum() > 0 for layer in layers.values())  # task 2 trained its own


def test_olora_adds_its_terms_to_the_loss():
    from moram_avalanche.strategies.text.plugins.olora import OLoRAPlugin

    bench = benchmark()
    strategy, _ = build("o-lora", "t5", lambda_orth=0.5, lambda_l2=0.1)
    run(strategy, bench, tasks=2)
    plugin = strategy.olora_plugin
    assert isinstance(plugin, OLoRAPlugin)
    assert plugin.last["orth"] > 0 and plugin.last["l2"] > 0  # task 2's LoRA against task 1's


def test_mtl_trains_jointly_from_the_initial_weights():
    bench = benchmark()
    strategy, matrix = build("mtl", "t5")
    initial = {k: v.clone() for k, v in strategy.model.state_dict().items()}
    seen = []
    original = strategy.model_adaptation

    def adapted(model=None):
        result = original(model)
        if strategy.is_training:  # what each task starts from, and trains on
            restarted = all(torch.equal(v.cpu(), initial[k]) for k, v in strategy.model.state_dict().items())
            seen.append((restarted, len(strategy.adapted_dataset)))
        return result

    strategy.model_adaptation = adapted
    run(strategy, bench)
    sizes = [len(e.dataset) for e in bench.train_stream]
    assert seen == [(True, sizes[0]), (True, sizes[0] + sizes[1]), (True, sum(sizes))]
    assert matrix.result().shape == (3, 3)


def test_avalanche_replay_composes_with_the_text_loop():
    from avalanche.training.plugins import ReplayPlugin

    bench = benchmark()
    replay = ReplayPlugin(mem_size=4)
    strategy, matrix = build("inc-lora", "t5", plugins=[replay])
    run(strategy, bench, tasks=2)
    assert len(replay.storage_policy.buffer) == 4
    assert matrix.result().shape == (2, 3)


PER_TASK = (3, 1, 2)  # epochs of TASKS[0], TASKS[1], TASKS[2]


@pytest.mark.parametrize("budget, steps", [
    (dict(iterations=3), lambda n, i: 3),
    (dict(iterations=None, epochs=2), lambda n, i: 2 * math.ceil(n / 4)),
    (dict(iterations=None, epochs=PER_TASK), lambda n, i: PER_TASK[i] * math.ceil(n / 4)),
    (dict(iterations=None, epochs=dict(zip(reversed(TASKS), reversed(PER_TASK)))),
     lambda n, i: PER_TASK[i] * math.ceil(n / 4))])
def test_the_budget_is_iterations_when_given_else_epochs(budget, steps):
    """--iterations: exactly that many steps per task (cycling the data); else the paper's
    epochs: every training example once per epoch, in ceil(n / batch) steps -- the same count
    for every task, or each task's own (the release's TRACE run), by place or by name."""
    from avalanche.core import SupervisedPlugin

    class CountSteps(SupervisedPlugin):
        def __init__(self):
            super().__init__()
            self.per_task = []

        def before_training_exp(self, strategy, **kwargs):
            self.per_task.append(0)

        def after_training_iteration(self, strategy, **kwargs):
            self.per_task[-1] += 1

    bench = benchmark()
    counter = CountSteps()
    strategy, _ = build("seq-lora", plugins=[counter], **budget)
    for experience in list(bench.train_stream)[:2]:
        strategy.train(experience)
    sizes = [len(experience.dataset) for experience in list(bench.train_stream)[:2]]
    assert counter.per_task == [steps(n, i) for i, n in enumerate(sizes)]


@pytest.mark.parametrize("epochs, message", [
    ((), "empty tuple"), ((1, 0, 1), r"epochs\[1\]"), ({"colour": 1.5}, "epochs\\['colour'\\]"),
    ({1: 2}, "keys are task names")])
def test_bad_per_task_epochs_are_refused_before_anything_is_built(epochs, message):
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    with pytest.raises(ValueError, match=message):
        get_strategy("seq-lora", family="text")(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer, epochs=epochs)


@pytest.mark.parametrize("epochs, message", [((1, 2), "gives 2 counts, one per task, but the stream has 3 tasks"),
                                             ({TASKS[0]: 1}, "but not for")])
def test_per_task_epochs_that_miss_a_task_of_the_stream_are_refused(epochs, message):
    bench = benchmark()
    strategy, _ = build("seq-lora", iterations=None, epochs=epochs)
    with pytest.raises(ValueError, match=message):
        strategy.train(list(bench.train_stream)[1])


def test_graded_metrics_fill_the_matrix_with_each_tasks_metric(tmp_path):
    """A TRACE stream of three generation tasks: every cell is its task's metric (ROUGE-L, edit
    similarity after Py150's literal rule, SARI against the prompt) of the answers generated, computed
    independently."""
    import json

    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.benchmarks import trace
    from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS
    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies.registry import get_strategy
    from moram_avalanche.text.tiny import tiny_language_model, word_tokenizer

    tasks = ("MeetingBank", "Py150", "20Minuten")
    texts = []
    for t, name in enumerate(tasks):
        items = [{"prompt": f"summarise item {i} of {name}", "answer": f"item {i} {'x' * t} done"} for i in range(4)]
        texts += [v for item in items for v in item.values()]
        for split in ("train", "eval", "test"):
            (tmp_path / name).mkdir(exist_ok=True)
            (tmp_path / name / f"{split}.json").write_text(json.dumps(items))
    bench = trace(tmp_path, tasks)
    tokenizer = word_tokenizer(texts)
    matrix = AccuracyMatrix()
    strategy = get_strategy("seq-lora", "text")(
        model=tiny_language_model("t5", tokenizer), tokenizer=tokenizer, train_mb_size=4, eval_mb_size=8,
        iterations=3, lr=1e-2, max_new_tokens=4, evaluator=EvaluationPlugin(matrix, loggers=[]))
    expected = []
    for experience in bench.train_stream:
        strategy.train(experience)
        row = []
        for test in bench.test_stream:
            strategy.eval([test])  # one batch per task: its predictions are the task's answers
            prompts, answers = zip(*[(p, a) for p, a, _ in test.dataset])
            row.append(TEXT_METRICS[test.metric](strategy.mb_predictions, list(answers), sources=list(prompts)))
        expected.append(row)
    assert [e.metric for e in bench.test_stream] == ["rouge_l", "code_similarity", "sari"]
    np.testing.assert_allclose(matrix.result(), np.array(expected), rtol=1e-9, atol=1e-9)
    assert ((matrix.result() > 0) & (matrix.result() < 100)).any()  # graded: cells between the hits


def test_gradient_accumulation_equals_one_larger_batch():
    """accumulation_steps 2 on batches of 2 takes the step one batch of 4 takes (equal answer
    lengths: the token loss's mean over 4 is the mean of two means over 2), and the budget counts
    optimizer steps."""
    from avalanche.core import SupervisedPlugin

    class CountSteps(SupervisedPlugin):
        def __init__(self):
            super().__init__()
            self.batches = 0

        def after_training_iteration(self, strategy, **kwargs):
            self.batches += 1

    bench = benchmark()
    weights = []
    for options in (dict(train_mb_size=4), dict(train_mb_size=2, accumulation_steps=2)):
        torch.manual_seed(5)  # the same shuffled order
        counter = CountSteps()
        strategy, _ = build("seq-lora", plugins=[counter], **{**options, "iterations": 1})
        for module in strategy.model.modules():  # no dropout: the two runs compute the same functions
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
            elif isinstance(getattr(module, "dropout", None), float):  # T5's attention-weight dropout
                module.dropout = 0.0
        strategy.train(bench.train_stream[0])
        assert counter.batches == options.get("accumulation_steps", 1)
        weights.append([p.detach().clone() for p in strategy.model.parameters() if p.requires_grad])
    for one, accumulated in zip(*weights):
        torch.testing.assert_close(accumulated, one, rtol=1e-5, atol=1e-6)
    assert any((w != 0).any() for w in weights[0])  # something trained


def test_accumulation_flushes_a_short_last_cycle_as_its_mean():
    from moram_avalanche.strategies.text.plugins.accumulation import AccumulatedSteps

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = AccumulatedSteps(torch.optim.SGD([param], lr=1.0), 3)
    for grad in (1.0, 3.0):  # two of three: the loop adds grad / 3 each time
        optimizer.zero_grad()
        param.grad = (param.grad if param.grad is not None else torch.zeros(1)) + grad / 3
        optimizer.step()
    assert param.item() == 0.0  # not stepped yet
    assert optimizer.flush() and param.item() == pytest.approx(-2.0)  # minus the mean gradient (1 + 3) / 2
    with pytest.raises(ValueError, match="accumulation steps"):
        AccumulatedSteps(optimizer.optimizer, 0)
