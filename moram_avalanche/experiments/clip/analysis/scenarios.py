"""The paper's activation scenarios: data of task ``t`` seen by the model after task ``t'``.

Figs. 3 and 6-8 of the paper show the atoms of the K projection of layer 8 (of 12) of the image
encoder on images of task 1 after learning task 1, 2 and 10, and on images of task 9 after
learning task 1 and task 9; Fig. 5 averages each atom's activation over the same scenarios.
:func:`default_scenarios` gives these for a run of any length, :func:`default_block` the layer.
"""

from __future__ import annotations

from typing import List, NamedTuple, Sequence

#: the paper's layer for the maps: layer 8 of ViT-B/16's 12 (1-based)
PAPER_BLOCK, PAPER_DEPTH = 8, 12


class Scenario(NamedTuple):
    """Data of task ``data`` seen by the model after task ``after`` (both 0-based)."""

    data: int
    after: int

    @property
    def label(self) -> str:
        return f"task {self.data + 1} after task {self.after + 1}"

    @property
    def slug(self) -> str:
        return f"task{self.data + 1}_after{self.after + 1}"


def default_scenarios(tasks: int) -> List[Scenario]:
    """Task 1 after tasks 1, 2 and the last; a later task after task 1 and after itself.

    The later task is the last but one (the paper's task 9 of 10), or the last in runs of two
    tasks. Duplicates (short runs) are left out.
    """
    if tasks < 1:
        raise ValueError("the run has no trained task yet")
    later = tasks - 2 if tasks >= 3 else tasks - 1
    wanted = [(0, 0), (0, min(1, tasks - 1)), (0, tasks - 1), (later, 0), (later, later)]
    return list(dict.fromkeys(Scenario(*pair) for pair in wanted))


def parse_scenarios(text: str, tasks: int) -> List[Scenario]:
    """``"1@1,1@2,9@9"`` (1-based ``DATA@AFTER`` pairs) as scenarios, checked against the run."""
    scenarios = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        data, sep, after = item.partition("@")
        if not (sep and data.isdigit() and after.isdigit()):
            raise ValueError(f"scenario {item!r}: expected DATA@AFTER with 1-based task numbers, "
                             "e.g. 1@2 (images of task 1, model after task 2)")
        scenario = Scenario(int(data) - 1, int(after) - 1)
        if not (0 <= scenario.data < tasks and 0 <= scenario.after < tasks):
            raise ValueError(f"scenario {item!r}: tasks are numbered 1..{tasks} in this run")
        scenarios.append(scenario)
    if not scenarios:
        raise ValueError("no scenario given: expected e.g. 1@1,1@2")
    return list(dict.fromkeys(scenarios))


def default_block(depth: int) -> int:
    """The block (0-based) of the maps: the paper's layer 8 of 12, else the middle one."""
    if depth < 1:
        raise ValueError("the encoder has no MoRAM layers")
    return PAPER_BLOCK - 1 if depth == PAPER_DEPTH else (depth + 1) // 2 - 1


def scenario_labels(scenarios: Sequence[Scenario]) -> str:
    return ", ".join(s.label for s in scenarios)


__all__ = ["PAPER_BLOCK", "PAPER_DEPTH", "Scenario", "default_block", "default_scenarios",
           "parse_scenarios", "scenario_labels"]
