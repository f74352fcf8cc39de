"""`compare`: the paper-style table, the comparison folder, resuming per strategy, the CLI."""

import csv
import io
import json

import open_clip
import pytest
import torch

from moram_avalanche.cli import main
from moram_avalanche.experiments.compare import Setup, run_comparison
from moram_avalanche.experiments.metrics import summarize
from moram_avalanche.experiments.tables import paper_table_csv, paper_table_markdown, summary_table
from tiny_clip import TINY_CONFIG

DOMAINS = ["a", "b", "c"]


def report(matrix):
    return {"domains": DOMAINS, "matrix": matrix, **summarize(torch.tensor(matrix).numpy())}


RESULTS = {
    # A[t, d]: Transfer of b = 20 (x) / 40 (y); of c = mean(10, 30) = 20 / mean(50, 10) = 30
    "x": report([[90.0, 20.0, 10.0], [80.0, 70.0, 30.0], [60.0, 65.0, 50.0]]),
    "y": report([[85.0, 40.0, 50.0], [85.0, 60.0, 10.0], [70.0, 56.0, 50.0]]),
}


def test_table_rows_values_and_bold_best_per_column():
    lines = paper_table_markdown(RESULTS).splitlines()
    assert lines[0] == "| Metric | Strategy | a | b | c | Mean |"
    body = lines[2:]
    assert len(body) == 6  # 3 metrics x 2 strategies
    # Transfer: first domain undefined; y best on b (40) and c (30) and the mean (35 vs 20)
    assert body[0] == "| Transfer | x | – | 20.0 | 20.0 | 20.0 |"
    assert body[1] == "|  | y | – | **40.0** | **30.0** | **35.0** |"
    # Last: a 60 vs 70, b 65 vs 56, c tie 50 -> both bold; mean 58.3 vs 58.7
    assert body[4] == "| Last | x | 60.0 | **65.0** | **50.0** | 58.3 |"
    assert body[5] == "|  | y | **70.0** | 56.0 | **50.0** | **58.7** |"
    average_x = sum(sum(r) for r in RESULTS["x"]["matrix"]) / 9
    assert f"{average_x:.1f}" in body[2]


def test_csv_has_one_row_per_metric_and_strategy():
    rows = list(csv.reader(io.StringIO(paper_table_csv(RESULTS))))
    assert rows[0] == ["metric", "strategy", "a", "b", "c", "mean"]
    assert len(rows) == 1 + 3 * 2 and all(len(r) == 6 for r in rows)
    assert rows[1][:3] == ["transfer", "x", ""] and float(rows[2][3]) == 40.0
    assert float(rows[6][5]) == pytest.approx((70 + 56 + 50) / 3)


def test_tables_refuse_mixed_or_incomplete_results():
    other = dict(report([[1.0, 2.0, 3.0]] * 3), domains=["a", "c", "b"])
    with pytest.raises(ValueError, match="same benchmark and order"):
        paper_table_markdown({"x": RESULTS["x"], "z": other})
    with pytest.raises(ValueError, match="incomplete"):
        summary_table({"x": {"domains": DOMAINS, "matrix": [[1.0, 2.0, 3.0]]}})


def tiny_setup(tokenizer, settings=None):
    from moram_avalanche.benchmarks.images.synthetic import synthetic

    transform = open_clip.image_transform(32, is_train=False)

    def options(name, eval_tf):
        if name == "zeroshot":
            return {"train_mb_size": 6}
        moram = {"atoms_per_task": 2, "topk": 2} if name == "moram" else {}
        return {"train_mb_size": 6, "iterations": 2, "lr": 1e-2, **moram}

    return Setup(
        make_model=lambda: (open_clip.CLIP(**TINY_CONFIG), transform, transform, tokenizer),
        make_benchmark=lambda tr, ev: synthetic(("shapes", "colours"), train_size=6, test_size=6,
                                                train_transform=tr, eval_transform=ev),
        options=options, settings=settings or {"budget": 2})


