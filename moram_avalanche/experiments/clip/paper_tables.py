"""What each of the MoRAM paper's CLIP tables is: its protocol, its rows, how each row is run.

``moram-avalanche reproduce TABLE`` regenerates these tables (:mod:`...reproduce`, the pipeline of
:mod:`..paper`; each table a :class:`~.table_spec.TableSpec` on a stream of :mod:`.protocols`):

=========================  ==========================  ==========================================
table (``TABLE``)          paper                       rows run
=========================  ==========================  ==========================================
``xtail``                  ``tab:few_xtail``           zero-shot, fine-tune (per domain), LwF,
                                                       WiSE-FT, ZSCL, MoE-Adapters, MoRAM
``xtail-order2``           ``tab:few_xtail_order_2``   zero-shot, LwF, WiSE-FT, ZSCL,
                                                       MoE-Adapters, MoRAM
``mtil``                   ``tab:few_mtil_full``       zero-shot, LwF, LwF-VR, WiSE-FT, ZSCL,
                           (5-shot)                    MoE-Adapters, MoRAM
``routing``                ``tab:mix_strategy``        MoE-LoRA and the six rank-1 rows
``robustness``             ``tab:supp_robustness``     InfLoRA, MoRAM over 3 seeds
``pruning``                ``tab:prune``               MoRAM without / with 99% pruning
``load-balance``           ``tab:load_balance``        MoRAM without / with load balancing
``sweeps``                 Fig. 4 (no numbers)         MoRAM over a grid of k, tau, delta
``additional-baselines``   ``tab:additional_baselines``  MoRAM (NoRGa, SD-LoRA: not run)
=========================  ==========================  ==========================================

Rows the library cannot run (SD-LoRA and NoRGa: their official code is class-incremental ViT
only, with no CLIP version or CLIP settings published; the routing table's "tau*" row) show the paper's numbers and "not run" with the reason. Each run's settings are
the strategy's own declaration for the paper's protocols
(:data:`~moram_avalanche.experiments.clip.recipes.PAPER_OPTIONS`) plus the row's options here.

Errata of the paper, carried and flagged (never silently copied):

* ``tab:supp_robustness`` and ``tab:prune`` print the column names of X-TAIL order 2 over
  order-1 values (their MoRAM rows equal ``tab:few_xtail``'s, value for value, in order-1
  column order): the values are shown under the order-1 names and the tables run on order 1.
* ``tab:few_xtail``'s iCaRL "Last" row equals its LwF "Last" row cell for cell.
"""

from __future__ import annotations

from typing import Dict, Tuple

from ...benchmarks import XTAIL_ORDERS
from ..paper.spec import NOT_IN_LIBRARY, Method, table_named
from ..seeding import RELEASE_SEED
from .protocols import MTIL_5SHOT, XTAIL_ORDER1, XTAIL_ORDER2
from .table_spec import TableSpec

#: the rows no CLIP code of theirs lets this library run, and why
NOT_RUN = {
    "NoRGa": Method("NoRGa", None, reason=f"{NOT_IN_LIBRARY}: its official code "
                    "[Minhchuyentoancbn/MoE_PromptCL] is prompt-based class-incremental ViT, no CLIP "
                    "version or CLIP settings published"),
    "SD-LoRA": Method("SD-LoRA", None, reason=f"{NOT_IN_LIBRARY}: its official code "
                      "[WuYichen-97/SD-Lora-CL] is class-incremental ViT, no CLIP version or CLIP "
                      "settings published"),
}

ORDER2_NAMES_OVER_ORDER1_VALUES = (
    "Erratum of the paper, carried: it prints the column names of X-TAIL order 2 ("
    + ", ".join(XTAIL_ORDERS[2]) + ") over this table's values, but the values are order 1's -- "
    "its MoRAM row equals the order-1 X-TAIL table's (tab:few_xtail) value for value, in order-1 "
    "column order. They are shown here under the order-1 names, and the table is run on order 1.")

#: the grid of the sweeps (Fig. 4 has no numbers): one parameter at a time, the others at the
#: paper's values (k 16, tau 0.01, delta 0.2); log-spaced around tau, even steps around delta,
#: powers of 2 around k (k = 1 is k = 2: the release keeps at least 2 atoms)
SWEEP_GRID = {
    "topk": ("top-k budget k", "k", (2, 4, 8, 16, 32)),
    "temperature": ("temperature τ", "τ", (0.001, 0.003, 0.01, 0.03, 0.1)),
    "threshold": ("threshold δ", "δ", (0.0, 0.1, 0.2, 0.3, 0.4)),
}


