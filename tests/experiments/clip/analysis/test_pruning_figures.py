"""The pruning figures equal what ``prune`` removed, counted independently during the run."""

import pytest

from moram_avalanche.experiments.clip.analysis import atoms_for_mass, load_run, pruning_rows
from moram_avalanche.experiments.clip.analysis.pruning import overall_saved_share, per_task
from tiny_runs import ATOMS, tiny_run


def test_atoms_kept_and_storage_saved_per_task_and_layer():
    log_dir, _, after = tiny_run(prune_mass=0.9)
    record = load_run(log_dir)
    rows = {(row.task, row.layer): row for row in pruning_rows(record)}
    assert len(rows) == 3 * 24
    added = saved = 0
    for task, layers in enumerate(after.layers):  # the banks right after each task settled
        for name, seen in layers.items():
            kept = int((seen["atom_task"] == task).sum())
            row = rows[task, name]
            assert (row.added, row.kept) == (ATOMS, kept), (task, name)
            assert row.saved == (ATOMS - kept) * (seen["in"] + seen["out"])
            added += ATOMS * (seen["in"] + seen["out"])
            saved += row.saved
    assert 0 < saved < added  # pruning dropped some atoms, not all
    assert overall_saved_share(list(rows.values())) == pytest.approx(saved / added)
    totals = per_task(list(rows.values()))
    assert [t["atoms_added"] for t in totals] == [24 * ATOMS] * 3
    assert sum(t["parameters_saved"] for t in totals) == saved
    assert record.prune_mass == 0.9


def test_a_run_without_pruning_shows_what_pruning_would_keep():
    record = load_run(tiny_run()[0])
    with pytest.raises(ValueError, match="was not pruned"):
        pruning_rows(record)
    for row in pruning_rows(record, hypothetical=True):
        stats = record.history[row.task]["layers"][row.layer]
        new = stats["mass"][stats["atom_task"] == row.task].double().numpy()
        assert row.kept == atoms_for_mass(new, 0.99) and row.added == ATOMS