def test_comparison_folder_and_resuming_per_strategy(tmp_path, tokenizer, capsys):
    setup = tiny_setup(tokenizer)
    results = run_comparison(setup, ["zeroshot", "moram"], tmp_path, progress=False)
    assert list(results) == ["zeroshot", "moram"]
    for name in results:
        run = tmp_path / name
        for file in ("results.json", "accuracy_matrix.csv", "checkpoint.pt", "memory.json", "time.json"):
            assert (run / file).exists(), file
        assert len(results[name]["matrix"]) == 2 and results[name]["time"]["train_seconds"] >= 0
    assert (tmp_path / "moram" / "atom_usage.png").exists()
    rows = list(csv.reader(io.StringIO((tmp_path / "table.csv").read_text())))
    assert rows[0] == ["metric", "strategy", "shapes", "colours", "mean"] and len(rows) == 7
    assert (tmp_path / "table.md").read_text().count("\n") == 2 + 6
    assert "| moram |" in (tmp_path / "summary.md").read_text()
    from PIL import Image

    assert Image.open(tmp_path / "accuracy_matrices.png").size[0] > Image.open(
        tmp_path / "moram" / "accuracy_matrix.png").size[0]
    assert "| Metric | Strategy |" in capsys.readouterr().out

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    combined = EventAccumulator(str(tmp_path / "tensorboard" / "comparison"),
                                size_guidance={"images": 0, "tensors": 0})
    combined.Reload()
    assert "comparison/accuracy_matrices" in combined.Tags()["images"]
    assert {"comparison/table/text_summary", "comparison/summary/text_summary"} <= set(combined.Tags()["tensors"])
    for name in results:
        run_log = EventAccumulator(str(tmp_path / "tensorboard" / name))
        run_log.Reload()
        assert "AccMatrix/Last" in run_log.Tags()["scalars"]

    # a finished strategy is not run again (its class is never built)
    stamp = (tmp_path / "moram" / "results.json").stat().st_mtime_ns
    again = run_comparison(setup, ["zeroshot", "moram"], tmp_path, progress=False)
    assert (tmp_path / "moram" / "results.json").stat().st_mtime_ns == stamp
    assert again["moram"]["matrix"] == results["moram"]["matrix"]
    # an unfinished one continues from its checkpoint (here: already past the last experience)
    (tmp_path / "moram" / "time.json").unlink()
    resumed = run_comparison(setup, ["moram"], tmp_path, progress=False)
    assert resumed["moram"]["matrix"] == results["moram"]["matrix"]
    # a finished one whose results were lost or torn writes them again
    (tmp_path / "moram" / "results.json").write_text('{"domains": ["shapes", "col')
    resumed = run_comparison(setup, ["moram"], tmp_path, progress=False)
    assert json.loads((tmp_path / "moram" / "results.json").read_text())["matrix"] == results["moram"]["matrix"]
    # a strategy added later joins the same table
    run_comparison(setup, ["zeroshot", "moram", "finetune"], tmp_path, progress=False)
    assert len(list(csv.reader(io.StringIO((tmp_path / "table.csv").read_text())))) == 1 + 3 * 3


def test_other_settings_in_the_same_folder_are_refused(tmp_path, tokenizer):
    run_comparison(tiny_setup(tokenizer), ["zeroshot"], tmp_path, progress=False)
    with pytest.raises(ValueError, match="other settings \\(budget"):
        run_comparison(tiny_setup(tokenizer, {"budget": 3}), ["zeroshot"], tmp_path, progress=False)
    run_comparison(tiny_setup(tokenizer, {"budget": 3}), ["zeroshot"], tmp_path, resume=False, progress=False)
    recorded = json.loads((tmp_path / "zeroshot" / "run.json").read_text())["run"]
    assert {k: v for k, v in recorded.items() if k not in ("seed", "strategy", "set")} == {"budget": 3}


def test_a_strategy_run_with_other_options_of_its_own_is_refused(tmp_path, tokenizer):
    setup = tiny_setup(tokenizer)
    setup.strategy_settings = lambda name: {"rank": 2} if name == "finetune" else {}
    run_comparison(setup, ["zeroshot", "finetune"], tmp_path, progress=False)
    assert json.loads((tmp_path / "finetune" / "run.json").read_text())["run"]["set"] == {"rank": 2}
    setup.strategy_settings = lambda name: {"rank": 4} if name == "finetune" else {}
    with pytest.raises(ValueError, match=r"finetune in .* was made with other settings "
                                         r"\(run.set.rank: 2 there, 4 now\)"):
        run_comparison(setup, ["zeroshot", "finetune"], tmp_path, progress=False)
    # --no-resume runs the listed strategies again, with the new settings
    run_comparison(setup, ["finetune"], tmp_path, resume=False, progress=False)
    assert json.loads((tmp_path / "finetune" / "run.json").read_text())["run"]["set"] == {"rank": 4}
    assert (tmp_path / "finetune" / "results.json").exists()


def test_a_rerun_with_other_python_options_is_refused_before_anything_runs(tmp_path, tokenizer):
    setup = tiny_setup(tokenizer)
    run_comparison(setup, ["zeroshot", "moram"], tmp_path, progress=False)
    recorded = json.loads((tmp_path / "moram" / "run.json").read_text())
    assert recorded["options"] == {"atoms_per_task": 2, "iterations": 2, "lr": 0.01, "topk": 2, "train_mb_size": 6}
    stamp = (tmp_path / "table.csv").stat().st_mtime_ns
    options = setup.options
    setup.options = lambda name, eval_tf: {**options(name, eval_tf), **({"lr": 1e-3} if name == "moram" else {})}
    with pytest.raises(ValueError, match=r"moram in .* was made with other settings \(options.lr: 0.01 there, "
                                         r"0.001 now\): delete .*moram to run it again"):
        run_comparison(setup, ["zeroshot", "moram"], tmp_path, progress=False)
    assert (tmp_path / "table.csv").stat().st_mtime_ns == stamp


