"""A kept launch (``paths.triton_launch``) launches what Triton's own launch would, with the arguments it would pass.

The comparison of launches runs in a process of its own without Triton's interpreter
(``triton_launch_check.py``, the dry driver of ``utils.triton_dry``: kernels compiled for sm_90, launches
recorded); the classes of arguments are checked here against Triton's own specialisation.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import triton_launch
from moram_avalanche.layers.moram.paths.triton_launch import (
    KeptLaunch,
    class_function,
    keepable,
    kept_or_plain,
    layout_of,
    specialization,
)

pytestmark = pytest.mark.skipif(not moram_triton.installed(), reason="Triton is not installed")

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def checked():
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", triton_launch.SWITCH)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    script = Path(__file__).with_name("triton_launch_check.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_launch_of_the_gpu_path_is_kept_and_passes_what_tritons_own_launch_passes(checked):
    sites = checked["sites"]
    assert len(sites) == 48  # 8 launches x float32, bfloat16, float64 x gated or not
    for name, site in sites.items():
        assert site["kept"], name
        assert site["triton_runs"] == 1, (name, site)  # the first of three calls; the next two direct
        assert site["differences"] == [], (name, site["differences"])


def test_a_new_class_of_arguments_goes_through_triton_and_gets_the_kernel_triton_chooses(checked):
    cases = {case["case"]: case for case in checked["classes"]}
    assert all(case["same_function"] for case in cases.values()), cases
    assert [case["through_triton"] for case in checked["classes"]] == [True] * 5 + [False]


def test_a_registered_launch_hook_gets_every_launch_through_triton(checked):
    hooks = checked["hooks"]
    assert hooks["hook_calls"] == ["route_forward_kernel"] and hooks["launches"] == 2
    assert hooks["hooked_passes_metadata"] and hooks["unhooked_passes_none"]


def test_a_direct_launch_runs_on_the_current_stream(checked):
    assert checked["stream"] == {"before": 7, "after": 11}


# ------------------------------------------------------------------ the arguments' classes, in this process
def tritons_specialization(arg):
    """Triton's own class of ``arg`` for an NVIDIA GPU (what its binder computes for each argument)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.nvidia.compiler import CUDABackend

    return native_specialize_impl(CUDABackend, arg, False, True, True)


def arguments():
    ints = [0, 1, 2, 15, 16, 17, 32, 48, -1, -16, -17, 2 ** 31 - 16, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, -2 ** 31,
            -2 ** 31 - 16, 2 ** 32, 2 ** 63 - 16, 2 ** 63 - 1, 2 ** 63, 2 ** 63 + 16, 2 ** 64 - 1]
    buffer = torch.zeros(64, dtype=torch.float64)  # (its address a multiple of 64 bytes)
    tensors = [buffer.view(dtype)[offset:] for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int16)
               for offset in (0, 1, 2, 4, 8)] + [buffer, buffer[1:], buffer[2:]]
    return ints + tensors + [True, False, 0.5, 1.0, None]


def test_equal_classes_are_equal_to_triton():
    """Finer than Triton's: two arguments of one class are of one class to Triton (and the reverse is
    not needed); the classes do not merge what Triton's tells apart."""
    args = arguments()
    ours = [specialization((arg,)) for arg in args]
    theirs = [tritons_specialization(arg) for arg in args]
    for i, a in enumerate(args):
        for j, b in enumerate(args):
            if ours[i] == ours[j]:
                assert theirs[i] == theirs[j], (a, b, theirs[i], theirs[j])


def test_the_classes_tell_apart_what_the_kernels_see():
    """Hand-worked: each thing Triton specialises on changes the class; an int's class is its value."""
    buffer = torch.zeros(64, dtype=torch.bfloat16)
    assert specialization((buffer,)) != specialization((buffer[1:],))  # 2 bytes off 16
    assert specialization((buffer,)) == specialization((buffer[8:],))  # 16 bytes on
    assert specialization((buffer,)) != specialization((buffer.view(torch.float16),))
    assert specialization((16,)) == specialization((16,)) != specialization((32,))  # (Triton: both "i32", "D")
    assert specialization((1,)) != specialization((True,)) and specialization((0,)) != specialization((False,))
    assert specialization((2 ** 31 - 16,)) != specialization((2 ** 31,)) != specialization((2 ** 63,))
    assert specialization((0.5,)) == specialization((1.0,)) != specialization((1,))


def test_an_argument_of_another_kind_makes_no_class():
    assert specialization((torch.zeros(2), (1, 2))) is None and layout_of(([1],)) is None
    assert layout_of((torch.zeros(2), 3, 0.5, True, None)) == "tioo" + "o"


