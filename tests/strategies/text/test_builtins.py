"""Avalanche's own strategies by name (``avalanche.ewc``, ...) on the tiny language models, and
Avalanche's plugins composed with the package's text strategies (MoRAM + ReplayPlugin).

Mechanics, not learning: a handful of iterations per task, so each run takes seconds.
"""

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin, EWCPlugin, ReplayPlugin

from text_runs import FAST, SIZES, Batches, benchmark, plugin_of, run  # noqa: F401
from text_runs import build_with_batches as build
from tiny_stream import FAMILIES, TASKS, stream_tokenizer

warnings.filterwarnings("ignore", category=DeprecationWarning)

#: small memories for the tiny stream (6 training samples per task)
OPTIONS = {"naive": {}, "replay": {"mem_size": 6}, "ewc": {}, "lwf": {},
           "gem": {"patterns_per_exp": 4}, "agem": {"patterns_per_exp": 4, "sample_size": 4}}


def task_prompts(bench, index):
    return {prompt for prompt, _, _ in bench.train_stream[index].dataset}


def quadprog_or_identity(monkeypatch):
    """GEM's projection needs quadprog (not a dependency of Avalanche's pins): without it, the
    projection returns the gradient unchanged so the memory and reference gradients are tested."""
    try:
        import quadprog  # noqa: F401
    except ImportError:
        from moram_avalanche.strategies.text.plugins.avalanche import TextGEMPlugin

        monkeypatch.setattr(TextGEMPlugin, "solve_quadprog", lambda self, g: g.detach().cpu().clone())


@pytest.mark.parametrize("name,family", [("naive", "t5"), ("naive", "llama"), ("replay", "llama"), ("ewc", "llama"),
                                         ("lwf", "llama"), ("gem", "llama"), ("agem", "llama"), ("ewc", "t5"),
                                         ("lwf", "t5")])
def test_avalanche_strategies_run_three_tasks_on_text(name, family, monkeypatch, one_thread):
    from avalanche import training

    from moram_avalanche.strategies.text.loop import TextStrategy

    quadprog_or_identity(monkeypatch)
    bench = benchmark()
    before = {k: v.clone() for k, v in FAMILIES[family](stream_tokenizer(), seed=0).state_dict().items()}
    strategy, matrix, batches = build(f"avalanche.{name}", family, **OPTIONS[name])
    avalanche_class = {"naive": training.Naive, "replay": training.Replay, "ewc": training.EWC,
                       "lwf": training.LwF, "gem": training.GEM, "agem": training.AGEM}[name]
    assert isinstance(strategy, avalanche_class) and isinstance(strategy, TextStrategy)
    run(strategy, bench)
    result = matrix.result()
    assert result.shape == (3, 3) and not np.isnan(result).any()
    assert ((result >= 0) & (result <= 100)).all() and matrix.domains == list(TASKS)
    assert [len(losses) for losses in batches.token_loss] == [2, 2, 2]  # the text loop's budget: iterations
    assert all(math.isfinite(v) for losses in batches.total_loss for v in losses)
    after = strategy.model.model.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k in before if "embed" in k or "shared" in k)  # SeqFT


def test_defaults_options_and_registry():
    from avalanche.training import EWC

    from moram_avalanche.strategies.registry import get_strategy, text_strategies
    from moram_avalanche.strategies.text.builtins import TextEWC
    from moram_avalanche.strategies.text.loop import PAPER_TEXT_LOOP

    assert {f"avalanche.{n}" for n in OPTIONS} <= set(text_strategies())
    cls = get_strategy("avalanche.ewc", family="text")
    assert cls is TextEWC and issubclass(cls, EWC) and cls.__name__ == "TextEWC"
    tokenizer = stream_tokenizer()
    given = []
    strategy = cls(model=FAMILIES["llama"](tokenizer), tokenizer=tokenizer, plugins=given,
                   evaluator=EvaluationPlugin(loggers=[]))
    assert given == []  # Avalanche's wrapper appended its plugin to a copy
    ewc = plugin_of(strategy, EWCPlugin)
    assert ewc.ewc_lambda == 0.4 and type(ewc).__name__ == "TextEWCPlugin"  # examples/ewc_mnist.py
    assert strategy.lr == PAPER_TEXT_LOOP["lr"] and strategy.train_mb_size == PAPER_TEXT_LOOP["train_mb_size"]
    assert strategy.train_epochs == PAPER_TEXT_LOOP["epochs"]
    replay = get_strategy("avalanche.replay", family="text")(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer,
                                                             mem_size=30, evaluator=EvaluationPlugin(loggers=[]))
    assert plugin_of(replay, ReplayPlugin).mem_size == 30
    with pytest.raises(TypeError, match="mem_sise.*mem_size"):
        get_strategy("avalanche.replay", family="text")(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer,
                                                        mem_sise=30)
    with pytest.raises(ValueError, match="epochs"):
        get_strategy("avalanche.ewc", family="text")(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer, epochs=0)
    with pytest.raises(ValueError, match="criterion"):
        get_strategy("avalanche.naive", family="text")(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer,
                                                       criterion=torch.nn.CrossEntropyLoss())