def test_a_wrong_option_of_any_strategy_stops_the_comparison_before_it_writes(tmp_path, tokenizer):
    setup = tiny_setup(tokenizer)
    options = setup.options
    setup.options = lambda name, eval_tf: {**options(name, eval_tf), **({"topkk": 2} if name == "moram" else {})}
    with pytest.raises(TypeError, match="MoRAM takes no option 'topkk': did you mean topk"):
        run_comparison(setup, ["zeroshot", "moram"], tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # zeroshot did not run first; no settings were written
    setup.options = options
    assert list(run_comparison(setup, ["zeroshot", "moram"], tmp_path / "out", progress=False)) == ["zeroshot", "moram"]


@pytest.mark.parametrize("names,message", [
    (["moram", "moram"], "listed twice"), ([], "no strategies"), (["ewc"], "unknown strategy 'ewc'")])
def test_bad_strategy_lists(names, message, tmp_path, tokenizer):
    with pytest.raises(ValueError, match=message):
        run_comparison(tiny_setup(tokenizer), names, tmp_path, progress=False)
    assert not list(tmp_path.rglob("run.json"))


def test_cli_compare(tmp_path, capsys):
    common = ["compare", "--benchmark", "synthetic", "--model", "moram-synthetic-tiny", "--pretrained", "none",
              "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--iterations", "1",
              "--batch-size", "8", "--out", str(tmp_path / "out")]
    assert main([*common, "--strategies", "zeroshot,moram", "--set", "lwf.lr=1"]) == 2
    assert "not compared: ['lwf']" in capsys.readouterr().err
    assert main([*common, "--strategies", "zeroshot,moram", "--set", "lr=1"]) == 2
    assert "STRATEGY.KEY=VALUE" in capsys.readouterr().err
    assert main([*common, "--strategies", "zeroshot,moram", "--set", "moram.topk=2",
                 "--set", "moram.atoms_per_task=2"]) == 0
    out = capsys.readouterr().out
    assert "| Transfer | zeroshot |" in out and "tensorboard --logdir" in out
    own = json.loads((tmp_path / "out" / "moram" / "run.json").read_text())
    settings = own["run"]  # the shared settings, in every strategy's record
    assert settings["iterations"] == 1 and own["environment"]["device"] == "cpu"
    assert own["run"]["set"] == {"topk": "2", "atoms_per_task": "2"}
    assert own["options"] == {"atoms_per_task": 2, "iterations": 1, "topk": 2, "train_mb_size": 8}
    assert json.loads((tmp_path / "out" / "zeroshot" / "run.json").read_text())["run"]["set"] == {}
    rows = list(csv.reader(io.StringIO((tmp_path / "out" / "table.csv").read_text())))
    assert len(rows) == 1 + 3 * 2 and len(rows[0]) == 2 + 5 + 1
    # a strategy with options of its own joins the existing comparison
    assert main([*common, "--strategies", "zeroshot,moram,inflora", "--set", "moram.topk=2",
                 "--set", "moram.atoms_per_task=2", "--set", "inflora.rank=2"]) == 0
    rows = list(csv.reader(io.StringIO((tmp_path / "out" / "table.csv").read_text())))
    assert len(rows) == 1 + 3 * 3
    # one already run with other options of its own is refused, before anything runs
    stamp = (tmp_path / "out" / "table.csv").stat().st_mtime_ns
    assert main([*common, "--strategies", "zeroshot,moram", "--set", "moram.topk=1",
                 "--set", "moram.atoms_per_task=2"]) == 2
    err = capsys.readouterr().err
    assert "moram in" in err and "run.set.topk" in err and "options.topk: 2 there, 1 now" in err
    assert "delete" in err
    assert (tmp_path / "out" / "table.csv").stat().st_mtime_ns == stamp


def test_set_values_are_python_literals_or_strings():
    from moram_avalanche.arguments import parse_sets as _parse_sets

    parsed = _parse_sets(["topk=8", "encoders=('visual',)", "routing=batch", "threshold=0"], prefixed=False)
    assert parsed == {"": {"topk": 8, "encoders": ("visual",), "routing": "batch", "threshold": 0}}
    assert _parse_sets(["MoRAM.lr=1e-3", "seq-lora.rank=4"], prefixed=True) == {
        "moram": {"lr": 1e-3}, "seq-lora": {"rank": 4}}
    for bad in ("lr", "=3", "1x=2"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            _parse_sets([bad], prefixed=False)
