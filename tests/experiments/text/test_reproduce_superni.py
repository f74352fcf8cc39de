"""``reproduce superni`` (``tab:sapt``): the paper's numbers, the plan with every setting's
source, and a rehearsal on a fake SAPT tree whose cells are checked against the runs'
results.json (AP / FT recomputed here from the matrices, and from a matrix written by hand)."""

import json

import numpy as np
import pytest

from command_line import cli
from fake_superni import pseudo_tree, superni_tree
from moram_avalanche.experiments.paper.numbers import as_dict, load_paper_numbers


def test_the_shipped_numbers_are_the_papers():
    table = as_dict(load_paper_numbers("superni"))
    assert table["Replay-based"]["Replay"] == {"AP": 35.37, "FT": 16.92}
    assert table["Replay-based"]["SAPT"] == {"AP": 51.54, "FT": 0.91}
    assert table["Replay-based"]["MoRAM (with replay)"] == {"AP": 51.79, "FT": 0.73}
    assert table["Replay-free"]["MoRAM"] == {"AP": 39.62, "FT": 5.74}
    # the replay-free baselines, transcribed since (they were empty, with a note): paper_tables_lm.md, tab:sapt's
    # "replay-free" rows
    assert table["Replay-free"]["L2P"] == {"AP": 15.18, "FT": 3.65}
    assert table["Replay-free"]["IncLoRA"] == {"AP": 12.33, "FT": 41.93}
    assert table["Replay-free"]["C-LoRA"] == {"AP": 22.69, "FT": 24.25}
    assert table["Replay-free"]["O-LoRA"] == {"AP": 26.37, "FT": 19.15}
    for label in ("L2P", "IncLoRA", "C-LoRA", "O-LoRA"):
        assert not load_paper_numbers("superni").row("Replay-free", label).note  # nothing left to say of the cells