def test_arguments_of_other_kinds_than_a_layouts_never_get_one_of_its_classes():
    """A launch kept for one layout looks its classes up with that layout's function: arguments of
    other kinds raise, or give a class no arguments of the layout can have (so Triton's launch takes them)."""
    tensor, classes = torch.zeros(4), class_function("tio")
    kept = {classes(tensor, n, x) for n in arguments() if type(n) is int for x in (0.5, None, True)}
    for args in [(3, 3, 0.5), (tensor, True, 0.5), (tensor, 3.0, 0.5), (tensor, 3, 2), (tensor, None, 0.5)]:
        try:
            found = classes(*args)
        except (AttributeError, TypeError):
            continue
        assert found not in kept, args
    with pytest.raises(TypeError):
        classes(tensor, 3)


def test_nothing_is_kept_under_the_interpreter_or_when_switched_off(monkeypatch):
    kernel = moram_triton._kernels().route_forward_kernel  # (the suite runs Triton's interpreter)
    assert not keepable(kernel) and not isinstance(kept_or_plain(kernel, (1,), K=1), KeptLaunch)
    assert not keepable(object())


def test_the_switch_is_read_at_import():
    code = "from moram_avalanche.layers.moram.paths import triton_launch as t; print(t.enabled())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    answers = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**env, triton_launch.SWITCH: value}).stdout.split()[-1]
               for value in ("triton", " Triton ", "", "kept")]
    assert answers == ["False", "False", "True", "True"]


def test_a_parameter_without_a_value_keeps_nothing():
    class Param:
        def __init__(self, name, default=None):
            self.name, self.has_default, self.default = name, default is not None, default

    class Kernel:
        params = [Param("x"), Param("K"), Param("BLOCK", 16), Param("FLAG")]

    launcher = KeptLaunch(Kernel(), (4,), {"K": 3})
    assert launcher.tail_of(1) is None and launcher.tail is None
    assert KeptLaunch(Kernel(), (4, 2), {"K": 3, "FLAG": True, "num_warps": 4}).tail_of(1) == (3, 16, True)
    assert KeptLaunch(Kernel(), (4, 2), {}).grid_3 == (4, 2, 1)


class _Compiled:
    """A compiled kernel as a kept launch uses it: its launcher records which kernel ran."""

    def __init__(self, classes, launched):
        self.function, self.packed_metadata = classes, object()
        self.run = lambda *args: launched.append(("direct", classes))


class _Kernel:
    """A JIT kernel whose launch (``run``) compiles one kernel per class of Triton's own specialisation."""

    def __init__(self):
        self.params, self.compiled, self.launched = [], {}, []

    def run(self, *args, grid, warmup, **constants):
        classes = tuple(tritons_specialization(arg) for arg in args)
        compiled = self.compiled.setdefault(classes, _Compiled(classes, self.launched))
        self.launched.append(("triton", classes))
        return compiled


def test_each_launch_runs_the_kernel_triton_would_even_when_the_arguments_kinds_change(monkeypatch):
    """Kept for arguments (tensor, int, float); then a call whose last argument is an int keeps nothing
    (its kinds are not the kept ones'), so a later int of another class is not served by its kernel."""
    knobs, driver = type("K", (), {"launch_enter_hook": None, "launch_exit_hook": None})(), type("D", (), {})()
    driver.active = type("A", (), {"get_current_device": lambda self: 0, "get_current_stream": lambda self, d: 5})()
    monkeypatch.setattr(triton_launch, "_runtime", lambda: (knobs, driver))
    kernel, tensor = _Kernel(), torch.zeros(8)
    launcher = KeptLaunch(kernel, (2,), {})
    calls = [(tensor, 3, 0.5), (tensor, 3, 0.25), (tensor, 2, 2), (tensor, 2, 16), (tensor, 2, 2), (tensor, 16, 0.5),
             (tensor[1:], 16, 0.5), (tensor, 1, 0.5), (tensor, 35, 0.5), (tensor, 3, 0.5)]
    for args in calls:
        launcher(*args)
    expected = [tuple(tritons_specialization(arg) for arg in args) for args in calls]
    ran = [classes for how, classes in kernel.launched]
    assert ran == expected  # (one record a call: Triton's launch, or the kept kernel's launcher)
    hows = [how for how, _ in kernel.launched]
    # (a class a new int value, a misaligned tensor, a new kind of argument: through Triton; a repeat: direct)
    assert hows == ["triton", "direct", "triton", "triton", "triton", "triton", "triton", "triton", "triton", "direct"]


