"""HumanEval sampling split across two processes (gloo, CPU): a scripted model whose pass@k is known
by hand, and the worker each spawned process runs (tests/strategies/text/test_humaneval_sampling_shards.py).
Spawned processes import their target by module name, so it lives here, not in a test file."""

import json
import os
from types import SimpleNamespace

from torch import nn

from moram_avalanche.benchmarks.text.humaneval import problem_answer

RIGHT, WRONG = "    return a + b\n", "    return a - b\n"
#: problem i passes on its first ``PASSING[i]`` of 3 samples (hand-chosen, so pass@k is known)
PASSING = (3, 1, 0, 2, 1)
N = 3


def problem(i):
    return {"task_id": f"Toy/{i}", "prompt": f'def add(a, b):\n    """Sum number {i}."""\n',
            "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"}


class ScriptedModel(nn.Module):
    """``sample`` returns problem i's first PASSING[i] completions right, the rest wrong, and
    records which prompts it was asked for (a padding batch included)."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def sample(self, prompts, n, max_new_tokens, **options):
        self.asked.append(list(prompts))
        out = []
        for prompt in prompts:
            i = int(prompt.split("number ")[1].split(".")[0])
            out.append([RIGHT if j < PASSING[i] else WRONG for j in range(n)])
        return out


def strategy_over(count):
    pairs = [(problem(i)["prompt"], problem_answer(problem(i)), 0) for i in range(count)]
    experience = SimpleNamespace(metric="humaneval", origin_stream=SimpleNamespace(name="test"), dataset=pairs)
    return SimpleNamespace(experience=experience, model=ScriptedModel(), clock=SimpleNamespace(train_exp_counter=1))


def sampling_worker(rank, world, port, out, count, sharded):
    import torch.distributed as dist

    import moram_avalanche.strategies.text.plugins.humaneval_sampling as sampling

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        if sharded:  # every sample call a collective: the shorter share pads
            sampling.holds_sharded_weights = lambda model: True
        plugin = sampling.HumanEvalSampling(n=N, ks=(1, 3), batch=1, workers=1)
        strategy = strategy_over(count)
        plugin.after_eval_exp(strategy)
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"report": plugin.report, "asked": strategy.model.asked}, f)
    finally:
        dist.destroy_process_group()
