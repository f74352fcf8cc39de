"""``sapt`` on a tiny T5 and the synthetic text stream, with a fake copy of SAPT's pseudo-samples:
what trains per task, the reflection term, the pseudo-sample reader, bad options."""

import json

import pytest
import torch
from avalanche.core import SupervisedPlugin

from fake_superni import pseudo_tree
from text_runs import benchmark, build, run
from tiny_stream import FAMILIES, TASKS, stream_tokenizer


@pytest.fixture
def pseudo(tmp_path):
    return pseudo_tree(tmp_path / "lora_gen_superni_t5", tasks=TASKS)


class Trainable(SupervisedPlugin):
    """The names of the parameters that require grad when each task's training starts."""

    def __init__(self):
        super().__init__()
        self.per_task = []

    def before_training_epoch(self, strategy, **kwargs):
        if len(self.per_task) == strategy.experience.current_experience:
            self.per_task.append({n for n, p in strategy.model.named_parameters() if p.requires_grad})


def test_each_task_trains_its_block_its_key_and_the_shared_query_only(pseudo):
    record = Trainable()
    strategy, matrix = build("sapt", pseudo_data_root=str(pseudo), plugins=[record])
    bench = benchmark()
    experiences = list(bench.train_stream)
    strategy.train(experiences[0])
    after_first = {n: p.detach().clone() for n, p in strategy.model.named_parameters() if "downs.0" in n or "ups.0" in n
                   or n.endswith("keys.0")}
    strategy.train(experiences[1])
    first, second = record.per_task
    for task, names in enumerate((first, second)):
        assert names, f"nothing trains at task {task}"
        for name in names:
            assert (f"downs.{task}" in name or f"ups.{task}" in name or name.endswith(f"sapt_router.keys.{task}")
                    or ".sapt_router.query." in name), name
        assert any(name.endswith(f"sapt_router.keys.{task}") for name in names)
        assert any(".sapt_router.query." in name for name in names)
        assert any(f"EncDecAttention.q.downs.{task}" in name for name in names)  # cross-attention too
        assert any(f"SelfAttention.v.ups.{task}" in name for name in names)
        assert not any(".k." in name or ".o." in name or "embed" in name or "shared" in name for name in names)
    # the first task's blocks and key did not move while the second trained
    params = dict(strategy.model.named_parameters())
    assert after_first and all(torch.equal(params[n], value) for n, value in after_first.items())
    assert strategy.router.reflection.shape == (2, 2)
    assert strategy.router.reflection[0].tolist() == [1.0, 0.0]  # one task: all its weight on its own block
    assert strategy.router.reflection[1].sum().item() == pytest.approx(1.0)


