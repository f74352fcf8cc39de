"""The TRACE protocol as the MoRAM release runs it, end to end on tiny models: the adapted modules
of a LLaMA and a Gemma, the decoding and prompt cuts that reach ``generate``, the full fine-tuning
rows' recipe, GEM's memory refusal, and the settings ``reproduce --dry-run`` prints with their
sources."""

import json

import pytest
import torch
from torch import nn

from tiny_text import LLAMA_KWARGS, tiny_llama

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def tiny_gemma(seed=0):
    from transformers import GemmaConfig, GemmaForCausalLM

    torch.manual_seed(seed)
    return GemmaForCausalLM(GemmaConfig(**LLAMA_KWARGS, head_dim=8)).eval()


MODELS = {"llama": tiny_llama, "gemma": tiny_gemma}


def adapted(language_model, layer_type):
    """The dotted names, in the Hugging Face model, of the linears wrapped by ``layer_type``."""
    from moram_avalanche.layers.base import find_layers

    return set(find_layers(language_model.model, layer_type))


def every_layer(projections):
    return {f"model.layers.{i}.self_attn.{p}" for i in range(2) for p in projections}


def build(name, model, tokenizer, **options):
    from moram_avalanche.strategies.registry import get_strategy

    return get_strategy(name, family="text")(model=model, tokenizer=tokenizer, **options)


@pytest.mark.parametrize("architecture", sorted(MODELS))
def test_trace_adapts_query_key_value_and_output_of_llama_and_gemma(architecture):
    from moram_avalanche.experiments.text.recipes import stream_options
    from moram_avalanche.layers.lora import LoRALinear
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.layers.task_lora import TaskLoRALinear
    from moram_avalanche.text.load import prepare_tokenizer
    from tiny_text import word_tokenizer

    tokenizer = prepare_tokenizer(word_tokenizer(), seq2seq=False)
    # the release's peft fork (utils/my_peft/utils/other.py): llama / gemma -> q, k, v, o
    for name, layer in (("moram", MoRAMLinear), ("seq-lora", LoRALinear), ("o-lora", TaskLoRALinear)):
        strategy = build(name, MODELS[architecture](), tokenizer, **stream_options("trace", name))
        assert adapted(strategy.model, layer) == every_layer(ATTENTION), name
    release = build("moram", MODELS[architecture](), tokenizer, **stream_options("trace", "moram", "trace-release"))
    assert adapted(release.model, MoRAMLinear) == every_layer(ATTENTION)
    # the classification streams keep the paper's query and key for MoRAM, peft's query and value for LoRA
    assert adapted(build("moram", MODELS[architecture](), tokenizer).model, MoRAMLinear) == every_layer(ATTENTION[:2])
    lora = build("seq-lora", MODELS[architecture](), tokenizer).model
    assert adapted(lora, LoRALinear) == every_layer(("q_proj", "v_proj"))


def test_a_target_table_without_the_models_type_is_refused():
    from moram_avalanche.text import inject_moram

    with pytest.raises(ValueError, match="not for 'llama'.*add a row"):
        inject_moram(tiny_llama(), {"gemma": ["q_proj"]})


def test_the_loop_passes_the_releases_decoding_and_each_tasks_prompt_cut(tmp_path):
    """A task that keeps its prompts' head (MeetingBank's way, here with a small limit) and one that
    keeps their end, evaluated by the loop with TRACE's stream options on a tiny LLaMA."""
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.benchmarks.text.stream import TextStreamTask, text_benchmark
    from moram_avalanche.experiments.text.recipes import stream_options
    from moram_avalanche.text.tiny import tiny_language_model, word_tokenizer

    words = [f"w{i}" for i in range(12)]
    long = " ".join(words)
    head = TextStreamTask("MeetingBank", ((long, "w1"),), ((long, "w1"),), metric="rouge_l", prompt_limit=5, keep="head")
    tail = TextStreamTask("FOMC", ((long, "w2"),), ((long, "w2"),), metric="accuracy")
    bench = text_benchmark([head, tail])
    tokenizer = word_tokenizer(words)
    options = {**stream_options("trace", "moram"), "max_source_length": 5, "max_new_tokens": 2, "iterations": 1,
               "evaluator": EvaluationPlugin(loggers=[])}
    strategy = build("moram", tiny_language_model("llama", tokenizer), tokenizer, **options)
    calls = []
    original = strategy.model.model.generate
    strategy.model.model.generate = lambda **kwargs: calls.append(kwargs) or original(**kwargs)
    strategy.eval(bench.test_stream)
    assert [c["repetition_penalty"] for c in calls] == [1.2, 1.2]  # TRACE/inference/infer_part.py
    assert [c["no_repeat_ngram_size"] for c in calls] == [3, 3]
    ids = lambda ws: [tokenizer.convert_tokens_to_ids(w) for w in ws]  # noqa: E731
    assert calls[0]["input_ids"][0].tolist() == ids(words[:5])  # MeetingBank: the head
    assert calls[1]["input_ids"][0].tolist() == ids(words[-5:])  # the others: the end (left truncation)


