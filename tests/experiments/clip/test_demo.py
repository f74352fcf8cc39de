"""The demo pipeline end to end at a reduced size."""

import json

import pytest

from moram_avalanche.experiments.clip.demo import DEMO_STRATEGIES, FULL_DEMO_STRATEGIES, DemoConfig, run_demo
from moram_avalanche.experiments.tables import paper_table_markdown, summary_table


def test_demo_pipeline_end_to_end(tmp_path, capsys):
    cache = tmp_path / "cache"
    results = run_demo(tmp_path / "out", cache_dir=cache, config=DemoConfig.quick(), progress=False,
                       strategies=FULL_DEMO_STRATEGIES)
    assert list(results) == ["zeroshot", "finetune", "wiseft", "lwf", "zscl", "moe-adapters", "inflora",
                             "moram"] == list(FULL_DEMO_STRATEGIES)
    assert DEMO_STRATEGIES == ("zeroshot", "finetune", "moram")  # `moram-avalanche demo` without --full
    for name, report in results.items():
        run = tmp_path / "out" / name
        assert len(report["matrix"]) == 5 and len(report["matrix"][0]) == 5
        assert json.loads((run / "results.json").read_text())["last"] == pytest.approx(report["last"])
        assert (run / "accuracy_matrix.csv").exists() and (run / "accuracy_matrix.png").exists()
        assert list((tmp_path / "out" / "tensorboard" / name).glob("events.out.tfevents.*"))
        memory = json.loads((run / "memory.json").read_text())
        assert memory == report["memory"] and memory["peak_mb"] > 0
    zero = results["zeroshot"]["matrix"]
    assert all(row == zero[0] for row in zero)  # ZeroShot never changes
    assert (tmp_path / "out" / "moram" / "atom_usage.png").exists()
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.strip() == summary_table(results) and "| moram |" in summary
    assert (tmp_path / "out" / "table.md").read_text().strip() == paper_table_markdown(results)
    assert "| strategy | Transfer | Average | Last |" in capsys.readouterr().out
    peaks = {name: report["memory"]["breakdown_mb"] for name, report in results.items()}
    # full fine-tuning holds gradients and optimizer state for every weight; the baselines add
    # a teacher (LwF), an anchor (WiSE-FT) or a teacher, an anchor and an average (ZSCL)
    model = peaks["finetune"]["model"]
    extra = {name: sum(v for k, v in b.items() if k not in ("model", "gradients", "optimizer"))
             for name, b in peaks.items()}
    assert extra["finetune"] == extra["zeroshot"] == 0
    assert extra["wiseft"] == pytest.approx(model, rel=0.02) and extra["lwf"] == pytest.approx(model, rel=0.02)
    assert extra["zscl"] == pytest.approx(3 * model, rel=0.02)
    assert "Peak memory: CPU proxy" in summary or "Peak memory: torch.cuda" in summary

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "out" / "tensorboard" / "moram"),
                              size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    assert {"AccMatrix/Last", "AccMatrix/Average", "AccMatrix/shapes"} <= set(events.Tags()["scalars"])
    assert len(events.Scalars("AccMatrix/Last")) == 5
    assert "AccMatrix/heatmap" in events.Tags()["images"]

    weights = sorted(cache.glob("*.pt"))
    assert len(weights) == 1
    stamp = weights[0].stat().st_mtime_ns
    run_demo(tmp_path / "again", cache_dir=cache, config=DemoConfig.quick(), strategies=("zeroshot",),
             progress=False)
    assert weights[0].stat().st_mtime_ns == stamp  # the pre-trained model came from the cache


def test_register_tiny_clip_is_kept_for_one_version():
    import open_clip

    from moram_avalanche.experiments.clip.demo import TINY_NAME, register_tiny_clip

    with pytest.warns(DeprecationWarning, match="register_tiny_clip is deprecated: load_clip registers"):
        assert register_tiny_clip("unused") == TINY_NAME
    assert TINY_NAME in open_clip.list_models()