def _sweep_methods() -> Tuple[Tuple[Tuple[str, str], ...], Tuple[Method, ...]]:
    rows, methods = [], []
    for option, (block, symbol, values) in SWEEP_GRID.items():
        for value in values:
            label = f"{symbol} = {value:g}"
            rows.append((block, label))
            methods.append(Method(label, "moram", ((option, value),)))
    return tuple(rows), tuple(methods)


_SWEEP_ROWS, _SWEEP_METHODS = _sweep_methods()

TABLES: Dict[str, TableSpec] = {spec.name: spec for spec in (
    TableSpec(
        name="xtail", label="tab:few_xtail",
        title="Comparisons on X-TAIL (order 1): Transfer, Average and Last per domain (%)",
        paper="xtail", protocol=XTAIL_ORDER1, layout="domains", methods=(
            Method("Zero-shot", "zeroshot"), Method("Fine-tune", "finetune-alone"),
            Method("LwF", "lwf"), Method("WiSE-FT", "wiseft"), Method("iCaRL", "icarl"),
            Method("ZSCL", "zscl"), Method("MoE-Adapter", "moe-adapters"), Method("RAIL-Primal", "rail-primal"),
            Method("CoDyRA", "codyra"), Method("MoRAM", "moram")),
        notes=("CLIP block: each domain's accuracy -- zero-shot, and fine-tuned on that domain "
               "alone from the pre-trained weights (the per-domain upper bound: the diagonal of "
               "the finetune-alone run).",
               "Erratum of the paper, carried: its iCaRL Last row equals its LwF Last row cell for "
               "cell (a copy); shown as printed, flagged.")),
    TableSpec(
        name="xtail-order2", label="tab:few_xtail_order_2",
        title="Comparisons on X-TAIL (order 2): Transfer, Average and Last per domain (%)",
        paper="xtail_order2", protocol=XTAIL_ORDER2, layout="domains", methods=(
            Method("Zero-shot", "zeroshot"), Method("LwF", "lwf"), Method("WiSE-FT", "wiseft"),
            Method("ZSCL", "zscl"), Method("MoE-Adapter", "moe-adapters"), Method("RAIL-Primal", "rail-primal"),
            Method("CoDyRA", "codyra"), Method("MoRAM", "moram"))),
    TableSpec(
        name="mtil", label="tab:few_mtil_full",
        title="Comparisons on 5-shot MTIL: Transfer, Average and Last per domain (%)",
        paper="mtil", protocol=MTIL_5SHOT, layout="domains", methods=(
            Method("Zero-shot", "zeroshot"), Method("LwF", "lwf"), Method("LwF-VR", "lwf-vr"),
            Method("WiSE-FT", "wiseft"), Method("ZSCL", "zscl"), Method("MoE-Adapter", "moe-adapters"),
            Method("RAIL-Primal", "rail-primal"), Method("CoDyRA", "codyra"), Method("MoRAM", "moram")),
        notes=("The paper's MTIL is 5-shot (\"in line with RAIL, a 5-shot split for MTIL\"): "
               "MoE-Adapters' few-shot MTIL protocol (--benchmark mtil-5shot).",)),
    TableSpec(
        name="routing", label="tab:mix_strategy", title="Memory retrieval (routing) strategies on X-TAIL (order 1)",
        paper="routing", protocol=XTAIL_ORDER1, layout="summary", methods=(
            Method("MoE-LoRA (Baseline)", "moe-lora"),
            Method("w/ Temperature Scaling (τ*)", None, reason="the paper does not give τ*"),
            Method("External Router (Learned W_r)", "moram-external-router"),
            Method("Self-Activated Retrieval", "moram-self-activation"),
            Method("w/ Sparsity Constraint (Top-k)", "moram-self+topk"),
            Method("w/ Temperature Scaling (τ_MoRAM)", "moram-self+temperature"),
            Method("w/ Threshold-based Selection (δ)", "moram-self+threshold"),
            Method("MoRAM (Full)", "moram")),
        columns=("Transfer", "Average", "Last"), decimals=2,
        notes=("Each \"w/\" row of the fine-grained block is self-activation plus that one "
               "component (see moram_avalanche.strategies.clip.moram for the reading).",)),
    TableSpec(
        name="robustness", label="tab:supp_robustness",
        title="InfLoRA and performance robustness on X-TAIL (order 1): mean ± std over 3 runs (%)",
        paper="robustness", protocol=XTAIL_ORDER1, layout="domains", methods=(
            Method("InfLoRA", "inflora"), Method("CoDyRA", "codyra"), Method("MoRAM", "moram")),
        seeds=(RELEASE_SEED, RELEASE_SEED + 1, RELEASE_SEED + 2), erratum=ORDER2_NAMES_OVER_ORDER1_VALUES,
        decimals=2,
        notes=("The paper does not give its seeds; ours are 42 (the release's), 43 and 44. The "
               "seed sets the few-shot subsets and the training (as the release's --seed); "
               "std is the sample standard deviation (n - 1).",)),
    TableSpec(
        name="pruning", label="tab:prune", title="Post-pruning on X-TAIL (order 1): the atoms covering 99% of the "
        "activation mass kept after each task (%)",
        paper="pruning", protocol=XTAIL_ORDER1, layout="domains", methods=(
            Method("MoRAM", "moram"), Method("MoRAM w/ pruning", "moram", (("prune_mass", 0.99),))),
        erratum=ORDER2_NAMES_OVER_ORDER1_VALUES),
    TableSpec(
        name="load-balance", label="tab:load_balance",
        title="Effect of load-balancing regularization on X-TAIL (order 1)",
        paper="load_balance", protocol=XTAIL_ORDER1, layout="summary", methods=(
            Method("MoRAM", "moram"), Method("MoRAM w/ load-bal.", "moram-load-balance")),
        columns=("Transfer", "Average", "Last"),
        notes=("The paper gives X-TAIL's Last only; its T5 columns (language models) are "
               "`reproduce t5-load-balance`.",
               "The paper does not give the balancing term or its weight: ours is 0.01 x the "
               "release's commented-out term (see moram_avalanche.strategies.clip.moram).")),
    TableSpec(
        name="sweeps", label="fig:sweeps (Fig. 4)", title="MoRAM's top-k budget, temperature and threshold on "
        "X-TAIL (order 1): one parameter at a time, the others at the paper's values",
        paper=None, protocol=XTAIL_ORDER1, layout="summary", methods=_SWEEP_METHODS,
        columns=("Transfer", "Average", "Last"),
        rows=_SWEEP_ROWS,
        notes=("Fig. 4 of the paper plots these sweeps without numbers: there is no paper column. "
               "The grid is ours, around the paper's values (k 16, τ 0.01, δ 0.2): k in "
               + ", ".join(map(str, SWEEP_GRID["topk"][2])) + " (k = 1 is k = 2 in the release); τ in "
               + ", ".join(f"{v:g}" for v in SWEEP_GRID["temperature"][2]) + "; δ in "
               + ", ".join(f"{v:g}" for v in SWEEP_GRID["threshold"][2]) + " (0: no gate).",)),
    TableSpec(
        name="additional-baselines", label="tab:additional_baselines",
        title="Comparisons with additional baselines on X-TAIL (order 1) (%)",
        paper="additional_baselines", protocol=XTAIL_ORDER1, layout="domains", methods=(
            NOT_RUN["NoRGa"], NOT_RUN["SD-LoRA"], Method("MoRAM", "moram"))),
)}

#: every table, in the order ``reproduce all`` runs them
TABLE_NAMES = tuple(TABLES)
#: the name that stands for every CLIP table (``reproduce all``)
EVERY_TABLE = "all"
#: the values ``reproduce``'s TABLE takes for the CLIP tables
TABLE_CHOICES = (*TABLE_NAMES, EVERY_TABLE)


def get_table(name: str) -> TableSpec:
    """The CLIP table ``name`` (:func:`~..paper.spec.table_named`)."""
    return table_named(TABLES, name, "table")


__all__ = ["EVERY_TABLE", "NOT_RUN", "ORDER2_NAMES_OVER_ORDER1_VALUES", "SWEEP_GRID", "TABLES", "TABLE_CHOICES", "TABLE_NAMES",
           "get_table"]
