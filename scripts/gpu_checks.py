"""Numerical checks of the GPU path: CUDA against the CPU reference, AMP (fp16, bf16) against fp32.

Run by ``scripts/gpu_check.sh`` on a CUDA machine (exit status 1 when a check fails):

1. ``MoRAMLinear`` on CUDA, fp32, eval and train, on each path (``triton``, ``dense``,
   ``reference``; ``layers/moram/paths``): output and every gradient against the naive reference
   (``layers/moram/naive.py``) on the CPU in float64 (ViT-B/16 sizes, 160 atoms).
2. The same layer under ``torch.autocast`` fp16 and bf16, on the GPU paths: output and
   gradients against the fp32 CUDA run (relative error of the whole tensor,
   ``||a - b|| / ||b||``), finite.
2a. Kept Triton launches (``layers/moram/paths/triton_launch.py``) against Triton's own launch at
   every call: a training step's output and gradients, the planned eval call's output (the same
   numbers), and the eval call's time both ways.
2b. No host synchronisation on the GPU paths: a forward and a backward (eval and train, fp32
   and bf16) under ``torch.cuda.set_sync_debug_mode("error")``; the sparse reference path's
   gated eval must trip it (the check can fail).
2c. The eval forward of each GPU path captured in a CUDA graph and replayed on new input, and
   compiled whole by ``torch.compile(fullgraph=True)`` (eval and a training step): the same
   numbers as eager.
3. The ViT-B/16 image tower with 10 tasks of atoms on its 72 linears: features under fp16 and
   bf16 autocast against fp32 (relative error and cosine), and one training step's
   gradients of the newest atoms.
4. One short MoRAM run of the strategy on CUDA on a synthetic stream, with ``amp=True`` (fp16
   autocast + gradient scaling) and without: the loss stays finite and the accuracies are printed.

    python scripts/gpu_checks.py [--out gpu_checks.txt]
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear, keep_base_casts
from moram_avalanche.layers.moram.naive import NaiveMoRAMLinear, naive_moram
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path

LINES = []
FAILED = []
DEVICE = "cuda"  # "cpu" with --smoke-cpu (checks the script itself, small sizes)
SIZES = {"layers": ((768, 768), (768, 3072), (3072, 768)), "tokens": (4, 197), "tower": "ViT-B-16",
         "images": 8}


def gpu_paths():
    """The GPU paths this device can run: triton (CUDA, or Triton's interpreter) and dense."""
    probe = torch.empty(0, device=DEVICE)
    return (["triton"] if moram_triton.usable(probe) else []) + ["dense"]


def report(name, value, limit):
    ok = value <= limit
    LINES.append(f"{'ok  ' if ok else 'FAIL'} {name}: {value:.2e} (limit {limit:.0e})")
    print(LINES[-1], flush=True)
    if not ok:
        FAILED.append(name)


def relative(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def layer_with_atoms(d_in, d_out, atoms=160):
    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(d_in, d_out), atoms_per_task=16, topk=16, temperature=0.01, threshold=0.2)
    for _ in range(atoms // 16):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=0.02)
    return layer.to(DEVICE)


def run_layer(layer, x, training, dtype=None):
    layer.train(training)
    x = x.clone().requires_grad_()
    with torch.autocast(DEVICE, dtype=dtype, enabled=dtype is not None):
        out = layer(x)
    out.float().square().mean().backward()
    grads = {"x": x.grad, "keys": layer.new_keys.grad, "values": layer.new_values.grad}
    layer.zero_grad(set_to_none=True)
    return out.detach().float(), {k: v.detach().float() for k, v in grads.items()}


def check_layer_parity():
    for path in gpu_paths() + ["reference"]:
        with use_path(path):
            for d_in, d_out in SIZES["layers"]:
                layer = layer_with_atoms(d_in, d_out)
                x = torch.randn(*SIZES["tokens"], d_in, device=DEVICE)
                frozen = layer.num_frozen
                cpu = copy.deepcopy(layer).cpu().double()
                naive = NaiveMoRAMLinear(cpu.base.weight, cpu.base.bias, cpu.keys[:frozen], cpu.values[:, :frozen],
                                         cpu.keys[frozen:], cpu.values[:, frozen:], topk=16, temperature=0.01,
                                         threshold=0.2)
                for training in (False, True):
                    out, grads = run_layer(layer, x, training)
                    naive.train(training)
                    xr = x.detach().cpu().double().requires_grad_()
                    ref = naive(xr)
                    ref.square().mean().backward()
                    tag = f"{path} {d_in}->{d_out} {'train' if training else 'eval'}"
                    report(f"layer {DEVICE} fp32 vs CPU float64 reference, {tag}: output",
                           relative(out.cpu(), ref.detach()), 1e-4)
                    report("  grad x", relative(grads["x"].cpu(), xr.grad), 1e-3)
                    if training:
                        report("  grad new keys", relative(grads["keys"].cpu(), naive.new_keys.grad), 1e-3)
                        report("  grad new values", relative(grads["values"].cpu().t(), naive.new_values.grad), 1e-3)
                    naive.zero_grad(set_to_none=True)


def check_layer_amp():
    for path in gpu_paths():
        with use_path(path):
            for d_in, d_out in SIZES["layers"][:2]:
                layer = layer_with_atoms(d_in, d_out)
                x = torch.randn(*SIZES["tokens"], d_in, device=DEVICE)
                for training in (False, True):
                    out32, grads32 = run_layer(layer, x, training)
                    for dtype, limit in ((torch.float16, 5e-3), (torch.bfloat16, 3e-2)):
                        out, grads = run_layer(layer, x, training, dtype)
                        tag = f"{path} {d_in}->{d_out} {'train' if training else 'eval'} {str(dtype)[6:]}"
                        finite = all(torch.isfinite(t).all() for t in (out, *grads.values()) if t is not None)
                        report(f"layer autocast vs fp32, {tag}: output (finite {finite})",
                               relative(out, out32) if finite else float("inf"), limit)
                        if training:
                            report("  grad new keys", relative(grads["keys"], grads32["keys"]), 10 * limit)
                            report("  grad new values", relative(grads["values"], grads32["values"]), 10 * limit)


def check_kept_base_eval():
    """The eval call with the base's copy kept (``keep_base_casts``: ``[W; A]`` one GEMM) on each GPU
    path, on a batch's rows and on a decode step's 8 (the Triton read-out kernel), against the
    float64 reference in float32 and against float32 under autocast."""
    for path in gpu_paths():
        with use_path(path):
            for d_in, d_out in SIZES["layers"][:2]:
                layer = layer_with_atoms(d_in, d_out).eval()
                layer.freeze()
                cpu = copy.deepcopy(layer).cpu().double()
                keep_base_casts(layer)
                for rows in (SIZES["tokens"], (1, 8)):
                    x = torch.randn(*rows, d_in, device=DEVICE)
                    ref = naive_moram(x.cpu().double().reshape(-1, d_in), cpu.base.weight, cpu.base.bias, [cpu.keys],
                                      [cpu.values], topk=16, temperature=0.01, threshold=0.2, training=False)
                    with torch.no_grad():
                        out32 = layer(x).float()
                        tag = f"{path} {d_in}->{d_out} eval, base kept, {rows[0] * rows[1]} rows"
                        report(f"layer {DEVICE} fp32 vs CPU float64 reference, {tag}: output",
                               relative(out32.reshape(-1, d_out).cpu(), ref), 1e-4)
                        for dtype, limit in ((torch.float16, 5e-3), (torch.bfloat16, 3e-2)):
                            with torch.autocast(DEVICE, dtype=dtype):
                                out = layer(x).float()
                            report(f"  autocast {str(dtype)[6:]} vs fp32", relative(out, out32), limit)


def _with_launches(kept, layer, run):
    """``run(layer)`` on a copy of ``layer`` made while launches are kept (``kept``) or Triton's own
    at every call (``paths.triton_launch``), on launchers made afresh (none from an earlier run)."""
    from moram_avalanche.layers.moram.paths import triton_launch

    was = triton_launch._ENABLED
    triton_launch._ENABLED = kept
    moram_triton._BOUND.clear()
    try:
        return run(copy.deepcopy(layer))
    finally:
        triton_launch._ENABLED = was
        moram_triton._BOUND.clear()


def check_kept_launches():
    """Kept Triton launches (0.7.11, ``layers/moram/paths/triton_launch.py``: the compiled kernel
    launched directly after a class of arguments' first launch) against Triton's own launch at every
    call: a training step's output and gradients (the routing kernels, forward and backward, fp32 and
    bf16 autocast), and the eval call over a frozen bank on a decode step's 8 rows, base apart and
    kept (the planned call's read-out kernel): the same numbers. Then that eval call's time, kept
    against Triton's own launch, back to back (what a launch costs the host)."""
    import statistics
    import time

    from moram_avalanche.layers.moram.paths import triton_launch
    from moram_avalanche.layers.moram.paths.triton_launch import KeptLaunch

    if "triton" not in gpu_paths():
        LINES.append("skip kept launches: the Triton path does not run here")
        print(LINES[-1])
        return
    d = SIZES["layers"][0][0]
    layer = layer_with_atoms(d, d)
    x = torch.randn(*SIZES["tokens"], d, device=DEVICE)
    kept_seen = []

    def note_kept():  # (the compiled kernels kept by the run with kept launches; the other keeps none)
        if triton_launch._ENABLED:
            kept_seen.append(sum(len(launcher.compiled) for launcher in moram_triton._BOUND.values()
                                 if isinstance(launcher, KeptLaunch)))

    with use_path("triton"):
        for dtype in (None, torch.bfloat16):
            def training(copy_, dtype=dtype):
                results = [run_layer(copy_, x, True, dtype) for _ in range(3)]  # (the last two launched kept)
                note_kept()
                return results[-1]

            (out_kept, grads_kept), (out_own, grads_own) = (_with_launches(kept, layer, training)
                                                            for kept in (True, False))
            tag = "fp32" if dtype is None else "bf16 autocast"
            report(f"kept launches vs Triton's own, training step {tag}: output", relative(out_kept, out_own), 1e-6)
            for name in grads_own:
                report(f"  gradient of {name}", relative(grads_kept[name], grads_own[name]), 1e-6)
        frozen = copy.deepcopy(layer).eval()
        frozen.freeze()
        step = torch.randn(1, 8, d, device=DEVICE)
        for kept_base in (False, True):
            def evaluation(copy_, kept_base=kept_base):
                keep_base_casts(copy_, kept_base)
                with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
                    outs = [copy_(step).float() for _ in range(3)]
                return outs[-1]

            same = relative(_with_launches(True, frozen, evaluation), _with_launches(False, frozen, evaluation))
            report(f"kept launches vs Triton's own, eval bf16, 8 rows, base {'kept' if kept_base else 'apart'}: "
                   "output", same, 1e-6)
        LINES.append(f"kept launches made (compiled kernels kept, per training run with kept launches, fp32 "
                     f"then bf16): {kept_seen}")
        print(LINES[-1])
        if DEVICE == "cuda" and (len(kept_seen) != 2 or not all(kept_seen)):  # (the CPU's interpreter keeps none)
            FAILED.append("kept launches: none kept on the training path")

        calls = 200 if DEVICE == "cuda" else 2  # (the CPU smoke run: Triton's interpreter, slow)

        def per_call_us(copy_):
            timings = []
            with torch.no_grad(), torch.autocast(DEVICE, dtype=torch.bfloat16):
                for _ in range(3):
                    copy_(step)
                for _ in range(5):
                    torch.cuda.synchronize() if DEVICE == "cuda" else None
                    start = time.perf_counter()
                    for _ in range(calls):
                        copy_(step)
                    torch.cuda.synchronize() if DEVICE == "cuda" else None
                    timings.append((time.perf_counter() - start) / calls * 1e6)
            return statistics.median(timings)

        rounds = [(_with_launches(True, frozen, per_call_us), _with_launches(False, frozen, per_call_us))
                  for _ in range(3)]
        kept_us, own_us = (statistics.median(column) for column in zip(*rounds))
        LINES.append(f"eval call, bf16 autocast, 8 rows, base apart, back to back: {kept_us:.1f} us with kept "
                     f"launches, {own_us:.1f} us with Triton's own ({kept_us / own_us:.2f}x; medians of 3 x 5 x {calls})")
        print(LINES[-1], flush=True)


def _synchronising(layer, x, training, dtype):
    """The error ``set_sync_debug_mode("error")`` raised in a forward (and backward), or None."""
    layer.train(training)
    x = x.clone().requires_grad_(training)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.autocast(DEVICE, dtype=dtype or torch.float32, enabled=dtype is not None):
            out = layer(x)
        if training:
            out.float().square().mean().backward()
        return None
    except RuntimeError as error:
        return str(error).splitlines()[0]
    finally:
        torch.cuda.set_sync_debug_mode(0)


def check_no_host_sync():
    if DEVICE != "cuda":
        LINES.append("skip host synchronisation check: needs CUDA (tests/layers/moram/test_paths.py checks the "
                     "operators on the CPU)")
        print(LINES[-1])
        return
    layer = layer_with_atoms(768, 768)
    layer.freeze()
    layer.expand()  # a task's atoms train on top of 144 frozen ones
    x = torch.randn(*SIZES["tokens"], 768, device=DEVICE)
    for path in gpu_paths():
        with use_path(path):
            for training in (False, True):
                for dtype in (None, torch.bfloat16):
                    error = _synchronising(layer, x, training, dtype)
                    report(f"host synchronisations, {path} {'train' if training else 'eval'} "
                           f"{str(dtype or torch.float32)[6:]}{': ' + error if error else ''}", float(error is not None), 0)
    with use_path("reference"):
        error = _synchronising(layer, x, False, None)
    report(f"the check trips on the sparse reference path's gated eval ({error or 'did NOT trip'})",
           float(error is None), 0)


def check_graphs_and_compile():
    if DEVICE != "cuda":
        LINES.append("skip CUDA graph / torch.compile check: needs CUDA (the dense path's torch.compile trace is "
                     "tested on the CPU)")
        print(LINES[-1])
        return
    for path in gpu_paths():
        with use_path(path):
            layer = layer_with_atoms(768, 3072).eval()
            layer.freeze()
            x = torch.randn(*SIZES["tokens"], 768, device=DEVICE)
            static = x.clone()
            with torch.inference_mode():
                layer(static)  # warm-up: kernels compiled, the bank cast
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    layer(static)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    captured = layer(static)
                fresh = torch.randn_like(x)
                static.copy_(fresh)
                graph.replay()
                report(f"{path}: eval forward captured in a CUDA graph, replayed on new input vs eager",
                       relative(captured, layer(fresh)), 1e-5)
            compiled = torch.compile(layer, fullgraph=True)
            with torch.inference_mode():
                report(f"{path}: torch.compile(fullgraph=True) eval vs eager", relative(compiled(x), layer(x)), 1e-4)
            layer.expand()
            with torch.no_grad():
                layer.new_values.normal_(std=0.02)
            layer.train()
            eager_out, eager_grads = run_layer(layer, x, True)
            out = compiled(x.clone().requires_grad_())
            out.float().square().mean().backward()
            report(f"{path}: torch.compile(fullgraph=True) training step vs eager: output",
                   relative(out.detach().float(), eager_out), 1e-4)
            report("  grad new keys", relative(layer.new_keys.grad, eager_grads["keys"]), 1e-3)
            layer.zero_grad(set_to_none=True)


def check_tower_amp():
    import open_clip

    from moram_avalanche.clip.inject import inject_moram

    torch.manual_seed(0)
    model = open_clip.create_model(SIZES["tower"], pretrained=None)
    layers = inject_moram(model, encoders=("visual",))
    for layer in layers.values():
        for _ in range(10):
            layer.expand()
            with torch.no_grad():
                layer.new_values.normal_(std=0.02)
    model = model.to(DEVICE).eval()
    size = model.visual.image_size[0]
    images = torch.randn(SIZES["images"], 3, size, size, device=DEVICE)
    with torch.inference_mode():
        ref = model.encode_image(images).float()
        for dtype, limit in ((torch.float16, 1e-2), (torch.bfloat16, 5e-2)):
            with torch.autocast(DEVICE, dtype=dtype):
                out = model.encode_image(images).float()
            cosine = float(torch.nn.functional.cosine_similarity(out, ref).min())
            report(f"{SIZES['tower']} tower, 10 tasks of atoms, {str(dtype)[6:]} autocast vs fp32: features "
                   f"(min cosine {cosine:.5f})", relative(out, ref), limit)
    model.train()
    grads = {}
    for dtype in (None, torch.float16, torch.bfloat16):
        with torch.autocast(DEVICE, dtype=dtype or torch.float16, enabled=dtype is not None):
            loss = model.encode_image(images).float().square().mean()
        loss.backward()
        grads[dtype] = torch.cat([layer.new_keys.grad.flatten().float() for layer in layers.values()])
        model.zero_grad(set_to_none=True)
    report("ViT-B/16 tower training step, fp16 vs fp32: grads of the newest keys",
           relative(grads[torch.float16], grads[None]), 1e-1)
    report("ViT-B/16 tower training step, bf16 vs fp32: grads of the newest keys",
           relative(grads[torch.bfloat16], grads[None]), 2e-1)


def check_strategy_amp():
    try:
        import avalanche  # noqa: F401
    except ImportError as error:
        LINES.append(f"skip the MoRAM strategy run: {error} (bring avalanche-lib's wheels: docs/concepts/gpu-path.md, 'GPU check')")
        print(LINES[-1])
        return
    import open_clip
    from avalanche.training.plugins import EvaluationPlugin
    from torchvision import transforms

    from moram_avalanche.benchmarks.images.synthetic import synthetic
    from moram_avalanche.experiments.clip.demo import TINY_CONFIG
    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies import MoRAM

    results = {}
    for amp in (False, True):
        torch.manual_seed(0)
        model = open_clip.CLIP(**TINY_CONFIG)
        simple = open_clip.tokenizer.SimpleTokenizer(context_length=TINY_CONFIG["text_cfg"]["context_length"])
        size = TINY_CONFIG["vision_cfg"]["image_size"]
        to_tensor = transforms.Compose([transforms.Resize((size, size)), transforms.ToTensor()])
        benchmark = synthetic(train_size=64, test_size=32, seed=0, train_transform=to_tensor,
                              eval_transform=to_tensor)
        matrix = AccuracyMatrix()
        strategy = MoRAM(model=model, tokenizer=simple, iterations=20, train_mb_size=16,
                         device=DEVICE, amp=amp, progress=False,
                         evaluator=EvaluationPlugin(matrix, loggers=[]))
        for experience in benchmark.train_stream[:3]:
            strategy.train(experience)
            strategy.eval(benchmark.test_stream)
            if not torch.isfinite(strategy.loss):
                FAILED.append(f"MoRAM strategy amp={amp}: loss {strategy.loss}")
        results[amp] = matrix.result()
    LINES.append(f"MoRAM strategy on CUDA, synthetic stream, 3 tasks: accuracy rows fp32 "
                 f"{results[False].round(1).tolist()} / amp fp16 {results[True].round(1).tolist()}")
    print(LINES[-1], flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke-cpu", action="store_true", help="run the checks on the CPU, small sizes")
    args = parser.parse_args()
    global DEVICE
    if args.smoke_cpu:
        DEVICE = "cpu"
        SIZES.update(layers=((64, 64), (64, 128), (128, 64)), tokens=(2, 9), tower="ViT-B-32", images=2)
    elif not torch.cuda.is_available():
        print("no CUDA device: nothing to check (--smoke-cpu runs the script on the CPU)", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (smoke run)"
    LINES.append(f"device: {name}, torch {torch.__version__}")
    print(LINES[-1])
    for check in (check_layer_parity, check_layer_amp, check_kept_base_eval, check_kept_launches, check_no_host_sync,
                  check_graphs_and_compile, check_tower_amp, check_strategy_amp):
        try:
            check()
        except Exception as err:  # report and go on with the next check
            FAILED.append(f"{check.__name__}: {type(err).__name__}: {err}")
            LINES.append(f"FAIL {check.__name__}: {type(err).__name__}: {err}")
            print(LINES[-1], flush=True)
    LINES.append(f"{len(FAILED)} failed" + (f": {FAILED}" if FAILED else ""))
    print(LINES[-1])
    if args.out:
        Path(args.out).write_text("\n".join(LINES) + "\n")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
