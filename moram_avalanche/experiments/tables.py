"""Result tables of a comparison: the paper-style per-domain table and the one-line summary.

Input everywhere: ``{strategy: report}`` with reports as :meth:`AccuracyMatrix.report
<moram_avalanche.experiments.metrics.AccuracyMatrix.report>` writes them to ``results.json`` (complete
matrices only).

The paper-style table follows the layout of the ZSCL / MoE-Adapters / MoRAM papers: three
blocks (Transfer, Average, Last), one row per strategy in each, one column per domain in
stream order plus the mean. The best value of each column within a block is in bold (every
strategy that ties for it; nothing with a single strategy). The first domain has no Transfer value (it is learned first).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Dict, List, Optional, Sequence

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


def _best(values: Sequence[Optional[float]]) -> Optional[float]:
    defined = [round(v, 1) for v in values if v is not None and not math.isnan(v)]
    return max(defined) if defined else None


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


__all__ = ["paper_table_csv", "paper_table_markdown", "summary_table", "table_rows"]
