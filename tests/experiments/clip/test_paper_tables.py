"""The paper's numbers as package data, the table specs, and the errata carried (not copied)."""

from pathlib import Path

import pytest

from moram_avalanche.benchmarks import MTIL_ORDERS, XTAIL_ORDERS
from moram_avalanche.experiments.clip.paper_tables import SWEEP_GRID, TABLE_NAMES, TABLES, get_table
from moram_avalanche.experiments.paper.numbers import PaperCell, as_dict, load_paper_numbers, paper_files, parse_cell
from moram_avalanche.experiments.paper.spec import MEAN_COLUMN

PACKAGE = Path(__file__).resolve().parents[3] / "moram_avalanche"


def test_cells_parse_as_printed():
    assert parse_cell("63.3") == PaperCell(63.3)
    assert parse_cell("72.26 ± 0.56") == PaperCell(72.26, 0.56)
    assert parse_cell("") is None and parse_cell("--") is None
    with pytest.raises(ValueError, match="not a number of the paper"):
        parse_cell("n/a")


def test_every_shipped_file_is_read_and_named_by_a_table():
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES

    assert set(paper_files()) == {"xtail", "xtail_order2", "mtil", "routing", "additional_baselines",
                                  "robustness", "pruning", "load_balance",
                                  "t5_standard", "t5_long", "llama_standard", "trace",
                                  "t5_order_robustness", "t5_load_balance", "superni", "codealpaca"}  # + the language models'
    assert ({spec.paper for spec in TABLES.values() if spec.paper} | {spec.paper for spec in TEXT_TABLES.values()}
            == set(paper_files()))
    for name in paper_files():
        numbers = load_paper_numbers(name)
        assert numbers.rows and all(len(row.cells) == len(numbers.columns) for row in numbers.rows)


def test_the_package_data_is_declared_for_an_installed_wheel():
    text = (PACKAGE.parent / "setup.cfg").read_text()
    assert "moram_avalanche.experiments.paper = *.csv" in text.split("[options.package_data]")[1].split("[")[0]
    assert sorted(p.name for p in (PACKAGE / "experiments" / "paper").glob("*.csv")) == \
        sorted(f"{n}.csv" for n in paper_files())


def test_domain_tables_have_the_protocols_columns_and_a_value_for_every_cell():
    for spec in TABLES.values():
        numbers = spec.paper_numbers()
        if numbers is None:
            continue
        if spec.layout == "domains":
            assert numbers.columns == spec.table_columns(), spec.name
        else:  # the load-balancing table gives Last only
            assert set(numbers.columns) <= set(spec.table_columns()), spec.name
        for row in numbers.rows:
            spec.method(row.method)  # every row says how it is run
            for column, cell in row.cells:
                first = spec.layout == "domains" and column == spec.protocol.domains[0]
                assert (cell is None) == (row.block == "Transfer" and first), (spec.name, row.method, column)
    assert get_table("xtail").table_columns() == (*XTAIL_ORDERS[1], MEAN_COLUMN)
    assert get_table("xtail-order2").table_columns()[:2] == ("StanfordCars", "Aircraft")
    assert get_table("mtil").table_columns() == (*MTIL_ORDERS["I"], MEAN_COLUMN)
    assert get_table("mtil").protocol.shots == 5 and get_table("mtil").protocol.builder == "mtil-5shot"


