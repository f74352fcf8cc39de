"""Which tensor operators a call dispatches, and which of them would make a GPU wait for the host.

A CUDA kernel launch returns at once; an operator whose result's SIZE or a Python value depends
on the data must wait for the device to finish (a host synchronisation): ``.item()`` /
``bool(t)`` (``_local_scalar_dense``, ``is_nonzero``), ``nonzero``, boolean-mask indexing
(``x[mask]``, ``x[mask] = v``: a ``nonzero`` inside), ``masked_select``, ``unique``,
``repeat_interleave`` without ``output_size``, ``equal``, a copy to the CPU. One of them in
every layer call turns a GPU-bound forward into a launch-and-wait loop.

:class:`OpCounter` records every ATen operator a block of code dispatches (a
``TorchDispatchMode``, so it works on CPU tensors too: what a forward would ask of a GPU is
read on a CPU) and :meth:`OpCounter.host_syncs` names those that would synchronise.
``torch.cuda.set_sync_debug_mode("error")`` is the same check on a real GPU (``scripts/gpu_checks.py``).

Pure Python on top of torch (imported on use).
"""

from __future__ import annotations

from collections import Counter
from typing import List

#: operators that always wait for the device (their result's size or value is read on the host)
SYNCHRONISING = frozenset({
    "aten::_local_scalar_dense", "aten::is_nonzero", "aten::item", "aten::nonzero", "aten::argwhere",
    "aten::masked_select", "aten::equal", "aten::allclose", "aten::_unique", "aten::_unique2",
    "aten::unique_dim", "aten::unique_consecutive", "aten::unique_dim_consecutive", "aten::bincount",
})
#: operators that wait only with some arguments (boolean indices, no output size, a copy to the CPU)
_INDEXING = frozenset({"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"})


def _op_name(func) -> str:
    return func._schema.name  # "aten::index" for aten.index.Tensor


def _is_bool_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def _synchronises(name: str, args, kwargs) -> bool:
    if name in SYNCHRONISING:
        return True
    if name in _INDEXING:
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(_is_bool_tensor(index) for index in (indices or ()) if index is not None)
    if name == "aten::repeat_interleave":
        return kwargs.get("output_size") is None and (len(args) < 4 or args[3] is None)
    if name in ("aten::_to_copy", "aten::to", "aten::copy_"):
        import torch

        device = kwargs.get("device")
        source = args[1] if name == "aten::copy_" and len(args) > 1 else args[0]
        target = args[0] if name == "aten::copy_" else None
        if name == "aten::copy_" and isinstance(source, torch.Tensor) and isinstance(target, torch.Tensor):
            return source.device.type != "cpu" and target.device.type == "cpu"
        return device is not None and torch.device(device).type == "cpu" and isinstance(source, torch.Tensor) \
            and source.device.type != "cpu"
    return False


class OpCounter:
    """Counts the ATen operators dispatched inside ``with OpCounter() as ops:`` (module docstring).

    ``ops.counts`` maps operator names (``"aten::mm"``) to calls; ``ops.total`` is their sum;
    :meth:`host_syncs` lists the calls that would make a GPU wait (operator name per call).
    Operators of a nested mode's own bookkeeping are not counted twice.
    """

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.syncs: List[str] = []
        self._mode = None

    def __enter__(self) -> "OpCounter":
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                name = _op_name(func)
                counter.counts[name] += 1
                if _synchronises(name, args, kwargs):
                    counter.syncs.append(name)
                return func(*args, **kwargs)

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._mode = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def host_syncs(self) -> List[str]:
        """The calls that would synchronise a GPU with the host, one name per call (empty: none)."""
        return list(self.syncs)

    def summary(self) -> str:
        """``total (name x count, ...)``, most frequent first."""
        parts = ", ".join(f"{name.split('::')[-1]} x{count}" for name, count in self.counts.most_common())
        return f"{self.total} ({parts})"


__all__ = ["OpCounter", "SYNCHRONISING"]
