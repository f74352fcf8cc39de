"""``reproduce t5-order-robustness`` (``tab:order_robustness``) and ``reproduce t5-load-balance``
(the T5 columns of ``tab:load_balance``): the paper's numbers, tables that read another table's
runs, the summary column over the orders, the plan, and a rehearsal's cells against its runs'
``results.json``."""

import json

import numpy as np
import pytest

from command_line import cli
from fake_text_data import release_tree
from moram_avalanche.experiments.paper.numbers import PaperCell, as_dict, load_paper_numbers


def test_the_shipped_numbers_agree_with_the_tables_they_share_runs_with():
    robustness = load_paper_numbers("t5_order_robustness")
    standard = as_dict(load_paper_numbers("t5_standard"))["T5-large"]
    moram = robustness.row("T5-large", "MoRAM")
    assert moram.cell("Mean ± std") == PaperCell(77.6, 0.26)
    orders = [moram.cell(f"Order {k}").mean for k in (1, 2, 3)]
    assert orders == [standard["MoRAM"][f"Order {k}"] for k in (1, 2, 3)]
    # an independent check of the transcription: 77.6 ± 0.26 is the mean and sample std of the orders
    assert round(float(np.mean(orders)), 1) == 77.6 and round(float(np.std(orders, ddof=1)), 2) == 0.26
    olora = robustness.row("T5-large", "O-LoRA")
    assert [olora.cell(f"Order {k}").mean for k in (1, 2, 3)] == [standard["O-LoRA"][f"Order {k}"] for k in (1, 2, 3)]
    # the paper's std, transcribed since (it was n/a): paper_tables_lm.md, tab:order_robustness "| O-LoRA | ... | 75.8 ± 0.46 |"
    assert olora.cell("Mean ± std") == PaperCell(75.8, 0.46) and not olora.note
    # the other rows, transcribed since (they were empty): tab:order_robustness's SeqFT, L2P and LFPT5 rows, whose
    # orders are tab:llm_cl_main's
    for label, mean_std in (("SeqFT", PaperCell(28.5, 11.82)), ("L2P", PaperCell(61.0, 0.70)),
                            ("LFPT5", PaperCell(72.7, 5.15))):
        row = robustness.row("T5-large", label)
        assert [row.cell(f"Order {k}").mean for k in (1, 2, 3)] == [standard[label][f"Order {k}"] for k in (1, 2, 3)]
        assert row.cell("Mean ± std") == mean_std
    balance = as_dict(load_paper_numbers("t5_load_balance"))["T5-large: 15-task"]
    long = as_dict(load_paper_numbers("t5_long"))["T5-large"]["MoRAM"]
    assert balance["MoRAM"] == {f"Order {k}": long[f"Order {k}"] for k in (4, 5, 6)}
    assert balance["MoRAM w/ load-bal."] == {"Order 4": 68.23, "Order 5": 67.86, "Order 6": 71.46}


def test_a_table_reads_the_runs_of_the_table_it_names():
    from moram_avalanche.experiments.paper.runs import method_runs, plan, run_settings
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    settings = TextReproduceSettings(data_root="/data", out="/out")
    for name, source, extra in (("t5-order-robustness", "t5-standard", 0), ("t5-load-balance", "t5-long", 3)):
        spec, base = TEXT_TABLES[name], TEXT_TABLES[source]
        assert spec.runs_of == source and spec.run_table == source
        assert (spec.model, spec.architecture, spec.dtype, spec.orders) == (base.model, base.architecture, base.dtype,
                                                                           base.orders)
        for _, label in spec.table_rows():  # a label of both tables runs the same strategy in both
            if label in dict(base.table_rows()).values():
                assert spec.method(label).strategy == base.method(label).strategy, label
        alone, both = plan([base], settings), plan([base, spec], settings)
        assert len(both) == len(alone) + extra  # shared runs are planned once
        folders = {run.folder(settings.root / "runs") for run, _ in alone}
        for _, label in spec.table_rows():
            for run in method_runs(spec, label, settings):
                shared = [r for r, _ in alone if r.folder(settings.root / "runs") == run.folder(settings.root / "runs")]
                if run.strategy == "moram-load-balance":
                    assert not shared  # the one run of its own, beside t5-long's
                    continue
                assert run.folder(settings.root / "runs") in folders and shared == [run]
                # the same record whichever table asks: a folder filled by one is read by the other
                assert run_settings(run, settings) == run_settings(shared[0], settings)
        used_by = dict(both)
        assert any(entry.startswith(f"{name}: ") for entries in used_by.values() for entry in entries)


