"""``torchrun --nproc_per_node 2 -m moram_avalanche run`` on a language model: two CPU processes
(gloo) train MoRAM and SeqLoRA on the tiny LLaMA and end where one process ends.

Tolerance, as for CLIP (tests/experiments/test_data_parallel_run.py): the processes add a
batch's gradients up in another order than one process, so the atoms agree within 1% of each
tensor's largest entry and each accuracy within one test sample of its task. Settings that keep
training smooth: no dropout on the atoms or on the LoRA's input (each process would draw its own
masks; SeqLoRA's default is O-LoRA's 0.1), tau = 1
(``temperature=None``) and top-k 8 (every atom).

The helpers (``tests/helpers/text_processes.py``) serve the sharded-weight runs too (tests/text/test_text_fsdp.py).
"""


import torch

from text_processes import ORDER, assert_same_runs, compare_args, moram_avalanche_cli, tiny_llama


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
