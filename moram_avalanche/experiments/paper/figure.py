"""The picture of a reproduced table, ours against the paper's (:func:`table_figure`): per block of a
per-domain table, each method's mean column as bars (error bars over the seeds); a summary
table's columns as horizontal bars; a table without paper numbers (the sweeps) as curves."""

from __future__ import annotations

import numpy as np

from .results import TableResult
from .spec import MEAN_COLUMN


def table_figure(result: TableResult):
    """Ours against the paper's: per block, the mean column of each method (bars, error bars
    over seeds); for the sweeps, Transfer / Average / Last against each parameter."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    from ..viz import figure_to_image

    spec = result.spec
    if spec.paper is None:  # the sweeps: curves per parameter
        return _sweep_figure(result, Figure, figure_to_image)
    if spec.layout == "summary":
        return _summary_figure(result, Figure, figure_to_image)
    blocks = list(dict.fromkeys(row.block for row in result.rows))
    panels = [(block, [(r.method, r.cells[MEAN_COLUMN]) for r in result.rows if r.block == block])
              for block in blocks]
    width = max(6.0, 0.55 * max(len(items) for _, items in panels) + 2)
    fig = Figure(figsize=(width, 2.6 * len(panels)), layout="constrained")
    title = f"{spec.label}: ours vs the paper" + _caveat(result)
    fig.suptitle(title)
    for index, (name, items) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, index + 1)
        x = np.arange(len(items))
        ours = [np.nan if c.ours is None else c.ours for _, c in items]
        errors = [0 if c.ours_std is None else c.ours_std for _, c in items]
        paper = [np.nan if c.paper is None else c.paper for _, c in items]
        ax.bar(x - 0.2, ours, 0.4, yerr=errors, label="ours", color="#3b75af")
        ax.bar(x + 0.2, paper, 0.4, label="paper", color="#b8b8b8")
        for position, value in zip(x, ours):
            if np.isnan(value):
                ax.text(position - 0.2, 2, "not run", rotation=90, fontsize=7, ha="center", va="bottom")
        ax.set_xticks(x, labels=[label for label, _ in items], rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, max(len(items), 4) - 0.4)
        ax.set_ylabel(f"{name}, mean (%)")
        ax.set_ylim(0, 100)
        if index == 0:
            ax.legend(fontsize=8, loc="lower right")
    return figure_to_image(fig)


def _summary_figure(result: TableResult, Figure, figure_to_image):
    """One panel per column (Transfer / Average / Last), one pair of horizontal bars per row."""
    rows = result.rows
    fig = Figure(figsize=(4 + 3 * len(result.columns), 1.4 + 0.42 * len(rows)), layout="constrained")
    fig.suptitle(f"{result.spec.label}: ours vs the paper" + _caveat(result))
    y = np.arange(len(rows))[::-1]
    for index, column in enumerate(result.columns):
        ax = fig.add_subplot(1, len(result.columns), index + 1)
        cells = [row.cells[column] for row in rows]
        ours = [np.nan if c.ours is None else c.ours for c in cells]
        ax.barh(y + 0.2, ours, 0.4, xerr=[0 if c.ours_std is None else c.ours_std for c in cells],
                label="ours", color="#3b75af")
        ax.barh(y - 0.2, [np.nan if c.paper is None else c.paper for c in cells], 0.4, label="paper",
                color="#b8b8b8")
        for position, value in zip(y, ours):
            if np.isnan(value):
                ax.text(1, position + 0.2, "not run", fontsize=7, va="center")
        ax.set_yticks(y, labels=[row.method for row in rows] if index == 0 else [], fontsize=8)
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"{column} (%)")
        if index == 0:
            ax.legend(fontsize=8, loc="lower right")
    return figure_to_image(fig)


def _sweep_figure(result: TableResult, Figure, figure_to_image):
    blocks = list(dict.fromkeys(row.block for row in result.rows))
    fig = Figure(figsize=(4.2 * len(blocks), 3.4), layout="constrained")
    fig.suptitle(f"{result.spec.label}: Transfer / Average / Last" + _caveat(result))
    for index, block in enumerate(blocks):
        ax = fig.add_subplot(1, len(blocks), index + 1)
        rows = [r for r in result.rows if r.block == block]
        labels = [r.method.split("=")[-1].strip() for r in rows]
        for column in result.columns:
            values = [np.nan if r.cells[column].ours is None else r.cells[column].ours for r in rows]
            errors = [0 if r.cells[column].ours_std is None else r.cells[column].ours_std for r in rows]
            ax.errorbar(range(len(rows)), values, yerr=errors, marker="o", label=column, capsize=3)
        ax.set_xticks(range(len(rows)), labels=labels)
        ax.set_xlabel(block)
        ax.set_ylabel("accuracy (%)")
        ax.legend(fontsize=8)
    return figure_to_image(fig)


def _caveat(result: TableResult) -> str:
    if result.rehearsal:
        return " (REHEARSAL: the numbers mean nothing)"
    return "" if result.budget is None else f" (smoke run: {result.budget} iterations per task)"


__all__ = ["table_figure"]
