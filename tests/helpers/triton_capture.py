"""What ``torch.compile(fullgraph=True)`` captures of a MoRAM layer on the Triton path, without a GPU.

Run as a script by tests/layers/moram/test_triton_kernels.py, in a process without ``TRITON_INTERPRET``
(under the interpreter ``triton.jit`` makes interpreted functions, which Dynamo cannot tell from
Python code). Besides the layer (train and eval), the eval read-out as a decode step will run it:
one GEMM giving the base output and the projections together (``x [W; A]^T + [b; 0]``), then
:func:`~moram_avalanche.layers.moram.paths.triton.route_read_out` on views of it; and the layer
itself doing that (``decode``: no grad, its base's copy kept, ``keep_base_casts``). The layer and its input are fake CUDA tensors (``FakeTensorMode``: shapes, dtypes and
devices, no data, no GPU); Dynamo is told Triton is usable (it asks for a GPU before it treats a
Triton kernel as a graph node: ``torch.utils._triton.has_triton``), and that it sees several GPUs
(a launch outside a graph would make its tensors' device current first:
:func:`~moram_avalanche.layers.moram.paths.triton.launch_index`); the backend records each graph
and runs nothing. A graph break is an error (``fullgraph=True``). Prints, as JSON, each case's
operators: the graph's, and those of the subgraphs Dynamo makes of the autograd function's
forward and backward.

    python tests/helpers/triton_capture.py
"""

import json
import os

os.environ.pop("TRITON_INTERPRET", None)

import torch
import torch.utils._triton
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from moram_avalanche.layers.moram.layer import MoRAMLinear, keep_base_casts, keep_stacked
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path
from moram_avalanche.layers.moram.paths.triton import route_read_out

torch.utils._triton.has_triton = lambda *args, **kwargs: True
# as on a machine with several GPUs: a launch outside a graph would make its tensors' device current
# (launch_index); inside one the graph does, and the launches must still be captured whole
moram_triton._SEVERAL_GPUS = True


class Recorded(Exception):
    """Raised instead of running a captured graph (its tensors are fake)."""


def operators(graph_module):
    return [getattr(node.target, "__name__", str(node.target)) for node in graph_module.graph.nodes
            if node.op in ("call_function", "call_method")]


def capture(layer, x):
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)

        def run(*args):
            raise Recorded

        return run

    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    try:
        compiled(x)
    except Recorded:
        pass
    torch._dynamo.reset()
    (graph,) = graphs
    return {name or "graph": operators(module) for name, module in graph.named_modules()
            if hasattr(module, "graph")}


class StackedReadOut(nn.Module):
    """The eval forward of a MoRAM layer in two kernels: ``full = x [W; A]^T + [b; 0]``
    ``[N, d_out + R]``, then ``route_read_out(full[:, d_out:], full[:, :d_out], B, ...)``."""

    def __init__(self, base: nn.Linear, atoms: int, k: int, temperature: float, threshold: float):
        super().__init__()
        self.register_buffer("stacked_weight", torch.cat([base.weight.detach(), torch.randn(atoms, base.in_features)]))
        self.register_buffer("stacked_bias", torch.cat([base.bias.detach(), torch.zeros(atoms)]))
        self.register_buffer("values", torch.randn(atoms, base.out_features))
        self.outputs, self.k, self.temperature, self.threshold = base.out_features, k, temperature, threshold

    def forward(self, x):
        full = nn.functional.linear(x.flatten(0, -2), self.stacked_weight, self.stacked_bias)
        out = route_read_out(full[:, self.outputs:], full[:, :self.outputs], self.values, self.k, self.temperature,
                             self.threshold)
        return out.view(*x.shape[:-1], self.outputs)


def main():
    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(24, 20), atoms_per_task=6, topk=4, temperature=0.05, threshold=0.2)
    for _ in range(4):
        layer.expand()
    with FakeTensorMode(allow_non_fake_inputs=True):
        layer = layer.to("cuda")
        x = torch.randn(2, 5, 24, device="cuda", requires_grad=True)
        frozen_x = torch.randn(2, 5, 24, device="cuda")
        stacked = StackedReadOut(nn.Linear(24, 20), atoms=30, k=4, temperature=0.05, threshold=0.2).to("cuda")
    cases = {}
    with use_path("triton"):
        cases["train"] = capture(layer.train(), x)
        layer.freeze()
        cases["eval"] = capture(layer.eval(), frozen_x)
    cases["read_out"] = capture(stacked.eval(), frozen_x)
    # the layer itself as a decode step calls it (no grad, its base's copy kept): its stacked copy is
    # made by an eager call (here by keep_stacked, fake tensors having no data to run a kernel on)
    keep_base_casts(layer)
    with FakeTensorMode(allow_non_fake_inputs=True):
        keep_stacked([layer], [layer.stack_sources(layer.base.weight, layer.base.bias)], torch.float32)
    with use_path("triton"), torch.no_grad():
        cases["decode"] = capture(layer.eval(), frozen_x)
    print(json.dumps(cases))


if __name__ == "__main__":
    main()
