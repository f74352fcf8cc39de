"""Devices named by the user: ``"auto"`` resolved, unavailable ones refused before anything runs.

torch is imported when a device is resolved, not when this module is (the room stays light).
"""

from __future__ import annotations


def resolve_device(device, what: str = "device") -> str:
    """The torch device ``device`` names, as a string, checked against this machine.

    ``"auto"`` is ``"cuda"`` when a CUDA GPU is usable, else ``"cpu"``. A CUDA device on a
    machine without one, a GPU index beyond the machine's, or a name torch does not know is a
    ValueError naming ``what`` (e.g. ``"--device"``), what was given and what is available.
    """
    import torch

    if str(device) == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"{what} {device!r} is not a torch device; use auto, cpu, cuda or cuda:N") from None
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
    return str(parsed) if not isinstance(device, str) else device


__all__ = ["resolve_device"]
