"""Atoms needed for 99% of the cumulative activation mass: hand computations on recorded masses."""

from pathlib import Path

import numpy as np
import pytest
import torch

from moram_avalanche.experiments.clip.analysis import atoms_for_mass, final_bank_mass, load_run, mass_counts
from moram_avalanche.experiments.clip.analysis.records import RunRecord
from tiny_runs import tiny_run


def test_atoms_for_mass_by_hand():
    assert atoms_for_mass([1, 5, 1, 3], 0.99) == 4  # 9.9 of 10 needs all four
    assert atoms_for_mass([1, 5, 1, 3], 0.8) == 2  # 5 + 3 = 8 reaches 8 exactly
    assert atoms_for_mass([1, 5, 1, 3], 0.81) == 3
    assert atoms_for_mass([0, 0], 0.99) == 0
    assert atoms_for_mass([2.0], 1.0) == 1
    with pytest.raises(ValueError, match="share must be in"):
        atoms_for_mass([1.0], 0)


def test_the_99_percent_counts_of_a_run_by_hand():
    record = load_run(tiny_run()[0])  # no pruning: atom i sits at position i in every task
    rows = {row.layer: row for row in mass_counts(record)}
    assert len(rows) == 24
    for name, row in rows.items():
        atoms = record.banks[name]["atom_task"].numel()
        total = np.zeros(atoms)
        for entry in record.history:  # the masses recorded while each task trained
            mass = entry["layers"][name]["mass"].double().numpy()
            total[: len(mass)] += mass
        ordered = np.sort(total)[::-1]
        needed = 1 + int(np.argmax(np.cumsum(ordered) >= 0.99 * total.sum()))
        assert (row.atoms, row.needed) == (atoms, needed), name
        assert row.total_mass == pytest.approx(total.sum())
    assert any(row.needed < row.atoms for row in rows.values())  # not every layer needs every atom
    # the same rule with another share gives other counts (the share is used)
    half = {row.layer: row.needed for row in mass_counts(record, share=0.5)}
    assert sum(half.values()) < sum(row.needed for row in rows.values())


def make_record(history, banks):
    return RunRecord(Path("hand"), "MoRAM", [f"d{t}" for t in range(len(history))], banks, history,
                     [{"L": int(e["layers"]["L"]["dropped"].numel())} for e in history])


def entry(mass, atom_task, dropped):
    return {"layers": {"L": {"mass": torch.tensor(mass, dtype=torch.float32),
                             "atom_task": torch.tensor(atom_task),
                             "dropped": torch.tensor(dropped, dtype=torch.long)}}}


def test_cumulative_masses_follow_atoms_through_pruning():
    # task 1 adds atoms a, b, c (masses 5, 1, 4); pruning drops b (position 1)
    # task 2 trains with [a, c, d, e, f] (masses 1, 2, 3, 0.5, 0.5); pruning drops e (position 3)
    history = [entry([5, 1, 4], [0, 0, 0], [1]),
               entry([1, 2, 3, 0.5, 0.5], [0, 0, 1, 1, 1], [3])]
    banks = {"L": {"atom_keys": torch.zeros(4, 2), "atom_values": torch.zeros(3, 4),
                   "num_frozen": torch.tensor(4), "atom_task": torch.tensor([0, 0, 1, 1])}}
    record = make_record(history, banks)
    mass = final_bank_mass(record, "L")
    np.testing.assert_allclose(mass.mass, [6, 6, 3, 0.5])  # a, c, d, f
    assert mass.atom_task.tolist() == [0, 0, 1, 1] and mass.dropped_mass == pytest.approx(1.5)
    assert mass_counts(record)[0].needed == 4  # 99% of 15.5 = 15.345 > 15
    assert mass_counts(record, share=0.9)[0].needed == 3  # 6 + 6 + 3 = 15 >= 13.95
    np.testing.assert_allclose(final_bank_mass(record, "L", until=0).mass, [5, 4])


def test_records_that_do_not_chain_are_refused():
    history = [entry([5, 1, 4], [0, 0, 0], []), entry([1, 2, 3], [0, 0, 1], [])]  # task 2 lost an atom
    banks = {"L": {"atom_keys": torch.zeros(3, 2), "atom_values": torch.zeros(3, 3),
                   "num_frozen": torch.tensor(3), "atom_task": torch.tensor([0, 0, 1])}}
    with pytest.raises(ValueError, match="do not chain at task 2"):
        final_bank_mass(make_record(history, banks), "L")