def fake_reports(spec, label, settings, lasts):
    """``{run: results.json}`` whose ``last`` is ``lasts[(order, seed)]``."""
    from moram_avalanche.experiments.paper.runs import method_runs

    runs = method_runs(spec, label, settings)
    return runs, {run: {"last": lasts[(run.protocol.order, run.seed)]} for run in runs}


def test_the_summary_column_is_the_mean_and_sample_std_over_the_orders():
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    spec = TEXT_TABLES["t5-order-robustness"]
    paper_row = spec.paper_numbers().row("T5-large", "MoRAM")
    settings = TextReproduceSettings(seeds=(1, 2))
    # per order the mean over the seeds: 77.4, 77.5, 77.9; over the orders 77.6 and sqrt(0.14 / 2)
    lasts = {(1, 1): 77.0, (1, 2): 77.8, (2, 1): 77.5, (2, 2): 77.5, (3, 1): 78.9, (3, 2): 76.9}
    runs, reports = fake_reports(spec, "MoRAM", settings, lasts)
    cells = spec.stream.cells(spec, paper_row, runs, reports)
    assert list(cells) == ["Order 1", "Order 2", "Order 3", "Mean ± std"] == list(spec.columns)
    assert [cells[f"Order {k}"].ours for k in (1, 2, 3)] == pytest.approx([77.4, 77.5, 77.9])
    assert cells["Order 1"].ours_std == pytest.approx(np.sqrt(0.32))  # over the two seeds of order 1
    summary = cells["Mean ± std"]
    assert summary.ours == pytest.approx(77.6) and summary.ours_std == pytest.approx(np.sqrt(0.07))
    assert summary.seeds == 2 and summary.paper == 77.6 and summary.paper_std == 0.26
    assert summary.difference == pytest.approx(0.0)
    # the standard table's Average has no std; the load-balancing table has no summary column
    standard = TEXT_TABLES["t5-standard"]
    cells = standard.stream.cells(standard, standard.paper_numbers().row("T5-large", "MoRAM"), runs, reports)
    assert cells["Average"].ours == pytest.approx(77.6) and cells["Average"].ours_std is None
    balance = TEXT_TABLES["t5-load-balance"]
    assert balance.columns == ("Order 4", "Order 5", "Order 6")
    # one order missing: no summary
    del reports[runs[0]]
    reports[runs[0]] = {"last": float("nan")}
    cells = spec.stream.cells(spec, paper_row, runs, reports)
    assert cells["Order 1"].ours is None and cells["Mean ± std"].ours is None


def test_a_summary_the_stream_does_not_know_is_refused():
    from dataclasses import replace

    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES

    with pytest.raises(ValueError, match="summary 'Median' is not one of"):
        replace(TEXT_TABLES["t5-standard"], summary="Median")


