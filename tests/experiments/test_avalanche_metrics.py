"""Every strategy of the package (and Avalanche's, on CLIP) with Avalanche's metrics, loggers and replay.

Avalanche's own metrics are an independent computation of what the accuracy matrix holds:
``Top1_Acc_Exp`` is its last row, ``ExperienceForgetting`` and ``ExperienceBWT`` the drop of
the first domain between the two rows.
"""

import os
import warnings

import pytest
import torch
from avalanche.evaluation.metrics import (
    accuracy_metrics,
    bwt_metrics,
    forgetting_metrics,
    gpu_usage_metrics,
    loss_metrics,
    ram_usage_metrics,
    timing_metrics,
)
from avalanche.logging import CSVLogger, InteractiveLogger, TensorboardLogger, TextLogger
from avalanche.training.plugins import EvaluationPlugin, ReplayPlugin
from torch import nn

from moram_avalanche.experiments.loggers import WandBLogger
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies.registry import get_strategy

warnings.filterwarnings("ignore", message="No loggers specified")
warnings.filterwarnings("ignore", category=DeprecationWarning)

pytestmark = pytest.mark.usefixtures("one_thread")

REFERENCES = {"reference_images": torch.utils.data.TensorDataset(
    torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))),
    "reference_sentences": ["a cat.", "a red dog.", "two birds."]}
#: each distinct strategy class of the package (the routing ablations share MoRAM's loop), and
#: one of Avalanche's, at a tiny budget
OPTIONS = {
    "zeroshot": {}, "finetune": {"lr": 1e-3}, "wiseft": {"warmup": 1}, "lwf": {"warmup": 1},
    "lwf-vr": {"warmup": 1, "sentences": 20}, "zscl": {"warmup": 1, "average_every": 1, **REFERENCES},
    "moe-adapters": {"experts": 4, "bottleneck": 8, "warmup": 1, "ae_iterations": 2, "ae_reference_iterations": 2,
                     "ae_hidden": 4, "ae_batch_size": 8, "feature_extractor": nn.AvgPool2d(8),
                     "reference_images": REFERENCES["reference_images"]},
    "inflora": {"rank": 4}, "seq-lora": {"rank": 4}, "moe-lora": {"rank": 4}, "moram": {"atoms_per_task": 4, "topk": 2},
    "moram-load-balance": {"atoms_per_task": 4, "topk": 2}, "avalanche.naive": {"lr": 1e-3},
}


def metrics():
    return [accuracy_metrics(minibatch=True, epoch=True, experience=True, stream=True),
            loss_metrics(epoch=True, experience=True), forgetting_metrics(experience=True, stream=True),
            bwt_metrics(experience=True, stream=True), timing_metrics(epoch=True, experience=True),
            ram_usage_metrics(every=0.5, experience=True), gpu_usage_metrics(0, experience=True)]


def exp(d):
    return f"Task{d:03d}/Exp{d:03d}"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_avalanche_metrics_and_replay_with_every_strategy(name, tiny_clip, tokenizer, make_stream, tmp_path):
    benchmark = make_stream("all", train_sizes=(8, 6, 6))
    matrix = AccuracyMatrix()
    evaluator = EvaluationPlugin(matrix, *metrics(), loggers=[CSVLogger(str(tmp_path / "csv"))])
    options = {"iterations": 2} if get_strategy(name).needs.trains else {}
    strategy = get_strategy(name)(model=tiny_clip, tokenizer=tokenizer, train_mb_size=4, eval_mb_size=6,
                                  plugins=[ReplayPlugin(mem_size=4)], evaluator=evaluator, progress=False,
                                  **options, **OPTIONS[name])
    for experience in benchmark.train_stream[:2]:
        strategy.train(experience)
        last = strategy.eval(benchmark.test_stream)
    a = matrix.result()
    assert a.shape == (2, 3)
    assert a[-1].tolist() == pytest.approx(
        [100 * last[f"Top1_Acc_Exp/eval_phase/test_stream/{exp(d)}"] for d in range(3)])
    forgetting = last[f"ExperienceForgetting/eval_phase/test_stream/{exp(0)}"]
    assert 100 * forgetting == pytest.approx(a[0, 0] - a[1, 0])
    assert last[f"ExperienceBWT/eval_phase/test_stream/{exp(0)}"] == pytest.approx(-forgetting)
    assert last[f"Time_Exp/eval_phase/test_stream/{exp(1)}"] > 0
    # sampled by a thread every 0.5 s: an experience this short may end before the first sample
    assert f"MaxRAMUsage_Experience/eval_phase/test_stream/{exp(1)}" in last
    assert f"MaxGPU0Usage_Experience/eval_phase/test_stream/{exp(1)}" in last
    assert (tmp_path / "csv" / "eval_results.csv").stat().st_size > 0


def test_avalanches_loggers_record_a_moram_run(tiny_clip, tokenizer, make_stream, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_SILENT", "true")
    benchmark = make_stream("all", train_sizes=(8, 6, 6))
    text = open(tmp_path / "log.txt", "w")
    tensorboard = TensorboardLogger(str(tmp_path / "tb"))
    wandb = WandBLogger(project_name="moram-avalanche-test", run_name="moram", dir=str(tmp_path),
                        save_code=False, params={"mode": "offline"})
    matrix = AccuracyMatrix()
    loggers = [InteractiveLogger(), TextLogger(text), CSVLogger(str(tmp_path / "csv")), tensorboard, wandb]
    strategy = get_strategy("moram")(model=tiny_clip, tokenizer=tokenizer, atoms_per_task=4, topk=2, iterations=2,
                                     train_mb_size=4, progress=False,
                                     evaluator=EvaluationPlugin(matrix, *metrics(), loggers=loggers))
    try:
        for experience in benchmark.train_stream[:2]:
            strategy.train(experience)
            strategy.eval(benchmark.test_stream)
    finally:
        wandb.wandb.finish()
        text.close()
    tensorboard.writer.flush()
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0}).Reload()
    tags = set(events.Tags()["scalars"])
    assert {"AccMatrix/alpha", "AccMatrix/Average", f"Top1_Acc_Exp/eval_phase/test_stream/{exp(1)}",
            f"ExperienceForgetting/eval_phase/test_stream/{exp(0)}", "StreamBWT/eval_phase/test_stream"} <= tags
    assert [e.value for e in events.Scalars("AccMatrix/alpha")] == pytest.approx(matrix.result()[:, 0].tolist())
    assert "Top1_Acc_Exp/eval_phase/test_stream" in (tmp_path / "log.txt").read_text()
    assert (tmp_path / "csv" / "training_results.csv").stat().st_size > 0
    runs = [p for p in os.listdir(tmp_path / "wandb") if p.startswith("offline-run-")]
    assert len(runs) == 1 and any(f.endswith(".wandb") for f in os.listdir(tmp_path / "wandb" / runs[0]))