def test_a_copy_or_a_pickle_keeps_no_compiled_kernel(monkeypatch):
    """A compiled kernel unloads its GPU module when freed: a copy of a launcher shares none (it keeps
    its own at its first launches), and a layer's deep copy, its pickle, carry none."""
    import copy
    import pickle

    knobs, driver = type("K", (), {"launch_enter_hook": None, "launch_exit_hook": None})(), type("D", (), {})()
    driver.active = type("A", (), {"get_current_device": lambda self: 0, "get_current_stream": lambda self, d: 5})()
    monkeypatch.setattr(triton_launch, "_runtime", lambda: (knobs, driver))
    kernel = _Kernel()
    launcher = KeptLaunch(kernel, (2, 3), {"num_warps": 4})
    launcher(torch.zeros(4), 3, 0.5)
    assert len(launcher.compiled) == 1
    for made in (copy.copy(launcher), copy.deepcopy(launcher), copy.deepcopy({"held": launcher})["held"]):
        assert made.kernel is kernel and made.grid == (2, 3) and made.constants == {"num_warps": 4}
        assert made.compiled == {} and made.classes is None
    assert KeptLaunch.__reduce__(launcher) == (KeptLaunch, (kernel, (2, 3), {"num_warps": 4}))
    plain = KeptLaunch(len, (1,), {"K": 2})  # (a picklable stand-in for the kernel)
    loaded = pickle.loads(pickle.dumps(plain))
    assert loaded.kernel is len and loaded.constants == {"K": 2} and loaded.compiled == {}


def test_with_several_gpus_each_device_keeps_its_own_kernels(monkeypatch):
    """A compiled kernel is loaded on one device: where the process sees several, the current device is
    asked at each launch and is part of the class (with one, it is asked once)."""
    current = {"device": 0}
    asked = []

    def get_current_device(self):
        asked.append(current["device"])
        return current["device"]

    knobs, driver = type("K", (), {"launch_enter_hook": None, "launch_exit_hook": None})(), type("D", (), {})()
    driver.active = type("A", (), {"get_current_device": get_current_device,
                                   "get_current_stream": lambda self, d: 10 + d})()
    monkeypatch.setattr(triton_launch, "_runtime", lambda: (knobs, driver))
    tensor = torch.zeros(8)
    for several in (True, False):
        monkeypatch.setattr(triton_launch, "_one_device", lambda several=several: not several)
        kernel = _Kernel()
        launcher = KeptLaunch(kernel, (2,), {})
        asked.clear()
        for device in (0, 0, 1, 1, 0):
            current["device"] = device
            launcher(tensor, 3, 0.5)
        hows = [how for how, _ in kernel.launched]
        if several:  # device 1's first launch goes through Triton (its own compiled kernel), then each is kept
            assert hows == ["triton", "direct", "triton", "direct", "direct"] and len(launcher.compiled) == 2
            assert len(asked) >= 5
        else:
            assert hows == ["triton"] + ["direct"] * 4 and len(asked) == 1 and launcher.device == 0


def test_a_direct_launch_that_raises_is_made_again_by_triton_and_no_launch_is_kept_after(monkeypatch):
    """A kept launch that raises (what no check here foresaw) costs one warning: the launch is made
    through Triton's own, and so is every later one of the process (as the switch makes them)."""
    knobs, driver = type("K", (), {"launch_enter_hook": None, "launch_exit_hook": None})(), type("D", (), {})()
    driver.active = type("A", (), {"get_current_device": lambda self: 0, "get_current_stream": lambda self, d: 5})()
    monkeypatch.setattr(triton_launch, "_runtime", lambda: (knobs, driver))
    monkeypatch.setattr(triton_launch, "_ENABLED", True)
    kernel, other, tensor = _Kernel(), _Kernel(), torch.zeros(8)
    launcher, second = KeptLaunch(kernel, (2,), {}), KeptLaunch(other, (2,), {})
    launcher(tensor, 3, 0.5)
    second(tensor, 3, 0.5)
    second(tensor, 3, 0.5)  # (kept, direct)

    def broken(*args):
        raise RuntimeError("the launcher refused its arguments")

    (entry,) = launcher.compiled.values()
    launcher.compiled = {key: (entry[0], broken, *entry[2:]) for key in launcher.compiled}
    with pytest.warns(RuntimeWarning, match="kept Triton launch .* raised RuntimeError: the launcher refused"):
        launcher(tensor, 3, 0.5)
    assert [how for how, _ in kernel.launched] == ["triton", "triton"] and not triton_launch.enabled()
    second(tensor, 3, 0.5)  # (another launcher, kept before: through Triton now, keeping nothing more)
    launcher(tensor, 3, 0.5)
    assert [how for how, _ in other.launched] == ["triton", "direct", "triton"]
    assert [how for how, _ in kernel.launched] == ["triton", "triton", "triton"]
    second(tensor, 4, 0.5)  # (a new class: launched through Triton, and not kept either)
    assert len(second.compiled) == 1