def test_traces_full_fine_tuning_rows_train_at_its_rate_and_epochs():
    from moram_avalanche.experiments.text.recipes import stream_options

    # BeyonderXX/TRACE scripts/train_seq_cl.sh: --learning_rate 1e-5 --num_train_epochs 5,3,7,5,3,5,5,7
    epochs = dict(zip(("C-STANCE", "FOMC", "MeetingBank", "Py150", "ScienceQA", "NumGLUE-cm", "NumGLUE-ds",
                       "20Minuten"), (5, 3, 7, 5, 3, 5, 5, 7)))
    for name in ("finetune", "mtl", "avalanche.ewc", "avalanche.gem", "avalanche.naive"):
        options = stream_options("trace", name)
        assert options["lr"] == 1e-5 and options["epochs"] == epochs, name
    for name in ("moram", "seq-lora", "o-lora"):  # the adapters keep the paper's TRACE rate
        assert stream_options("trace", name)["lr"] == 5e-4 and "epochs" not in stream_options("trace", name)
    assert stream_options("trace", "icl")["max_source_length"] == 3584  # TRACE scripts/ICL.sh
    # ZinYY/TreeLoRA scripts/lora_based_methods/hidelora.sh: lr=1e-4, epochs=5,3,7,5,3,5,5,7; the paper's batch
    hidelora = stream_options("trace", "hidelora")
    assert hidelora["lr"] == 1e-4 and hidelora["epochs"] == epochs and hidelora["train_mb_size"] == 4
    assert hidelora["target_modules"]["llama"] == ["q_proj", "k_proj", "v_proj", "o_proj"]  # the release's fork


def test_gem_refuses_a_gradient_store_that_does_not_fit_with_the_figures(monkeypatch):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.benchmarks import synthetic_text
    from moram_avalanche.utils import memory
    from tiny_stream import FAMILIES, TASKS, stream_tokenizer

    tokenizer = stream_tokenizer()
    strategy = build("avalanche.gem", FAMILIES["t5"](tokenizer), tokenizer, train_mb_size=4, iterations=1,
                     max_new_tokens=2, patterns_per_exp=2, evaluator=EvaluationPlugin(loggers=[]))
    bench = synthetic_text(TASKS, train_per_label=1, test_per_label=1)
    params = sum(p.numel() for p in strategy.model.parameters())
    # 3 tasks: 2 past gradients before the last; float32 gradients on the CPU, the float64 copies beside them;
    # and what the training step allocates for its trainable (here every) float32 weight: its gradient and
    # AdamW's two moments, 4 + 8 bytes (utils/memory.py step_state_bytes: the fit counts training's own state)
    need = (2 + 2) * params * 4 + 2 * params * (4 + 8) + params * (4 + 8 + 8 + 4) + params * (4 + 8)
    monkeypatch.setattr(memory, "available_bytes", lambda device: need)  # 90% of it usable: too little
    with pytest.raises(ValueError, match=rf"GEM's gradient store \(2 past tasks x {params:,} parameters x 4 bytes.*"
                                         rf"need {memory.format_bytes(need)}.*avalanche.agem"):
        strategy.train(bench.train_stream[0])
    monkeypatch.setattr(memory, "available_bytes", lambda device: 2 * need)
    strategy.train(bench.train_stream[0])  # fits: trains


