"""Devices named by the user: ``"auto"`` resolved, unavailable ones refused before anything runs.

torch is imported when a device is resolved, not when this module is (the room stays light).
"""

from __future__ import annotations

#: device types a run can use; any other torch device type (meta, xla, hpu, ...) is refused
DEVICE_TYPES = ("cpu", "cuda", "mps")


def check_device(device, what: str = "device") -> str:
    """The torch device ``device`` names, as a string, checked against this machine.

    Accepted: ``"auto"`` (``"cuda"`` when a CUDA GPU is usable, else ``"cpu"``), ``cpu``,
    ``cuda``, ``cuda:N`` (N below the machine's GPU count), ``mps`` where available, or a
    ``torch.device`` of those. Refused with a ValueError naming ``what`` (e.g.
    ``"--device"``), what was given and what is available: a name torch does not know, a
    device type a run cannot compute on (``meta`` holds no data; ``xla``, ``hpu``, ...), a
    CUDA device on a machine without one, a GPU index beyond the machine's, a ``cpu:N``.
    """
    import torch

    if isinstance(device, str) and device.strip().lower() == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise ValueError(f"{what} must be a device name (auto, cpu, cuda, cuda:N, mps) or a "
                         f"torch.device, got {type(device).__name__} {device!r}")
    if isinstance(device, int):
        device = f"cuda:{device}"
    try:
        parsed = torch.device(device.strip() if isinstance(device, str) else device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{what} {device!r} is not a torch device; use auto, cpu, cuda or cuda:N") from None
    if parsed.type == "meta":
        raise ValueError(f"{what} {device!r}: the meta device holds no data (tensors there have a "
                         "shape only), so nothing can be trained or evaluated on it; use auto, cpu "
                         "or cuda")
    if parsed.type not in DEVICE_TYPES:
        raise ValueError(f"{what} {device!r}: device type {parsed.type!r} is not supported; use "
                         "auto, cpu, cuda, cuda:N or mps")
    if parsed.type == "cpu" and parsed.index not in (None, 0):
        raise ValueError(f"{what} {device!r}: there is one CPU device; use {what} cpu")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"{what} {device!r}: no CUDA GPU is usable on this machine (torch "
                             f"{torch.__version__}); use {what} cpu, or auto to take a GPU when "
                             "there is one")
        count = torch.cuda.device_count()
        if parsed.index is not None and parsed.index >= count:
            raise ValueError(f"{what} {device!r}: this machine has {count} CUDA GPU(s), "
                             f"cuda:0 to cuda:{count - 1}")
    elif parsed.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"{what} {device!r}: MPS is not available on this machine; use {what} cpu")
    return device if isinstance(device, str) and device == str(parsed) else str(parsed)


def resolve_device(device, what: str = "device") -> str:
    """:func:`check_device` (kept under its older name: every caller resolves and checks)."""
    return check_device(device, what)


__all__ = ["DEVICE_TYPES", "check_device", "resolve_device"]