def test_ewc_importances_are_the_token_loss_and_its_penalty_counts_from_task_two(one_thread):
    from torch.utils.data import DataLoader

    from moram_avalanche.strategies.text.loop import collate_text

    bench = benchmark()
    strategy, _, batches = build("avalanche.ewc", "llama", ewc_lambda=1e3)
    run(strategy, bench, tasks=1)
    ewc = plugin_of(strategy, EWCPlugin)
    importances = {k: v.data for k, v in ewc.importances[0].items()}
    # recomputed by hand: mean over minibatches of the squared gradients of the token loss
    model = strategy.model
    model.eval()
    expected = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
    loader = DataLoader(bench.train_stream[0].dataset, batch_size=FAST["train_mb_size"], collate_fn=collate_text)
    for prompts, answers, _ in loader:
        model.zero_grad()
        model.loss(prompts, answers).backward()
        for k, p in model.named_parameters():
            expected[k] += p.grad.pow(2) / len(loader)
    model.zero_grad(set_to_none=True)
    model.train()
    assert set(importances) == set(expected)
    for k in expected:
        assert torch.isfinite(importances[k]).all() and (importances[k] >= 0).all(), k
        torch.testing.assert_close(importances[k], expected[k], rtol=1e-4, atol=1e-10)
    assert sum(float(v.sum()) for v in importances.values()) > 0
    assert sum(bool(v.abs().sum() > 0) for v in importances.values()) >= len(importances) // 2
    run(strategy, _rest(bench, 1))
    run(strategy, _rest(bench, 2))
    penalties = [[total - token for token, total in zip(t, a)] for t, a in zip(batches.token_loss, batches.total_loss)]
    assert all(p == 0 for p in penalties[0])
    assert all(p > 0 for task in penalties[1:] for p in task[1:])  # after the first step of task 2 moved the weights
    assert set(ewc.importances) == {0, 1, 2}


def _rest(bench, index):
    class One:
        train_stream = [bench.train_stream[index]]
        test_stream = bench.test_stream
    return One


def test_replay_buffer_holds_earlier_text_and_replays_it():
    bench = benchmark()
    strategy, matrix, batches = build("avalanche.replay", "llama", mem_size=6, iterations=4)
    run(strategy, bench)
    buffer = plugin_of(strategy, ReplayPlugin).storage_policy.buffer
    assert len(buffer) == 6
    items = list(buffer)
    assert all(isinstance(p, str) and isinstance(a, str) for p, a, _ in items)
    assert {t for _, _, t in items} == {0, 1, 2}  # balanced over the experiences seen
    first, second = task_prompts(bench, 0), task_prompts(bench, 1)
    assert all(prompt in first for batch in batches.prompts[0] for prompt in batch)
    seen_2 = {prompt for batch in batches.prompts[1] for prompt in batch}
    seen_3 = {prompt for batch in batches.prompts[2] for prompt in batch}
    assert seen_2 & first and seen_3 & first and seen_3 & second  # earlier tasks' prompts in later batches
    assert matrix.result().shape == (3, 3)


def test_moram_with_replay_plugin_on_text():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    bench = benchmark()
    strategy, matrix, batches = build("moram", "llama", plugins=[ReplayPlugin(mem_size=6)], iterations=4)
    run(strategy, bench)
    assert matrix.result().shape == (3, 3) and not np.isnan(matrix.result()).any()
    first, second = task_prompts(bench, 0), task_prompts(bench, 1)
    assert all(prompt in first for batch in batches.prompts[0] for prompt in batch)
    seen_2 = {prompt for batch in batches.prompts[1] for prompt in batch}
    seen_3 = {prompt for batch in batches.prompts[2] for prompt in batch}
    assert seen_2 & first and seen_2 & task_prompts(bench, 1)  # task 2 mixes its own and task 1's
    assert seen_3 & first and seen_3 & second
    assert {layer.num_atoms for layer in find_layers(strategy.model, MoRAMLinear).values()} == {24}


def test_ewc_plugin_composes_with_text_strategies():
    """Avalanche's EWCPlugin given to a package strategy (SeqLoRA: one LoRA through the stream)."""
    bench = benchmark()
    strategy, _, batches = build("seq-lora", "llama", plugins=[EWCPlugin(ewc_lambda=1e3)])
    ewc = plugin_of(strategy, EWCPlugin)
    assert type(ewc).__name__ == "TextEWCPlugin"
    run(strategy, bench, tasks=2)
    assert set(ewc.importances) == {0, 1}
    assert any(total > token for token, total in zip(batches.token_loss[1], batches.total_loss[1]))


