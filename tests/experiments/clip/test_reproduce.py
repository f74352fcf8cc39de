"""`moram-avalanche reproduce`: every table on the fake data root with the tiny model and 2
iterations (the paper's layout, the paper's numbers beside ours, resuming, several seeds), the
plan (--dry-run), the paper alone (--paper), rehearsals, and the cell arithmetic by hand."""

import csv
import io
import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

from moram_avalanche.cli import main
from moram_avalanche.experiments.clip.paper_tables import TABLES, get_table
from moram_avalanche.experiments.clip.reproduce import ReproduceSettings
from moram_avalanche.experiments.paper.numbers import load_paper_numbers
from moram_avalanche.experiments.paper.report import CSV_VALUES, table_markdown
from moram_avalanche.experiments.paper.results import table_result
from moram_avalanche.experiments.paper.runs import method_runs
from moram_avalanche.experiments.paper.spec import MEAN_COLUMN


def small_sweeps():
    """The sweep table with 4 of its 15 points (one per parameter off the paper's value, and the
    paper's k): the full grid's rows are checked in test_paper_tables; each point is one more run."""
    spec = TABLES["sweeps"]
    keep = ("k = 4", "k = 16", "τ = 0.1", "δ = 0")
    return replace(spec, rows=tuple(r for r in spec.rows if r[1] in keep),
                   methods=tuple(m for m in spec.methods if m.label in keep))


@pytest.fixture(scope="module")
def offline_parts(tiny_clip_name, tmp_path_factory):
    """What a tiny offline reproduction replaces: DDAS's ImageNet AlexNet (seeded random
    convolution features, and a stand-in file where its weights would lie), RAIL-Primal's
    15000-wide expansion (64 wide: its 15000 x 15000 ridge matrix is 0.9 GB), the per-run
    pictures drawn after every evaluation (tested elsewhere; here they would cost most of the
    time), and most of the sweep grid (:func:`small_sweeps`)."""
    import moram_avalanche.experiments.clip.recipes as recipes
    import moram_avalanche.experiments.viz as viz
    import moram_avalanche.strategies.clip.moe_adapters as moe
    from moram_avalanche.algorithms.ddas import random_conv_features

    weights = tmp_path_factory.mktemp("hub") / "alexnet-owt-7be5be79.pth"
    weights.write_bytes(b"never read: the features are replaced")
    blank = lambda *args, **kwargs: Image.new("RGB", (4, 4))  # noqa: E731
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(moe, "alexnet_features", lambda path=None: random_conv_features(0))
        patch.setattr(moe, "alexnet_weights_path", lambda: weights)
        for name in ("accuracy_heatmap", "accuracy_heatmaps", "heatmap"):
            patch.setattr(viz, name, blank)
        patch.setitem(TABLES, "sweeps", small_sweeps())
        patch.setitem(recipes.PAPER_OPTIONS["rail-primal"], "hidden_dim", 64)
        yield tiny_clip_name
    torch.set_num_threads(threads)


def command(table, root, out, tiny, *extra):
    return ["reproduce", table, "--data-root", str(root), "--out", str(out), "--model", tiny,
            "--pretrained", "none", "--iterations", "2", "--ref-images", "synthetic", "--ref-sentences",
            "synthetic", "--device", "cpu", "--no-progress", "--num-workers", "0", *extra]
    # workers (the default with --data-root) only add start-up time for the fake tree's tiny images


@pytest.fixture(scope="module")
def reproduced(offline_parts, fake_root, tmp_path_factory):
    """`reproduce all` once (one seed), shared by the layout tests."""
    out = tmp_path_factory.mktemp("reproduce")
    assert main(command("all", fake_root, out, offline_parts, "--seeds", "42")) == 0
    return out


def read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


