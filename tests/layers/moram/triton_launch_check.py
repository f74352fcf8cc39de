"""What a kept launch (``paths.triton_launch.KeptLaunch``) hands Triton's launcher, beside what Triton's own launch hands it, without a GPU.

Run as a script by tests/layers/moram/test_triton_launch.py, in a process without
``TRITON_INTERPRET`` (the interpreter has no compiled kernels). Triton's driver is the dry one
(:mod:`moram_avalanche.utils.triton_dry`): each kernel is compiled for sm_90 for real, each
compiled kernel gets a handle of its own, and every launch is recorded instead of run. Prints, as
JSON, one entry a check:

* ``sites``: each of the GPU path's launches (the routing's forward and backward, the long way's
  read-out, a planned call's read-out onto one GEMM's output or two, float32, bfloat16 and
  float64, gated or not), made three times: whether the launcher is kept, how many of the calls went
  through Triton's launch (``JITFunction.run``), and the differences between the last call's
  recorded launch and Triton's own launch of the same arguments (grid, stream, compiled function,
  its packed metadata, every argument by identity or value; Triton's launch metadata and hooks:
  its hook chains, which call nothing, where the kept launch passes None);
* ``classes``: one kept launch of the routing kernel called with arguments of several
  specialisations (an address off 16 bytes, a stride not divisible by 16, an int equal to 1, float16
  for bfloat16), then again with the first: per call, whether it took Triton's launch, and whether its
  compiled function is the one Triton's launch takes for those arguments;
* ``hooks``: a launch hook registered, then removed: the hook's calls and who launched;
* ``stream``: the stream a direct launch passes after the current stream changed.

    python tests/layers/moram/triton_launch_check.py
"""

import json
import os

os.environ.pop("TRITON_INTERPRET", None)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # (Triton 3.9 warns where it is unset; 1 is its default)

import torch
import triton
from triton import knobs

from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import triton_launch
from moram_avalanche.layers.moram.paths.triton_launch import KeptLaunch
from moram_avalanche.utils.triton_dry import dry_driver


def counting(kernel):
    """``kernel`` whose Triton launches (``JITFunction.run``) are counted in ``kernel.triton_runs``."""
    if "run" not in vars(kernel):
        original = type(kernel).run.__get__(kernel)

        def run(*args, **kwargs):
            kernel.triton_runs += 1
            return original(*args, **kwargs)

        kernel.run, kernel.triton_runs = run, 0
    return kernel


def same(a, b) -> bool:
    return a is b if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) else type(a) is type(b) and a == b


def differences(kept, triton_own) -> list:
    """What differs between a kept launch's record and Triton's own launch's of the same arguments."""
    found = [name for name in ("grid", "stream", "function") if getattr(kept, name) != getattr(triton_own, name)]
    if kept.packed_metadata is not triton_own.packed_metadata:
        found.append("packed_metadata")
    if len(kept.args) != len(triton_own.args):
        found.append(f"{len(kept.args)} arguments, Triton's launch {len(triton_own.args)}")
    found += [f"argument {i}" for i, (a, b) in enumerate(zip(kept.args, triton_own.args)) if not same(a, b)]
    if (kept.launch_metadata, kept.enter_hook, kept.exit_hook) != (None, None, None):
        found.append("the kept launch passed launch metadata or hooks")
    for name in ("enter_hook", "exit_hook"):  # Triton's: a chain that calls nothing (or None)
        hook = getattr(triton_own, name)
        if hook is not None and getattr(hook, "calls", None) != []:
            found.append(f"Triton's {name} calls something")
    return found


def through_triton(launcher: KeptLaunch, record, launches):
    """Triton's own launch of the arguments ``record`` shows (those before the kept launch's tail), recorded."""
    given = record.args[:len(record.args) - len(launcher.tail)]
    launcher.kernel.run(*given, grid=launcher.grid, warmup=False, **launcher.constants)
    return launches[-1]


def site(name, call, launches):
    """``call`` made three times; the entry ``sites`` keeps (module docstring)."""
    kernel = counting(getattr(moram_triton._kernels(), name))
    before = kernel.triton_runs
    launcher = None
    for _ in range(3):
        launcher = call() or launcher
    record = launches[-1]
    runs = kernel.triton_runs - before
    kept = launcher if isinstance(launcher, KeptLaunch) else None
    return {"kept": kept is not None, "triton_runs": runs,
            "differences": differences(record, through_triton(kept, record, launches)) if kept else ["not kept"]}


LAST = {}  # kernel name -> the launcher kept_kernel gave last
_kept_kernel = moram_triton.kept_kernel


def _recording_kept_kernel(name, bind, *args):
    LAST[name] = _kept_kernel(name, bind, *args)
    return LAST[name]


moram_triton.kept_kernel = _recording_kept_kernel


def bound(name):
    """The launcher ``kept_kernel`` gave last for kernel ``name``."""
    return LAST.get(name)


def sites(launches) -> dict:
    torch.manual_seed(0)
    entries = {}
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        for gate in (0.2, None):
            entries.update(sites_of(dtype, gate, launches))
    return entries


