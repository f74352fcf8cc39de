"""What each of the MoRAM paper's CLIP tables is: its protocol, its rows, how each row is run.

``moram-avalanche reproduce TABLE`` regenerates these tables (:mod:`..reproduce`):

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

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union

from ...benchmarks import MTIL_ORDERS, XTAIL_ORDERS, benchmark_entry
from ..paper.numbers import PaperNumbers, load_paper_numbers
from ..seeding import RELEASE_SEED

#: the blocks of a per-domain table and what each reads from a run
BLOCK_METRICS = {"CLIP": "diagonal", "Transfer": "transfer", "Average": "average", "Last": "last"}
#: the summary columns of the routing / load-balancing / sweep tables -> report keys
SUMMARY_METRICS = {"Transfer": "transfer", "Average": "average", "Last": "last"}
#: the mean column of a per-domain table (the paper's "Average")
MEAN_COLUMN = "Average"
#: a stream kind -> its domain orders
STREAM_ORDERS = {"xtail": XTAIL_ORDERS, "mtil": MTIL_ORDERS}


@dataclass(frozen=True)
class Protocol:
    """A stream as the paper runs it.

    Attributes:
        key: folder name of its runs.
        builder: the ``--benchmark`` name that builds it (``xtail``, ``mtil-5shot``).
        benchmark: the stream kind, ``"xtail"`` or ``"mtil"`` (what a strategy's paper
            settings read, :data:`~moram_avalanche.experiments.clip.recipes.PAPER_OPTIONS`).
        order, shots, prompts: the stream's options.
        description: what it is, in words.
    """

    key: str
    builder: str
    benchmark: str
    order: Union[int, str]
    shots: int
    prompts: str
    description: str

    @property
    def domains(self) -> Tuple[str, ...]:
        return tuple(STREAM_ORDERS[self.benchmark][self.order])

    def stream_options(self) -> Dict[str, Any]:
        """The builder's keyword arguments (the seed is the run's)."""
        return {"order": self.order, "shots": self.shots, "prompts": self.prompts}


XTAIL_ORDER1 = Protocol(
    "xtail-order1-16shot", "xtail", "xtail", 1, 16, "moram",
    f"{benchmark_entry('xtail').protocol}; order 1 ({', '.join(XTAIL_ORDERS[1])}); the release's "
    "per-domain prompts")
XTAIL_ORDER2 = Protocol(
    "xtail-order2-16shot", "xtail", "xtail", 2, 16, "moram",
    f"X-TAIL, 16 shots per class, order 2 ({', '.join(XTAIL_ORDERS[2])}), every domain's classes "
    "at test; the release's per-domain prompts")
MTIL_5SHOT = Protocol(
    "mtil-orderI-5shot", "mtil-5shot", "mtil", "I", 5, "zscl",
    f"{benchmark_entry('mtil-5shot').protocol}; order I ({', '.join(MTIL_ORDERS['I'])}); ZSCL's "
    "prompts (train on the first template, evaluate each domain with its template ensemble)")


@dataclass(frozen=True)
class Method:
    """A method label of a paper table and how this package runs it.

    Attributes:
        label: the paper's label.
        strategy: the registered strategy that runs it; None: not run (``reason`` says why).
        options: keyword arguments on top of the strategy's paper settings.
        reason: why it is not run.
    """

    label: str
    strategy: Optional[str]
    options: Tuple[Tuple[str, Any], ...] = ()
    reason: str = ""


NOT_IN_LIBRARY = "not implemented in this library"
_NOT_RUN = {
    "NoRGa": Method("NoRGa", None, reason=f"{NOT_IN_LIBRARY}: its official code "
                    "[Minhchuyentoancbn/MoE_PromptCL] is prompt-based class-incremental ViT, no CLIP "
                    "version or CLIP settings published"),
    "SD-LoRA": Method("SD-LoRA", None, reason=f"{NOT_IN_LIBRARY}: its official code "
                      "[WuYichen-97/SD-Lora-CL] is class-incremental ViT, no CLIP version or CLIP "
                      "settings published"),
}


def find_method(methods, label: str, table: str) -> Method:
    """The :class:`Method` of ``label`` among a table's ``methods``."""
    for method in methods:
        if method.label == label:
            return method
    raise KeyError(f"table {table!r} does not say how to run {label!r}")