def test_transcription_spot_checks_against_the_paper():
    xtail = as_dict(load_paper_numbers("xtail"))
    assert xtail["Last"]["MoRAM"]["Average"] == 80.9 and xtail["Transfer"]["MoRAM"]["EuroSAT"] == 46.9
    assert xtail["CLIP"]["Zero-shot"]["Aircraft"] == 23.5 and xtail["Average"]["CoDyRA"]["Average"] == 71.3
    order2 = as_dict(load_paper_numbers("xtail_order2"))
    assert order2["Last"]["MoRAM"]["EuroSAT"] == 92.9 and order2["Transfer"]["MoRAM"]["StanfordCars"] is None
    mtil = as_dict(load_paper_numbers("mtil"))
    assert mtil["Last"]["MoRAM"]["Average"] == 79.3 and mtil["Transfer"]["LwF-VR"]["CIFAR100"] == 62.5
    robustness = load_paper_numbers("robustness").row("Last", "InfLoRA")
    assert robustness.cell("EuroSAT") == PaperCell(79.38, 2.22)
    routing = as_dict(load_paper_numbers("routing"))
    assert routing["Fine-Grained (Rank-1 Memory Experts)"]["MoRAM (Full)"] == {
        "Transfer": 63.3, "Average": 72.7, "Last": 80.9}


def test_the_order2_header_erratum_is_carried_as_order1_values():
    """tab:supp_robustness and tab:prune print order-2 names over order-1 values: their MoRAM
    rows equal tab:few_xtail's (order 1) value for value, so they are stored and shown under
    the order-1 names, run on order 1, and the erratum is said."""
    xtail = as_dict(load_paper_numbers("xtail"))
    for name, table in (("robustness", "robustness"), ("pruning", "pruning")):
        spec = get_table(table)
        numbers = as_dict(load_paper_numbers(name))
        for block in ("Transfer", "Average", "Last"):
            assert numbers[block]["MoRAM"] == xtail[block]["MoRAM"], (name, block)
        assert spec.protocol.order == 1 and spec.table_columns() == (*XTAIL_ORDERS[1], MEAN_COLUMN)
        assert "order 2" in spec.erratum and "order 1" in spec.erratum and "Erratum" in spec.erratum
    # read under the printed (order-2) names, the MoRAM row would not be order 2's
    order2 = as_dict(load_paper_numbers("xtail_order2"))
    assert as_dict(load_paper_numbers("pruning"))["Last"]["MoRAM"]["Aircraft"] != order2["Last"]["MoRAM"]["Aircraft"]


def test_the_icarl_last_row_erratum_is_flagged():
    numbers = load_paper_numbers("xtail")
    icarl, lwf = numbers.row("Last", "iCaRL"), numbers.row("Last", "LwF")
    assert icarl.cells == lwf.cells  # as printed
    assert "erratum" in icarl.note and "LwF" in icarl.note and not lwf.note
    assert any("iCaRL" in note and "Erratum" in note for note in get_table("xtail").notes)


def test_rows_not_run_are_the_methods_the_library_lacks():
    not_run = {m.label for spec in TABLES.values() for m in spec.methods if m.strategy is None}
    assert not_run == {"NoRGa", "SD-LoRA", "w/ Temperature Scaling (τ*)"}
    assert all(m.reason for spec in TABLES.values() for m in spec.methods if m.strategy is None)


def test_the_sweep_grid_surrounds_the_papers_values():
    assert 16 in SWEEP_GRID["topk"][2] and 0.01 in SWEEP_GRID["temperature"][2] and 0.2 in SWEEP_GRID["threshold"][2]
    sweeps = get_table("sweeps")
    assert sweeps.paper is None and len(sweeps.table_rows()) == sum(len(g[2]) for g in SWEEP_GRID.values())
    assert "without numbers" in " ".join(sweeps.notes) and "The grid is ours" in " ".join(sweeps.notes)


def test_table_names():
    from moram_avalanche.cli import REPRODUCE_TABLES
    from moram_avalanche.experiments.clip.family import FAMILY
    from moram_avalanche.experiments.clip.paper_tables import TABLE_CHOICES

    assert TABLE_NAMES == ("xtail", "xtail-order2", "mtil", "routing", "robustness", "pruning", "load-balance",
                           "sweeps", "additional-baselines")
    assert REPRODUCE_TABLES == TABLE_CHOICES == (*TABLE_NAMES, "all")
    assert FAMILY.reproduction.resolve("all") == tuple(TABLES.values())
    with pytest.raises(ValueError, match="unknown table 'cifar'"):
        get_table("cifar")
