"""Pictures for TensorBoard and PNG files: accuracy matrices, and the heatmaps a strategy's plugins
describe (MoRAM's atom usage: :meth:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin.run_pictures`)."""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np


def figure_to_image(fig, dpi: int = 100):
    """A matplotlib figure as an RGB PIL image (tight bounding box)."""
    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    buffer.seek(0)
    image = Image.open(buffer).convert("RGB")
    image.load()
    return image


def save_png(image, path) -> None:
    """Write a PIL image to ``path`` as PNG, atomically."""
    from ..utils.files import atomic_write_bytes

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    atomic_write_bytes(path, buffer.getvalue())


def heatmap(values: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *,
            title: str = "", fmt: str = "{:.1f}", vmin=None, vmax=None, cmap: str = "viridis"):
    """A labelled heatmap of ``values`` (NaN cells left blank) as a PIL image."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    values = np.asarray(values, dtype=float)
    rows, cols = values.shape
    fig = Figure(figsize=(1.2 + 0.75 * cols, 0.9 + 0.45 * rows))
    ax = fig.add_subplot()
    ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(cols), labels=list(col_labels), rotation=45, ha="right")
    ax.set_yticks(range(rows), labels=list(row_labels))
    low = np.nanmin(values) if vmin is None else vmin
    high = np.nanmax(values) if vmax is None else vmax
    for r in range(rows):
        for c in range(cols):
            if np.isfinite(values[r, c]):
                bright = (values[r, c] - low) > 0.6 * (high - low)  # viridis is light at the top
                ax.text(c, r, fmt.format(values[r, c]), ha="center", va="center", fontsize=8,
                        color="black" if bright else "white")
    if title:
        ax.set_title(title)
    return figure_to_image(fig)


def accuracy_heatmap(matrix: np.ndarray, domains: Sequence[str], title: str = "accuracy (%)"):
    """Rows: after training on domain t; columns: evaluated domain d."""
    rows = [f"after {d}" for d in domains[: len(matrix)]]
    return heatmap(matrix, rows, domains, title=title, vmin=0, vmax=100)


def accuracy_heatmaps(matrices, domains: Sequence[str], *, per_row: int = 4,
                      title: str = "accuracy (%) after training on each domain"):
    """The accuracy matrices of several strategies side by side, on one colour scale (0-100).

    ``matrices``: ``{strategy: [rows, domains] matrix}``; at most ``per_row`` panels per row.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    if not matrices:
        raise ValueError("no accuracy matrices to draw")
    names = list(matrices)
    cols = min(per_row, len(names))
    grid_rows = -(-len(names) // cols)
    size = len(domains)
    cell = 0.5 if size <= 12 else 0.35
    fig = Figure(figsize=(cols * (1.5 + cell * size), grid_rows * (1.9 + cell * size)),
                 layout="constrained")  # keeps titles clear of the tick labels above them
    fig.suptitle(title)
    for i, name in enumerate(names):
        ax = fig.add_subplot(grid_rows, cols, i + 1)
        values = np.asarray(matrices[name], dtype=float)
        image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_title(name)
        ax.set_xticks(range(size), labels=list(domains), rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(values.shape[0]),
                      labels=list(domains[: values.shape[0]]) if i % cols == 0 else [], fontsize=7)
        if size <= 12:
            for r in range(values.shape[0]):
                for c in range(values.shape[1]):
                    if np.isfinite(values[r, c]):
                        ax.text(c, r, f"{values[r, c]:.0f}", ha="center", va="center", fontsize=6,
                                color="black" if values[r, c] > 60 else "white")
    fig.colorbar(image, ax=fig.axes, shrink=0.8, label="accuracy (%)")
    return figure_to_image(fig)


__all__ = ["accuracy_heatmap", "accuracy_heatmaps", "figure_to_image", "heatmap",
           "save_png"]
