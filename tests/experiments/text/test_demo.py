"""``moram-avalanche demo --text`` end to end at its quick size: folders, the OP / BWT table, the cache."""

import csv
import json

import pytest

from moram_avalanche.cli import main
from moram_avalanche.experiments.text.demo import (
    MANIFEST,
    TEXT_DEMO_STRATEGIES,
    TextDemoConfig,
    damage,
    pretrained_tiny_t5,
    pretraining_settings,
)

TASKS = ["colour", "mood", "topic", "size", "animal"]


def read_matrix(path):
    """The accuracy matrix of ``accuracy_matrix.csv`` (rows: after each task, columns: tasks)."""
    with open(path) as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["trained_on", *TASKS]
    return [[float(cell) for cell in row[1:]] for row in rows[1:]]


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """One quick demo through the command line: (output folder, cache folder, stdout)."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("text-demo")
    out, cache = root / "out", root / "cache"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["demo", "--text", "--quick", "--out", str(out), "--cache-dir", str(cache), "--no-progress",
                     "--device", "cpu"])
    assert code == 0
    return out, cache, printed.getvalue()


def test_quick_text_demo_writes_every_strategy_and_the_op_bwt_table(quick_demo):
    from moram_avalanche.benchmarks.text.metrics import op_bwt

    out, _, printed = quick_demo
    assert TEXT_DEMO_STRATEGIES == ("seq-lora", "moram")
    with open(out / "table.csv") as f:
        table = {row["strategy"]: row for row in csv.DictReader(f)}
    assert list(table) == list(TEXT_DEMO_STRATEGIES)
    for name in TEXT_DEMO_STRATEGIES:
        run = out / name
        results = json.loads((run / "results.json").read_text())
        assert results["domains"] == TASKS and len(results["matrix"]) == 5
        assert (run / "accuracy_matrix.png").exists() and (run / "time.json").exists()
        assert list((out / "tensorboard" / name).glob("events.out.tfevents.*"))
        record = json.loads((run / "run.json").read_text())
        assert record["run"]["benchmark"] == "synthetic-text" and "text_demo" in record["run"]
        # OP and BWT recomputed from the written matrix, by hand and by the paper's definitions
        matrix = read_matrix(run / "accuracy_matrix.csv")
        last = matrix[-1]
        op = sum(last) / 5
        bwt = sum(matrix[j][j] - last[j] for j in range(4)) / 4
        assert float(table[name]["op"]) == pytest.approx(op, abs=1e-3)
        assert float(table[name]["bwt"]) == pytest.approx(bwt, abs=1e-3)
        # the release's figure (collect_results.py): min(A[N, j] - A[j, j], 0) summed over the N tasks, / N
        release = sum(min(last[j] - matrix[j][j], 0.0) for j in range(5)) / 5
        assert op_bwt(matrix) == pytest.approx({"op": op, "bwt": bwt, "release_bwt": release})
        assert float(table[name]["release_bwt"]) == pytest.approx(release, abs=1e-3)
        assert [float(table[name][task]) for task in TASKS] == pytest.approx(last, abs=1e-3)
        assert float(table[name]["train_seconds"]) > 0
    markdown = (out / "table.md").read_text()
    assert markdown.startswith("| strategy | OP | BWT | BWT (release) | colour | mood | topic | size | animal | Train s |")
    assert "| seq-lora |" in markdown and "| moram |" in markdown and markdown.strip() in printed
    summary = (out / "summary.md").read_text()
    assert "| strategy | OP | BWT |" in summary and "Chance (a random option): colour 33.3, mood 50.0" in summary
    assert "positive = forgetting" in summary and "runs/demo" not in printed


def test_the_cache_is_reused_and_a_damaged_one_rebuilt(quick_demo, capsys):
    _, cache, _ = quick_demo
    config = TextDemoConfig.quick()
    folders = sorted(p for p in cache.iterdir() if p.is_dir())
    assert len(folders) == 1 and (folders[0] / "config.json").exists() and (folders[0] / "tokenizer.json").exists()
    weights = folders[0] / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert pretrained_tiny_t5(cache, config, progress=False) == folders[0]
    assert weights.stat().st_mtime_ns == stamp  # not pre-trained again
    assert "damaged" not in capsys.readouterr().err

    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped byte
    weights.write_bytes(bytes(data))
    assert pretrained_tiny_t5(cache, config, progress=False) == folders[0]
    err = capsys.readouterr().err
    assert "damaged (model.safetensors does not match its checksum): pre-training it again" in err
    assert damage(folders[0], pretraining_settings(config)) is None and weights.read_bytes() != bytes(data)
    (folders[0] / MANIFEST).unlink()  # a folder left without its manifest is rebuilt too
    pretrained_tiny_t5(cache, config, progress=False)
    assert f"{MANIFEST} is missing" in capsys.readouterr().err
    assert sorted(p.name for p in cache.iterdir()) == [folders[0].name]  # no temporary left


def test_a_finished_text_demo_is_not_run_again(quick_demo):
    import contextlib
    import io

    out, cache, _ = quick_demo
    stamps = {name: (out / name / "results.json").stat().st_mtime_ns for name in TEXT_DEMO_STRATEGIES}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["demo", "--text", "--quick", "--out", str(out), "--cache-dir", str(cache), "--no-progress",
                     "--device", "cpu"]) == 0
    assert {name: (out / name / "results.json").stat().st_mtime_ns for name in TEXT_DEMO_STRATEGIES} == stamps
    assert "| moram |" in printed.getvalue()


def test_a_folder_of_other_runs_is_refused_not_started_over(quick_demo, tmp_path, capsys):
    import shutil

    out, cache, _ = quick_demo
    other = tmp_path / "other"
    shutil.copytree(out / "moram", other / "moram")
    record = json.loads((other / "moram" / "run.json").read_text())
    del record["run"]["text_demo"]  # as if another comparison (the CLIP demo's) had made it
    (other / "moram" / "run.json").write_text(json.dumps(record))
    assert main(["demo", "--text", "--quick", "--out", str(other), "--cache-dir", str(cache), "--no-progress",
                 "--device", "cpu"]) == 2
    assert "holds runs that are not the text demo's (moram)" in capsys.readouterr().err
    assert sorted(p.name for p in other.iterdir()) == ["moram"] and (other / "moram" / "results.json").exists()


def test_the_text_table_marks_the_best_of_each_column():
    from moram_avalanche.experiments.tables import text_table_csv, text_table_markdown

    def report(matrix):
        return {"domains": ["a", "b"], "matrix": matrix, "per_domain": {}, "time": {"train_seconds": 2.0}}

    results = {"x": report([[90.0, 10.0], [50.0, 80.0]]), "y": report([[70.0, 20.0], [65.0, 60.0]])}
    lines = text_table_markdown(results).splitlines()
    assert lines[0] == "| strategy | OP | BWT | BWT (release) | a | b | Train s |"
    # x: OP 65, BWT 40, the release's (50 - 90 + 0) / 2 = -20; y: OP 62.5, BWT 5, the release's -2.5
    # (the lower BWT is the better one; the release's is negative, so the higher)
    assert lines[2] == "| x | **65.0** | 40.0 | -20.0 | 50.0 | **80.0** | 2 |"
    assert lines[3] == "| y | 62.5 | **5.0** | **-2.5** | **65.0** | 60.0 | 2 |"
    assert text_table_csv(results).splitlines()[1] == "x,65.0000,40.0000,-20.0000,50.0000,80.0000,2.0000"


def test_the_text_recipes_are_the_papers_llm_setting_at_the_demos_rate():
    from moram_avalanche.experiments.text.recipes import TEXT_DEMO_OPTIONS, text_demo_recipe
    from moram_avalanche.strategies.registry import text_strategies
    from moram_avalanche.text import PAPER_LLM_OPTIONS

    config = TextDemoConfig()
    assert set(TEXT_DEMO_OPTIONS) == set(TEXT_DEMO_STRATEGIES) and set(TEXT_DEMO_OPTIONS) <= set(text_strategies())
    assert text_demo_recipe("moram", config) == {**PAPER_LLM_OPTIONS, "lr": config.lr}
    assert text_demo_recipe("seq-lora", config) == {"lr": config.lr}


def test_text_with_full_is_refused(tmp_path, capsys):
    assert main(["demo", "--text", "--full", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--full" in err and "leave --full out" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
