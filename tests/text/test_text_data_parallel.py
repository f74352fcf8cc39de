"""``torchrun --nproc_per_node 2 -m moram_avalanche run`` on a language model: two CPU processes
(gloo) train MoRAM and SeqLoRA on the tiny LLaMA and end where one process ends.

Tolerance, as for CLIP (tests/experiments/test_data_parallel_run.py): the processes add a
batch's gradients up in another order than one process, so the atoms agree within 1% of each
tensor's largest entry and each accuracy within one test sample of its task. Settings that keep
training smooth: no dropout on the atoms or on the LoRA's input (each process would draw its own
masks; SeqLoRA's default is O-LoRA's 0.1), tau = 1
(``temperature=None``) and top-k 8 (every atom).

The helpers (:func:`tiny_llama`, :func:`python_command`, :func:`moram_avalanche_cli`,
:func:`assert_same_runs`) serve the sharded-weight runs too (tests/text/test_text_fsdp.py).
"""

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


def test_two_processes_match_one_on_the_tiny_llama(tmp_path):
    from moram_avalanche.benchmarks import synthetic_text

    model = tiny_llama(tmp_path / "tiny-llama")
    one = moram_avalanche_cli(compare_args(model, tmp_path / "one"))
    assert one.returncode == 0, one.stderr[-3000:]
    two = moram_avalanche_cli(compare_args(model, tmp_path / "two"), processes=2)
    assert two.returncode == 0, (two.stdout + two.stderr)[-3000:]
    tests = [len(e.dataset) for e in synthetic_text(ORDER).test_stream]
    learned = assert_same_runs(tmp_path / "one", tmp_path / "two", ("moram", "seq-lora"), tests)
    assert learned > 0  # SeqLoRA learns something here: the matrices are not trivially equal


def test_two_processes_train_l2ps_pool_as_one(tmp_path):
    """L2P's pool and keys (a prefix outside the transformers model) are averaged across processes
    like adapters: two processes end where one ends (selection is per row; the pull term's mean
    over each process's rows averages to the batch's)."""
    from moram_avalanche.benchmarks import synthetic_text

    model = tiny_llama(tmp_path / "tiny-llama")
    args = ["compare", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategies", "l2p",
            "--model", str(model), "--iterations", "10", "--batch-size", "8", "--set", "l2p.lr=3e-2",
            "--set", "l2p.pool_size=4", "--set", "l2p.top_k=2", "--set", "l2p.max_new_tokens=2", "--device", "cpu", "--no-progress"]
    one = moram_avalanche_cli([*args, "--out", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = moram_avalanche_cli([*args, "--out", str(tmp_path / "two")], processes=2)
    assert two.returncode == 0, (two.stdout + two.stderr)[-3000:]
    tests = [len(e.dataset) for e in synthetic_text(ORDER).test_stream]
    assert_same_runs(tmp_path / "one", tmp_path / "two", ("l2p",), tests)
    # the pool trained (its prompts left the embedding rows / 100 they started from), so agreeing means something
    from transformers import AutoModelForCausalLM

    table = AutoModelForCausalLM.from_pretrained(model).get_input_embeddings().weight.detach() / 100.0
    pool = torch.load(tmp_path / "one" / "l2p" / "checkpoint.pt", weights_only=True)["model"]["prefix.weight"]
    assert any(not any(torch.allclose(v, row) for row in table) for v in pool.reshape(-1, table.shape[1]))