def _methods(*methods: Method) -> Tuple[Method, ...]:
    return methods


@dataclass(frozen=True)
class TableSpec:
    """One table of the paper and how to regenerate it.

    Attributes:
        name: the ``reproduce`` name. label: the paper's LaTeX label. title: its caption.
        paper: the shipped numbers (:func:`~moram_avalanche.experiments.paper.numbers.load_paper_numbers`),
            None for a figure without numbers.
        protocol: the stream its rows run on.
        layout: ``"domains"`` (blocks x methods x per-domain columns and the mean) or
            ``"summary"`` (methods x :attr:`columns`).
        methods: how each method label is run.
        columns: the columns of a summary table.
        rows: ``(block, method label)`` of a table without paper numbers (the sweeps).
        seeds: the default seeds (``--seeds`` overrides them): the release's 42.
        erratum: an error of the paper this table carries, said wherever it is shown.
        notes: anything else the reader must know.
        decimals: digits after the point, as the paper prints them.
    """

    name: str
    label: str
    title: str
    paper: Optional[str]
    protocol: Protocol
    layout: str
    methods: Tuple[Method, ...]
    columns: Tuple[str, ...] = ()
    rows: Tuple[Tuple[str, str], ...] = ()
    seeds: Tuple[int, ...] = (RELEASE_SEED,)
    erratum: str = ""
    notes: Tuple[str, ...] = field(default_factory=tuple)
    decimals: int = 1

    def paper_numbers(self) -> Optional[PaperNumbers]:
        return load_paper_numbers(self.paper) if self.paper else None

    def table_rows(self) -> Tuple[Tuple[str, str], ...]:
        """``(block, method label)`` in the paper's order."""
        numbers = self.paper_numbers()
        return tuple((r.block, r.method) for r in numbers.rows) if numbers else self.rows

    def table_columns(self) -> Tuple[str, ...]:
        """The value columns: the protocol's domains and the mean, or :attr:`columns`."""
        if self.layout == "domains":
            return (*self.protocol.domains, MEAN_COLUMN)
        return self.columns

    def method(self, label: str) -> Method:
        return find_method(self.methods, label, self.name)

    def metric(self, block: str, column: str) -> str:
        """The report key a cell reads (``diagonal``, ``transfer``, ``average``, ``last``)."""
        return BLOCK_METRICS[block] if self.layout == "domains" else SUMMARY_METRICS[column]


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
        "xtail", "tab:few_xtail", "Comparisons on X-TAIL (order 1): Transfer, Average and Last per domain (%)",
        "xtail", XTAIL_ORDER1, "domains", _methods(
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
        "xtail-order2", "tab:few_xtail_order_2",
        "Comparisons on X-TAIL (order 2): Transfer, Average and Last per domain (%)",
        "xtail_order2", XTAIL_ORDER2, "domains", _methods(
            Method("Zero-shot", "zeroshot"), Method("LwF", "lwf"), Method("WiSE-FT", "wiseft"),
            Method("ZSCL", "zscl"), Method("MoE-Adapter", "moe-adapters"), Method("RAIL-Primal", "rail-primal"),
            Method("CoDyRA", "codyra"), Method("MoRAM", "moram"))),
    TableSpec(
        "mtil", "tab:few_mtil_full", "Comparisons on 5-shot MTIL: Transfer, Average and Last per domain (%)",
        "mtil", MTIL_5SHOT, "domains", _methods(
            Method("Zero-shot", "zeroshot"), Method("LwF", "lwf"), Method("LwF-VR", "lwf-vr"),
            Method("WiSE-FT", "wiseft"), Method("ZSCL", "zscl"), Method("MoE-Adapter", "moe-adapters"),
            Method("RAIL-Primal", "rail-primal"), Method("CoDyRA", "codyra"), Method("MoRAM", "moram")),
        notes=("The paper's MTIL is 5-shot (\"in line with RAIL, a 5-shot split for MTIL\"): "
               "MoE-Adapters' few-shot MTIL protocol (--benchmark mtil-5shot).",)),
    TableSpec(
        "routing", "tab:mix_strategy", "Memory retrieval (routing) strategies on X-TAIL (order 1)",
        "routing", XTAIL_ORDER1, "summary", _methods(
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
        "robustness", "tab:supp_robustness",
        "InfLoRA and performance robustness on X-TAIL (order 1): mean ± std over 3 runs (%)",
        "robustness", XTAIL_ORDER1, "domains", _methods(
            Method("InfLoRA", "inflora"), Method("CoDyRA", "codyra"), Method("MoRAM", "moram")),
        seeds=(RELEASE_SEED, RELEASE_SEED + 1, RELEASE_SEED + 2), erratum=ORDER2_NAMES_OVER_ORDER1_VALUES,
        decimals=2,
        notes=("The paper does not give its seeds; ours are 42 (the release's), 43 and 44. The "
               "seed sets the few-shot subsets and the training (as the release's --seed); "
               "std is the sample standard deviation (n - 1).",)),
    TableSpec(
        "pruning", "tab:prune", "Post-pruning on X-TAIL (order 1): the atoms covering 99% of the "
        "activation mass kept after each task (%)",
        "pruning", XTAIL_ORDER1, "domains", _methods(
            Method("MoRAM", "moram"), Method("MoRAM w/ pruning", "moram", (("prune_mass", 0.99),))),
        erratum=ORDER2_NAMES_OVER_ORDER1_VALUES),
    TableSpec(
        "load-balance", "tab:load_balance", "Effect of load-balancing regularization on X-TAIL (order 1)",
        "load_balance", XTAIL_ORDER1, "summary", _methods(
            Method("MoRAM", "moram"), Method("MoRAM w/ load-bal.", "moram-load-balance")),
        columns=("Transfer", "Average", "Last"),
        notes=("The paper gives X-TAIL's Last only; its T5 columns (language models) are "
               "`reproduce t5-load-balance`.",
               "The paper does not give the balancing term or its weight: ours is 0.01 x the "
               "release's commented-out term (see moram_avalanche.strategies.clip.moram).")),
    TableSpec(
        "sweeps", "fig:sweeps (Fig. 4)", "MoRAM's top-k budget, temperature and threshold on X-TAIL "
        "(order 1): one parameter at a time, the others at the paper's values",
        None, XTAIL_ORDER1, "summary", _SWEEP_METHODS, columns=("Transfer", "Average", "Last"),
        rows=_SWEEP_ROWS,
        notes=("Fig. 4 of the paper plots these sweeps without numbers: there is no paper column. "
               "The grid is ours, around the paper's values (k 16, τ 0.01, δ 0.2): k in "
               + ", ".join(map(str, SWEEP_GRID["topk"][2])) + " (k = 1 is k = 2 in the release); τ in "
               + ", ".join(f"{v:g}" for v in SWEEP_GRID["temperature"][2]) + "; δ in "
               + ", ".join(f"{v:g}" for v in SWEEP_GRID["threshold"][2]) + " (0: no gate).",)),
    TableSpec(
        "additional-baselines", "tab:additional_baselines",
        "Comparisons with additional baselines on X-TAIL (order 1) (%)",
        "additional_baselines", XTAIL_ORDER1, "domains", _methods(
            _NOT_RUN["NoRGa"], _NOT_RUN["SD-LoRA"], Method("MoRAM", "moram"))),
)}

#: every table, in the order ``reproduce all`` runs them
TABLE_NAMES = tuple(TABLES)
#: the values ``reproduce``'s TABLE takes for the CLIP tables
TABLE_CHOICES = (*TABLE_NAMES, "all")


def get_table(name: str) -> TableSpec:
    """The table ``name``; a clear error listing them for an unknown one."""
    if name not in TABLES:
        raise ValueError(f"unknown table {name!r}; the paper's CLIP tables: {', '.join(TABLE_NAMES)} "
                         "(or 'all')")
    return TABLES[name]


def resolve_tables(name: str) -> Tuple[TableSpec, ...]:
    """``name`` or, for ``"all"``, every table."""
    return tuple(TABLES.values()) if name == "all" else (get_table(name),)


__all__ = ["BLOCK_METRICS", "MEAN_COLUMN", "find_method", "MTIL_5SHOT", "Method", "NOT_IN_LIBRARY",
           "ORDER2_NAMES_OVER_ORDER1_VALUES", "Protocol", "SUMMARY_METRICS", "SWEEP_GRID", "TABLES",
           "TABLE_CHOICES", "TABLE_NAMES", "TableSpec", "XTAIL_ORDER1", "XTAIL_ORDER2", "get_table", "resolve_tables"]
