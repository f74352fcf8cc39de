"""The language-model tables' CSVs hold every cell of the paper, and only the paper's: each CSV cell is
compared with ``data/paper_tables_lm.md`` (the transcription of the paper's LaTeX, a copy of the
project's reference, read here by its own Markdown parser: an independent reading), mean and std;
the paper's averages, stds and parameter percentages agree with its own cells."""

import math
import re
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np
import pytest

from moram_avalanche.experiments.paper.numbers import load_paper_numbers

REFERENCE = Path(__file__).with_name("data") / "paper_tables_lm.md"
#: the language-model tables' files
LM_FILES = ("t5_standard", "t5_long", "llama_standard", "trace", "t5_order_robustness", "t5_load_balance",
            "superni", "codealpaca")

Number = Tuple[float, Optional[float]]  # mean, std


def reference_tables() -> Dict[str, Tuple[list, list]]:
    """``{label: (header, rows)}``: the first pipe table under each ``## tab:<label> — ...`` heading."""
    tables, label = {}, None
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (tab:\S+)", line)
        if heading:
            label = heading.group(1)
            continue
        if label and line.startswith("|") and not set(line.strip()) <= set("|-: "):  # not the separator line
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            header, rows = tables.setdefault(label, ([], []))
            if header:
                rows.append(cells)
            else:
                header.extend(cells)
    return tables


def number(text: str) -> Optional[Number]:
    """``"34.3 ± 1.2"`` -> (34.3, 1.2); ``"63.45"`` -> (63.45, None); ``"0.13%"`` -> (0.13, None); "--", "": None."""
    text = text.strip().rstrip("%")
    if text in ("", "--"):
        return None
    mean, _, std = text.partition("±")
    return float(mean), (float(std) if std.strip() else None)


def table(label):
    header, rows = reference_tables()[label]
    return [dict(zip(header, row)) for row in rows]


# the paper's labels -> this package's (block and method names of the CSVs)
TRACE_BLOCKS = {"meta-llama/LLaMA-2-7B-Chat": "LLaMA-2-7B-Chat", "google/Gemma-2B-it": "Gemma-2B-it",
                "meta-llama/LLaMA-3-1B-Instruct": "LLaMA-3-1B-Instruct"}
CODEALPACA_METHODS = {"Llama-3.1-8B (base)": "Base model", "LoRA (r=4)": "LoRA r = 4", "LoRA (r=8)": "LoRA r = 8",
                      "LoRA (r=16)": "LoRA r = 16", "LoRA (r=32)": "LoRA r = 32", "MoRAM": "MoRAM",
                      "LoRI-D": "LoRI-D", "LoRI-S": "LoRI-S"}
ONE_FIGURE = "(one figure for all orders)"


def order_table(expected, label, file, block, columns):
    """A method x orders table: ``columns`` maps the paper's heads to the CSV's."""
    for row in table(label):
        cells = expected.setdefault((file, block, row["method"]), {})
        for head, column in columns.items():
            if head not in row:
                continue  # another table's orders
            text = row[head]
            if ONE_FIGURE in text:  # MTL: one figure, the average of every order
                text = ""
            cells[column] = number(text)


