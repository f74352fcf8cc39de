"""scripts/bench_profile.py: a profile's numbers from hand-made events, a real CPU profile, dynamo's counters."""

import gzip
import importlib
import json
from types import SimpleNamespace

import pytest
import torch


@pytest.fixture
def profile(scripts):
    return importlib.import_module("bench_profile")


def event(name, device="CPU", us=0.0, self_cpu=0.0):
    span = SimpleNamespace(elapsed_us=lambda: us)
    return SimpleNamespace(name=name, device_type=f"DeviceType.{device}", time_range=span, self_cpu_time_total=self_cpu)


def test_the_numbers_of_two_hand_made_steps(profile):
    events = [event("aten::mm", self_cpu=30.0), event("cudaLaunchKernel"), event("cudaLaunchKernel"),
              event("cuLaunchKernelEx"), event("cudaGraphLaunch"),
              event("gemm_kernel", "CUDA", us=600.0), event("gemm_kernel", "CUDA", us=600.0),
              event("route_kernel", "CUDA", us=300.0), event("Memcpy DtoD", "CUDA", us=100.0)]
    numbers = profile.summarise(events, steps=2, host_s=0.0005, wall_s=0.004)
    assert numbers["kernel_launches_per_step"] == 1.5 and numbers["graph_launches_per_step"] == 0.5
    assert numbers["kernels_per_step"] == 2.0
    assert numbers["gpu_busy_ms_per_step"] == pytest.approx(0.8)   # 1600 us over 2 steps
    assert numbers["gpu_busy_share"] == pytest.approx(0.4)         # of the 2 ms wall time per step
    assert numbers["host_ms_per_step"] == pytest.approx(0.25)
    assert [row["name"] for row in numbers["top"]] == ["gemm_kernel", "route_kernel", "Memcpy DtoD"]
    assert numbers["top"][0] == {"name": "gemm_kernel", "calls_per_step": 1.0, "us_per_step": 600.0, "share": 0.75}
    text = profile.format_summary("two steps", numbers)
    assert "GPU busy 0.80 ms/step (40% of the wall time)" in text and "kernels by GPU time" in text


def test_a_cpu_profile_ranks_operators_and_writes_the_table_and_the_trace(profile, tmp_path, one_thread):
    a = torch.randn(64, 64)
    numbers = profile.profile_steps(lambda: (a @ a).relu(), "cpu", steps=3, table_path=str(tmp_path / "t.txt"),
                                    trace_path=str(tmp_path / "trace.json.gz"))
    assert numbers["steps"] == 3 and numbers["gpu_busy_ms_per_step"] is None and numbers["kernels_per_step"] == 0
    assert "operators by self CPU time" in numbers["ranked"]
    names = {row["name"]: row["calls_per_step"] for row in numbers["top"]}
    assert names["aten::mm"] == 1.0 and names["aten::relu"] == 1.0
    assert "aten::mm" in (tmp_path / "t.txt").read_text()
    with gzip.open(tmp_path / "trace.json.gz") as trace:
        assert "traceEvents" in json.load(trace)
    assert not (tmp_path / "trace.json").exists()


def test_counter_changes_count_what_moved(profile):
    before = {"frames": {"total": 2, "ok": 2}, "stats": {"unique_graphs": 2}}
    after = {"frames": {"total": 5, "ok": 5}, "stats": {"unique_graphs": 3, "calls_captured": 9},
             "graph_break": {"data-dependent branch": 2}, "inductor": {"cudagraph_skips": 1, "fusions": 4}}
    changes = profile.counter_changes(before, after)
    assert changes["frames_compiled"] == 3 and changes["graphs"] == 1
    assert changes["graph_breaks"] == {"data-dependent branch": 2} and changes["cudagraph_skips"] == {"cudagraph_skips": 1}
    assert profile.counter_changes(after, after)["moved"] == {}


def test_dynamo_counters_see_a_graph_break(profile):
    def broken(x):
        y = x + 1
        print("", end="")  # a graph break
        return y * 2

    before = profile.dynamo_counters()
    torch.compile(broken, backend="eager")(torch.ones(3))
    changes = profile.counter_changes(before, profile.dynamo_counters())
    assert sum(changes["graph_breaks"].values()) >= 1 and changes["frames_compiled"] >= 1