def test_every_trace_row_steps_adam_at_traces_betas_clipped_at_one_on_float32_masters():
    """TRACE's training/main.py builds Adam with betas (0.9, 0.95) for every --CL_method
    (BeyonderXX/TRACE training/main.py:392-395), and its DeepSpeed configuration trains in bf16 with
    float32 masters, clipping at 1.0 (utils/ds_utils.py:48; the release's TRACE/utils/ds_utils.py:43):
    every text strategy on --benchmark trace takes the three, and the optimizer it builds steps with
    them. SAPT's Trainer clips at 1.0 on SuperNI (transformers' max_grad_norm default)."""
    from moram_avalanche.algorithms.mixed_precision import MasterWeights
    from moram_avalanche.experiments.text.recipes import stream_options, text_strategy_classes
    from moram_avalanche.text.load import prepare_tokenizer
    from tiny_text import word_tokenizer

    for name in text_strategy_classes():
        options = stream_options("trace", name)
        assert (options["betas"], options["max_grad_norm"], options["master_weights"]) == ((0.9, 0.95), 1.0, True), name
        assert stream_options("superni", name)["max_grad_norm"] == 1.0, name
    tokenizer = prepare_tokenizer(word_tokenizer(), seq2seq=False)
    for name in ("l2p", "finetune", "seq-lora"):  # (MoRAM's atoms are added as a task starts)
        strategy = build(name, tiny_llama().to(torch.bfloat16), tokenizer, **stream_options("trace", name))
        strategy.make_optimizer()
        groups = strategy.optimizer.param_groups
        assert all(group["betas"] == (0.9, 0.95) for group in groups), name
        # what AdamW steps is float32: masters of the bf16 weights (L2P's prompt pool is float32 itself)
        assert all(p.dtype == torch.float32 for group in groups for p in group["params"]), name
        assert isinstance(strategy.optimizer, MasterWeights) == (name != "l2p"), name
        assert strategy.gradient_clip().max_norm == 1.0


def test_dry_runs_print_every_changed_setting_with_its_source():
    from moram_avalanche.experiments.paper.plan_text import plan_text
    from moram_avalanche.experiments.text.paper_tables import get_text_table
    from moram_avalanche.experiments.text.recipes import describe, stream_settings, table_settings
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    for table in ("trace", "t5-standard", "t5-long"):
        spec = get_text_table(table)
        text = plan_text([spec], TextReproduceSettings())
        strategies = {m.strategy for m in spec.methods if m.strategy}
        printed = 0
        for name in strategies:
            for setting in stream_settings(spec.benchmark, name) + table_settings(table, name):
                assert f"{setting.option} {describe(setting.value)}  [{setting.source}]" in text, (table, name)
                assert any(mark in setting.source for mark in (".py", ".sh", "paper Sec. 4")), setting
                printed += 1
        assert printed or table == "t5-standard"
    trace = plan_text([get_text_table("trace")], TextReproduceSettings())
    assert "repetition_penalty 1.2  [TRACE/inference/infer_part.py" in trace
    assert "q_proj, k_proj, v_proj, o_proj (llama, gemma, gemma2" in trace and "my_peft/utils/other.py" in trace
    assert "MeetingBank keeps the head of its transcripts, up to 4096 tokens" in trace
    assert "collect_results.py" in trace and "GiB on the GPU" in trace  # the release's BWT; GEM's memory
    # TRACE's optimiser and precision, and what the float32 state costs (utils/memory.py training_state_bytes:
    # 18 bytes per trainable bf16 weight, 6 in pure bf16)
    assert "betas (0.9, 0.95)  [BeyonderXX/TRACE training/main.py:392-395" in trace
    assert "max_grad_norm 1  [TRACE/utils/ds_utils.py:43" in trace and "master_weights True  [" in trace
    assert "memory: 18 bytes per trainable weight" in trace and "--set master_weights=False: 6)" in trace
    standard = plan_text([get_text_table("t5-standard")], TextReproduceSettings())
    assert "--add_task_name True --add_dataset_name True" in standard and "articles kept" in standard
    assert "LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)" in standard
    long = plan_text([get_text_table("t5-long")], TextReproduceSettings())
    assert "lambda_orth yelp 0, amazon 0.5" in long and "wic 5  [O-LoRA scripts/long.sh" in long


def test_t5_long_runs_olora_with_its_per_task_lambdas_and_mnli_epochs():
    from moram_avalanche.experiments.paper.runs import method_runs, run_options
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    settings = TextReproduceSettings()
    long_run = method_runs(TEXT_TABLES["t5-long"], "O-LoRA", settings)[0]
    options = run_options(long_run, settings)
    # O-LoRA scripts/long.sh, by hand: WiC --lamda_1 5 --lamda_2 0.3; COPA 0.5 / 0.1; yelp 0 / 0; MNLI 2 epochs
    assert (options["lambda_orth"]["wic"], options["lambda_l2"]["wic"]) == (5.0, 0.3)
    assert (options["lambda_orth"]["copa"], options["lambda_l2"]["copa"]) == (0.5, 0.1)
    assert (options["lambda_orth"]["yelp"], options["lambda_l2"]["yelp"]) == (0.0, 0.0)
    assert options["epochs"]["mnli"] == 2 and set(options["epochs"].values()) == {1, 2}
    standard = method_runs(TEXT_TABLES["t5-standard"], "O-LoRA", settings)[0]
    assert run_options(standard, settings) == {}  # order_1.sh's 0.5 / 0 are the strategy's defaults


