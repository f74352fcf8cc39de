"""A killed language-model run resumes to the matrix of an uninterrupted one (lean checkpoints)."""

import numpy as np
import pytest
import torch

from text_runs import assert_same_run_states, benchmark, build, killed_and_resumed


@pytest.mark.parametrize("name,family", [("moram", "t5"), ("inc-lora", "llama"), ("finetune", "t5"), ("hidelora", "llama"),
                                         ("moram-load-balance", "t5"), ("inf-lora", "t5"), ("lfpt5", "t5"),
                                         ("lori-s", "llama")])
def test_killed_run_resumes_to_the_same_matrix(tmp_path, name, family):
    from moram_avalanche.experiments.checkpoint import read_run_state
    from moram_avalanche.experiments.runner import CHECKPOINT_NAME, run_stream

    def fresh():
        torch.manual_seed(0)
        if name == "lfpt5":  # a short prompt, few short pseudo-sample draws
            return build(name, family, prompt_length=4, pseudo_draws=4, pseudo_max_tokens=4)
        return build(name, family, dropout=0.1) if name.startswith("moram") else build(name, family)

    strategy, whole = fresh()
    run_stream(strategy, benchmark(), tmp_path / "whole", progress=False)

    first, _ = fresh()
    assert run_stream(first, benchmark(), tmp_path / "killed", max_experiences=1, progress=False) == 1
    state = read_run_state(tmp_path / "killed" / CHECKPOINT_NAME)
    assert state["experiences_done"] == 1
    resumed, matrix = fresh()  # a new process: fresh model, strategy and metric
    assert run_stream(resumed, benchmark(), tmp_path / "killed", progress=False) == 3
    np.testing.assert_array_equal(matrix.result(), whole.result())
    after, before = resumed.checkpoint_model_state(), strategy.checkpoint_model_state()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in after)
    assert_same_run_states(tmp_path / "whole", tmp_path / "killed")  # plugins' states and generators too


def test_a_killed_sapt_run_resumes_to_the_same_matrix_and_state(tmp_path):
    """SAPT's router (query projection, task keys, reflection targets) and blocks are in the lean
    checkpoint: a resumed run ends bit-for-bit where an uninterrupted one does."""
    from fake_superni import pseudo_tree
    from tiny_stream import TASKS

    pseudo = str(pseudo_tree(tmp_path / "pseudo", tasks=TASKS))

    def fresh():
        torch.manual_seed(0)
        return build("sapt", "t5", pseudo_data_root=pseudo)

    strategy, _, resumed = killed_and_resumed(fresh, tmp_path, kill_after=2)
    after, before = resumed.checkpoint_model_state(), strategy.checkpoint_model_state()
    assert after.keys() == before.keys()
    assert any(k.endswith("sapt_router.reflection") for k in after) and any(".keys.2" in k for k in after)
    assert all(torch.equal(after[k], before[k]) for k in after)
