"""The one reproduce pipeline of experiments/paper, on a toy family that supplies only what a family
must (a protocol, a table, settings): runs planned once and shared, a run's options in their order,
its record and folder, the needs check, the plan's frame, and a table read back from its runs --
every value by hand."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import pytest

from moram_avalanche.experiments.family import Reproduction
from moram_avalanche.experiments.paper.needs import check_needs
from moram_avalanche.experiments.paper.plan_text import plan_text
from moram_avalanche.experiments.paper.protocol import PaperProtocol
from moram_avalanche.experiments.paper.results import mean_over_seeds, paper_cell, read_report, table_result
from moram_avalanche.experiments.paper.runs import Run, method_runs, plan, run_options, run_settings
from moram_avalanche.experiments.paper.settings import ReproductionSettings
from moram_avalanche.experiments.paper.setup import run_setup
from moram_avalanche.experiments.paper.spec import Method, PaperTable


@dataclass(frozen=True)
class ToyProtocol(PaperProtocol):
    key: str
    builder: str = "toy"

    def run_name(self, strategy, options):
        return strategy + "".join(f"+{k}={v}" for k, v in options)

    def paper_options(self, run, settings):
        return {"lr": 0.1, "iterations": 100}

    def stream_record(self, run, settings):
        return {"seed": run.seed}

    def make_benchmark(self, run, settings):
        return lambda train_tf, eval_tf: ("benchmark", run.seed)

    def plan_lines(self, run, used_by, settings):
        return [f"  {run.name} (seed {run.seed}): {'; '.join(used_by)}"]


@dataclass(frozen=True, kw_only=True)
class ToyTable(PaperTable):
    protocol: ToyProtocol

    def table_columns(self):
        return ("Last",)

    def run_protocols(self, settings, block=None):
        return (self.protocol,)

    def cells(self, block, paper_row, runs, reports, settings):
        cell = paper_cell(paper_row, "Last")
        if reports is not None:
            mean_over_seeds(cell, [reports[run]["last"] for run in runs])
        return {"Last": cell}

    def plan_lines(self, settings):
        return [f"  {m.label}: {m.strategy or m.reason}" for m in self.methods]


@dataclass
class ToySettings(ReproductionSettings):
    data_root: Optional[str] = None
    out: str = "out"
    seeds: Optional[Tuple[int, ...]] = None
    device: str = "cpu"
    iterations: Optional[int] = None
    rehearse: bool = False
    progress: bool = False
    missing: Tuple[str, ...] = ()

    rehearsal = "one step per task"
    data_wanted = "the toy data"

    def plan_header(self, specs, planned):
        return [f"  data: {len(planned)} runs"]

    def problems(self, specs, planned):
        return list(self.missing)

    def needs_hint(self, specs, root):
        return "\nlook under the toy root"

    def model_record(self, run):
        return {"model": "toy"}

    def budget_options(self, run, options):
        return {"iterations": self.budget, "warmup": 0}

    def load_model(self, run):
        return "a model", None, None, None


STREAM = ToyProtocol("toy-stream")
SHARED = Method("Ours", "moram")
A = ToyTable(name="a", label="tab:a", title="Table A", paper=None, protocol=STREAM, seeds=(1, 2),
             methods=(SHARED, Method("Theirs", None, reason="no code"), Method("Ours, no prune", "moram",
                                                                              (("prune", 0),))),
             rows=(("Last", "Ours"), ("Average", "Ours"), ("Last", "Theirs"), ("Last", "Ours, no prune")))
B = ToyTable(name="b", label="tab:b", title="Table B", paper=None, protocol=STREAM, methods=(SHARED,),
             rows=(("Last", "Ours"),))


def test_a_run_shared_by_tables_is_planned_once_with_every_row_it_serves():
    settings = ToySettings(seeds=(1,))
    planned = plan([A, B], settings)
    assert [entry.run for entry in planned] == [Run(STREAM, "moram", (), 1), Run(STREAM, "moram", (("prune", 0),), 1)]
    assert planned[0].used_by == ["a: Ours", "b: Ours"]  # A's two blocks of "Ours" are one row of the plan
    assert planned[1].used_by == ["a: Ours, no prune"]
    assert method_runs(A, "Theirs", settings) == []  # not run: no runs
    # the table's own seeds without --seeds
    assert [run.seed for run in method_runs(A, "Ours", ToySettings())] == [1, 2]
    assert planned[1].run.folder("/runs") == Path("/runs/toy-stream/seed1/moram+prune=0")


def test_a_runs_options_are_its_papers_then_the_budgets_then_its_rows():
    run = Run(STREAM, "moram", (("iterations", 0), ("topk", 4)), 7)
    assert run_options(run, ToySettings()) == {"lr": 0.1, "iterations": 0, "topk": 4}
    assert run_options(run, ToySettings(iterations=3)) == {"lr": 0.1, "iterations": 0, "topk": 4, "warmup": 0}
    assert run_options(Run(STREAM, "moram", (), 7), ToySettings(rehearse=True))["iterations"] == 2  # a rehearsal's
    record = run_settings(run, ToySettings(data_root="/data/../data"))
    assert record == {"reproduce": 1, "protocol": "toy-stream", "benchmark": "toy", "stream": {"seed": 7},
                      "data_root": "/data", "model": "toy", "strategy": "moram", "seed": 7,
                      "options": {"iterations": "0", "lr": "0.1", "topk": "4"}}
    json.dumps(record)


def test_a_runs_setup_is_its_record_its_stream_and_fresh_options():
    run = Run(STREAM, "moram", (), 3)
    setup = run_setup(run, ToySettings())
    assert setup.settings == run_settings(run, ToySettings()) and setup.seed == 3 and setup.device == "cpu"
    assert setup.make_model() == ("a model", None, None, None)
    assert setup.make_benchmark(None, None) == ("benchmark", 3)
    first = setup.options("moram", None)
    first["lr"] = 5.0
    assert setup.options("moram", None) == {"lr": 0.1, "iterations": 100}  # a fresh dict for every strategy


def test_the_needs_check_names_everything_missing_at_once(tmp_path):
    with pytest.raises(ValueError, match=r"reproduce needs the toy data: give --data-root DIR \(or --paper"):
        check_needs([A], ToySettings(), [])
    with pytest.raises(ValueError, match="is not a folder"):
        check_needs([A], ToySettings(data_root=str(tmp_path / "nothing")), [])
    check_needs([A], ToySettings(data_root=str(tmp_path)), [])  # nothing missing: no error
    with pytest.raises(ValueError) as error:
        check_needs([A, B], ToySettings(data_root=str(tmp_path), missing=("x gone", "y gone", "x gone")), [])
    assert str(error.value) == ("cannot reproduce a, b: 2 thing(s) missing; nothing was run.\n  x gone\n  y gone"
                                "\nlook under the toy root")


def test_the_plan_frames_the_familys_lines():
    text = plan_text([A, B], ToySettings(rehearse=True))
    assert text.splitlines()[:3] == [
        "moram-avalanche reproduce: a, b -- REHEARSAL (one step per task; the numbers mean nothing)",
        f"  device: cpu; output: {Path('out') / 'rehearsal'}", "  data: 5 runs"]
    assert "\na (tab:a): Table A; seeds 1, 2\n  Ours: moram\n  Theirs: no code\n" in text
    assert "\nb (tab:b): Table B; seeds 42\n" in text  # the release's seed by default
    assert text.endswith("runs (5; each resumes from its folder):\n"
                         "  moram (seed 1): a: Ours\n  moram (seed 2): a: Ours\n"
                         "  moram+prune=0 (seed 1): a: Ours, no prune\n  moram+prune=0 (seed 2): a: Ours, no prune\n"
                         "  moram (seed 42): b: Ours")


def write_results(folder: Path, strategy: str, last: float, rows: int = 2):
    """``results.json`` of a run on two domains whose accuracy matrix has ``rows`` rows, its Last ``last``."""
    (folder / strategy).mkdir(parents=True)
    report = {"domains": ["d1", "d2"], "matrix": [[last] * 2] * rows, "per_domain": {}, "last": last}
    (folder / strategy / "results.json").write_text(json.dumps(report))


def test_a_table_reads_its_finished_runs_back_beside_the_rows_it_cannot_run(tmp_path):
    settings = ToySettings(out=str(tmp_path))
    ours = method_runs(A, "Ours", settings)
    write_results(ours[0].folder(settings.root / "runs"), "moram", 50.0)
    write_results(ours[1].folder(settings.root / "runs"), "moram", 60.0)
    unpruned = method_runs(A, "Ours, no prune", settings)
    write_results(unpruned[0].folder(settings.root / "runs"), "moram", 10.0)
    write_results(unpruned[1].folder(settings.root / "runs"), "moram", 20.0, rows=1)  # killed after a task
    assert read_report(unpruned[1].folder(settings.root / "runs"), "moram") is None
    result = table_result(A, settings)
    rows = {(row.block, row.method): row for row in result.rows}
    assert list(rows) == list(A.rows) and list(result.seeds) == [1, 2]
    cell = rows[("Last", "Ours")].cells["Last"]
    assert (cell.ours, cell.ours_std, cell.seeds) == (55.0, pytest.approx(np.sqrt(50.0)), 2)
    assert cell.paper is None and cell.difference is None
    assert rows[("Last", "Theirs")].status == "not run" and rows[("Last", "Theirs")].reason == "no code"
    incomplete = rows[("Last", "Ours, no prune")]
    assert incomplete.status == "incomplete" and incomplete.reason == "1 of 2 runs not finished"
    assert incomplete.cells["Last"].ours is None
    assert rows[("Last", "Ours")].runs == [str(run.folder(settings.root / "runs")) for run in ours]


def test_a_familys_record_resolves_its_tables():
    record = Reproduction(specs={"a": A, "b": B}, settings=lambda args: ToySettings(), index=("index.md", "Toys"),
                          every="all")
    assert record.tables == ("a", "b", "all")
    assert record.resolve("all") == (A, B) and record.resolve("b") == (B,)
    with pytest.raises(ValueError, match="unknown paper table 'c'; the paper's: a, b"):
        record.resolve("c")
    assert Reproduction(specs={"a": A}, settings=None, index=("i.md", "t")).tables == ("a",)
