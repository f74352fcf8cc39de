"""A MoRAM path forced by ``MORAM_AVALANCHE_PATH`` that the run's device cannot run is refused
where the run starts, before the model loads (issue 46: ``triton`` on a CPU without Triton's
interpreter, ``cpu-kernel`` whose kernel cannot be built, were tracebacks at the first forward,
after the weights loaded and ``run.json`` was written)."""

import pytest

from moram_avalanche.layers.moram.paths import cpu_kernel
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths.switch import PATH_VARIABLE
from moram_avalanche.strategies.forced_path import check_forced_path, forced_path_problem


class ModelLoaded(Exception):
    """Raised by the setup's model loader: the run got as far as loading the model."""


def never_loaded():
    raise ModelLoaded


@pytest.fixture
def no_interpreter(monkeypatch):
    """Triton, where installed, without its interpreter (the test suite turns it on for the CPU)."""
    monkeypatch.setattr(moram_triton, "interpreting", lambda: False)
    return monkeypatch


@pytest.mark.parametrize("setting", [None, "auto", "no-cpu-kernel", "reference", "dense"])
def test_what_runs_on_any_device_is_not_refused(setting, monkeypatch):
    if setting is None:
        monkeypatch.delenv(PATH_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(PATH_VARIABLE, setting)
    assert forced_path_problem("cpu") is None
    check_forced_path("cpu")


def test_triton_on_a_cpu_without_the_interpreter_is_refused_in_one_line(no_interpreter):
    no_interpreter.setenv(PATH_VARIABLE, "triton")
    with pytest.raises(ValueError, match=r"^MoRAM path 'triton' \(MORAM_AVALANCHE_PATH=triton\) cannot run on device "
                                         r"cpu: (Triton is not installed|Triton runs on CUDA tensors).*; or unset "
                                         r"MORAM_AVALANCHE_PATH \(auto picks the path each device can run\)$") as error:
        check_forced_path("cpu")
    assert "\n" not in str(error.value)


def test_cpu_kernel_off_the_cpu_or_unbuildable_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv(PATH_VARIABLE, "cpu-kernel")
    with pytest.raises(ValueError, match=r"'cpu-kernel' \(MORAM_AVALANCHE_PATH=cpu-kernel\) cannot run on device "
                                         r"cuda: it runs on CPU tensors; run on --device cpu"):
        check_forced_path("cuda")  # no GPU needed: nothing is made on it
    monkeypatch.setattr(cpu_kernel, "_module", None)  # a loader that has not built yet, and cannot
    monkeypatch.setattr(cpu_kernel, "_failure", None)
    monkeypatch.setattr(cpu_kernel, "_build", lambda: (_ for _ in ()).throw(OSError("no ninja")))
    with pytest.raises(ValueError, match="MORAM_AVALANCHE_PATH=cpu-kernel asks for MoRAM's CPU routing kernel, but "
                                         "it could not be built: OSError: no ninja") as error:
        check_forced_path("cpu")
    assert "\n" not in str(error.value)


def test_an_unknown_setting_is_the_switchs_error(monkeypatch):
    monkeypatch.setenv(PATH_VARIABLE, "fast")
    with pytest.raises(ValueError, match="MORAM_AVALANCHE_PATH: unknown MoRAM path 'fast'"):
        check_forced_path("cpu")


def test_the_run_path_refuses_before_the_model_loads_and_only_for_moram(no_interpreter):
    from moram_avalanche.experiments.run import Setup, prepare_runs

    no_interpreter.setenv(PATH_VARIABLE, "triton")
    setup = Setup(make_model=never_loaded, make_benchmark=lambda train, eval: None, family="text")
    with pytest.raises(ValueError, match="MoRAM path 'triton'"):
        prepare_runs(setup, ["seq-lora", "moram"])
    with pytest.raises(ModelLoaded):  # no MoRAM layer runs: the forced path does not matter
        prepare_runs(setup, ["seq-lora"])
