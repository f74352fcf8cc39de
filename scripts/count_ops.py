"""Operators one MoRAM layer dispatches per forward and backward, per path, and which would make a GPU wait.

A 768 -> 768 layer with 160 atoms (10 tasks of 16, k = 16, tau = 0.01, delta = 0.2) on
4 x 197 tokens, read on the CPU with a ``TorchDispatchMode`` (what the same calls ask of a GPU):

* eval  -- a frozen bank (after a task), gated, under ``torch.no_grad()``; and the same with the base's
  copy kept (``keep_base_casts``: on the GPU paths the base stacked with the keys, one GEMM for
  ``W x + b`` and ``p = A x``, ``layers.moram.stacked``);
* train -- 144 frozen atoms and 16 trainable, forward and backward, the input requiring grad;

each in float32 and under bfloat16 autocast (a second call: the first casts the frozen bank).
For the ``triton`` path the two kernel launches are counted apart (``+ 1 kernel``) and their
interpreter's own bookkeeping is not: the launches are replaced by no-ops here. Columns: ATen
operators dispatched (of which GEMMs), and the host synchronisations among them.

It runs on older checkouts too (no ``moram_paths`` there: their one PyTorch path is what ran on
a GPU, with ``MORAM_AVALANCHE_KERNEL=off``, the variable of checkouts before 0.7; this one's is
``MORAM_AVALANCHE_PATH=no-cpu-kernel``), which is how the before/after of the issue's note were
counted:

    MORAM_AVALANCHE_KERNEL=off PYTHONPATH=<old checkout> python scripts/count_ops.py
    python scripts/count_ops.py
"""

from __future__ import annotations

import contextlib
import os
import types
from collections import Counter

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from moram_avalanche.layers.moram.layer import MoRAMLinear

try:
    from moram_avalanche.layers.moram.layer import keep_base_casts
except ImportError:  # a checkout before 0.7.0
    keep_base_casts = None

SYNCS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero", "aten::masked_select", "aten::_unique2"}
#: matrix products: ``aten::linear`` and ``aten::matmul`` reach a dispatch mode whole in recent PyTorch
#: (their ``addmm`` runs below it), so they are counted with the products they hold
GEMMS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul"}


class Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops, self.syncs = Counter(), 0

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        self.ops[name] += 1
        bool_index = name in ("aten::index", "aten::index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ()) if i is not None)
        self.syncs += name in SYNCS or bool_index
        return func(*args, **kwargs)

    def line(self):
        gemms = sum(self.ops[name] for name in GEMMS)
        return f"{sum(self.ops.values()):4d} ops ({gemms} GEMMs), {self.syncs} host syncs"


def layer(frozen: bool):
    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(768, 768), atoms_per_task=16, topk=16, temperature=0.01, threshold=0.2)
    for _ in range(10):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=0.02)
    if frozen:
        layer.freeze()
    return layer


def measure(path_context, launches):
    x = torch.randn(4, 197, 768)
    rows = []
    for dtype in (None, torch.bfloat16):
        amp = torch.autocast("cpu", dtype=dtype or torch.float32, enabled=dtype is not None)
        with path_context():
            ev = layer(True).eval()
            with torch.no_grad(), amp:
                ev(x)  # the first call casts the frozen bank under autocast
                launches.clear()
                with Count() as count:
                    ev(x)
            rows.append((f"eval  {'bf16' if dtype else 'fp32'} forward ", count, len(launches)))
            if keep_base_casts is not None:
                keep_base_casts(ev)
                with torch.no_grad(), amp:
                    ev(x)  # the first call keeps the base's copy
                    launches.clear()
                    with Count() as count:
                        ev(x)
                rows.append((f"eval  {'bf16' if dtype else 'fp32'} kept base", count, len(launches)))
                step = x[:1, :8]  # a decode step's few rows: the read-out kernel takes steps 2-6
                with torch.no_grad(), amp:
                    launches.clear()
                    with Count() as count:
                        ev(step)
                rows.append((f"eval  {'bf16' if dtype else 'fp32'} kept, 8 tokens", count, len(launches)))
            tr = layer(False).train()
            inp = x.clone().requires_grad_()
            launches.clear()
            with amp, Count() as forward:
                out = tr(inp)
            rows.append((f"train {'bf16' if dtype else 'fp32'} forward ", forward, len(launches)))
            launches.clear()
            with Count() as backward:
                out.float().sum().backward()
            rows.append((f"train {'bf16' if dtype else 'fp32'} backward", backward, len(launches)))
    return rows


def main() -> None:
    launches = []
    try:
        from moram_avalanche.layers.moram.paths import triton as moram_triton
        from moram_avalanche.layers.moram.paths import use_path
    except ImportError:  # a checkout before the GPU path: one PyTorch path
        paths = {"before (PyTorch path)": contextlib.nullcontext}
    else:
        class Launcher:
            def __getitem__(self, grid):
                return lambda *args, **kwargs: launches.append(1)

        moram_triton._kernels = lambda: types.SimpleNamespace(route_forward_kernel=Launcher(),
                                                              route_backward_kernel=Launcher(),
                                                              route_read_out_kernel=Launcher())
        moram_triton.usable = lambda tensor: True
        paths = {name: (lambda name=name: use_path(name)) for name in ("reference", "dense", "triton")}
    switches = "; ".join(f"{name}={os.environ[name]}" for name in ("MORAM_AVALANCHE_PATH", "MORAM_AVALANCHE_KERNEL")
                         if name in os.environ) or "MORAM_AVALANCHE_PATH unset (auto)"
    print(f"torch {torch.__version__}; {switches}; 768 -> 768, 160 atoms, 4 x 197 tokens")
    for name, context in paths.items():
        print(f"== {name}")
        for label, count, kernels in measure(context, launches):
            print(f"  {label}: {count.line()}" + (f" + {kernels} Triton kernel" if kernels else ""))


if __name__ == "__main__":
    main()