def test_paper_and_dry_run_need_no_data():
    done = cli("reproduce", "superni", "--paper")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| 51.79 | 0.73 |" in done.stdout and "| MoRAM | 39.62 | 5.74 |" in done.stdout
    done = cli("reproduce", "superni", "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    # Replay, SAPT, MoRAM (with replay), L2P, IncLoRA, O-LoRA, MoRAM on order 1, seed 42
    assert "runs (7;" in out and "SAPT: sapt" in out and "C-LoRA: not run" in out and "L2P: l2p" in out
    assert "task1572_samsum_summary, task363_sst2_polarity_classification" in out
    for line in ("lr 0.0003  [circle-hit/SAPT gen_script_superni_t5.py",
                 "accumulation_steps 4  [circle-hit/SAPT", "max_new_tokens 50  [circle-hit/SAPT",
                 "moram-replay: defaults [as moram, plus Avalanche's ReplayPlugin", "[SAPT score.py]",
                 "sapt: defaults [circle-hit/SAPT gen_script_superni_t5.py: LoRA rank 4, lora_alpha 32",
                 "kl_ratio 0.5", "pseudo-samples: SAPT's shipped generated_data/lora_gen_superni_t5"):
        assert line in out, line


def hand_ap_ft(matrix):
    """AP and FT written out with loops (SAPT's score.py)."""
    n = len(matrix)
    ap = sum(matrix[n - 1]) / n
    drops = []
    for j in range(n - 1):
        best = max(matrix[i][j] for i in range(j, n - 1))
        drops.append(best - matrix[n - 1][j])
    return ap, sum(drops) / len(drops)


def test_a_rehearsal_writes_ap_and_ft_of_its_runs(tmp_path):
    from moram_avalanche.benchmarks.text.superni import SUPERNI_ORDERS
    from moram_avalanche.experiments.compare import run_comparison
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.paper.runs import method_runs
    from moram_avalanche.experiments.paper.setup import run_setup
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.rehearsal import REHEARSAL_TEST
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    root = superni_tree(tmp_path / "CL_Benchmark", train=10, test=6)
    pseudo = pseudo_tree(tmp_path / "generated_data" / "lora_gen_superni_t5")
    spec = TEXT_TABLES["superni"]
    settings = TextReproduceSettings(data_root=str(root), out=str(tmp_path / "out"), rehearse=True, progress=False)
    # three rows keep the test short (full fine-tuning with replay, SAPT, and MoRAM with replay); the others read
    # "incomplete"
    folders = {}
    for label in ("Replay", "SAPT", "MoRAM (with replay)"):
        (run,) = method_runs(spec, label, settings)
        run_comparison(run_setup(run, settings), [run.strategy], run.folder(settings.root / "runs"),
                       progress=False)
        folders[label] = run.folder(settings.root / "runs") / run.strategy
    result = table_result(spec, settings)
    rows = {row.method: row for row in result.rows}
    for label, folder in folders.items():
        report = json.loads((folder / "results.json").read_text())
        assert report["domains"] == list(SUPERNI_ORDERS[1])
        matrix = np.array(report["matrix"])
        assert matrix.shape == (15, 15) and ((0 <= matrix) & (matrix <= 100)).all()
        ap, ft = hand_ap_ft(matrix.tolist())
        assert rows[label].status == "run"
        assert rows[label].cells["AP"].ours == pytest.approx(ap)
        assert rows[label].cells["FT"].ours == pytest.approx(ft)
        assert rows[label].cells["AP"].seeds == 1
        record = json.loads((folder / "run.json").read_text())["run"]
        assert record["options"]["lr"] == "0.0003" and record["options"]["max_new_tokens"] == "4"  # SAPT's, capped
        assert record["stream"] == {"order": 1, "train_limit": 8, "test_limit": REHEARSAL_TEST}
    assert rows["MoRAM (with replay)"].cells["AP"].paper == 51.79
    assert rows["SAPT"].cells["AP"].paper == 51.54 and rows["SAPT"].cells["FT"].paper == 0.91
    assert rows["MoRAM"].status == "incomplete"
    # the SAPT row read SAPT's pseudo-samples found beside CL_Benchmark (recorded), and ran its reflection
    record = json.loads((folders["SAPT"] / "run.json").read_text())["run"]
    assert record["options"]["pseudo_data_root"] == repr(str(pseudo.resolve()))
    assert record["options"]["accumulation_steps"] == "4" and record["strategy"] == "sapt"
    # the cells follow results.json: a matrix written by hand gives AP 185 / 15 and FT 5
    hand = [[10.0 + j if j <= i else 0.0 for j in range(15)] for i in range(15)]
    hand[14] = [5.0 + j for j in range(14)] + [24.0]
    path = folders["MoRAM (with replay)"] / "results.json"
    report = json.loads(path.read_text())
    report["matrix"] = hand
    path.write_text(json.dumps(report))
    row = next(r for r in table_result(spec, settings).rows if r.method == "MoRAM (with replay)")
    assert row.cells["AP"].ours == pytest.approx(185 / 15) and row.cells["FT"].ours == pytest.approx(5.0)


def test_a_rehearsal_of_the_l2p_row_writes_its_runs_ap_and_ft(tmp_path):
    """L2P's row (a prompt pool before T5's encoder input, the model frozen) on the real code path,
    capped: its cells are its run's results.json; the run used SAPT's loop and TRACE's pool settings."""
    from moram_avalanche.experiments.compare import run_comparison
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.paper.runs import method_runs
    from moram_avalanche.experiments.paper.setup import run_setup
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    root = superni_tree(tmp_path / "CL_Benchmark", train=10, test=6)
    spec = TEXT_TABLES["superni"]
    settings = TextReproduceSettings(data_root=str(root), out=str(tmp_path / "out"), rehearse=True, progress=False)
    (run,) = method_runs(spec, "L2P", settings)
    assert run.strategy == "l2p"
    run_comparison(run_setup(run, settings), [run.strategy], run.folder(settings.root / "runs"), progress=False)
    folder = run.folder(settings.root / "runs") / "l2p"
    report = json.loads((folder / "results.json").read_text())
    ap, ft = hand_ap_ft(report["matrix"])
    row = next(r for r in table_result(spec, settings).rows if r.method == "L2P")
    assert row.status == "run" and row.block == "Replay-free"
    assert row.cells["AP"].ours == pytest.approx(ap) and row.cells["FT"].ours == pytest.approx(ft)
    assert row.cells["AP"].paper == 15.18  # paper_tables_lm.md, tab:sapt: "| replay-free | L2P | no | 15.18 | 3.65 |"
    options = json.loads((folder / "run.json").read_text())["run"]["options"]
    assert options["lr"] == "0.0003" and "pool_size" not in options  # SAPT's loop; L2P's defaults (TRACE's)
