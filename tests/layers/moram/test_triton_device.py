"""Each Triton launch is made on its tensors' CUDA device, not on whichever is current.

Triton launches a kernel on the current CUDA device and its current stream, whatever device the
tensors are on. With several GPUs in one process (``--device cuda:1``) every launch of the GPU
path (the routing's forward and backward, the read-out, a planned call's read-out) must make its
tensors' device current first, and only there: nothing is asked per call with one GPU or none,
and nothing inside ``torch.compile`` (the graph's code makes its device current; the capture test,
``tests/helpers/triton_capture.py``, runs as if several GPUs were seen).

Without a GPU: the kernels are replaced by recorders of the device current at their launch, and
the CUDA device calls (``device_count``, ``current_device``, ``torch.cuda.device``) by a fake one
with two GPUs, ``cuda:0`` current.
"""

import types

import pytest
import torch

from moram_avalanche.layers.moram.paths import triton as moram_triton


class FakeCuda:
    """Two GPUs, ``cuda:0`` current; ``torch.cuda.device(i)`` makes ``i`` current, then the one before."""

    def __init__(self):
        self.current, self.switches, self.asked = 0, [], 0

    def current_device(self):
        self.asked += 1
        return self.current

    def device(self, index):
        fake = self

        class Guard:
            def __enter__(self):
                self.before, fake.current = fake.current, index
                fake.switches.append(index)

            def __exit__(self, *exc):
                fake.current = self.before
                return False

        return Guard()


@pytest.fixture
def cuda(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", fake.current_device)
    monkeypatch.setattr(torch.cuda, "device", fake.device)
    monkeypatch.setattr(moram_triton, "_SEVERAL_GPUS", None)  # (asked again, of the fake)
    return fake


def test_launch_index_names_a_device_only_where_several_gpus_are_seen(monkeypatch):
    monkeypatch.setattr(moram_triton, "_SEVERAL_GPUS", None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert moram_triton.launch_index(torch.device("cuda", 0)) is None
    assert moram_triton._SEVERAL_GPUS is False  # asked once, kept
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert moram_triton.launch_index(torch.device("cuda", 1)) is None  # (the answer kept: one GPU)
    monkeypatch.setattr(moram_triton, "_SEVERAL_GPUS", None)
    assert moram_triton.launch_index(torch.device("cuda", 1)) == 1
    assert moram_triton.launch_index(torch.device("cuda", 0)) == 0
    assert moram_triton.launch_index(torch.device("cuda")) is None  # (no index: the current device)
    assert moram_triton.launch_index(torch.device("cpu")) is None  # (the interpreter)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert moram_triton.launch_index(torch.device("cuda", 1)) is None  # (a graph makes its device current)


def test_launched_on_makes_the_device_current_only_for_the_launch(cuda):
    seen = []

    def launcher(*args, **kwargs):
        seen.append((cuda.current, args, kwargs))
        return "launched"

    assert moram_triton.launched_on(1, launcher, 3, 4, K=5) == "launched"
    assert seen == [(1, (3, 4), {"K": 5})] and cuda.switches == [1] and cuda.current == 0
    assert moram_triton.launched_on(0, launcher, 6) == "launched"  # already current: no switch
    assert seen[-1] == (0, (6,), {}) and cuda.switches == [1]
    assert moram_triton.on_device(torch.device("cpu"), launcher) is launcher  # nothing to do: as it is
    assert moram_triton.on_device(torch.device("cuda", 1), launcher)(7) == "launched"
    assert seen[-1] == (1, (7,), {}) and cuda.switches == [1, 1] and cuda.current == 0


def test_with_one_gpu_a_launch_asks_nothing_after_its_first(monkeypatch):
    """One GPU: the count is asked once, then a launch reads one flag (no device, no CUDA call)."""
    counted = []
    monkeypatch.setattr(moram_triton, "_SEVERAL_GPUS", None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: counted.append(1) or 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: pytest.fail("asked the current device"))

    def launcher():
        return "launched"

    for _ in range(3):
        assert moram_triton.on_device(torch.device("cuda", 0), launcher) is launcher
    assert counted == [1]


def recording_kernels(cuda, launches):
    """Kernels that record the device current at their launch (and the kernel's name)."""
    def kernel(name):
        class Launcher:
            def __getitem__(self, grid):
                return lambda *args, **kwargs: launches.append((name, cuda.current))
        return Launcher()

    return types.SimpleNamespace(route_forward_kernel=kernel("forward"), route_backward_kernel=kernel("backward"),
                                 route_read_out_kernel=kernel("read_out"))


@pytest.mark.parametrize("device", [1, 0])
def test_every_launch_of_the_gpu_path_runs_on_its_tensors_device(cuda, monkeypatch, device):
    """The tensors are CPU tensors standing for ``cuda:<device>`` (``launch_index`` sees their device
    as that one): each launch happens with that device current, and ``cuda:0`` is current after."""
    launches, devices = [], []
    monkeypatch.setattr(moram_triton, "_kernels", lambda: recording_kernels(cuda, launches))
    launch_index = moram_triton.launch_index

    def as_cuda(tensor_device):
        devices.append(tensor_device)
        return launch_index(torch.device("cuda", device))

    monkeypatch.setattr(moram_triton, "launch_index", as_cuda)
    rows, atoms, outputs, k = 3, 12, 8, 4
    proj, values = torch.randn(rows, atoms), torch.randn(atoms, outputs)
    base_out, full = torch.randn(rows, outputs), torch.randn(rows, outputs + atoms)
    _, _, state = moram_triton.route_forward(proj, k, 0.05, 0.2, want_state=True)
    moram_triton.route_backward(torch.randn(rows, atoms), proj, state, k, 0.05, 0.2)
    moram_triton.run_read_out(proj, base_out, values, k, 0.05, 0.2)
    read_out = moram_triton.ReadOut(values, k, 0.05, 0.2)
    read_out(proj, base_out)
    read_out.joined(full)
    read_out(proj, base_out)  # (its launcher kept: still on the device)
    assert launches == [("forward", device), ("backward", device)] + [("read_out", device)] * 4
    assert devices == [torch.device("cpu")] * 4  # (each asked of its tensors' device; ReadOut once)
    assert cuda.current == 0 and cuda.switches == ([1] * 6 if device == 1 else [])
