"""FIX (ICL) as TRACE builds it: random, label-balanced examples within a token budget, laid out
under the task's header and note, the prompt without its instruction; nothing trains."""

import json

import numpy as np
import pytest
import torch

from tiny_stream import FAMILIES, TASKS, stream_tokenizer


def build(**options):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    matrix = AccuracyMatrix()
    strategy = get_strategy("icl", family="text")(
        model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer, evaluator=EvaluationPlugin(matrix, loggers=[]),
        train_mb_size=4, max_new_tokens=2, **options)
    return strategy, matrix


def test_draws_are_label_balanced_within_the_budget_and_random():
    import random

    from moram_avalanche.benchmarks.text.stream import TextStreamTask
    from moram_avalanche.strategies.text.icl import draw_demonstrations

    # 30 examples, 10 per letter; every fifth prompt is too long for a share of the budget
    pairs = [((f"Q: {'long ' * 40 if i % 5 == 0 else ''}item {i}"), "ABC"[i % 3]) for i in range(30)]
    choice = TextStreamTask("FOMC", pairs, pairs[:1], ("A", "B", "C"), "option_letter", instruction="Q: ")
    words = lambda text: len(text.split())  # noqa: E731
    picks = draw_demonstrations(pairs, choice, 6, budget=120, count_tokens=words, rng=random.Random(0))
    # TRACE: C-STANCE / FOMC take an answer fewer than shots / 3 times -> 2 of each letter
    assert sorted(answer for _, answer in picks) == ["A", "A", "B", "B", "C", "C"]
    # a share of the budget is 120 / (2 * 6) = 10 tokens for example and answer: no long prompt
    assert all("long" not in example and words(example) + 1 <= 10 for example, _ in picks)
    assert all(not example.startswith("Q: ") for example, _ in picks)  # the instruction is stripped
    assert [example for example, _ in picks] != [f"item {i}" for i in range(6)]  # not the first in the file
    # an open task takes distinct answers; one whose layout shows none gets none (MeetingBank)
    open_pairs = [(f"p{i}", f"answer {i % 4}") for i in range(20)]
    open_task = TextStreamTask("Py150", open_pairs, open_pairs[:1], metric="code_similarity")
    answers = [a for _, a in draw_demonstrations(open_pairs, open_task, 6, 10 ** 6, words, random.Random(0))]
    assert sorted(answers) == [f"answer {i}" for i in range(4)]  # only four distinct answers exist
    from moram_avalanche.benchmarks.text.trace import TRACE_ICL

    meeting = TextStreamTask("MeetingBank", open_pairs, open_pairs[:1], metric="rouge_l", icl=TRACE_ICL["MeetingBank"])
    assert draw_demonstrations(open_pairs, meeting, 6, 10 ** 6, words, random.Random(0)) == []


def test_a_trace_prompt_gets_the_releases_layout(tmp_path):
    from moram_avalanche.benchmarks import trace
    from moram_avalanche.benchmarks.text.trace import ICL_NOTE, TRACE_INSTRUCTIONS

    instruction = TRACE_INSTRUCTIONS["FOMC"]
    items = [{"prompt": f"{instruction}Text:\nrates {i}\nStance:", "answer": "ABC"[i % 3]} for i in range(12)]
    for name in ("FOMC", "Py150"):
        (tmp_path / name).mkdir()
        data = items if name == "FOMC" else [{"prompt": f"<s> x = {i}", "answer": f"y{i}"} for i in range(12)]
        for split in ("train", "eval", "test"):
            (tmp_path / name / f"{split}.json").write_text(json.dumps(data))
    bench = trace(tmp_path, ["FOMC", "Py150"])
    strategy, matrix = build(shots=3, max_source_length=512)
    before = {k: v.clone() for k, v in strategy.model.state_dict().items()}
    for experience in bench.train_stream:
        strategy.train(experience)
    assert all(torch.equal(v, before[k]) for k, v in strategy.model.state_dict().items())  # nothing trains
    fomc, py150 = bench.tasks
    shown = strategy.demonstrations[0]
    assert len(shown) == 3 and sorted(d[-3] for d in shown) == ["A", "B", "C"]  # one of each letter
    assert all(d.startswith("Text:\nrates ") and d.endswith("\n\n") for d in shown)
    # the release's collator: instruction + note + examples + the prompt without its instruction
    assert strategy.with_demonstrations([items[0]["prompt"]], 0, fomc) == [
        instruction + ICL_NOTE + "".join(shown) + "Text:\nrates 0\nStance:"]
    # Py150: "Continue writing the code." and "Code:" before each example and before the prompt
    code = strategy.demonstrations[1]
    assert all(d.startswith("Code:\n<s> x = ") for d in code)
    assert strategy.with_demonstrations(["<s> x = 99"], 1, py150) == [
        "Continue writing the code.\n" + ICL_NOTE + "".join(code) + "Code:\n<s> x = 99"]
    assert strategy.with_demonstrations(["q"], 5) == ["q"]  # a task not seen yet: no examples
    strategy.eval(bench.test_stream)
    assert matrix.result().shape == (1, 2) and not np.isnan(matrix.result()).any()
    other, _ = build(shots=3)
    other.load_checkpoint_model_state(strategy.checkpoint_model_state())
    assert other.demonstrations == strategy.demonstrations  # resumable


def test_icl_defaults_are_traces_and_bad_values_are_refused():
    from moram_avalanche.strategies.text.icl import ICL_SHOTS, TextICL

    strategy, _ = build()
    assert isinstance(strategy, TextICL) and strategy.shots == ICL_SHOTS == 6  # TRACE scripts/ICL.sh
    with pytest.raises(ValueError, match="shots must be"):
        build(shots=-1)
    with pytest.raises(ValueError, match="seed"):
        build(seed=-2)


def test_icl_on_the_synthetic_stream_end_to_end():
    from moram_avalanche.benchmarks import synthetic_text

    bench = synthetic_text(TASKS, train_per_label=3, test_per_label=1)
    strategy, matrix = build(shots=3)
    for experience in list(bench.train_stream)[:2]:
        strategy.train(experience)
        strategy.eval(bench.test_stream)
    first = bench.train_stream[0]
    # no layout declared: example + answer + blank line, one per label word (3 shots, 3 labels)
    assert sorted(d.rsplit("\n", 3)[-3].rsplit(":", 1)[-1] for d in strategy.demonstrations[0]) == sorted(first.label_words)
    assert matrix.result().shape == (2, 3)