def test_paper_and_dry_run_name_the_numbers_runs_and_settings():
    from moram_avalanche.experiments.reproduce import plan_text
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    done = cli("reproduce", "t5-order-robustness", "--paper")
    assert done.returncode == 0, done.stderr[-2000:]
    # every row transcribed since (SeqFT's was empty, both flagged †): paper_tables_lm.md, tab:order_robustness
    # "| SeqFT | 18.9 | 24.9 | 41.7 | 28.5 ± 11.82 |" and "| MoRAM | 77.4 | 77.5 | 77.9 | 77.6 ± 0.26 |", no note left
    assert "| T5-large | SeqFT | 18.90 | 24.90 | 41.70 | 28.50 ± 11.82 |" in done.stdout
    assert "| MoRAM | 77.40 | 77.50 | 77.90 | 77.60 ± 0.26 |" in done.stdout
    done = cli("reproduce", "t5-load-balance", "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| T5-large: 15-task | MoRAM |" not in done.stdout  # the plan, not the numbers
    assert "runs: t5-long's" in done.stdout and "runs (6;" in done.stdout
    assert "moram-load-balance: defaults [as moram, plus 0.01 x" in done.stdout
    assert "speed: a training forward runs the plain-autograd path" in done.stdout
    assert "lm-cl-order6-t5-large/seed42/moram-load-balance" in done.stdout
    text = plan_text("t5-order-robustness", TextReproduceSettings())
    assert "runs (15;" in text and "L2P: l2p" in text and "LFPT5: lfpt5" in text
    assert "l2p: defaults [the model frozen; a pool of 10 prompts" in text and "TRACE's pool settings serve" in text
    assert "o-lora: defaults [as inc-lora; O-LoRA scripts/order_1.sh" in text  # every setting with its source


def test_a_rehearsal_cell_is_its_runs_results(tmp_path):
    """The MoRAM row of t5-order-robustness, rehearsed (3 orders, a tiny T5): each cell is the mean of
    the last row of its run's accuracy matrix, the summary their mean and sample std."""
    from moram_avalanche.benchmarks.text.tasks import ORDERS
    from moram_avalanche.experiments.compare import run_comparison
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.paper.runs import method_runs
    from moram_avalanche.experiments.paper.setup import run_setup
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    root = release_tree(tmp_path / "data", ORDERS[1])
    spec = TEXT_TABLES["t5-order-robustness"]
    settings = TextReproduceSettings(data_root=str(root), out=str(tmp_path / "out"), rehearse=True, progress=False)
    runs = method_runs(spec, "MoRAM", settings)
    for run in runs:  # what reproduce does for each planned run (the row's three; the others stay unfinished)
        run_comparison(run_setup(run, settings), [run.strategy],
                       run.folder(settings.root / "runs"), progress=False)
    result = table_result(spec, settings)
    rows = {row.method: row for row in result.rows}
    assert rows["MoRAM"].status == "run" and rows["O-LoRA"].status == "incomplete"
    assert rows["L2P"].status == "incomplete"  # its runs exist in the plan, not on disk
    lasts = []
    for run in runs:
        folder = settings.root / "runs" / f"lm-cl-order{run.protocol.order}-t5-large" / "seed42" / "moram"
        assert run.folder(settings.root / "runs") == folder  # t5-standard's folder
        report = json.loads((folder / "moram" / "results.json").read_text())
        assert report["domains"] == list(ORDERS[run.protocol.order])
        lasts.append(float(np.mean(report["matrix"][-1])))
        assert rows["MoRAM"].cells[f"Order {run.protocol.order}"].ours == pytest.approx(lasts[-1])
        assert report["last"] == pytest.approx(lasts[-1])
    summary = rows["MoRAM"].cells["Mean ± std"]
    assert summary.ours == pytest.approx(np.mean(lasts)) and summary.ours_std == pytest.approx(np.std(lasts, ddof=1))
    assert summary.paper == 77.6 and summary.paper_std == 0.26
    record = json.loads((runs[0].folder(settings.root / "runs") / "moram" / "run.json").read_text())
    assert record["run"]["model"] == "tiny random-init t5"


def test_a_load_balancing_rehearsal_runs_its_row_beside_t5_longs_runs(tmp_path):
    """The load-balancing row of t5-load-balance rehearsed on order 4 alone (fifteen tasks with a tiny
    T5; the table's three orders run the same way): its cell is its run's results."""
    from dataclasses import replace

    from moram_avalanche.benchmarks.text.tasks import ORDERS
    from moram_avalanche.experiments.compare import run_comparison
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.paper.runs import method_runs
    from moram_avalanche.experiments.paper.setup import run_setup
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    root = release_tree(tmp_path / "data", ORDERS[4])
    spec = replace(TEXT_TABLES["t5-load-balance"], orders=(4,))
    settings = TextReproduceSettings(data_root=str(root), out=str(tmp_path / "out"), rehearse=True, progress=False)
    (run,) = method_runs(spec, "MoRAM w/ load-bal.", settings)
    assert (run.strategy, run.protocol.table, run.protocol.order) == ("moram-load-balance", "t5-long", 4)
    folder = run.folder(settings.root / "runs")
    assert folder == settings.root / "runs" / "lm-cl-order4-t5-large" / "seed42" / "moram-load-balance"
    run_comparison(run_setup(run, settings), [run.strategy], folder, progress=False)
    rows = {row.method: row for row in table_result(spec, settings).rows}
    assert rows["MoRAM"].status == "incomplete" and rows["MoRAM w/ load-bal."].status == "run"
    report = json.loads((folder / "moram-load-balance" / "results.json").read_text())
    assert report["domains"] == list(ORDERS[4]) and np.array(report["matrix"]).shape == (15, 15)
    cell = rows["MoRAM w/ load-bal."].cells["Order 4"]
    assert cell.ours == pytest.approx(float(np.mean(report["matrix"][-1]))) and cell.paper == 68.23
    assert list(rows["MoRAM w/ load-bal."].cells) == ["Order 4"]  # no summary column in this table
