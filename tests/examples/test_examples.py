"""Every script of ``examples/`` runs with ``--tiny`` (offline, CPU, one thread) and writes what it says.

Each runs as a user runs it, ``python examples/X.py --tiny --out DIR``, in its own process; the
test then reads what it wrote and checks it against what it must be: the accuracy matrix's shape,
domains and range and its summaries recomputed from the matrix; Avalanche's own accuracy equal to
the package's matrix; the atoms grown per task; a saved adapter that reloads onto a fresh base with
the same logits; a zero-shot row that never changes.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def tiny_clip_weights():
    """The tiny CLIP's ``synthetic`` weights, made once in the package's cache (about a minute the
    first time; every later run reads the file), so that no script below pays for them."""
    from moram_avalanche.clip.registry import TINY_NAME, made_weights

    return made_weights(TINY_NAME, "synthetic", progress=False)


def run_example(name, out, *extra):
    """``python examples/<name> --tiny --out <out>`` as a user runs it (offline, one thread);
    returns its standard output; a failure shows the script's own output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1",
           # the PyTorch path: the same results as the compiled CPU kernel, without building it
           "MORAM_AVALANCHE_PATH": "no-cpu-kernel"}
    done = subprocess.run([sys.executable, str(EXAMPLES / name), "--tiny", "--out", str(out), *extra], cwd=out.parent,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def read_matrix(folder):
    """``accuracy_matrix.csv`` of a run folder: (domains, rows' domains, matrix)."""
    lines = (folder / "accuracy_matrix.csv").read_text().splitlines()
    header, rows = lines[0].split(","), [line.split(",") for line in lines[1:]]
    return header[1:], [row[0] for row in rows], np.array([[float(v) for v in row[1:]] for row in rows])


def check_report(folder, domains):
    """The run folder's matrix is square over ``domains`` (trained in that order), every accuracy a
    percentage, and ``results.json``'s summaries are the matrix's, recomputed here (from the CSV's
    four decimals: to 1e-4, as the matrix itself)."""
    columns, trained, matrix = read_matrix(folder)
    assert columns == trained == list(domains)
    assert np.isfinite(matrix).all() and ((matrix >= 0) & (matrix <= 100)).all()
    report = json.loads((folder / "results.json").read_text())
    assert np.allclose(report["matrix"], matrix, atol=1e-4)
    assert report["average"] == pytest.approx(matrix.mean(), abs=1e-4)
    assert report["last"] == pytest.approx(matrix[-1].mean(), abs=1e-4)
    before = [matrix[:d, d].mean() for d in range(1, len(domains))]  # accuracy on a domain not yet trained
    assert report["transfer"] == pytest.approx(np.mean(before), abs=1e-4)
    return matrix


def test_clip_moram_avalanche_loop(tmp_path, tiny_clip_weights):
    out = tmp_path / "loop"
    printed = run_example("clip_moram_avalanche_loop.py", out)
    check_report(out, ["shapes", "colours", "glyphs"])
    assert json.loads(printed)["domains"] == ["shapes", "colours", "glyphs"]
    assert any((out / "tb").iterdir())  # Avalanche's TensorBoard logger wrote its events


def test_avalanche_strategy_with_moram_plugin(tmp_path, tiny_clip_weights):
    out = tmp_path / "naive"
    run_example("avalanche_strategy_with_moram_plugin.py", out)
    matrix = check_report(out, ["shapes", "colours"])
    # MoRAMPlugin grew every bank by r = 16 atoms per experience and froze them all at the end
    atoms = json.loads((out / "atoms.json").read_text())
    assert len(atoms) == 36  # the tiny CLIP: 3 + 3 blocks, q, k, v, out, c_fc, c_proj each
    assert all(layer == {"frozen": 32, "total": 32} for layer in atoms.values())
    # Avalanche's own accuracy metric, logged by its CSV logger, is the package's matrix
    lines = (out / "csv" / "eval_results.csv").read_text().splitlines()
    header, rows = lines[0].split(","), [dict(zip(lines[0].split(","), line.split(","))) for line in lines[1:]]
    assert {"eval_exp", "training_exp", "eval_accuracy", "forgetting"} <= set(header) and len(rows) == 4
    for row in rows:
        assert 100 * float(row["eval_accuracy"]) == pytest.approx(
            matrix[int(row["training_exp"]), int(row["eval_exp"])], abs=1e-3)
    assert (out / "log.txt").stat().st_size > 0


def test_peft_trainer_two_tasks(tmp_path):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForSeq2SeqLM

    import moram_avalanche.text  # noqa: F401  (registers MoRAM with peft)
    from moram_avalanche.layers.moram.paths import use_path

    out = tmp_path / "peft"
    run_example("peft_trainer_two_tasks.py", out)
    losses = json.loads((out / "loss_matrix.json").read_text())
    assert list(losses) == ["colour", "mood"] and all(list(row) == ["colour", "mood"] for row in losses.values())
    assert all(np.isfinite(loss) and loss > 0 for row in losses.values() for loss in row.values())
    # the adapter holds both tasks' atoms, r = 8 per task and layer, every one frozen, and no base weight
    saved = load_file(out / "adapter" / "adapter_model.safetensors")
    owners = [tensor for key, tensor in saved.items() if key.endswith("atom_task")]
    assert owners and all(owner.tolist() == [0] * 8 + [1] * 8 for owner in owners)
    assert all(".moram_bank." in key for key in saved)
    # a fresh base with the saved adapter gives the trained model's logits on the script's probe
    probe = torch.load(out / "probe.pt")
    base = AutoModelForSeq2SeqLM.from_pretrained(out / "tiny-t5")
    reloaded = PeftModel.from_pretrained(base, str(out / "adapter")).eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the script's one thread (run_example): another count may sum a GEMM in another order
    try:
        with torch.no_grad(), use_path("no-cpu-kernel"):  # the script's path (run_example), whatever this process built
            logits = reloaded(**probe["inputs"]).logits
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(logits, probe["logits"])
    with torch.no_grad():  # and the atoms do matter: the base alone gives other logits
        plain = AutoModelForSeq2SeqLM.from_pretrained(out / "tiny-t5").eval()(**probe["inputs"]).logits
    assert not torch.allclose(plain, probe["logits"])


def test_compare_on_your_stream(tmp_path, tiny_clip_weights):
    out = tmp_path / "compare"
    run_example("compare_on_your_stream.py", out)
    domains = ["colours", "stripes"]  # the toy stream's folders, in sorted order
    assert sorted(p.name for p in Path(f"{out}-toy-stream").iterdir()) == domains
    matrices = {name: check_report(out / name, domains) for name in ("zeroshot", "finetune", "moram")}
    assert (matrices["zeroshot"] == matrices["zeroshot"][0]).all()  # it trains nothing: every row the same
    table = (out / "table.csv").read_text().splitlines()
    assert table[0] == "metric,strategy,colours,stripes,mean"
    assert sorted({line.split(",")[1] for line in table[1:]}) == ["finetune", "moram", "zeroshot"]
    assert (out / "accuracy_matrices.png").stat().st_size > 0


def test_language_model_moram(tmp_path):
    out = tmp_path / "lm"
    printed = run_example("language_model_moram.py", out)
    tasks = ["colour", "mood", "topic"]
    matrix = check_report(out, tasks)
    report = json.loads((out / "results.json").read_text())
    # OP and BWT as the paper defines them: the last row's mean; the mean drop from A[j, j] to A[N, j]
    assert report["op"] == pytest.approx(matrix[-1].mean(), abs=1e-4)  # (the CSV's four decimals)
    assert report["bwt"] == pytest.approx(np.mean([matrix[j, j] - matrix[-1, j] for j in range(len(tasks) - 1)]),
                                          abs=2e-4)
    assert json.loads(printed)["domains"] == tasks
    assert (out / "tiny-t5" / "config.json").is_file()