def test_lwf_distils_the_previous_models_answer_tokens():
    from avalanche.training.plugins import LwFPlugin

    bench = benchmark()
    strategy, _, batches = build("avalanche.lwf", "llama")
    lwf = plugin_of(strategy, LwFPlugin)
    run(strategy, bench, tasks=1)
    teacher = lwf.lwf.prev_model
    assert teacher is not strategy.model and not any(p.requires_grad for p in teacher.parameters())
    prompts, answers = [p for p, _, _ in bench.train_stream[1].dataset], [a for _, a, _ in bench.train_stream[1].dataset]
    strategy.model.eval()
    assert float(lwf.distillation(strategy.model, prompts, answers).detach()) == pytest.approx(0.0, abs=1e-6)
    logits = strategy.model.answer_logits(prompts, answers)
    assert logits.shape[-1] == strategy.model.config.vocab_size and logits.shape[0] >= len(prompts)
    run(strategy, _rest(bench, 1))
    assert all(p == 0 for p in (total - token for token, total in zip(batches.token_loss[0], batches.total_loss[0])))
    assert any(total > token for token, total in zip(batches.token_loss[1], batches.total_loss[1]))
    strategy.model.eval()
    # against task 1's teacher: the plugin's own is now a copy of the model after task 3 (a frozen copy is
    # taken after every experience), whose divergence from the model is 0 up to float rounding, of either sign
    lwf.lwf.prev_model = teacher
    assert float(lwf.distillation(strategy.model, prompts, answers).detach()) > 0


@pytest.mark.parametrize("name", ["gem", "agem"])
def test_gem_and_agem_reference_gradients_come_from_text_memories(name, monkeypatch):
    quadprog_or_identity(monkeypatch)
    bench = benchmark()
    strategy, _, _ = build(f"avalanche.{name}", "llama", **OPTIONS[name])
    run(strategy, bench, tasks=2)
    from avalanche.training.plugins import AGEMPlugin, GEMPlugin

    plugin = plugin_of(strategy, GEMPlugin if name == "gem" else AGEMPlugin)
    params = sum(p.numel() for p in strategy.model.parameters())
    if name == "gem":
        assert [len(plugin.memory_x[t]) for t in (0, 1)] == [4, 4]
        assert set(plugin.memory_x[0]) <= task_prompts(bench, 0)
        assert plugin.G.shape == (1, params) and plugin.G.abs().sum() > 0  # task 1's memory, during task 2
    else:
        assert [len(buffer) for buffer in plugin.buffers] == [4, 4]
        assert plugin.reference_gradients.shape == (params,) and plugin.reference_gradients.abs().sum() > 0


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A tiny T5 and its tokenizer written with ``save_pretrained`` (what users pass as --model)."""
    folder = tmp_path_factory.mktemp("tiny-t5")
    tokenizer = stream_tokenizer(("colour", "mood"))
    FAMILIES["t5"](tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_cli_runs_avalanche_ewc_on_synthetic_text(model_folder, tmp_path):
    log_dir = tmp_path / "run"
    args = [sys.executable, "-m", "moram_avalanche", "run", "--benchmark", "synthetic-text",
            "--order", "colour,mood", "--strategy", "avalanche.ewc", "--model", str(model_folder),
            "--log-dir", str(log_dir), "--iterations", "2", "--batch-size", "8",
            "--set", "max_new_tokens=2", "--set", "ewc_lambda=10", "--no-progress"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((log_dir / "results.json").read_text())
    assert results["domains"] == ["colour", "mood"] and len(results["matrix"]) == 2
    assert json.loads((log_dir / "run.json").read_text())["strategy"] == "TextEWC"
    again = subprocess.run(args, capture_output=True, text=True, timeout=600)  # resumes Avalanche's checkpoint
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((log_dir / "results.json").read_text())["matrix"] == results["matrix"]


def test_text_builtins_resume_with_their_plugins_state(tmp_path, monkeypatch):
    """A run stopped after task 1 resumes with EWC's importances of task 1 (Avalanche's checkpoint)."""
    from moram_avalanche.experiments.runner import run_stream
    from moram_avalanche.strategies.text.builtins import TextEWC

    bench = benchmark()
    strategy, _, _ = build("avalanche.ewc", "llama")
    run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False)
    resumed, _, _ = build("avalanche.ewc", "llama")
    trained, train = [], TextEWC.train
    monkeypatch.setattr(TextEWC, "train", lambda self, experience, **kw: (trained.append(experience.current_experience),
                                                                         train(self, experience, **kw))[1])
    assert run_stream(resumed, bench, tmp_path, progress=False) == 3
    assert [len(losses) for losses in plugin_of(resumed, Batches).token_loss] == [2, 2, 2]  # task 1's restored
    assert resumed.clock.train_exp_counter == 3 and trained == [1, 2]  # task 1 was not trained again
    ewc = plugin_of(resumed, EWCPlugin)
    assert set(ewc.importances) == {0, 1, 2}
    torch.testing.assert_close({k: v.data for k, v in ewc.importances[0].items()},
                               {k: v.data for k, v in plugin_of(strategy, EWCPlugin).importances[0].items()})
