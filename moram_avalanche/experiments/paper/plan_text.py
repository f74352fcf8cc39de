"""The plan of ``reproduce TABLE --dry-run``, as text: the model, device and data, each table's rows
and every run with its settings (:func:`plan_text`); each family fills in its own lines
(the settings' :meth:`~.settings.ReproductionSettings.plan_header`, the table's
:meth:`~.spec.PaperTable.plan_lines`, the protocol's :meth:`~.protocol.PaperProtocol.plan_lines`)."""

from __future__ import annotations

from typing import Any, Sequence

from .runs import plan, table_seeds


def plan_text(specs: Sequence[Any], settings) -> str:
    """The plan of ``specs`` (module docstring)."""
    planned = plan(specs, settings)
    lines = [f"moram-avalanche reproduce: {', '.join(s.name for s in specs)}"
             + (f" -- REHEARSAL ({settings.rehearsal}; the numbers mean nothing)" if settings.rehearse else ""),
             *settings.model_lines(),
             f"  device: {settings.device}; output: {settings.root}",
             *settings.plan_header(specs, planned)]
    for spec in specs:
        lines.append(f"\n{spec.name} ({spec.label}): {spec.title}{spec.plan_heading(settings)}; seeds "
                     f"{', '.join(map(str, table_seeds(spec, settings)))}")
        lines += spec.plan_lines(settings)
    lines.append(f"\nruns ({len(planned)}; each resumes from its folder):")
    for entry in planned:
        lines += entry.run.protocol.plan_lines(entry.run, entry.used_by, settings)
    return "\n".join(lines)


__all__ = ["plan_text"]
