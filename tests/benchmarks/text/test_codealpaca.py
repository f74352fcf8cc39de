"""The codealpaca stream's HumanEval test as bigcode-evaluation-harness's ``humaneval`` task runs it: the prompt
stripped (``get_prompt``: ``doc["prompt"].strip()``), answers generated unstripped within 512 tokens of prompt and
answer (main.py ``--max_length_generation 512``), for greedy generation and sampling alike."""

import json

import pytest

from fake_text_data import codealpaca_tree
from moram_avalanche.models.language_model import PromptCut, prompt_cuts


def test_the_humaneval_prompts_are_stripped_and_their_answers_generated_as_the_harness_does(tmp_path):
    from moram_avalanche.benchmarks.text.codealpaca import codealpaca

    benchmark = codealpaca(codealpaca_tree(tmp_path / "data"))
    (task,) = benchmark.tasks
    prompt, answer = task.test[0]
    # the fake problem's prompt "def f0(x):\n    \"\"\"Return x.\"\"\"\n    return x\n    # ", stripped by hand
    assert prompt == 'def f0(x):\n    """Return x."""\n    return x\n    #'
    assert json.loads(answer)["prompt"] == prompt  # the program runs after the prompt the model continued
    assert benchmark.humaneval_problems["Fake/0"]["prompt"].endswith("    # ")  # the problems as read
    # every sample of the task: 512 tokens of prompt and answer, unstripped; its prompt cut the model's way
    assert prompt_cuts(benchmark.tasks, [0, 0]) == [PromptCut(None, None, 512, False)] * 2
    # the training pairs are the plain task's (prompt_cuts' limit and keep, the only fields training reads)
    assert prompt_cuts(benchmark.tasks, [0])[0][:2] == (None, None)


def test_a_bad_max_length_is_named():
    from moram_avalanche.benchmarks.text.codealpaca import HumanEvalTestedTask

    with pytest.raises(ValueError, match="max_length must be a positive number of tokens .* got 0"):
        HumanEvalTestedTask("x", [("a", "b")], [("c", "d")], max_length=0)


def test_a_codealpaca_file_whose_every_output_is_empty_is_refused_at_the_data_check(tmp_path):
    from moram_avalanche.benchmarks.readers import DataError
    from moram_avalanche.benchmarks.text.codealpaca import codealpaca
    from moram_avalanche.benchmarks.text.data_checks import check_codealpaca_layout

    root = codealpaca_tree(tmp_path / "data", examples=7)
    path = root / "code_alpaca_20k.json"
    path.write_text(json.dumps([{**item, "output": " \n" if i % 2 else ""}
                                for i, item in enumerate(json.loads(path.read_text()))]))
    expected = f"{path}: every one of its 7 examples has an empty output: nothing to train on"
    with pytest.raises(DataError) as info:  # not "train must be a non-empty sequence"
        codealpaca(root)
    assert info.value.problem == expected and info.value.status == "malformed"
    reports, text = check_codealpaca_layout(root)
    assert reports[0].status == "malformed" and expected in reports[0].message and "cannot be built" in text
