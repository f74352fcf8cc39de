"""The LFPT5 row of the T5 tables (``t5-standard``, ``t5-long``, ``t5-order-robustness``): it runs
the ``lfpt5`` strategy, its plan names LFPT5's settings with their sources, and a rehearsal's cells
are its runs' ``results.json``."""

import json

import numpy as np
import pytest

from fake_text_data import release_tree


def test_the_t5_tables_run_lfpt5_with_its_sources_in_the_plan():
    from moram_avalanche.experiments.reproduce import plan_text
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    for name in ("t5-standard", "t5-long", "t5-order-robustness"):
        assert TEXT_TABLES[name].method("LFPT5").strategy == "lfpt5", name
    text = plan_text("t5-standard", TextReproduceSettings())
    assert "LFPT5: lfpt5" in text and "lm-cl-order3-t5-large/seed42/lfpt5" in text
    assert "lfpt5: defaults [LFPT5 (Qin & Joty 2022), qcwthu/Lifelong-Fewshot-Language-Learning" in text
    # the draws: 500 is this library's; the official count follows the few-shot test file (Classification.py:365-366,
    # 491-512); the "model/Replay/LFPT5.py: 100 x 5" once cited is TRACE's commit 0ba4b64, replaced by 66a48b9
    for fact in ("--prompt_number 300", "Adafactor lr 0.5", "--lm_lambda 0.25 --kd_lamda 0.01",
                 "memnumforeveryclass", "top-k 64, repetition penalty 2.5",
                 "500 draws per earlier task (ours: the official count is 3 per line of the task's few-shot test file",
                 "TRACE's LFPT5 (model/Replay/LFPT5.py at 66a48b9"):
        assert fact in text, fact
    assert "100 x 5 draws at temperature 0.7 were in commit 0ba4b64, replaced since" in text


def test_a_rehearsal_of_the_lfpt5_row_fills_its_cells_from_its_runs(tmp_path):
    """The LFPT5 row of t5-order-robustness, rehearsed (3 orders, a tiny T5, capped pseudo-sample
    draws): each cell is the mean of the last row of its run's accuracy matrix."""
    from moram_avalanche.benchmarks.text.tasks import ORDERS
    from moram_avalanche.experiments.compare import run_comparison
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.paper.runs import method_runs, run_options, run_settings
    from moram_avalanche.experiments.paper.setup import run_setup
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    root = release_tree(tmp_path / "data", ORDERS[1])
    spec = TEXT_TABLES["t5-order-robustness"]
    settings = TextReproduceSettings(data_root=str(root), out=str(tmp_path / "out"), rehearse=True, progress=False)
    runs = method_runs(spec, "LFPT5", settings)
    assert [run.strategy for run in runs] == ["lfpt5"] * 3
    options = run_options(runs[0], settings)  # the strategy's own rehearsal caps
    assert (options["pseudo_draws"], options["pseudo_max_tokens"], options["prompt_length"]) == (8, 8, 4)
    for run in runs:
        run_comparison(run_setup(run, settings), [run.strategy],
                       run.folder(settings.root / "runs"), progress=False)
    rows = {row.method: row for row in table_result(spec, settings).rows}
    assert rows["LFPT5"].status == "run" and rows["MoRAM"].status == "incomplete"
    lasts = []
    for run in runs:
        folder = settings.root / "runs" / f"lm-cl-order{run.protocol.order}-t5-large" / "seed42" / "lfpt5"
        assert run.folder(settings.root / "runs") == folder  # t5-standard's folder
        report = json.loads((folder / "lfpt5" / "results.json").read_text())
        assert report["domains"] == list(ORDERS[run.protocol.order]) and np.array(report["matrix"]).shape == (4, 4)
        lasts.append(float(np.mean(report["matrix"][-1])))
        assert rows["LFPT5"].cells[f"Order {run.protocol.order}"].ours == pytest.approx(lasts[-1])
    summary = rows["LFPT5"].cells["Mean ± std"]
    assert summary.ours == pytest.approx(np.mean(lasts)) and summary.ours_std == pytest.approx(np.std(lasts, ddof=1))
    # what made the run, as recorded for its resume check: the caps among its options
    recorded = run_settings(runs[0], settings)
    assert recorded["strategy"] == "lfpt5" and recorded["model"] == "tiny random-init t5"
    assert {k: recorded["options"][k] for k in ("pseudo_draws", "prompt_length")} == {"pseudo_draws": "8",
                                                                                     "prompt_length": "4"}
