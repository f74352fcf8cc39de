"""``torchrun --nproc_per_node 2 -m moram_avalanche run``: the one-process result; a killed run resumes.

Two processes (gloo, CPU) train MoRAM on the synthetic stream; the run is killed (SIGKILL to
torchrun and its workers) as soon as the first experience's checkpoint is written, and started
again. It must end as one process running uninterrupted: the accuracy matrix within one test
image per cell (identical in every run so far), the atoms within 1% of each tensor's largest
entry (measured: 0.4%). The processes add a batch's gradients up in another order than one
process does, and AdamW turns rounding-level differences on near-zero coordinates into
learning-rate-sized steps.

Settings: ``--no-augment``, else each process draws its own random crops (README, "Several
GPUs"); ``topk=8`` (every atom of the two experiences) and ``temperature=None`` (tau = 1) keep
training smooth. With the paper's tau = 0.01 the routing is nearly one-hot, its near-zero
gradients are mostly rounding noise that AdamW scales up to full steps, and any two runs that
add numbers in another order drift apart after a few steps -- one process on 1 thread against
one process on 2 threads as much as two processes against one (measured: gradient L1 58.6014
vs 58.6009 at the second experience's first step, 55.2 vs 62.1 at its fourth). With tau = 1
two processes and one agree to 1e-6 (relative) at every step.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from moram_avalanche.cli import main

ROOT = Path(__file__).resolve().parents[2]
RUN = ["run", "--benchmark", "synthetic", "--order", "shapes,digits", "--strategy", "moram",
       "--model", "moram-synthetic-tiny", "--pretrained", "none", "--iterations", "6", "--batch-size", "8",
       "--lr", "1e-2", "--set", "atoms_per_task=4", "--set", "topk=8", "--set", "temperature=None",
       "--no-augment", "--no-progress"]
#: the atoms: within 1% of each tensor's largest entry (measured: 0.4%)
RTOL = 1e-2
#: the accuracy matrix: one test image per cell (60 per domain)
CELL = 100 / 60


def torchrun(args, log_path):
    command = [sys.executable, "-W", "ignore", "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", "-m", "moram_avalanche", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    log = open(log_path, "w")
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def kill_tree(pid):
    import psutil

    parent = psutil.Process(pid)
    for process in [*parent.children(recursive=True), parent]:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def experiences_done(path):
    if not path.exists():
        return 0
    try:
        return torch.load(path, weights_only=True)["experiences_done"]
    except Exception:  # noqa: BLE001 - being written (atomically renamed; this is the old one)
        return 0


def rows_written(log_dir, rows: int) -> bool:
    """Whether the run in ``log_dir`` has checkpointed ``rows`` experiences and written their
    results (rank 0 writes ``results.json`` just after the checkpoint that backs it)."""
    try:
        written = len(json.loads((log_dir / "results.json").read_text())["matrix"])
    except (OSError, ValueError, KeyError):
        return False
    return experiences_done(log_dir / "checkpoint.pt") >= rows and written >= rows


def test_two_processes_match_one_and_a_killed_run_resumes(tmp_path, one_thread):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert main([*RUN, *cache, "--log-dir", str(tmp_path / "one")]) == 0
    one = json.loads((tmp_path / "one" / "results.json").read_text())
    one_atoms = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=True)["model"]

    two = tmp_path / "two"
    run = torchrun([*RUN, *cache, "--log-dir", str(two)], tmp_path / "killed.log")
    deadline = time.time() + 300
    while not rows_written(two, 1) and run.poll() is None and time.time() < deadline:
        time.sleep(0.05)  # results.json follows the checkpoint that backs it: wait for both
    kill_tree(run.pid)  # torchrun and both workers, mid-way through the second experience
    run.wait()
    assert experiences_done(two / "checkpoint.pt") == 1, (tmp_path / "killed.log").read_text()[-3000:]
    assert len(json.loads((two / "results.json").read_text())["matrix"]) == 1

    resumed = torchrun([*RUN, *cache, "--log-dir", str(two)], tmp_path / "resumed.log")
    assert resumed.wait(timeout=300) == 0, (tmp_path / "resumed.log").read_text()[-3000:]
    log = (tmp_path / "resumed.log").read_text()
    assert "resuming MoRAM after 1 experience(s)" in log
    assert log.count("Transfer ") == 1  # rank 0 alone reports (and writes)
    result = json.loads((two / "results.json").read_text())
    assert len(result["matrix"]) == len(one["matrix"]) == 2
    assert all(abs(a - b) <= CELL for row_a, row_b in zip(result["matrix"], one["matrix"])
               for a, b in zip(row_a, row_b)), (result["matrix"], one["matrix"])
    atoms = torch.load(two / "checkpoint.pt", weights_only=True)["model"]
    assert atoms.keys() == one_atoms.keys()
    floats = [k for k in atoms if atoms[k].is_floating_point()]
    worst = max(float((atoms[k] - one_atoms[k]).abs().max() / one_atoms[k].abs().max().clamp_min(1e-12))
                for k in floats)
    assert worst <= RTOL, worst
    assert all(torch.equal(atoms[k], one_atoms[k]) for k in atoms if k not in floats)  # counts, tasks
    assert any(float(one_atoms[k].float().abs().sum()) > 0 for k in atoms if k.endswith("atom_values"))