def expected_cells() -> Dict[Tuple[str, str, str], Dict[str, Optional[Number]]]:
    """``{(file, block, method): {column: number or None}}`` of every row of the reference."""
    expected: Dict[Tuple[str, str, str], Dict[str, Optional[Number]]] = {}
    for row in table("tab:llm_cl"):
        block = TRACE_BLOCKS[row["model"]]
        for head, text in row.items():
            if head not in ("model", "metric"):
                method = "FIX (ICL)" if head == "FIX(ICL)" else head
                expected.setdefault(("trace", block, method), {})[row["metric"]] = number(text)
    orders = {f"Order-{k}": f"Order {k}" for k in range(1, 7)}
    order_table(expected, "tab:llm_cl_main", "t5_standard", "T5-large", {**orders, "Avg.": "Average"})
    order_table(expected, "tab:supp_llm_cl_long", "t5_long", "T5-large", {**orders, "Avg.": "Average"})
    order_table(expected, "tab:llama", "llama_standard", "LLaMA2-7B", {**orders, "Avg.": "Average"})
    order_table(expected, "tab:load_balance", "t5_load_balance", "T5-large: 15-task", orders)
    order_table(expected, "tab:order_robustness", "t5_order_robustness", "T5-large",
                {"Order 1": "Order 1", "Order 2": "Order 2", "Order 3": "Order 3", "Avg ± Std": "Mean ± std"})
    for row in table("tab:sapt"):
        replay = row["replay"] == "yes"
        assert replay == (row["group"] == "replay-based")
        method = "MoRAM (with replay)" if replay and row["method"] == "MoRAM" else row["method"]
        block = "Replay-based" if replay else "Replay-free"
        expected[("superni", block, method)] = {"AP": number(row["AP"]), "FT": number(row["FT"])}
    for row in table("tab:llm_ood_main"):
        cells = expected.setdefault(("codealpaca", "Llama-3.1-8B", CODEALPACA_METHODS[row["method"]]), {})
        for head, text in row.items():
            if head == "HumanEval Pass@1":  # one completion per problem: the greedy column (the table's notes)
                cells["HumanEval pass@1 (greedy)"] = number(text)
            elif head in ("Params (M)", "% Params"):  # "added / activated" (MoRAM) or one count (LoRA)
                unit = "(M)" if head == "Params (M)" else "(%)"
                added, _, activated = text.partition(" / ")
                cells[f"Params added {unit}"], cells[f"Params activated {unit}"] = number(added), number(activated)
            elif head != "method":
                cells[head] = number(text)
    for row in table("tab:supp_humaneval"):
        cells = expected.setdefault(("codealpaca", "Llama-3.1-8B", CODEALPACA_METHODS[row["method"]]), {})
        for k in (1, 5, 10):
            cells[f"HumanEval pass@{k}"] = number(row[f"Pass@{k}"])
    return expected


def test_the_reference_is_read_whole():
    tables = reference_tables()
    assert len(tables["tab:llm_cl"][1]) == 6 and len(tables["tab:llm_cl"][0]) == 13  # 3 models x OP / BWT
    assert len(tables["tab:llm_cl_main"][1]) == 13 and len(tables["tab:supp_llm_cl_long"][1]) == 12
    assert len(tables["tab:llm_ood_main"][0]) == 13 and len(tables["tab:supp_humaneval"][1]) == 3
    assert number("34.3 ± 1.2") == (34.3, 1.2) and number("0.52%") == (0.52, None) and number("--") is None


def test_every_csv_cell_is_the_papers_cell_and_every_paper_cell_is_in_a_csv():
    expected = expected_cells()
    shipped = {}
    for name in LM_FILES:
        numbers = load_paper_numbers(name)
        for row in numbers.rows:
            shipped[(name, row.block, row.method)] = {
                column: None if cell is None else (cell.mean, cell.std) for column, cell in row.cells}
    assert set(shipped) == set(expected)  # the same rows: none missing, none added
    for key, cells in shipped.items():
        paper = expected[key]
        assert set(paper) <= set(cells), (key, set(paper) - set(cells))  # every paper column has a CSV column
        for column, value in cells.items():
            assert value == paper.get(column), (key, column, value, paper.get(column))
    # by hand: TRACE 3 x (11 OP + 10 BWT), T5 1 + 12 x 4 and 1 + 11 x 4, LLaMA 2 x 4, order robustness 5 x 4,
    # load balance 2 x 3, SuperNI 8 x 2, CodeAlpaca 10 + 4 x 12 + 2 x 3 + 17
    assert sum(value is not None for cells in shipped.values() for value in cells.values()) == 288


def test_a_row_quoted_from_another_paper_says_so_and_the_errata_are_flagged():
    long = load_paper_numbers("t5_long")
    for row in long.rows:  # tab:supp_llm_cl_long: "prior methods' figures are quoted from LB-CL"
        assert ("quoted from LB-CL" in row.note) == (row.method != "MoRAM"), row.method
    assert "erratum" in load_paper_numbers("t5_standard").row("T5-large", "L2P").note
    assert "one number for the three orders" in load_paper_numbers("t5_standard").row("T5-large", "MTL").note


