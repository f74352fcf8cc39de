"""Result tables of a comparison: the paper-style per-domain table and the one-line summary.

Input everywhere: ``{strategy: report}`` with reports as :meth:`AccuracyMatrix.report
<moram_avalanche.experiments.metrics.AccuracyMatrix.report>` writes them to ``results.json`` (complete
matrices only).

The paper-style table follows the layout of the ZSCL / MoE-Adapters / MoRAM papers: three
blocks (Transfer, Average, Last), one row per strategy in each, one column per domain in
stream order plus the mean. The best value of each column within a block is in bold (every
strategy that ties for it; nothing with a single strategy). The first domain has no Transfer value (it is learned first).

The language-model table (:func:`text_table_markdown`, the text demo's) has one row per
strategy: OP and BWT (the paper's definitions,
:func:`~moram_avalanche.benchmarks.text.metrics.op_bwt`: OP is the average accuracy after the
last task, BWT the mean drop on the earlier tasks from right after each was learned to the end,
positive = forgetting), the last row of the accuracy matrix per task and the training time.
Best values in bold as above (the lowest BWT).

:data:`PAPER_TABLES` and :data:`TEXT_TABLES` bundle what a comparison writes
(:func:`~moram_avalanche.experiments.compare.write_comparison`).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

METRICS = ("transfer", "average", "last")


def _check(results: Dict[str, dict]) -> List[str]:
    if not results:
        raise ValueError("no results to tabulate")
    domains = None
    for name, report in results.items():
        if "per_domain" not in report:
            raise ValueError(f"the results of {name!r} are incomplete (no full accuracy matrix yet)")
        if domains is None:
            domains = list(report["domains"])
        elif list(report["domains"]) != domains:
            raise ValueError(
                f"{name!r} was evaluated on {report['domains']}, the others on {domains}: "
                "a comparison needs the same benchmark and order for every strategy")
    return domains


def table_rows(results: Dict[str, dict]) -> List[dict]:
    """One row per (metric, strategy): ``{"metric", "strategy", "domains": [...], "mean"}``.

    Domain cells are floats or None (Transfer of the first domain).
    """
    _check(results)
    rows = []
    for metric in METRICS:
        for name, report in results.items():
            rows.append({"metric": metric, "strategy": name,
                         "domains": list(report["per_domain"][metric]), "mean": report[metric]})
    return rows


def _best(values: Sequence[Optional[float]], lowest: bool = False) -> Optional[float]:
    defined = [round(v, 1) for v in values if v is not None and not math.isnan(v)]
    return (min if lowest else max)(defined) if defined else None


def paper_table_markdown(results: Dict[str, dict]) -> str:
    """The Transfer / Average / Last blocks as a Markdown table, best per column in bold."""
    domains = _check(results)
    rows = table_rows(results)
    lines = ["| Metric | Strategy | " + " | ".join(domains) + " | Mean |",
             "|---|---|" + "---:|" * (len(domains) + 1)]
    for metric in METRICS:
        block = [r for r in rows if r["metric"] == metric]
        columns = [[r["domains"][d] for r in block] for d in range(len(domains))]
        columns.append([r["mean"] for r in block])
        best = [_best(column) if len(block) > 1 else None for column in columns]
        for i, row in enumerate(block):
            cells = [_cell(column[i], best[c]) for c, column in enumerate(columns)]
            label = metric.capitalize() if i == 0 else ""
            lines.append(f"| {label} | {row['strategy']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Optional[float], best: Optional[float]) -> str:
    if value is None or math.isnan(value):
        return "–"
    text = f"{value:.1f}"
    return f"**{text}**" if best is not None and round(value, 1) == best else text


def paper_table_csv(results: Dict[str, dict]) -> str:
    """The same rows as CSV (full precision, empty cells where undefined, no bold)."""
    domains = _check(results)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["metric", "strategy", *domains, "mean"])
    for row in table_rows(results):
        cells = ["" if v is None or math.isnan(v) else f"{v:.4f}" for v in [*row["domains"], row["mean"]]]
        writer.writerow([row["metric"], row["strategy"], *cells])
    return buffer.getvalue()


def summary_table(results: Dict[str, dict]) -> str:
    """Markdown: Transfer / Average / Last, Last on the domains learned before the last one,
    BWT (the paper's backward transfer, positive = forgetting; "-" with one domain or an older
    report), and, when the reports have them, peak memory (with a note saying what was measured) and
    training time per experience."""
    _check(results)
    timed = all("time" in report for report in results.values())
    header = "| strategy | Transfer | Average | Last | Last (old domains) | BWT | Peak memory (MB) |"
    rule = "|---|---|---|---|---|---|---|"
    if timed:
        header, rule = header + " Train s / exp. |", rule + "---|"
    lines, kinds = [header, rule], []
    for name, report in results.items():
        old = report["per_domain"]["last"][:-1]
        cells = [report["transfer"], report["average"], report["last"],
                 sum(old) / len(old) if old else float("nan")]
        memory = report.get("memory")
        peak = "-" if memory is None else f"{memory['peak_mb']:.1f}"
        if memory is not None and memory["kind"] not in kinds:
            kinds.append(memory["kind"])
        bwt = "-" if report.get("bwt") is None else f"{report['bwt']:.1f}"
        line = f"| {name} | " + " | ".join(f"{v:.1f}" for v in cells) + f" | {bwt} | {peak} |"
        if timed:
            line += f" {report['time']['train_seconds_per_experience']:.1f} |"
        lines.append(line)
    lines += [f"\nPeak memory: {kind}." for kind in kinds]
    return "\n".join(lines)


def text_rows(results: Dict[str, dict]) -> List[dict]:
    """One row per strategy: ``{"strategy", "op", "bwt", "release_bwt", "last": [...],
    "train_seconds"}`` (``train_seconds`` None when the report has no ``time``)."""
    from ..benchmarks.text.metrics import op_bwt

    _check(results)
    rows = []
    for name, report in results.items():
        scores = op_bwt(report["matrix"])
        seconds = report["time"]["train_seconds"] if "time" in report else None
        rows.append({"strategy": name, "op": scores["op"], "bwt": scores["bwt"], "release_bwt": scores["release_bwt"],
                     "last": [float(v) for v in report["matrix"][-1]], "train_seconds": seconds})
    return rows


def text_table_markdown(results: Dict[str, dict]) -> str:
    """OP, BWT (the paper's, and the release's beside it), the last row per task and training
    seconds, one row per strategy (Markdown)."""
    domains = _check(results)
    rows = text_rows(results)
    columns = [[r["op"] for r in rows], [r["bwt"] for r in rows], [r["release_bwt"] for r in rows],
               *[[r["last"][d] for r in rows] for d in range(len(domains))]]
    # best: OP highest; the paper's BWT lowest (forgetting positive); the release's highest (forgetting negative)
    best = [_best(column, lowest=c == 1) if len(rows) > 1 else None for c, column in enumerate(columns)]
    lines = ["| strategy | OP | BWT | BWT (release) | " + " | ".join(domains) + " | Train s |",
             "|---|" + "---:|" * (len(domains) + 4)]
    for i, row in enumerate(rows):
        cells = [_cell(column[i], best[c]) for c, column in enumerate(columns)]
        seconds = "–" if row["train_seconds"] is None else f"{row['train_seconds']:.0f}"
        lines.append(f"| {row['strategy']} | " + " | ".join(cells) + f" | {seconds} |")
    return "\n".join(lines)


def text_table_csv(results: Dict[str, dict]) -> str:
    """The same rows as CSV (full precision, no bold)."""
    domains = _check(results)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["strategy", "op", "bwt", "release_bwt", *domains, "train_seconds"])
    for row in text_rows(results):
        cells = ["" if v is None or math.isnan(v) else f"{v:.4f}"
                 for v in [row["op"], row["bwt"], row["release_bwt"], *row["last"], row["train_seconds"]]]
        writer.writerow([row["strategy"], *cells])
    return buffer.getvalue()


def text_summary_table(results: Dict[str, dict]) -> str:
    """Markdown: OP, BWT, the last row's mean on the tasks learned before the last one, peak
    memory (with the note saying what was measured) and training time, and the definitions."""
    _check(results)
    lines = ["| strategy | OP | BWT | Last (old tasks) | Peak memory (MB) | Train s / task |",
             "|---|---|---|---|---|---|"]
    kinds = []
    for row, report in zip(text_rows(results), results.values()):
        old = row["last"][:-1]
        memory = report.get("memory")
        peak = "-" if memory is None else f"{memory['peak_mb']:.1f}"
        if memory is not None and memory["kind"] not in kinds:
            kinds.append(memory["kind"])
        per = "-" if "time" not in report else f"{report['time']['train_seconds_per_experience']:.1f}"
        cells = [row["op"], row["bwt"], sum(old) / len(old) if old else float("nan")]
        lines.append(f"| {row['strategy']} | " + " | ".join(f"{v:.1f}" for v in cells) + f" | {peak} | {per} |")
    lines.append("\nOP: average accuracy after the last task. BWT: mean drop on the earlier tasks from "
                 "right after each was learned to the end (positive = forgetting).")
    lines += [f"Peak memory: {kind}." for kind in kinds]
    return "\n".join(lines)


class Tables(NamedTuple):
    """What a comparison writes: ``table.md`` (``markdown``), ``table.csv`` (``csv``) and
    ``summary.md`` (``summary``), each a function of ``{strategy: report}``."""

    markdown: Callable[[Dict[str, dict]], str]
    csv: Callable[[Dict[str, dict]], str]
    summary: Callable[[Dict[str, dict]], str]


#: the CLIP tables: Transfer / Average / Last per domain, and the summary
PAPER_TABLES = Tables(paper_table_markdown, paper_table_csv, summary_table)
#: the language-model tables: OP, BWT and the last row per task, and the summary
TEXT_TABLES = Tables(text_table_markdown, text_table_csv, text_summary_table)


__all__ = ["PAPER_TABLES", "TEXT_TABLES", "Tables", "paper_table_csv", "paper_table_markdown", "summary_table",
           "table_rows", "text_rows", "text_summary_table", "text_table_csv", "text_table_markdown"]