def sites_of(dtype, gate, launches) -> dict:
    """``sites``' entries for one dtype and gate (None: none)."""
    rows, atoms, outputs, k = 8, 48, 40, 4
    proj = torch.randn(rows, atoms, dtype=dtype)
    values = torch.randn(atoms, outputs, dtype=dtype)
    base_out = torch.randn(rows, outputs, dtype=dtype)
    full = torch.randn(rows, outputs + atoms, dtype=dtype)
    grad = torch.randn(rows, atoms, dtype=dtype)
    state = []  # (the forward's, made after the forward's own entry)
    read_out = moram_triton.ReadOut(values, k, 0.05, gate)
    no_base = moram_triton.ReadOut(values, k, 0.05, gate, base=False)

    def forward(want_weights=False, want_state=True):
        moram_triton.route_forward(proj, k, 0.05, gate, want_weights=want_weights, want_state=want_state)
        return bound("route_forward_kernel")

    def backward(want_coef=False):
        if not state:
            state.extend(moram_triton.route_forward(proj, k, 0.05, gate, want_state=True)[2])
        moram_triton.route_backward(grad, proj, tuple(state), k, 0.05, gate, want_coef=want_coef)
        return bound("route_backward_kernel")

    def long_way():
        moram_triton.run_read_out(proj, base_out, values, k, 0.05, gate)
        return bound("route_read_out_kernel")

    calls = {
        "route_forward": ("route_forward_kernel", forward),
        "route_forward weights": ("route_forward_kernel", lambda: forward(True, False)),
        "route_backward": ("route_backward_kernel", backward),
        "route_backward coef": ("route_backward_kernel", lambda: backward(True)),
        "run_read_out": ("route_read_out_kernel", long_way),
        "ReadOut": ("route_read_out_kernel", lambda: (read_out(proj, base_out), read_out.launchers[rows])[1]),
        "ReadOut.joined": ("route_read_out_kernel", lambda: (read_out.joined(full), read_out.launchers[rows])[1]),
        "ReadOut without a base": ("route_read_out_kernel", lambda: (no_base(proj), no_base.launchers[rows])[1]),
    }
    tag = f"{str(dtype).replace('torch.', '')} {'gated' if gate is not None else 'ungated'}"
    return {f"{name} {tag}": site(kernel, call, launches) for name, (kernel, call) in calls.items()}


def classes(launches) -> list:
    """One kept launch of the routing kernel over arguments of several specialisations (module docstring)."""
    kernel = counting(moram_triton._kernels().route_forward_kernel)
    rows, atoms, k = 8, 48, 4
    launch = moram_triton.launch(rows, atoms, k, 2)
    launcher = KeptLaunch(kernel, launch.grid, dict(
        K=k, GATED=True, KEEP_ALL=False, WRITE_W=False, SAVE=False, BLOCK_N=launch.block_n, BLOCK_H=launch.block_h,
        BLOCK_W=launch.block_w, BLOCK_K=launch.block_k, LONG_INDEX=False, ROWS_FIRST=launch.rows_first,
        num_warps=launch.num_warps))
    wide = torch.randn(rows, atoms + 16, dtype=torch.bfloat16)  # (rows 64 entries apart: a stride divisible by 16)

    def arguments(proj, rows=rows):
        coef = torch.empty(rows, atoms, dtype=proj.dtype)
        return (proj, coef, coef, coef, coef, rows, atoms, proj.stride(0), atoms, atoms, 20.0, 0.2, 1e-12)

    cases = [  # (each differs from the first in one thing, and the last is of the first's class)
        ("the first", arguments(wide[:, :atoms])),
        ("an address 2 bytes off 16", arguments(wide[:, 1:atoms + 1])),
        ("a row stride of 49", arguments(torch.randn(rows, 49, dtype=torch.bfloat16)[:, :atoms])),
        ("an int equal to 1", arguments(wide[:1, :atoms], rows=1)),
        ("float16 for bfloat16", arguments(wide[:, :atoms].to(torch.float16).contiguous())),
        ("the first's class again", arguments(torch.randn(rows, atoms + 16, dtype=torch.bfloat16)[:, :atoms])),
    ]
    results = []
    for name, args in cases:
        before = kernel.triton_runs
        launcher(*args)
        record = launches[-1]
        own = through_triton(launcher, record, launches)
        results.append({"case": name, "through_triton": kernel.triton_runs - before - 1 == 1,
                        "same_function": record.function == own.function})
    return results


def hooks(launches) -> dict:
    torch.manual_seed(1)
    proj = torch.randn(8, 48)
    seen = []

    def hook(metadata):
        seen.append(metadata.get()["name"])

    moram_triton.route_forward(proj, 4, 0.05, 0.2)  # (its launcher kept and launched through Triton)
    before = len(launches)
    chain = knobs.runtime.launch_enter_hook
    if chain is None:  # (Triton 3.4: a hook is set in its place; 3.5 on: added to a chain)
        knobs.runtime.launch_enter_hook = chain = hook
    else:
        chain.add(hook)
    try:
        moram_triton.route_forward(proj, 4, 0.05, 0.2)
        hooked = launches[-1]
    finally:
        if chain is hook:
            knobs.runtime.launch_enter_hook = None
        else:
            chain.remove(hook)
    moram_triton.route_forward(proj, 4, 0.05, 0.2)
    after = launches[-1]
    return {"hook_calls": seen, "launches": len(launches) - before,
            "hooked_passes_metadata": hooked.launch_metadata is not None and hooked.enter_hook is chain,
            "unhooked_passes_none": (after.launch_metadata, after.enter_hook, after.exit_hook) == (None, None, None)}


def stream(launches) -> dict:
    from triton.runtime import driver

    proj = torch.randn(8, 48)
    moram_triton.route_forward(proj, 4, 0.05, 0.2)
    first = launches[-1].stream
    driver.active.current_stream = 11
    moram_triton.route_forward(proj, 4, 0.05, 0.2)
    return {"before": first, "after": launches[-1].stream}


def main():
    assert triton_launch.enabled(), "unset MORAM_AVALANCHE_TRITON_LAUNCH for this check"
    with dry_driver(arch=90, stream=7) as launches:
        moram_triton.usable = lambda tensor: True  # (the dry driver takes CPU tensors)
        result = {"triton": triton.__version__, "sites": sites(launches), "classes": classes(launches),
                  "hooks": hooks(launches), "stream": stream(launches)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
