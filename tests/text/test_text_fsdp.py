"""``--fsdp``: the tiny LLaMA's frozen weights sharded over CPU processes (gloo, FSDP2).

* two processes with sharded weights end where one process ends (the data-parallel test's
  settings and tolerances, tests/text/test_text_data_parallel.py), with gradient
  checkpointing on; the run folder records ``--fsdp`` and refuses to resume without it;
* three processes, whose evaluation shares differ in batches (8 test prompts, 2 per batch:
  1, 2 and 2 batches), finish (padding batches keep every process calling the sharded model;
  without them the run hangs) and end where one process ends, with gradient accumulation;
* each of two processes holds half of the (bf16) weights' bytes, and adapters injected and
  grown afterwards are plain, trainable tensors;
* the refusals: without torchrun, on an image benchmark, with strategies that train the
  weights themselves or are Avalanche's.
"""

import json
import sys

import pytest
import torch

from text_processes import ORDER, assert_same_runs, compare_args, moram_avalanche_cli, python_command, tiny_llama


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def test_two_processes_with_sharded_weights_match_one(model, tmp_path):
    from moram_avalanche.benchmarks import synthetic_text

    one = moram_avalanche_cli(compare_args(model, tmp_path / "one"))
    assert one.returncode == 0, one.stderr[-3000:]
    two = moram_avalanche_cli([*compare_args(model, tmp_path / "two"), "--fsdp", "--gradient-checkpointing"],
                              processes=2)
    assert two.returncode == 0, (two.stdout + two.stderr)[-3000:]
    tests = [len(e.dataset) for e in synthetic_text(ORDER).test_stream]
    learned = assert_same_runs(tmp_path / "one", tmp_path / "two", ("moram", "seq-lora"), tests)
    assert learned > 0  # SeqLoRA learns something here: the matrices are not trivially equal
    record = json.loads((tmp_path / "two" / "moram" / "run.json").read_text())
    assert record["run"]["fsdp"] is True and "fsdp" not in json.loads((tmp_path / "one" / "moram" / "run.json").read_text())["run"]
    again = moram_avalanche_cli(compare_args(model, tmp_path / "two"))  # the same folder, without --fsdp
    assert again.returncode == 2 and "fsdp: true there" in again.stderr, again.stderr[-2000:]


def run_args(model, log_dir):
    """One MoRAM run whose three processes see the same batches as one process: a global batch
    of 3 (1 prompt each), 2 x 2 minibatches per task (fewer than an epoch of either task, so one
    process never reaches an epoch's short tail, which the processes skip)."""
    return ["run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", "moram",
            "--model", str(model), "--log-dir", str(log_dir), "--iterations", "2", "--batch-size", "3",
            "--eval-batch-size", "2", "--set", "lr=3e-2", "--set", "atoms_per_task=4", "--set", "topk=8",
            "--set", "temperature=None", "--set", "dropout=0.0", "--set", "max_new_tokens=2",
            "--set", "accumulation_steps=2", "--device", "cpu", "--no-progress"]


def test_unequal_evaluation_shares_do_not_hang(model, tmp_path):
    from moram_avalanche.benchmarks import synthetic_text

    tests = [len(e.dataset) for e in synthetic_text(ORDER).test_stream]
    assert tests[1] % 3 != 0  # the shares differ (8 prompts: 2, 3, 3): a process pads
    one = moram_avalanche_cli(run_args(model, tmp_path / "one" / "moram"))
    assert one.returncode == 0, one.stderr[-3000:]
    three = moram_avalanche_cli([*run_args(model, tmp_path / "three" / "moram"), "--fsdp"], processes=3,
                                timeout=240)
    assert three.returncode == 0, (three.stdout + three.stderr)[-3000:]
    assert_same_runs(tmp_path / "one", tmp_path / "three", ("moram",), tests)


