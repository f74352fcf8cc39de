"""The cost results as Markdown tables, beside the paper's (tab:supp_params, tab:sup_params_memory,
tab:latency; ViT-B/16 on X-TAIL, GPU not named in the paper)."""

from __future__ import annotations

from typing import Optional

from .formula import PAPER_FORMULAS

#: the paper's tab:sup_params_memory: trainable parameters (M) and training GPU memory (MiB) per task
PAPER_PARAMS_MEMORY = {"LwF": (129.6, 32172), "ZSCL": (129.6, 26290), "MoE-Adapters": (59.8, 22358),
                       "CoDyRA": (4.4, 21770), "MoRAM": (4.4, 21090)}
#: the paper's tab:latency: training ms/image, inference ms/image after tasks 1 / 5 / 10
PAPER_LATENCY = {"CLIP": (None, (1.95, 1.95, 1.95)), "CoDyRA": (6.99, (1.95, 1.95, 1.95)),
                 "MoE-Adapters": (8.56, (3.25, 3.25, 3.25)), "MoRAM": (8.32, (2.07, 2.27, 2.52))}


def _number(value: Optional[float], digits: int = 2) -> str:
    return "--" if value is None else f"{value:.{digits}f}"


def parameters_table(results: dict) -> str:
    """Trainable parameters per adapted weight matrix and per task, and what each adds to CLIP."""
    lines = ["| strategy | trainable per weight matrix and task | at | count | trainable per task (M) | "
             "added to CLIP (M) |", "|---|---|---|---|---|---|"]
    for row in results["strategies"]:
        matrix = row.get("per_matrix")
        if matrix:
            values = ", ".join(f"{k} = {v}" for k, v in matrix["values"].items())
            formula, at, count = matrix["text"], f"{matrix['layer']} ({values})", f"{matrix['count']:,}"
            if matrix["unit"] != "weight matrix":
                formula += f" (per {matrix['unit']})"
        else:
            formula, at, count = "0 (nothing trains)" if not row["trains"] else "--", "", "0"
        per_task = ", ".join(f"task {e['task']}: {e['trainable'] / 1e6:.2f}" for e in row["tasks"])
        last = row["tasks"][-1]
        lines.append(f"| {row['strategy']} | {formula} | {at} | {count} | {per_task} | "
                     f"{last['added'] / 1e6:.2f} after task {last['task']} |")
    return "\n".join(lines)


def latency_table(results: dict) -> str:
    """Per strategy and measured task: training and inference ms/image, peak training memory."""
    lines = ["| strategy | after task | training ms/image | inference ms/image | peak training memory (MiB) |",
             "|---|---|---|---|---|"]
    for row in results["strategies"]:
        for entry in row["tasks"]:
            if "infer_ms_per_image" not in entry:
                continue
            lines.append(f"| {row['strategy']} | {entry['task']} | {_number(entry.get('train_ms_per_image'))} | "
                         f"{_number(entry['infer_ms_per_image'])} | {_number(entry.get('peak_mb'), 1)} |")
    if len(lines) == 2:
        return "Not measured (parameters only)."
    return "\n".join(lines)


def paper_tables() -> str:
    lines = ["Paper (ViT-B/16, X-TAIL; GPU not named), for reference:", "",
             "| method | trainable per weight matrix and task |", "|---|---|"]
    lines += [f"| {method} | {formula} |" for method, formula in PAPER_FORMULAS.items()]
    lines += ["", "| method | trainable per task (M) | training GPU memory (MiB) |", "|---|---|---|"]
    lines += [f"| {m} | {p} | {mem} |" for m, (p, mem) in PAPER_PARAMS_MEMORY.items()]
    lines += ["", "| method | training ms/image | inference ms/image after 1 / 5 / 10 tasks |", "|---|---|---|"]
    lines += [f"| {m} | {_number(t)} | {' / '.join(_number(v) for v in inf)} |"
              for m, (t, inf) in PAPER_LATENCY.items()]
    return "\n".join(lines)


def cost_report(results: dict, paper: bool = True) -> str:
    """The whole report: what was measured where, the two tables, and the paper's."""
    settings = results["settings"]
    head = [f"# Cost of {', '.join(r['strategy'] for r in results['strategies'])}", "",
            f"- model: {settings['model']} ({settings['pretrained'] or 'random weights'})",
            f"- device: {results['device']}; precision: {results['precision']}",
            f"- training: batch {settings['batch_size']}, {settings['classes']} classes per task, "
            f"median of {settings['iterations']} timed steps after {settings['warmup']}; inference: "
            f"{settings['eval_images']} test images per task, batch {settings['eval_batch_size'] or settings['batch_size']}, "
            f"median over {settings['repeats']} evaluations after 1 untimed",
            f"- peak memory: {results['memory_kind']}", "",
            "## Trainable parameters", "", parameters_table(results), "",
            "## Latency and memory", "", latency_table(results), ""]
    if paper:
        head += [paper_tables(), ""]
    return "\n".join(head)


__all__ = ["PAPER_LATENCY", "PAPER_PARAMS_MEMORY", "cost_report", "latency_table", "paper_tables",
           "parameters_table"]
