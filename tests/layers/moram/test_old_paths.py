"""0.6's module paths and names of MoRAM's layer still resolve, to the objects that now hold them, until 0.8."""

import importlib
import sys
import warnings

import pytest

from moram_avalanche.layers.moram import backward, layer
from moram_avalanche.layers.moram.paths import choice, cpu_kernel, dense, reference, switch

# 0.6 module -> {a name it held: the object that holds it now}
OLD_NAMES = {
    "moram_avalanche.layers.moram_paths": {
        "PATHS": switch.PATHS, "PATH_VARIABLE": switch.PATH_VARIABLE, "check_path": switch.check_path,
        "requested": switch.requested, "use_path": switch.use_path, "path_name": choice.path_name,
        "mixture_for": choice.mixture_for},
    "moram_avalanche.layers.moram_fused": {
        "route": reference.route, "select": reference.select, "read_out": reference.read_out,
        "sparse_mixture": reference.sparse_mixture, "Kernels": reference.Kernels, "RELEVANCE_EPS": 1e-12,
        "kernels_for": choice.kernels_for, "compute_dtype": layer.compute_dtype,
        "MoRAMFunction": backward.MoRAMFunction},
    "moram_avalanche.layers.routing_kernel": {"load": cpu_kernel.load, "built": cpu_kernel.built,
                                              "SOURCE": cpu_kernel.SOURCE},
    "moram_avalanche.layers.moram_dense": {"dense_mixture": dense.dense_mixture},
}


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_an_old_module_path_resolves_with_a_warning_to_where_its_names_are_now(old, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)  # imported by another test: import it afresh
    with pytest.warns(DeprecationWarning, match=f"{old} moved to moram_avalanche.layers.moram"):
        module = importlib.import_module(old)
    for name, now in OLD_NAMES[old].items():
        assert getattr(module, name) is now or getattr(module, name) == now, name


def test_the_kernels_old_choice_and_variable_are_its_mode_and_the_switchs_with_a_warning(monkeypatch):
    monkeypatch.delenv(switch.PATH_VARIABLE, raising=False)
    monkeypatch.delenv(switch.KERNEL_VARIABLE, raising=False)
    with pytest.warns(DeprecationWarning, match=r"cpu_kernel.choice is mode\(\)"):
        assert cpu_kernel.choice is cpu_kernel.mode
    with pytest.warns(DeprecationWarning, match="KERNEL_VARIABLE is switch.KERNEL_VARIABLE"):
        assert cpu_kernel.KERNEL_VARIABLE == "MORAM_AVALANCHE_KERNEL"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cpu_kernel.mode() == "auto"
    with pytest.raises(AttributeError, match="has no attribute 'kernels_for'"):
        cpu_kernel.kernels_for  # noqa: B018 -- the chooser's, never the kernel's