def test_the_reflection_term_reads_the_earlier_tasks_pseudo_samples_and_trains_the_router_only(pseudo):
    from moram_avalanche.layers.sapt import reflection_loss
    from moram_avalanche.strategies.text.plugins.sapt import token_embeddings

    strategy, _ = build("sapt", pseudo_data_root=str(pseudo))
    bench = benchmark()
    run(strategy, bench, tasks=2)  # the second task's minibatches past the first step add the term
    plugin = strategy.sapt_plugin
    assert set(plugin.last) == {0}  # the first task's pseudo-samples, at the second task
    # the term by hand: the first task's stored target against the router's weights on a pseudo batch
    prompts = ["Definition: Generate an item of colour.\n\nNow complete the following example -\n"
               "Input: colour pseudo item 1\nOutput: "]
    assert plugin.pseudo_prompts("colour")[1] == prompts[0]
    logits = strategy.router.logits(token_embeddings(strategy.model, prompts))
    target = strategy.router.target(0, 2)
    assert target.tolist() == [1.0, 0.0]
    expected = -torch.log_softmax(logits, dim=-1)[0, 0]  # KL([1, 0] || p) = -log p_0
    assert reflection_loss(logits, target).item() == pytest.approx(expected.item(), rel=1e-5)
    # its gradient reaches the router (query projection, keys), no LoRA block
    # (every LoRA block and the router made trainable; the embeddings stay frozen, as in training)
    strategy.model.zero_grad(set_to_none=True)
    for name, parameter in strategy.model.named_parameters():
        parameter.requires_grad_(".downs." in name or ".ups." in name or ".sapt_router." in name)
    term = plugin.reflection(strategy.model)
    term.backward()
    with_grad = {n for n, p in strategy.model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert with_grad and all(".sapt_router." in n for n in with_grad)


def test_the_reflection_weight_and_the_first_step(pseudo):
    """kl_ratio times accumulation_steps is added (the loop divides every loss by the steps), and not
    before the first optimizer step (SAPT's ``global_step > 0``)."""
    from types import SimpleNamespace

    strategy, _ = build("sapt", pseudo_data_root=str(pseudo), accumulation_steps=2, iterations=2, kl_ratio=0.25)
    experiences = list(benchmark().train_stream)
    seen = []
    original = strategy.sapt_plugin.reflection

    def spy(model):
        term = original(model)
        if term is not None:
            seen.append(float(term.detach()))
        return term

    strategy.sapt_plugin.reflection = spy
    strategy.train(experiences[0])
    assert seen == []  # no earlier task
    strategy.train(experiences[1])
    assert len(seen) == 2  # 4 minibatches (2 steps x 2), the first 2 before the first optimizer step
    # the weight: loss + kl_ratio * accumulation_steps * term (the loop then divides by accumulation_steps)
    plugin = strategy.sapt_plugin
    plugin.reflection = lambda model: torch.tensor(0.3)
    fake = SimpleNamespace(loss=torch.tensor(1.0), accumulation_steps=2, model=None)
    plugin.minibatches = 2
    plugin.before_backward(fake)
    assert fake.loss.item() == pytest.approx(1.0 + 0.25 * 2 * 0.3)


def test_a_missing_pseudo_sample_file_fails_before_the_first_task(tmp_path):
    root = pseudo_tree(tmp_path / "pseudo", tasks=TASKS[:1])  # the second task's file is missing
    strategy, _ = build("sapt", pseudo_data_root=str(root))
    with pytest.raises(ValueError, match=r"no pseudo-samples for task 'mood'.*missing file"):
        strategy.train(list(benchmark().train_stream)[0])


def test_without_reflection_no_pseudo_samples_are_needed():
    strategy, matrix = build("sapt", kl_ratio=0.0)
    run(strategy, benchmark())
    assert matrix.result().shape == (3, 3) and strategy.sapt_plugin.last == {}


def test_bad_options_are_refused_in_one_line(tmp_path):
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    cls = get_strategy("sapt", family="text")
    cases = [
        (dict(), "sapt needs pseudo_data_root"),
        (dict(pseudo_data_root=str(tmp_path / "nowhere")), "is not a folder"),
        (dict(pseudo_data_root=str(tmp_path), kl_ratio=-1), "kl_ratio"),
        (dict(pseudo_data_root=str(tmp_path), rank=0), "rank"),
        (dict(pseudo_data_root=str(tmp_path), temperature=0.0), "temperature"),
        (dict(pseudo_data_root=3), r"pseudo_data_root takes Optional\[str\]"),
    ]
    for options, message in cases:
        with pytest.raises((TypeError, ValueError), match=message) as error:
            cls(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer, **options)
        assert "\n" not in str(error.value), options
    with pytest.raises(ValueError, match="causal model.*use a T5 model") as error:
        cls(model=FAMILIES["llama"](tokenizer), tokenizer=tokenizer, kl_ratio=0.0)
    assert "\n" not in str(error.value)


def test_the_pseudo_sample_reader(tmp_path):
    from moram_avalanche.benchmarks.text.superni import superni_prompt
    from moram_avalanche.benchmarks.text.superni_pseudo import (
        check_pseudo_data,
        pseudo_data_line,
        pseudo_root_beside,
        read_pseudo_prompts,
    )

    repository = tmp_path / "SAPT"
    (repository / "CL_Benchmark" / "SuperNI").mkdir(parents=True)
    root = pseudo_tree(repository / "generated_data" / "lora_gen_superni_t5", tasks=["task1", "task2"], count=2)
    assert pseudo_root_beside(repository / "CL_Benchmark") == root.resolve()
    assert pseudo_root_beside(repository / "CL_Benchmark" / "SuperNI") == root.resolve()
    assert pseudo_root_beside(tmp_path / "elsewhere") is None
    # the SuperNI folder or its parent, the prompt of the file's own definition
    expected = [superni_prompt("Generate an item of task1.", f"task1 pseudo item {i}") for i in range(2)]
    assert read_pseudo_prompts(root, "task1") == expected == read_pseudo_prompts(root / "SuperNI", "task1")
    (root / "SuperNI" / "task2" / "train.json").write_text(json.dumps({"Definition": ["d"], "Instances": [{"x": 1}]}))
    reports = {r.name: r for r in check_pseudo_data(root, ["task1", "task2", "task3"])}
    assert reports["task1"].status == "found" and reports["task1"].train == 2
    assert reports["task2"].status == "malformed" and "non-empty string \"input\"" in reports["task2"].message
    assert reports["task3"].status == "missing"
    # check-data's line
    line = pseudo_data_line(repository / "CL_Benchmark", ["task1", "task3"])
    assert line.endswith("1 task(s) missing or broken: task3") and str(root.resolve()) in line
    assert pseudo_data_line(repository / "CL_Benchmark", ["task1"]).endswith(", 2 for 1 tasks")
    assert "no generated_data/lora_gen_superni_t5 beside" in pseudo_data_line(tmp_path / "elsewhere", ["task1"])


def test_the_pseudo_samples_are_checked_against_the_stream_before_anything_is_built(tmp_path):
    """Issue 46: a missing pseudo-sample file failed at the first task, after the model loaded;
    it is refused when the options are checked against the stream. Only the tasks reflection
    reads are needed (every task but the last)."""
    from moram_avalanche.strategies.registry import get_strategy

    cls = get_strategy("sapt", family="text")
    stream = benchmark()  # colour, mood, size
    with pytest.raises(ValueError, match="sapt needs pseudo_data_root"):
        cls.check_benchmark({}, stream)
    with pytest.raises(ValueError, match="is not a folder"):
        cls.check_benchmark({"pseudo_data_root": str(tmp_path / "nowhere")}, stream)
    root = pseudo_tree(tmp_path / "pseudo", tasks=TASKS[:1])  # mood's file is missing
    with pytest.raises(ValueError, match=r"pseudo-samples of task 'mood' .*missing.*missing file") as error:
        cls.check_benchmark({"pseudo_data_root": str(root)}, stream)
    assert "\n" not in str(error.value)
    cls.check_benchmark({"pseudo_data_root": str(root), "kl_ratio": 0.0}, stream)  # no reflection: nothing read
    whole = pseudo_tree(tmp_path / "whole", tasks=TASKS[:2])  # size's is never read (the last task)
    cls.check_benchmark({"pseudo_data_root": str(whole)}, stream)


@pytest.mark.parametrize("train_limit", [None, 2])
def test_pseudo_data_root_at_the_real_data_is_refused(tmp_path, train_limit):
    """Issue 46: pseudo_data_root at SAPT's CL_Benchmark (the same layout) replayed the earlier
    tasks' real training examples as "pseudo-samples", without a word."""
    from fake_superni import superni_tree
    from moram_avalanche.benchmarks.text.superni import SUPERNI_TASKS, superni
    from moram_avalanche.strategies.registry import get_strategy

    cls = get_strategy("sapt", family="text")
    tasks = list(SUPERNI_TASKS[:2])
    data = superni_tree(tmp_path / "CL_Benchmark", tasks=tasks)
    stream = superni(data, tasks, train_limit=train_limit)
    for root in (data, data / "SuperNI"):
        with pytest.raises(ValueError, match=rf"pseudo_data_root {root} holds the stream's own training prompts of "
                                             rf"task '{tasks[0]}' \(all {train_limit or 6} of them\).*real data") as error:
            cls.check_benchmark({"pseudo_data_root": str(root)}, stream)
        assert "\n" not in str(error.value)
    cls.check_benchmark({"pseudo_data_root": str(pseudo_tree(tmp_path / "pseudo", tasks=tasks))}, stream)
