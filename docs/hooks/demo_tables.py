"""MkDocs hook: the demo's tables, read from a demo run.

A page's line ``<!-- demo-tables -->`` becomes the tables a ``moram-avalanche demo`` run wrote
(:func:`moram_avalanche.experiments.demos.run_family_demo`, through ``compare``): its
``summary.md`` (one line per strategy with peak memory and time), its ``table.md`` (Transfer /
Average / Last per domain) and each strategy's accuracy matrix (``<strategy>/accuracy_matrix.csv``:
a row per domain trained on, a column per domain evaluated, accuracy in %), so the numbers on the
site are the ones the demo printed. The run folder is ``$MORAM_AVALANCHE_DOCS_DEMO``, default
``runs/demo`` under the folder of ``mkdocs.yml`` (where ``.ci/run``'s ``moram-avalanche demo``
writes it, before the build). :func:`demo_tables_markdown` is the generator, tested without
MkDocs (``tests/docs/test_docs_hooks.py``).
"""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path
from typing import List

from page_markers import MarkerLine

MARKER = MarkerLine("demo-tables")
#: the variable naming the demo run folder, and its default (relative to mkdocs.yml's folder)
FOLDER_VARIABLE = "MORAM_AVALANCHE_DOCS_DEMO"
DEFAULT_FOLDER = "runs/demo"
#: what the folder must hold (written by the demo's comparison, experiments/compare.py)
TABLE_FILES = ("summary.md", "table.md")
MATRIX_FILE = "accuracy_matrix.csv"
logger = logging.getLogger("mkdocs.hooks.demo_tables")


class DemoRunMissing(ValueError):
    """The demo run folder is missing or incomplete; the message says how to make it."""


def check_demo_folder(folder: Path) -> None:
    """Raise :class:`DemoRunMissing` (one line) unless ``folder`` holds a finished demo run."""
    missing = [name for name in TABLE_FILES if not (folder / name).is_file()]
    if missing:
        raise DemoRunMissing(f"the docs' demo tables read a demo run, but {folder} has no {', '.join(missing)}: "
                             f"run `moram-avalanche demo` first (or set {FOLDER_VARIABLE} to a demo's --out folder)")


def strategy_order(folder: Path) -> List[str]:
    """The strategies with a matrix, in the order of ``summary.md``'s rows (others after, by name)."""
    with_matrix = {path.parent.name for path in folder.glob(f"*/{MATRIX_FILE}")}
    listed = []
    for line in (folder / "summary.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0] in with_matrix and cells[0] not in listed:
            listed.append(cells[0])
    return listed + sorted(with_matrix - set(listed))


def matrix_markdown(csv_path: Path) -> List[str]:
    """An accuracy matrix CSV (``trained_on,<domain>...``) as a Markdown table, accuracies to
    one decimal as the demo's tables print them (an empty cell stays empty)."""
    with open(csv_path, newline="", encoding="utf-8") as file:
        header, *rows = list(csv.reader(file))
    domains = header[1:]
    lines = ["| after training on | " + " | ".join(domains) + " |", "|---|" + "---:|" * len(domains)]
    for trained_on, *cells in rows:
        values = [f"{float(cell):.1f}" if cell.strip() else "" for cell in cells]
        lines.append(f"| {trained_on} | " + " | ".join(values) + " |")
    return lines


def demo_tables_markdown(folder: Path) -> str:
    """The demo run in ``folder`` as Markdown: summary, table and every strategy's matrix."""
    folder = Path(folder)
    check_demo_folder(folder)
    lines = ["**Summary** (`summary.md`):", "", (folder / "summary.md").read_text(encoding="utf-8").strip(), "",
             "**Transfer / Average / Last per domain** (`table.md`):", "",
             (folder / "table.md").read_text(encoding="utf-8").strip(), "",
             f"**Accuracy matrices** (`<strategy>/{MATRIX_FILE}`: a row per domain trained on, a column per "
             "domain evaluated, accuracy in %):", ""]
    for strategy in strategy_order(folder):
        lines += [f"*{strategy}*", "", *matrix_markdown(folder / strategy / MATRIX_FILE), ""]
    return "\n".join(lines)


def demo_folder(config_dir: Path) -> Path:
    """``$MORAM_AVALANCHE_DOCS_DEMO``, else :data:`DEFAULT_FOLDER`, relative to ``config_dir``."""
    return Path(config_dir) / os.environ.get(FOLDER_VARIABLE, DEFAULT_FOLDER)


def on_pre_build(config, **kwargs) -> None:
    MARKER.start()


def on_files(files, config, **kwargs):
    """Before any page is read: stop the build with one line when a page needs a missing demo run."""
    from mkdocs.exceptions import Abort

    if any(MARKER.holds(file.content_string) for file in files.documentation_pages()):
        try:
            check_demo_folder(demo_folder(Path(config.config_file_path).parent))
        except DemoRunMissing as error:
            raise Abort(str(error)) from None
    return files


def on_page_markdown(markdown, page, config, files, **kwargs):
    folder = demo_folder(Path(config.config_file_path).parent)
    return MARKER.replace(markdown, page.file.src_uri, lambda: demo_tables_markdown(folder))


def on_post_build(config, **kwargs) -> None:
    MARKER.warn_if_unused(logger)
    if MARKER.pages:
        logger.info("demo tables read from %s in %s", demo_folder(Path(config.config_file_path).parent),
                    ", ".join(MARKER.pages))
