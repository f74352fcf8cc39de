"""``reproduce <language-model table> --paper`` prints every cell the paper has: for each table, each
printed row holds the shipped number of every column where the paper gives one (the shipped
numbers are checked against the paper's transcription in tests/experiments/paper/test_numbers.py),
"–" only where it gives none, and never "n/a"."""

import pytest

from moram_avalanche.cli import main
from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES


def printed_rows(markdown: str, columns):
    """``{(block, method): [cell text]}`` of the table ``--paper`` prints (blocks carried down)."""
    rows, block = {}, None
    lines = markdown.splitlines()
    start = lines.index("| Block | Method | " + " | ".join(columns) + " |")
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        block = cells[0] or block
        rows[(block, cells[1].removesuffix(" †"))] = cells[2:]
    return rows


@pytest.mark.parametrize("name", list(TEXT_TABLES))
def test_paper_prints_every_cell_the_paper_has(name, capsys):
    spec = TEXT_TABLES[name]
    assert main(["reproduce", name, "--paper"]) == 0
    out = capsys.readouterr().out
    assert "n/a" not in out and "not transcribed" not in out
    columns = spec.table_columns()
    rows = printed_rows(out, columns)
    numbers = spec.paper_numbers()
    assert list(rows) == [(row.block, row.method) for row in numbers.rows]
    shown = 0
    for row in numbers.rows:
        for column, text in zip(columns, rows[(row.block, row.method)]):
            cell = row.cell(column)
            if cell is None:
                assert text == "–", (name, row.method, column)
                continue
            mean, _, std = text.partition(" ± ")
            assert float(mean) == round(cell.mean, spec.decimals), (name, row.method, column, text)
            assert (float(std) if std else None) == (None if cell.std is None else round(cell.std, spec.decimals))
            shown += 1
    # by hand, the paper's cells of each table (paper_tables_lm.md)
    assert shown == {"t5-standard": 49, "t5-long": 45, "llama-standard": 8, "trace": 63, "t5-order-robustness": 20,
                     "t5-load-balance": 6, "superni": 16, "codealpaca": 81}[name]
