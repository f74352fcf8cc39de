"""The CodeAlpaca table's columns read from a finished run's files, written here by hand: HumanEval pass@k,
MMLU's eight subject columns (one subject, or lm-eval's stem group weighted by its questions) and the
parameter columns, in millions and in % of the adapted model (every expectation computed by hand)."""

import json

import pytest

from moram_avalanche.benchmarks.text.mmlu import STEM_SUBJECTS

#: the tiny LLaMA of a rehearsal (hidden 32, 4 heads of 8, 2 key-value heads, MLP 37, 2 blocks, LlamaConfig's
#: default vocabulary of 32000, untied): d_in + d_out over a block's seven projections, and its parameters
TINY_WIDTH = 2 * ((32 + 32) + (32 + 16) + (32 + 16) + (32 + 32) + (32 + 37) + (32 + 37) + (37 + 32))
TINY_PARAMETERS = (2 * 32000 * 32 + 32
                   + 2 * (32 * 32 + 32 * 16 + 32 * 16 + 32 * 32 + 32 * 37 + 37 * 32 + 37 * 32 + 2 * 32))


def write_run(folder, subjects):
    """A finished codealpaca run: its results.json (greedy pass@1 62.5), humaneval.json and mmlu.json."""
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(
        {"domains": ["codealpaca"], "matrix": [[62.5]], "per_domain": {"codealpaca": 62.5}, "last": 62.5}))
    (folder / "humaneval.json").write_text(json.dumps({"pass@1": 50.0, "pass@5": 70.0, "pass@10": 80.0}))
    total = sum(entry["questions"] for entry in subjects.values())
    overall = sum(entry["acc"] * entry["questions"] for entry in subjects.values()) / total
    (folder / "mmlu.json").write_text(json.dumps({"subjects": subjects, "mmlu": overall, "questions": total}))
    return overall


def moram_row(tmp_path, subjects):
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.paper.runs import method_runs
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    spec = TEXT_TABLES["codealpaca"]
    settings = TextReproduceSettings(out=str(tmp_path), rehearse=True)
    (run,) = method_runs(spec, "MoRAM", settings)
    overall = write_run(run.folder(settings.root / "runs") / run.strategy, subjects)
    row = next(r for r in table_result(spec, settings).rows if r.method == "MoRAM")
    assert row.status == "run"
    return row, overall


def test_the_subject_columns_and_the_parameter_columns_of_a_finished_run(tmp_path):
    # every stem subject 10 questions at 40 %, but college_physics: 30 at 80 %; four more subjects
    subjects = {subject: {"acc": 40.0, "questions": 10} for subject in STEM_SUBJECTS}
    subjects["college_physics"] = {"acc": 80.0, "questions": 30}
    subjects.update(formal_logic={"acc": 25.0, "questions": 4}, philosophy={"acc": 60.0, "questions": 5},
                    high_school_microeconomics={"acc": 70.0, "questions": 10},
                    public_relations={"acc": 55.0, "questions": 20}, world_religions={"acc": 90.0, "questions": 10})
    row, overall = moram_row(tmp_path, subjects)
    cells = row.cells
    assert (cells["HumanEval pass@1"].ours, cells["HumanEval pass@5"].ours, cells["HumanEval pass@10"].ours) == (
        50.0, 70.0, 80.0)
    assert cells["HumanEval pass@1 (greedy)"].ours == 62.5 and cells["MMLU"].ours == pytest.approx(overall)
    assert (cells["Logic"].ours, cells["Phil."].ours, cells["Reli."].ours, cells["Econ."].ours,
            cells["Pub. Rel."].ours, cells["Phys."].ours, cells["ML"].ours) == (25.0, 60.0, 90.0, 70.0, 55.0, 80.0, 40.0)
    # STEM is the mean over the group's questions (lm-eval's weight_by_size), not over its 19 subjects (42.1)
    assert cells["STEM"].ours == pytest.approx((18 * 10 * 40.0 + 30 * 80.0) / (18 * 10 + 30))
    # the paper's numbers beside ours (tab:llm_ood_main and tab:supp_humaneval's MoRAM rows)
    assert (cells["STEM"].paper, cells["Phys."].paper, cells["HumanEval pass@10"].paper) == (55.53, 46.08, 70.1)
    # MoRAM: 16 atoms per linear, top-k 4, on the rehearsal's tiny LLaMA; % of every parameter, the adapter's too
    added, activated = 16 * TINY_WIDTH, 4 * TINY_WIDTH
    assert cells["Params added (M)"].ours == pytest.approx(added / 1e6)
    assert cells["Params activated (M)"].ours == pytest.approx(activated / 1e6)
    assert cells["Params added (%)"].ours == pytest.approx(100 * added / (TINY_PARAMETERS + added))
    assert cells["Params activated (%)"].ours == pytest.approx(100 * activated / (TINY_PARAMETERS + added))
    assert (cells["Params added (%)"].paper, cells["Params activated (%)"].paper) == (0.52, 0.32)


def test_a_column_whose_subjects_were_not_all_scored_stays_empty(tmp_path):
    subjects = {subject: {"acc": 50.0, "questions": 10} for subject in STEM_SUBJECTS if subject != "college_physics"}
    subjects["philosophy"] = {"acc": 75.0, "questions": 8}
    row, _ = moram_row(tmp_path, subjects)
    assert row.cells["Phil."].ours == 75.0 and row.cells["ML"].ours == 50.0
    for column in ("STEM", "Phys.", "Logic", "Econ."):  # a part of the stem group is not the group
        assert row.cells[column].ours is None and row.cells[column].seeds == 0, column


def test_the_subject_accuracy_is_weighted_by_questions():
    from moram_avalanche.experiments.text.codealpaca_stream import subject_accuracy, task_subjects

    scored = {"a": {"acc": 100.0, "questions": 1}, "b": {"acc": 0.0, "questions": 3}, "c": {"acc": 50.0, "questions": None}}
    assert subject_accuracy(scored, ("a", "b")) == 25.0 and subject_accuracy(scored, ("a",)) == 100.0
    assert subject_accuracy(scored, ("a", "d")) is None and subject_accuracy(scored, ("c",)) is None
    assert task_subjects("mmlu_college_physics") == ("college_physics",) and task_subjects("mmlu_stem") == STEM_SUBJECTS