def agrees(value: float, printed: float, digits: int) -> bool:
    """Whether ``printed`` (``digits`` after the point) is ``value`` rounded or cut to them (the paper does both)."""
    scale = 10 ** digits
    return any(math.isclose(printed, candidate, abs_tol=1e-9)
               for candidate in (round(value, digits), math.floor(value * scale + 1e-9) / scale))


def digits_of(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def test_each_printed_average_and_std_agrees_with_its_cells():
    checked = 0
    for label in ("tab:llm_cl_main", "tab:supp_llm_cl_long", "tab:llama"):
        for row in table(label):
            if any(ONE_FIGURE in text for text in row.values()):
                continue  # MTL: one figure
            orders = [number(text) for head, text in row.items() if head.startswith("Order-")]
            mean, printed = float(np.mean([value[0] for value in orders])), row["Avg."]
            if (label, row["method"]) == ("tab:llm_cl_main", "L2P"):
                # the paper's erratum (paper_tables_lm.md: "L2P's average is 60.7 in tab:llm_cl_main and 61.0" in
                # tab:order_robustness): its orders' mean is 61.03
                assert not agrees(mean, float(printed), digits_of(printed)) and agrees(mean, 61.0, 1)
                continue
            assert agrees(mean, float(printed), digits_of(printed)), (label, row["method"], mean, printed)
            checked += 1
    for row in table("tab:order_robustness"):  # "Avg ± Std": mean and sample std (n - 1) of the three orders
        orders = [float(row[f"Order {k}"]) for k in (1, 2, 3)]
        mean, _, std = row["Avg ± Std"].partition(" ± ")
        assert agrees(float(np.mean(orders)), float(mean), digits_of(mean)), row["method"]
        assert agrees(float(np.std(orders, ddof=1)), float(std), digits_of(std)), row["method"]
        checked += 1
    assert checked == 11 + 11 + 2 + 5  # every row but MTL's (and the erratum)


#: Llama-3.1-8B (hidden 4096, 32 blocks, 32 query / 8 key-value heads of 128, MLP 14336, vocabulary 128256,
#: untied embeddings): d_in + d_out summed over a block's seven projections, and the model's parameters
LLAMA31_WIDTH = 32 * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 3)
LLAMA31_PARAMETERS = (2 * 128256 * 4096 + 4096
                      + 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 4096 * 14336 * 3 + 2 * 4096))


def test_the_parameter_columns_agree_with_the_models_shapes():
    assert LLAMA31_WIDTH == 2_621_440 and LLAMA31_PARAMETERS == 8_030_261_248
    rows = {row["method"]: row for row in table("tab:llm_ood_main")}
    for rank in (4, 8, 16, 32):
        row = rows[f"LoRA (r={rank})"]
        added = rank * LLAMA31_WIDTH
        assert float(row["Params (M)"]) == round(added / 1e6, 1), rank
        # % of every parameter of the adapted model (peft's print_trainable_parameters: trainable / all)
        assert agrees(100 * added / (LLAMA31_PARAMETERS + added), number(row["% Params"])[0], 2), rank
    moram_added, moram_activated = (float(x) for x in rows["MoRAM"]["Params (M)"].split(" / "))
    assert moram_added == round(16 * LLAMA31_WIDTH / 1e6, 1)  # 16 atoms per linear, as LoRA r = 16
    assert moram_activated == round(10 * LLAMA31_WIDTH / 1e6, 1)  # ten atoms' worth (the table's notes)
    added_pct, activated_pct = (number(x)[0] for x in rows["MoRAM"]["% Params"].split(" / "))
    total = LLAMA31_PARAMETERS + 16 * LLAMA31_WIDTH
    assert agrees(100 * 16 * LLAMA31_WIDTH / total, added_pct, 2)
    assert agrees(100 * moram_activated * 1e6 / total, activated_pct, 2)
    # the library's count of the base model, on the meta device, is the hand count
    from transformers import LlamaConfig

    from moram_avalanche.experiments.text.codealpaca_stream import base_parameters

    config = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                         num_hidden_layers=32, vocab_size=128256, tie_word_embeddings=False)
    assert base_parameters(config) == LLAMA31_PARAMETERS