def test_a_run_folder_made_before_the_prefix_is_not_resumed():
    from moram_avalanche.experiments.paper.runs import method_runs, run_settings
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    settings = TextReproduceSettings()
    spec = TEXT_TABLES["t5-standard"]
    run = method_runs(spec, "MoRAM", settings)[0]
    assert run_settings(run, settings)["stream"]["task_prefix"] is True  # recorded, so checked on resume
    json.dumps(run_settings(run, settings))  # and writable


def test_gemma_is_in_the_release_target_table():
    from moram_avalanche.text.targets import RELEASE_TARGET_MODULES

    names = {name for name, module in tiny_gemma().named_modules() if isinstance(module, nn.Linear)}
    assert every_layer(ATTENTION) <= names
    assert tuple(RELEASE_TARGET_MODULES["gemma"]) == ATTENTION == tuple(RELEASE_TARGET_MODULES["llama"])


def test_a_row_the_package_cannot_run_says_why_and_a_run_row_not_yet_run_shows_the_papers_number(tmp_path):
    from moram_avalanche.experiments.paper.report import table_markdown
    from moram_avalanche.experiments.paper.results import table_result
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLES
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    result = table_result(TEXT_TABLES["trace"], TextReproduceSettings(out=str(tmp_path)))
    rows = {r.method: r for r in result.rows if r.block == "LLaMA-2-7B-Chat"}
    assert all(row.status != "not run" for row in rows.values())  # every TRACE row runs now
    # transcribed since (they were empty, flagged †): paper_tables_lm.md, tab:llm_cl's LLaMA-2-7B-Chat OP row
    for name, op in (("DualPrompt", 37.69), ("HiDeLoRA", 41.60), ("L2P", 36.23)):
        assert rows[name].status == "incomplete"  # it runs; nothing was run here
        assert rows[name].cells["OP"].paper == op
    assert rows["TreeLoRA"].status == "incomplete"
    assert (rows["TreeLoRA"].cells["OP"].paper, rows["TreeLoRA"].cells["BWT"].paper) == (43.52, 3.46)  # tab:llm_cl
    lines = table_markdown(result).splitlines()
    # with their std, and no note left (no †): tab:llm_cl "43.52 ± 1.0", "3.46 ± 0.4", "41.60 ± 0.8", "7.12 ± 0.4"
    at = lines.index("|  | TreeLoRA | ours | incomplete |  |  |")
    assert lines[at + 1] == "|  |  | paper | 43.52 ± 1.00 | 3.46 ± 0.40 | – |"  # the release's BWT: no paper number
    at = lines.index("|  | HiDeLoRA | ours | incomplete |  |  |")
    assert lines[at + 1] == "|  |  | paper | 41.60 ± 0.80 | 7.12 ± 0.40 | – |"
    # a row the package cannot run (SuperNI's C-LoRA: no published code) says why
    superni = table_result(TEXT_TABLES["superni"], TextReproduceSettings(out=str(tmp_path)))
    [clora] = [r for r in superni.rows if r.method == "C-LoRA"]
    assert clora.status == "not run" and "no published code" in clora.reason
    assert any(line.startswith("- ") and "C-LoRA: not run -- not implemented in this library: no published code"
               in line for line in table_markdown(superni).splitlines())


def test_l2p_runs_traces_l2p_settings_on_trace_and_the_tables_loop_elsewhere():
    from moram_avalanche.experiments.text.recipes import stream_options, stream_settings

    options = stream_options("trace", "l2p")
    # BeyonderXX/TRACE training/main.py (pool 10, length 5), model/Dynamic_network/L2P.py (top 3, 0.5),
    # scripts/train_seq_cl.sh (the script of every --CL_method: lr 1e-5, epochs 5,3,7,5,3,5,5,7)
    assert (options["pool_size"], options["prompt_length"], options["top_k"], options["pull_coef"]) == (10, 5, 3, 0.5)
    assert options["lr"] == 1e-5 and options["epochs"]["MeetingBank"] == 7 and options["train_mb_size"] == 4
    assert all(s.source for s in stream_settings("trace", "l2p"))
    superni = stream_options("superni", "l2p")  # SAPT's loop, L2P's own defaults (TRACE's)
    assert superni["lr"] == 3e-4 and "pool_size" not in superni
