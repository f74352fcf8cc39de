"""The analysis pictures, in one style: readable labels, one colour scale per figure, titles
that say what is shown (what, which layer, which data, after which task).

Every function returns a PIL image (:func:`~moram_avalanche.experiments.viz.figure_to_image`).
Continuous values use ``viridis`` on a scale fixed by what they are (mixture weights 0-1, atom
counts 0 to the bank size); tasks are told apart by the qualitative ``tab10`` / ``tab20`` colours.
"""

from __future__ import annotations

import contextlib
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...viz import figure_to_image
from .mass import MassCount
from .pruning import PruneRow
from .records import TOWER_NAMES, parse_layer_name

#: continuous colour map of every analysis figure
CMAP = "viridis"
#: the projections in the paper's order (the release's "qkvoinout")
PROJECTIONS = ("q", "k", "v", "out", "fc", "proj")
STYLE = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "xtick.labelsize": 8,
         "ytick.labelsize": 8, "legend.fontsize": 8, "figure.titlesize": 11}
DPI = 120


@contextlib.contextmanager
def _style():
    import matplotlib

    matplotlib.use("Agg", force=False)
    with matplotlib.rc_context(STYLE):
        yield


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def task_colours(tasks: int) -> List:
    """One qualitative colour per task (tab10 up to 10 tasks, tab20 up to 20, then repeating)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10" if tasks <= 10 else "tab20"]
    return [cmap(t % cmap.N) for t in range(max(tasks, 1))]


def _task_blocks(atom_task: np.ndarray):
    """``(task, first row, last row)`` of each run of equal tasks."""
    blocks, start = [], 0
    for row in range(1, len(atom_task) + 1):
        if row == len(atom_task) or atom_task[row] != atom_task[start]:
            blocks.append((int(atom_task[start]), start, row - 1))
            start = row
    return blocks


def patch_strip(image: np.ndarray, grid: Sequence[int], prefix: int) -> np.ndarray:
    """The patches of ``image`` ``[H, W, 3]`` side by side in token order, ``prefix`` blank slots
    (the class token) first: ``[ph, (prefix + gh * gw) * pw, 3]``."""
    rows, cols = grid
    ph, pw = image.shape[0] // rows, image.shape[1] // cols
    slots = [np.ones((ph, pw, 3)) * 0.85 for _ in range(prefix)]
    for index in range(rows * cols):
        r, c = divmod(index, cols)
        slots.append(image[r * ph:(r + 1) * ph, c * pw:(c + 1) * pw])
    return np.concatenate(slots, axis=1)


def activation_map(weights: np.ndarray, atom_task: np.ndarray, *, title: str,
                   image: Optional[np.ndarray] = None, grid: Optional[Sequence[int]] = None,
                   token_names: Optional[Sequence[str]] = None):
    """Atoms x tokens heatmap of mixture weights (0-1), atoms grouped by the task that added them.

    With ``image`` ``[H, W, 3]`` and its patch ``grid`` (rows, cols) the patches are drawn under
    their tokens (class token first, blank) and the whole image beside, with the grid; with
    ``token_names`` (prompts) the tokens are labelled instead.
    """
    weights, atom_task = np.asarray(weights, dtype=float), np.asarray(atom_task)
    atoms, tokens = weights.shape
    prefix = tokens - (grid[0] * grid[1]) if image is not None else 0
    width = float(np.clip(3.5 + 0.085 * tokens, 8, 20))
    height = float(np.clip(1.6 + 0.045 * atoms, 2.8, 9)) + (1.0 if image is not None else 0.6)
    with _style():
        fig = _figure(width, height)
        spec = fig.add_gridspec(2, 3, width_ratios=[1, 0.018, 0.16],
                                height_ratios=[1, 0.14 if image is not None else 0.001])
        ax = fig.add_subplot(spec[0, 0])
        shown = ax.imshow(weights, aspect="auto", cmap=CMAP, vmin=0, vmax=1, interpolation="nearest")
        for _, first, _ in _task_blocks(atom_task):
            if first:
                ax.axhline(first - 0.5, color="white", linewidth=0.8)
        blocks = _task_blocks(atom_task)
        ax.set_yticks([(first + last) / 2 for _, first, last in blocks],
                      labels=[f"task {task + 1}" for task, _, _ in blocks])
        ax.set_ylabel(f"atoms ({atoms}), by the task that added them")
        fig.colorbar(shown, cax=fig.add_subplot(spec[0, 1]), label="mixture weight")
        ax.set_title(title, loc="left")
        if token_names is not None:
            ax.set_xticks(range(tokens), labels=list(token_names), rotation=90)
            ax.set_xlabel("tokens")
        elif image is not None:
            step = max(1, int(np.ceil(tokens / 25)))
            ticks = [0, *range(prefix + step - 1, tokens, step)] if prefix else list(range(0, tokens, step))
            ax.set_xticks(ticks, labels=["CLS" if t < prefix else str(t - prefix + 1) for t in ticks])
            ax.tick_params(axis="x", labelbottom=False, labeltop=True)
            strip_ax = fig.add_subplot(spec[1, 0], sharex=ax)
            strip_ax.imshow(patch_strip(image, grid, prefix), extent=(-0.5, tokens - 0.5, 0, 1), aspect="auto",
                            interpolation="nearest")
            strip_ax.set_yticks([])
            strip_ax.set_xlabel(f"tokens: class token, then the {grid[0]} x {grid[1]} patches row by row "
                                "(the patch under each column)")
            whole = fig.add_subplot(spec[0, 2])
            whole.imshow(image, interpolation="nearest")
            for k in range(1, grid[0]):
                whole.axhline(k * image.shape[0] / grid[0] - 0.5, color="white", linewidth=0.3)
            for k in range(1, grid[1]):
                whole.axvline(k * image.shape[1] / grid[1] - 0.5, color="white", linewidth=0.3)
            whole.set_xticks([])
            whole.set_yticks([])
            whole.set_title("the image", fontsize=8)
        return figure_to_image(fig, dpi=DPI)


def activation_ratios(panels: Sequence[dict], *, title: str):
    """One bar chart per scenario (stacked, one shared y scale): each atom's averaged activation
    ratio, bars coloured by the task that added the atom.

    ``panels``: ``{"label", "ratios" [R], "atom_task" [R]}`` per scenario.
    """
    tasks = 1 + max(int(np.max(p["atom_task"])) for p in panels)
    colours = task_colours(tasks)
    top = max(float(np.max(p["ratios"])) for p in panels) * 1.1 or 1.0
    atoms = max(len(p["ratios"]) for p in panels)
    with _style():
        fig = _figure(float(np.clip(4 + 0.06 * atoms, 8, 18)), 1.2 + 1.6 * len(panels))
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        for ax, panel in zip(axes, panels):
            owner = np.asarray(panel["atom_task"])
            ax.bar(np.arange(len(panel["ratios"])), panel["ratios"], width=0.85,
                   color=[colours[int(t)] for t in owner])
            ax.set_ylim(0, top)
            ax.set_title(panel["label"], loc="left")
            ax.set_ylabel("ratio")
            ax.grid(axis="y", alpha=0.3)
        axes[-1].set_xlabel("atom (bank order: task 1's atoms first)")
        from matplotlib.patches import Patch

        fig.legend(handles=[Patch(color=colours[t], label=f"task {t + 1}") for t in range(tasks)],
                   loc="outside lower center", ncols=min(tasks, 10), title="atoms added by")
        fig.suptitle(title)
        return figure_to_image(fig, dpi=DPI)


def _grid(rows: Sequence[MassCount], encoder: str, field: str):
    mine = [row for row in rows if row.encoder == encoder]
    depth = 1 + max(row.block for row in mine)
    projections = [p for p in PROJECTIONS if any(row.projection == p for row in mine)]
    projections += sorted({row.projection for row in mine} - set(projections))
    values = np.full((depth, len(projections)), np.nan)
    for row in mine:
        values[row.block, projections.index(row.projection)] = getattr(row, field)
    return values, projections


def mass_counts(rows: Sequence[MassCount], *, share: float, tasks: int):
    """Per tower, blocks x projections: atoms needed for ``share`` of the cumulative mass
    (annotated), on one scale from 0 to the largest bank."""
    encoders = [e for e in ("visual", "text") if any(row.encoder == e for row in rows)]
    top = max(row.atoms for row in rows)
    depth = max(1 + row.block for row in rows)
    with _style():
        fig = _figure(1.8 + 3.6 * len(encoders), 1.6 + 0.32 * depth)
        axes = fig.subplots(1, len(encoders), squeeze=False)[0]
        for ax, encoder in zip(axes, encoders):
            values, projections = _grid(rows, encoder, "needed")
            atoms, _ = _grid(rows, encoder, "atoms")
            shown = ax.imshow(values, aspect="auto", cmap=CMAP, vmin=0, vmax=top)
            for (r, c), value in np.ndenumerate(values):
                if np.isfinite(value):
                    ax.text(c, r, f"{value:.0f}", ha="center", va="center", fontsize=7,
                            color="black" if value > 0.6 * top else "white")
            ax.set_xticks(range(len(projections)), labels=projections)
            ax.set_yticks(range(values.shape[0]), labels=[str(b + 1) for b in range(values.shape[0])])
            ax.set_ylabel("layer")
            bank = int(np.nanmax(atoms))
            ax.set_title(f"{TOWER_NAMES[encoder]} encoder (of {bank} atoms per layer)")
        fig.colorbar(shown, ax=list(axes), label="atoms needed", shrink=0.9)
        fig.suptitle(f"Atoms needed for {share:.0%} of the cumulative activation mass, after all "
                     f"{tasks} tasks")
        return figure_to_image(fig, dpi=DPI)


def cumulative_curves(curves: Dict[str, dict], *, share: float, tasks: int):
    """Per tower, the share of a layer's cumulative mass held by its ``n`` largest atoms, with the
    ``share`` line and each layer's count marked.

    ``curves``: ``{label: {"encoder", "curve" [R], "needed"}}``.
    """
    encoders = [e for e in ("visual", "text") if any(c["encoder"] == e for c in curves.values())]
    with _style():
        fig = _figure(1.5 + 4.2 * len(encoders), 3.6)
        axes = fig.subplots(1, len(encoders), squeeze=False, sharey=True)[0]
        for ax, encoder in zip(axes, encoders):
            mine = {label: c for label, c in curves.items() if c["encoder"] == encoder}
            colours = task_colours(len(mine))
            for colour, (label, c) in zip(colours, mine.items()):
                x = np.arange(1, len(c["curve"]) + 1)
                ax.plot(x, c["curve"], color=colour, label=f"{label}: {c['needed']} of {len(x)}")
                ax.axvline(c["needed"], color=colour, linestyle=":", linewidth=1)
            ax.axhline(share, color="grey", linestyle="--", linewidth=1, label=f"{share:.0%} of the mass")
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("atoms, largest cumulative mass first")
            ax.set_title(f"{TOWER_NAMES[encoder]} encoder")
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right")
        axes[0].set_ylabel("share of the layer's cumulative mass")
        fig.suptitle(f"Sorted cumulative activation mass after all {tasks} tasks (representative layers)")
        return figure_to_image(fig, dpi=DPI)


def pruning(rows: Sequence[PruneRow], *, hypothetical: bool, share: float = 0.99, paper_share: float = 0.3):
    """Left: stored numbers saved per task (share of those the task added; the paper's ~30% marked).
    Right: mean atoms kept per layer, by tower and projection, per task (one scale, 0 to ``r``).
    ``hypothetical``: what keeping ``share`` of each task's mass would do (the run did not prune)."""
    tasks = sorted({row.task for row in rows})
    where = {row.layer: parse_layer_name(row.layer) for row in rows}
    present = {(w.encoder, w.projection) for w in where.values()}
    groups = [(e, p) for e in ("visual", "text") for p in PROJECTIONS if (e, p) in present]
    groups += sorted(present - set(groups))
    kept = np.full((len(groups), len(tasks)), np.nan)
    for g, group in enumerate(groups):
        for t, task in enumerate(tasks):
            mine = [row.kept for row in rows
                    if row.task == task and (where[row.layer].encoder, where[row.layer].projection) == group]
            kept[g, t] = np.mean(mine)
    saved = []
    for task in tasks:
        part = [row for row in rows if row.task == task]
        added = sum(row.added * row.per_atom for row in part)
        saved.append(100 * sum(row.saved for row in part) / added if added else 0.0)
    top = max(row.added for row in rows)
    what = (f"would save ({share:.0%} rule on the recorded masses; this run did not prune)" if hypothetical
            else "saved")
    with _style():
        fig = _figure(3.5 + 0.45 * len(tasks) * 2, 1.8 + 0.28 * len(groups))
        left, right = fig.subplots(1, 2, width_ratios=[1, 1.2])
        left.bar([t + 1 for t in tasks], saved, color=task_colours(1)[0])
        left.axhline(100 * paper_share, color="grey", linestyle="--", linewidth=1, label="paper: about 30%")
        left.set_xticks([t + 1 for t in tasks])
        left.set_xlabel("task")
        left.set_ylabel("storage saved (% of the task's atoms)")
        left.set_ylim(0, 100)
        left.legend(loc="upper right")
        left.set_title("storage saved per task" if not hypothetical else "storage pruning would save per task")
        shown = right.imshow(kept, aspect="auto", cmap=CMAP, vmin=0, vmax=top)
        for (r, c), value in np.ndenumerate(kept):
            if np.isfinite(value):
                right.text(c, r, f"{value:.1f}", ha="center", va="center", fontsize=7,
                           color="black" if value > 0.6 * top else "white")
        right.set_xticks(range(len(tasks)), labels=[str(t + 1) for t in tasks])
        right.set_yticks(range(len(groups)), labels=[f"{TOWER_NAMES[e]} {p}" for e, p in groups])
        right.set_xlabel("task")
        right.set_title(f"atoms kept per layer (mean over blocks, of {top})")
        fig.colorbar(shown, ax=right, label="atoms kept")
        fig.suptitle(f"Pruning: atoms kept and storage {what}")
        return figure_to_image(fig, dpi=DPI)


__all__ = ["CMAP", "PROJECTIONS", "activation_map", "activation_ratios", "cumulative_curves", "mass_counts",
           "patch_strip", "pruning", "task_colours"]