#: MMLU's test questions per subject (hendrycks/test; cais/mmlu's test split): the candidates for the
#: paper's abbreviated heads, and lm-eval's stem group
QUESTIONS = {"formal_logic": 126, "philosophy": 311, "world_religions": 171, "public_relations": 110,
             "machine_learning": 112, "high_school_microeconomics": 238, "high_school_macroeconomics": 390,
             "econometrics": 114, "college_physics": 102, "high_school_physics": 151, "conceptual_physics": 235}
STEM_QUESTIONS = {"abstract_algebra": 100, "anatomy": 135, "astronomy": 152, "college_biology": 144,
                  "college_chemistry": 100, "college_computer_science": 100, "college_mathematics": 100,
                  "college_physics": 102, "computer_security": 100, "conceptual_physics": 235,
                  "electrical_engineering": 145, "elementary_mathematics": 378, "high_school_biology": 310,
                  "high_school_chemistry": 203, "high_school_computer_science": 100, "high_school_mathematics": 270,
                  "high_school_physics": 151, "high_school_statistics": 216, "machine_learning": 112}


def whole_questions(printed: float, questions: int) -> bool:
    """Whether ``printed`` (two decimals) is k / questions for a whole k, rounded or cut."""
    k = round(printed * questions / 100)
    return agrees(100 * k / questions, printed, 2)


def test_the_main_tables_pass_at_1_is_one_completion_per_problem():
    """tab:llm_ood_main's Pass@1 is shown as pass@1 (greedy) (the table's notes): its figures are whole
    numbers of HumanEval's 164 problems, as one completion per problem gives."""
    rows = {row["method"]: float(row["HumanEval Pass@1"]) for row in table("tab:llm_ood_main")}
    for method, printed in rows.items():
        if method == "Llama-3.1-8B (base)":
            assert abs(printed - 100 * 63 / 164) < 0.02  # 38.40, printed 0.01 from 63 / 164 = 38.41
        else:
            assert whole_questions(printed, 164), method
    supp = {row["method"]: float(row["Pass@1"]) for row in table("tab:supp_humaneval")}
    assert supp["MoRAM"] == round(rows["MoRAM"], 1)  # 47.6: the same figure, rounded


def test_the_mmlu_columns_are_the_tasks_the_papers_figures_fix():
    from moram_avalanche.benchmarks.text.mmlu import STEM_SUBJECTS
    from moram_avalanche.experiments.text.codealpaca_stream import MMLU_SUBJECT_COLUMNS, task_subjects

    rows = table("tab:llm_ood_main")
    assert len(rows) == 6
    columns = {column: task_subjects(task) for column, task in MMLU_SUBJECT_COLUMNS.items()}
    assert set(columns) == {"Logic", "Phil.", "Reli.", "Econ.", "Pub. Rel.", "STEM", "Phys.", "ML"}
    assert set(STEM_SUBJECTS) == set(STEM_QUESTIONS) and sum(STEM_QUESTIONS.values()) == 3153
    for column, subjects in columns.items():
        questions = sum({**QUESTIONS, **STEM_QUESTIONS}[s] for s in subjects)
        for row in rows:  # every cell of the column is a whole number of its task's questions
            assert whole_questions(float(row[column]), questions), (column, row["method"])
    # and no other candidate for Econ. and Phys. fits every cell
    for column, others in (("Econ.", ("high_school_macroeconomics", "econometrics")),
                           ("Phys.", ("high_school_physics", "conceptual_physics"))):
        for other in others:
            assert not all(whole_questions(float(row[column]), QUESTIONS[other]) for row in rows), (column, other)
    lm_eval = pytest.importorskip("lm_eval.tasks.mmlu._generate_configs")  # lm-eval's own category table
    assert set(STEM_SUBJECTS) == {s for s, category in lm_eval.SUBJECTS.items() if category == "stem"}
