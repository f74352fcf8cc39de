"""Language-model runs in new processes, one or several (``torchrun``, gloo on the CPU): the
command, the tiny LLaMA folder they load, and the check that two runs end alike (the
data-parallel and the sharded-weight runs: tests/text/test_text_data_parallel.py,
tests/text/test_text_fsdp.py)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch

from tiny_stream import FAMILIES, stream_tokenizer

ROOT = Path(__file__).resolve().parents[2]
ORDER = ("colour", "mood")
RTOL = 1e-2


def compare_args(model, out):
    return ["compare", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategies", "moram,seq-lora",
            "--model", str(model), "--out", str(out), "--iterations", "25", "--batch-size", "8", "--set", "moram.lr=3e-2", "--set", "seq-lora.lr=3e-2",
            "--set", "moram.atoms_per_task=4", "--set", "moram.topk=8", "--set", "moram.temperature=None",
            "--set", "moram.dropout=0.0", "--set", "seq-lora.dropout=0.0", "--set", "moram.max_new_tokens=2", "--set", "seq-lora.max_new_tokens=2",
            "--device", "cpu", "--no-progress"]


def tiny_llama(folder):
    """The tiny LLaMA of the synthetic stream and its tokenizer, saved in ``folder`` (returned)."""
    tokenizer = stream_tokenizer(ORDER)
    FAMILIES["llama"](tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def python_command(args, processes=1, timeout=900):
    """``python ARGS``, under torchrun with ``processes`` CPU processes when > 1. Past ``timeout``
    seconds every process it started is killed (a hung collective would keep torchrun's workers
    alive) and subprocess.TimeoutExpired is raised."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    launcher = (["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
                if processes > 1 else [])
    with subprocess.Popen([sys.executable, "-W", "ignore", *launcher, *args], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True) as started:
        try:
            stdout, stderr = started.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(started.pid, signal.SIGKILL)  # its own session: the launcher and its workers
            started.communicate()
            raise
    return subprocess.CompletedProcess(started.args, started.returncode, stdout, stderr)


def moram_avalanche_cli(args, processes=1, timeout=900):
    """``python -m moram_avalanche ARGS`` (:func:`python_command`)."""
    return python_command(["-m", "moram_avalanche", *args], processes, timeout)


def assert_same_runs(one, two, names, tests):
    """The runs in folders ``one`` and ``two`` (``<folder>/<name>`` per strategy name) end alike:
    each accuracy within one test sample (``tests``: the test samples per task) and the adapters
    within :data:`RTOL` of each tensor's largest entry. Returns the sum of ``one``'s matrices."""
    learned = 0.0
    for name in names:
        a = json.loads((Path(one) / name / "results.json").read_text())["matrix"]
        b = json.loads((Path(two) / name / "results.json").read_text())["matrix"]
        print(f"{name}: matrices {a} / {b}")
        assert len(a) == len(b) == len(tests)
        for row_a, row_b in zip(a, b):
            for j, (x, y) in enumerate(zip(row_a, row_b)):
                assert abs(x - y) <= 100 / tests[j] + 1e-9, (name, a, b)
        learned += sum(map(sum, a))
        state_a = torch.load(Path(one) / name / "checkpoint.pt", weights_only=True)["model"]
        state_b = torch.load(Path(two) / name / "checkpoint.pt", weights_only=True)["model"]
        assert state_a.keys() == state_b.keys()
        floats = [k for k in state_a if state_a[k].is_floating_point() and state_a[k].abs().max() > 0]
        worst = max(float((state_b[k] - state_a[k]).abs().max() / state_a[k].abs().max()) for k in floats)
        print(f"{name}: adapters' worst relative difference {worst:.2e}")
        assert worst <= RTOL, (name, worst)
    return learned