#: run under torchrun by the test below: the command line's model loader with --fsdp (bf16), then
#: MoRAM injected and grown; each process writes what it holds
SHARES_SCRIPT = """
import json, sys
import torch
from moram_avalanche.algorithms.data_parallel import is_sharded, rank
from moram_avalanche.algorithms.fsdp import weight_bytes
from moram_avalanche.cli import build_parser
from moram_avalanche.experiments.distributed import start_processes
from moram_avalanche.experiments.text.loaders import text_model_loader
from moram_avalanche.text.inject import add_task, inject_moram

model_folder, out = sys.argv[1], sys.argv[2]
args = build_parser().parse_args(["run", "--benchmark", "synthetic-text", "--strategy", "moram", "--model", model_folder,
                                  "--dtype", "bfloat16", "--fsdp", "--device", "cpu", "--log-dir", out])
start_processes(args.seed, args.device)
language_model = text_model_loader(args, args.device)()[0]
local, total = weight_bytes(language_model)
sharded = [name for name, p in language_model.named_parameters() if is_sharded(p)]
weights = len(list(language_model.parameters()))
inject_moram(language_model.model)
add_task(language_model.model)
trained = [(name, is_sharded(p), p.dtype == torch.bfloat16) for name, p in language_model.named_parameters()
           if p.requires_grad]
with open(f"{out}/rank{rank()}.json", "w") as file:
    json.dump({"local": local, "total": total, "sharded": len(sharded), "parameters": weights,
               "trained": trained}, file)
"""


def test_each_of_two_processes_holds_half_of_the_weights(model, tmp_path):
    from transformers import AutoModelForCausalLM

    script = tmp_path / "shares.py"
    script.write_text(SHARES_SCRIPT)
    done = python_command([str(script), str(model), str(tmp_path)], processes=2, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    whole = sum(p.numel() * 2 for p in AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16).parameters())
    print(f"bytes held: {[r['local'] for r in ranks]} of {whole}")
    for held in ranks:
        assert held["total"] == whole  # every weight is there, in bf16
        assert held["sharded"] == held["parameters"]  # every weight sharded, none left whole
        assert 0.45 * whole <= held["local"] <= 0.55 * whole
        # MoRAM's atoms, injected after sharding: plain tensors of the weights' dtype, trainable
        assert held["trained"] and all(not sharded and bf16 for _, sharded, bf16 in held["trained"])
    assert sum(r["local"] for r in ranks) == whole  # the shares add up to the model, no copies
    assert ranks[0]["trained"] == ranks[1]["trained"]


def cli_error(capsys, *args):
    from moram_avalanche.cli import main

    assert main(list(args)) == 2
    return capsys.readouterr().err


def test_refusals(model, tmp_path, capsys, monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    text = ("--benchmark", "synthetic-text", "--model", str(model), "--device", "cpu", "--fsdp")
    err = cli_error(capsys, "run", *text, "--strategy", "moram", "--log-dir", str(tmp_path / "a"))
    assert "--fsdp shards the frozen weights over the processes of a torchrun run" in err
    err = cli_error(capsys, "run", "--benchmark", "synthetic", "--strategy", "moram", "--device", "cpu",
                    "--fsdp", "--log-dir", str(tmp_path / "b"))
    assert "no strategy of --benchmark synthetic trains that way" in err
    # as under torchrun: the strategies are refused before any process group starts
    monkeypatch.setenv("RANK", "0"), monkeypatch.setenv("LOCAL_RANK", "0"), monkeypatch.setenv("WORLD_SIZE", "1")
    for name in ("finetune", "mtl", "avalanche.naive", "moram-replay"):
        err = cli_error(capsys, "run", *text, "--strategy", name, "--log-dir", str(tmp_path / "c"))
        assert f"strategy {name} does not train that way" in err and "hidelora, inc-lora, moram, moram-load-balance, o-lora, seq-lora" in err
    err = cli_error(capsys, "compare", *text, "--strategies", "moram,finetune", "--out", str(tmp_path / "d"))
    assert "strategy finetune does not train that way" in err
    assert not any((tmp_path / folder).exists() for folder in "abcd")  # refused before anything was written
    assert "torch.distributed" not in sys.modules or not torch.distributed.is_initialized()