@pytest.mark.parametrize("name", list(TABLES))
def test_every_table_has_the_papers_layout_with_the_papers_numbers_beside_ours(reproduced, name):
    spec = get_table(name)
    folder = reproduced / name
    for file in ("table.md", "table.csv", "table.png", "reproduction.json"):
        assert (folder / file).is_file(), file
    assert any((folder / "tensorboard").iterdir())
    assert Image.open(folder / "table.png").size[0] > 100
    rows = read_csv(folder / "table.csv")
    columns = list(spec.table_columns())
    assert list(rows[0])[3:3 + len(columns)] == columns  # block, method, value, the paper's columns
    expected = [(block, method) for block, method in spec.table_rows()]
    assert [(r["block"], r["method"]) for r in rows[::len(CSV_VALUES)]] == expected
    numbers = spec.paper_numbers()
    for start in range(0, len(rows), len(CSV_VALUES)):
        lines = {r["value"]: r for r in rows[start:start + len(CSV_VALUES)]}
        assert list(lines) == list(CSV_VALUES)
        block, method = lines["ours"]["block"], lines["ours"]["method"]
        run = spec.method(method).strategy is not None
        assert lines["ours"]["status"].startswith("run" if run else "not run")
        for column in columns:
            paper = numbers.row(block, method).cell(column) if numbers else None
            if paper is None:
                assert lines["paper"][column] == ""
            else:  # the paper column is filled, from the shipped numbers
                assert float(lines["paper"][column]) == pytest.approx(paper.mean)
            undefined = spec.layout == "domains" and block == "Transfer" and column == spec.protocol.domains[0]
            if not run or undefined:
                assert lines["ours"][column] == ""
                continue
            ours = float(lines["ours"][column])
            assert 0 <= ours <= 100
            if paper is not None:
                assert float(lines["difference"][column]) == pytest.approx(ours - paper.mean, abs=1e-3)
            assert lines["ours_std"][column] == ""  # one seed
    markdown = (folder / "table.md").read_text()
    assert "NOT the paper's budget" in markdown and spec.label in markdown
    assert ("| paper |" in markdown) == (numbers is not None)
    if spec.erratum:
        assert spec.erratum in markdown
    index = (reproduced / "index.md").read_text()
    assert spec.title in index


def test_rows_read_what_their_block_says(reproduced):
    """CLIP: the diagonal (fine-tuned alone / zero-shot); Transfer / Average / Last: the run's."""
    settings = ReproduceSettings(out=str(reproduced), seeds=(42,), iterations=2)
    spec = get_table("xtail")
    result = {(r.block, r.method): r for r in table_result(spec, settings).rows}
    alone = method_runs(spec, "Fine-tune", settings)[0]
    report = json.loads((alone.folder(reproduced / "runs") / alone.strategy / "results.json").read_text())
    diagonal = [report["matrix"][i][i] for i in range(len(report["domains"]))]
    cells = result[("CLIP", "Fine-tune")].cells
    assert [cells[d].ours for d in report["domains"]] == diagonal
    assert cells[MEAN_COLUMN].ours == pytest.approx(np.mean(diagonal))
    moram = method_runs(spec, "MoRAM", settings)[0]
    report = json.loads((moram.folder(reproduced / "runs") / "moram" / "results.json").read_text())
    assert result[("Last", "MoRAM")].cells[MEAN_COLUMN].ours == pytest.approx(report["last"])
    assert result[("Transfer", "MoRAM")].cells["DTD"].ours == pytest.approx(report["per_domain"]["transfer"][2])
    # the tables share runs: MoRAM on X-TAIL order 1 serves the pruning table's MoRAM row
    pruning = method_runs(get_table("pruning"), "MoRAM", settings)[0]
    assert pruning == moram
    assert method_runs(get_table("sweeps"), "k = 16", settings)[0] == moram  # the paper's k: same run


def test_a_killed_run_resumes_and_a_second_seed_gives_mean_and_std(offline_parts, fake_root, reproduced,
                                                                   tmp_path, monkeypatch):
    import moram_avalanche.experiments.runner as runner

    out = tmp_path / "out"
    original = runner.run_stream
    calls = []

    def killed(strategy, benchmark, out_dir, **kwargs):
        calls.append(out_dir)
        if len(calls) == 2:  # the second run dies after 3 of its 10 experiences
            original(strategy, benchmark, out_dir, **{**kwargs, "max_experiences": 3})
            raise KeyboardInterrupt
        return original(strategy, benchmark, out_dir, **kwargs)

    monkeypatch.setattr(runner, "run_stream", killed)
    # the command line reports an interruption in one line, exit status 130 (128 + SIGINT)
    assert main(command("load-balance", fake_root, out, offline_parts, "--seeds", "42")) == 130
    assert not (out / "load-balance" / "table.md").exists()
    monkeypatch.setattr(runner, "run_stream", original)
    assert main(command("load-balance", fake_root, out, offline_parts, "--seeds", "42")) == 0
    ours = json.loads((out / "load-balance" / "reproduction.json").read_text())
    uninterrupted = json.loads((reproduced / "load-balance" / "reproduction.json").read_text())
    assert [r["cells"] for r in ours["rows"]] == [r["cells"] for r in uninterrupted["rows"]]

    # a second seed: the first seed's runs are read back, the second's run; cells become mean ± std
    assert main(command("load-balance", fake_root, out, offline_parts, "--seeds", "42,43")) == 0
    settings = ReproduceSettings(out=str(out), seeds=(42, 43), iterations=2)
    spec = get_table("load-balance")
    for row in table_result(spec, settings).rows:
        lasts = []
        for run in method_runs(spec, row.method, settings):
            report = json.loads((run.folder(out / "runs") / run.strategy / "results.json").read_text())
            lasts.append(report["last"])
        cell = row.cells["Last"]
        assert cell.seeds == 2 and cell.ours == pytest.approx(np.mean(lasts))
        assert cell.ours_std == pytest.approx(math.sqrt((lasts[0] - lasts[1]) ** 2 / 2))
    markdown = (out / "load-balance" / "table.md").read_text()
    assert "Seeds: 42, 43 (cells: mean ± sample std over the seeds)." in markdown
    assert " ± " in markdown.split("| MoRAM |")[1].splitlines()[0]


def test_dry_run_lists_every_run_with_the_papers_settings(capsys):
    assert main(["reproduce", "xtail", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    runs = plan.split("\nruns (")[1]
    moram = runs.split("  moram (seed 42)")[1].split("used by")[0]
    for setting in ("atoms_per_task=16", "topk=16", "temperature=0.01", "threshold=0.2", "lr=0.0005",
                    "iterations=500", "train_mb_size=64", "encoders=('visual', 'text')",
                    "targets=('q', 'k', 'v', 'out', 'fc', 'proj')", "order 1 (Aircraft, Caltech101,",
                    "16 shots per class", "prompts 'moram'", "seed 42"):
        assert setting in moram, setting
    lwf = runs.split("  lwf (seed 42)")[1].split("used by")[0]
    for setting in ("lr=1e-05 (Aircraft 5e-05, MNIST 5e-05)", "warmup=100", "label_smoothing=0.2",
                    "temperature=2", "iterations=500", "betas=(0.9, 0.999)"):
        assert setting in lwf, setting
    moe = runs.split("  moe-adapters (seed 42)")[1].split("used by")[0]
    assert "lr=0.001 (Aircraft 0.008, Caltech101 0.0005" in moe and "threshold=0.0585" in moe
    assert "reference images (moe-adapters): <data-root>/tiny-imagenet-200/train" in moe
    assert "ImageNet AlexNet weights" in moe
    zscl = runs.split("  zscl (seed 42)")[1].split("used by")[0]
    assert "<data-root>/ImageNet/train" in zscl and "Validation_GCC-1.1.0-Validation_output.csv" in zscl
    assert "average_every=100" in zscl and "l2_weight=1" in zscl
    assert "runs (10;" in plan and "iCaRL [Transfer, Average, Last]: icarl" in plan
    rail = runs.split("  rail-primal (seed 42)")[1].split("used by")[0]
    # hidden_dim is the release's 15000 outside this module (its tiny runs narrow it: offline_parts)
    assert "hidden_dim=" in rail and "fusion_weight=0.8" in rail and "regularization=0.1" in rail
    assert "iterations" not in rail.split("settings:")[1].split("\n")[0]  # training-free
    codyra = runs.split("  codyra (seed 42)")[1].split("used by")[0]
    for setting in ("rank=16", "max_kappa=0.005", "kappa_steps=50", "lr=0.0005", "iterations=500"):
        assert setting in codyra, setting
    icarl = runs.split("  icarl (seed 42)")[1].split("used by")[0]
    assert "memory_size=10000" in icarl and "label_smoothing=0," in icarl and "teacher='zeroshot'" in icarl
    assert "Fine-tune [CLIP]: finetune-alone" in plan and "NOT the paper's budget" not in plan


def test_the_paper_alone_needs_no_data(capsys):
    assert main(["reproduce", "robustness", "--paper"]) == 0
    text = capsys.readouterr().out
    assert "79.38 ± 2.22" in text and get_table("robustness").erratum in text
    assert main(["reproduce", "all", "--paper"]) == 0
    text = capsys.readouterr().out
    assert all(spec.title in text for spec in TABLES.values())
    assert "Last / iCaRL: erratum: equals the LwF Last row" in text


def test_missing_data_is_named_before_anything_runs(offline_parts, fake_root, tmp_path, capsys):
    root = tmp_path / "data"
    shutil.copytree(fake_root, root)
    shutil.rmtree(root / "dtd")
    out = tmp_path / "out"
    args = command("xtail", root, out, offline_parts)
    args = [a for a in args if a not in ("--ref-images", "--ref-sentences", "synthetic")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "nothing was run" in err and "xtail domain DTD: missing" in err
    assert f"{root}/ImageNet/train does not exist" in err and "tiny-imagenet-200/train does not exist" in err
    assert "Validation_GCC-1.1.0-Validation_output.csv does not exist" in err
    assert not out.exists()
    assert main(["reproduce", "xtail", "--out", str(out)]) == 2
    assert "give --data-root" in capsys.readouterr().err
    assert main(["reproduce", "table-9"]) == 2
    assert "unknown table 'table-9'" in capsys.readouterr().err
    assert main(["reproduce", "xtail", "--dry-run", "--seeds", "42,x"]) == 2
    assert "--seeds must be comma-separated non-negative integers" in capsys.readouterr().err
    assert main(["reproduce", "xtail", "--dry-run", "--seeds", "42,42"]) == 2
    assert "seeds must be distinct" in capsys.readouterr().err


def test_a_rehearsal_runs_the_plan_briefly_apart_from_the_results(offline_parts, fake_root, tmp_path):
    out = tmp_path / "out"
    args = [a for a in command("additional-baselines", fake_root, out, offline_parts) if a not in ("--iterations", "2")]
    assert main([*args, "--rehearse"]) == 0
    assert not (out / "additional-baselines").exists()
    markdown = (out / "rehearsal" / "additional-baselines" / "table.md").read_text()
    assert "**REHEARSAL**: 2 iterations per experience" in markdown
    run = out / "rehearsal" / "runs" / "xtail-order1-16shot" / "seed42" / "moram"
    settings = json.loads((run / "moram" / "run.json").read_text())["run"]
    assert settings["stream"]["test_shots"] == 2 and settings["options"]["iterations"] == "2"


# ------------------------------------------------------------------ the arithmetic, by hand
def write_report(folder, strategy, matrix, domains):
    from moram_avalanche.experiments.metrics import summarize

    (folder / strategy).mkdir(parents=True)
    report = {"domains": domains, "matrix": matrix, **summarize(np.array(matrix))}
    (folder / strategy / "results.json").write_text(json.dumps(report))


def test_cells_mean_std_and_difference_by_hand(tmp_path):
    """Two seeds of hand-made matrices for the load-balancing table's rows."""
    spec = get_table("load-balance")
    settings = ReproduceSettings(out=str(tmp_path), seeds=(1, 2))
    domains = list(spec.protocol.domains)
    size = len(domains)
    lasts = {}
    for label in ("MoRAM", "MoRAM w/ load-bal."):
        for k, run in enumerate(method_runs(spec, label, settings)):
            value = 50.0 + 10 * k + (5 if label == "MoRAM" else 0)  # Last = this value
            matrix = [[value] * size for _ in range(size)]
            write_report(run.folder(tmp_path / "runs"), run.strategy, matrix, domains)
            lasts.setdefault(label, []).append(value)
    result = table_result(spec, settings)
    paper = load_paper_numbers("load_balance")
    for row in result.rows:
        cell = row.cells["Last"]
        assert cell.ours == np.mean(lasts[row.method])  # 55 / 50 and 65 / 60 -> 60 / 55
        assert cell.ours_std == pytest.approx(np.std(lasts[row.method], ddof=1)) == pytest.approx(7.0710678)
        assert cell.paper == paper.row("X-TAIL", row.method).cell("Last").mean
        assert cell.difference == pytest.approx(cell.ours - cell.paper)
        assert row.cells["Transfer"].paper is None and row.cells["Transfer"].difference is None
    text = table_markdown(result)
    assert "| X-TAIL | MoRAM | ours | 60.0 ± 7.1 | 60.0 ± 7.1 | 60.0 ± 7.1 |" in text
    assert "|  |  | Δ | – | – | −20.9 |" in text  # 60.0 - 80.9


def test_an_unfinished_run_leaves_its_row_incomplete(tmp_path):
    spec = get_table("load-balance")
    settings = ReproduceSettings(out=str(tmp_path), seeds=(1,))
    run = method_runs(spec, "MoRAM", settings)[0]
    write_report(run.folder(tmp_path / "runs"), run.strategy, [[10.0] * 10] * 10, list(spec.protocol.domains))
    rows = {r.method: r for r in table_result(spec, settings).rows}
    assert rows["MoRAM"].status == "run" and rows["MoRAM w/ load-bal."].status == "incomplete"
    assert rows["MoRAM w/ load-bal."].cells["Last"].ours is None
