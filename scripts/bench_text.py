"""Speed of MoRAM on language models: training step against same-rank LoRA, generation against the base model.

Goals (the project's issue "GPU path II"): "LLaMA-1B- and T5-base-sized training step <= 1.10x
same-rank LoRA (same dropout) and generation <= 1.15x the base model" (:data:`TRAIN_GOAL`,
:data:`GENERATION_GOAL`). Both are measured after 4 and after 15 tasks (``--tasks``), in the
paper's LLM setting (paper Sec. 4, LLM settings: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`):
r = 8 new atoms per task, top-k 4, tau 0.1, delta 0.2, dropout 0.1 on the atoms' input, on the
query and key projections (T5: ``q`` and ``k`` of every attention, self- and cross-attention;
LLaMA: ``q_proj`` and ``k_proj``; :data:`moram_avalanche.text.MORAM_TARGET_MODULES`).

Models are random-init from their configs (no download; speed does not depend on the weights):

* ``--model t5-base``  -- a T5-base-sized ``T5ForConditionalGeneration`` (d_model 768, d_ff 3072,
  d_kv 64, 12 + 12 layers, 12 heads, vocab 32128);
* ``--model llama-1b`` -- a LLaMA-3.2-1B-sized ``LlamaForCausalLM`` (hidden 2048, 16 layers,
  32 heads, 8 key/value heads, intermediate 8192, vocab 128256, tied embeddings).

``--layers N`` shrinks the depth (a quick CPU check; the printout says so): the embedding and
the LM head keep their full size, so they weigh more in a shrunk model than in the real one.
``--quick`` shrinks the widths too (:data:`QUICK`: every figure meaningless; checks the script).

What is timed, round-robin in this one process (medians of ``--repeats`` after ``--warmup``
untimed calls; the clock waits for queued CUDA work, ``torch.cuda.synchronize``):

1. training step, train mode -- forward, teacher-forced token cross-entropy of ``--target-len``
   answer tokens after ``--source-len`` prompt tokens (T5: encoder input and labels; LLaMA: one
   sequence, prompt positions ignored), backward, AdamW step (the text loop's lr and betas,
   no weight decay) on the trainable parameters: MoRAM (after task t, t * 8 atoms per target
   linear, the last 8 trainable, the others frozen) against a rank-8 LoRA with the same dropout
   (:class:`moram_avalanche.text.lora_layers.DropoutLoRALinear`, scale 1, dropout on its input
   as peft's ``lora_dropout``) on the same linears, so both train the same number of parameters
   and both pay for one dropout. Ratio MoRAM / LoRA. MoRAM's dropout on the atoms' input is on
   in train mode: :class:`~moram_avalanche.text.layer.DropoutMoRAMLinear` computes ``base(x)``
   plus the atoms' term on the dropped input, one product with the base weight as LoRA;
   ``--dropout 0`` shows what the dropout costs (both lose it).
2. generation, eval mode (MoRAM's delta gate is on, the bank frozen as after the task:
   ``bench_copies.frozen_copy``) -- greedy ``generate`` of exactly ``--new-tokens`` tokens
   (``min_new_tokens == max_new_tokens``, KV cache on) for ``--batch`` prompts of
   ``--source-len`` tokens: MoRAM against the base model (no adapter) and against the LoRA
   model. Ratios time(MoRAM) / time(base) and time(LoRA) / time(base), and tokens/s.

The atoms grow with the library's own calls (:func:`~moram_avalanche.text.inject.inject_moram`,
:func:`~moram_avalanche.text.inject.add_task`; ``add_task`` freezes the previous task's atoms);
each task's values B are drawn N(0, ``--value-std``^2) from a seeded generator so the mixture
really runs (the library starts them at zero), keys keep the library's Kaiming init. LoRA's
up-projection is drawn the same way. The printout gives the share of kept atoms whose relevance
passes the eval gate: random keys pass few, and the eval read-out skips the others, so a
trained bank may cost more at generation.

Memory: the base model is built once (on ``--device``, then cast to ``--dtype``); the LoRA and
MoRAM models are structural copies that share every weight and buffer of the base (a deepcopy
whose memo maps the base's tensors to themselves), so the three models hold one copy of the
weights (LLaMA-1B in float32: about 5 GB) and can be timed round-robin. Every base weight is
frozen in all three; the adapters live in their own copy.

Example (a GPU):
    python scripts/bench_text.py --model llama-1b --device cuda --batch 8 --source-len 256 \\
        --target-len 16 --new-tokens 32 --tasks 4,15 --repeats 10 --json llama.json
Small CPU check:
    python scripts/bench_text.py --model t5-base --layers 2 --batch 4 --source-len 64 \\
        --target-len 8 --new-tokens 8 --repeats 3 --threads 1
Quick check of the script (tiny widths): python scripts/bench_text.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Dict, List, Optional

import torch
from bench_copies import frozen_copy, sharing_copy
from bench_timing import add_timing_options, apply_threads, time_round_robin
from torch import nn

from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.lora import LoRALinear
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel
from moram_avalanche.layers.replace import replace_linears
from moram_avalanche.strategies.text.loop import PAPER_TEXT_LOOP, TEXT_BETAS
from moram_avalanche.text import PAPER_LLM_OPTIONS, add_task, inject_moram, target_names
from moram_avalanche.text.lora_layers import DropoutLoRALinear
from moram_avalanche.utils.files import atomic_write_text

#: the project's goals (issue "GPU path II"), after 15 tasks: MoRAM's training step / the same-rank,
#: same-dropout LoRA's, and generation time / the base model's, eager and compiled
TRAIN_GOAL = 1.10
GENERATION_GOAL = 1.15
#: LoRA's rank: the same as MoRAM's new atoms per task (8)
RANK = PAPER_LLM_OPTIONS["atoms_per_task"]

#: model name -> (transformers class, config class, config fields, the field holding the depth)
MODELS = {
    "t5-base": ("T5ForConditionalGeneration", "T5Config", dict(
        vocab_size=32128, d_model=768, d_ff=3072, d_kv=64, num_layers=12, num_decoder_layers=12,
        num_heads=12, relative_attention_num_buckets=32, feed_forward_proj="relu",
        tie_word_embeddings=True, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
        ("num_layers", "num_decoder_layers")),
    "llama-7b": ("LlamaForCausalLM", "LlamaConfig", dict(  # LLaMA-2-7B (meta-llama/Llama-2-7b-hf's config)
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, rms_norm_eps=1e-5, max_position_embeddings=4096,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2), ("num_hidden_layers",)),
    "llama-1b": ("LlamaForCausalLM", "LlamaConfig", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5,
        max_position_embeddings=131072, tie_word_embeddings=True, bos_token_id=128000,
        eos_token_id=128001, rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 8192}),
        ("num_hidden_layers",)),
}
#: ``--quick``: tiny widths over each model's config, 2 layers deep (every figure meaningless; checks the
#: script; the token ids stay inside the tiny vocabulary)
QUICK_LAYERS = 2
QUICK = {
    "t5-base": dict(vocab_size=99, d_model=32, d_ff=37, d_kv=8, num_heads=4, relative_attention_num_buckets=8),
    "llama-1b": dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=8, bos_token_id=1, eos_token_id=2),
    "llama-7b": dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_attention_heads=4, num_key_value_heads=4),
}


# ---------------------------------------------------------------------- models
def model_config(name: str, layers: Optional[int] = None, **overrides):
    """The transformers config of ``name`` (:data:`MODELS`), ``layers`` deep if given, with ``overrides``."""
    import transformers

    _, config_class, fields, depth_fields = MODELS[name]
    fields = dict(fields, **overrides)
    if layers is not None:
        fields.update({field: int(layers) for field in depth_fields})
    return getattr(transformers, config_class)(**fields)


def full_depth(name: str) -> int:
    return MODELS[name][2][MODELS[name][3][0]]


def build_base(name: str, config, device, dtype: torch.dtype, seed: int = 0) -> nn.Module:
    """The random-init model of ``name`` on ``device`` in ``dtype``, eval mode, every weight frozen."""
    import transformers

    torch.manual_seed(seed)
    with torch.device(device):
        model = getattr(transformers, MODELS[name][0])(config)
    model = model.to(dtype=dtype).eval()
    model.requires_grad_(False)
    return model


def seeded_normal_(tensor: torch.Tensor, std: float, generator: torch.Generator) -> None:
    """Fill ``tensor`` in place with N(0, std^2) drawn on the CPU from ``generator`` (device independent)."""
    with torch.no_grad():
        tensor.copy_(torch.randn(tensor.shape, generator=generator) * std)


def lora_layer(rank: int, dropout: float = 0.0):
    """``linear -> the LoRA layer over it``: rank ``rank``, scale 1, and ``dropout`` on its input
    (:class:`~moram_avalanche.text.lora_layers.DropoutLoRALinear`; 0: the plain
    :class:`~moram_avalanche.layers.lora.LoRALinear`, nothing dropped)."""
    if dropout:
        return lambda linear: DropoutLoRALinear(linear, rank, dropout=dropout)
    return lambda linear: LoRALinear(linear, rank)


def with_lora(base: nn.Module, rank: int = RANK, std: float = 0.02, seed: int = 0, targets=None,
              dropout: float = 0.0) -> nn.Module:
    """A sharing copy of ``base`` with a rank-``rank`` LoRA on MoRAM's targets (``targets``: names
    or a ``model_type`` table; None: the architecture's), up-projection N(0, std^2), ``dropout``
    on its input (:func:`lora_layer`)."""
    model = sharing_copy(base)
    model.requires_grad_(False)
    layers = replace_linears(model, target_names(model, targets), lora_layer(rank, dropout))
    generator = torch.Generator().manual_seed(seed)
    for layer in layers.values():
        seeded_normal_(layer.up, std, generator)
    return model


def with_moram(base: nn.Module, dropout: float = PAPER_LLM_OPTIONS["dropout"],
               options: Optional[dict] = None) -> nn.Module:
    """A sharing copy of ``base`` with empty MoRAM layers on its targets: the paper's LLM setting
    (:data:`~moram_avalanche.text.PAPER_LLM_OPTIONS`), or ``options`` (e.g. its TRACE setting)."""
    model = sharing_copy(base)
    inject_moram(model, **dict(options if options is not None else PAPER_LLM_OPTIONS, dropout=dropout))
    return model


def grow(model: nn.Module, tasks: int, std: float = 0.02, seed: int = 0) -> int:
    """Grow ``model``'s MoRAM layers to ``tasks`` tasks: every new task's values N(0, std^2), seeded.

    Tasks already held are kept (the model grows from 4 to 15 tasks without starting over).
    Returns the atoms per layer; the last task's atoms stay trainable.
    """
    layers = find_layers(model, MoRAMLinear)
    per_task = atoms_per_task(layers)
    held = max(layer.num_atoms for layer in layers.values()) // per_task
    if tasks < held:
        raise ValueError(f"the model already holds {held} tasks; cannot shrink to {tasks}")
    for task in range(held, tasks):
        generator = torch.Generator().manual_seed(seed * 1000 + task)
        add_task(model)
        for layer in layers.values():
            seeded_normal_(layer.new_values, std, generator)
    return check_growth(model, tasks)


def atoms_per_task(layers: Dict[str, MoRAMLinear]) -> int:
    """The new atoms per task of ``layers`` (one value for all of them)."""
    counts = {layer.atoms_per_task for layer in layers.values()}
    if len(counts) != 1:
        raise AssertionError(f"the MoRAM layers add different numbers of atoms per task: {sorted(counts)}")
    return counts.pop()


def check_growth(model: nn.Module, tasks: int) -> int:
    """The invariant after ``tasks`` tasks: each MoRAM layer holds ``tasks * r`` atoms, the last ``r``
    trainable; the model's trainable parameters are exactly those. Returns the atoms per layer."""
    layers = find_layers(model, MoRAMLinear)
    per_task = atoms_per_task(layers)
    for name, layer in layers.items():
        if (layer.num_atoms, layer.num_trainable) != (tasks * per_task, per_task):
            raise AssertionError(f"{name}: {layer.num_atoms} atoms ({layer.num_trainable} trainable) after "
                                 f"{tasks} tasks; expected {tasks * per_task} ({per_task} trainable)")
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    atoms = {id(p) for layer in layers.values() for p in (layer.new_keys, layer.new_values)}
    if trainable != atoms:
        raise AssertionError("the model's trainable parameters are not exactly the current task's atoms")
    return tasks * per_task


def trainable_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# ---------------------------------------------------------------------- inputs and timed calls
def make_inputs(config, batch: int, source_len: int, target_len: int, device, seed: int = 0) -> dict:
    """Random token ids: ``{"train": model kwargs with labels, "prompt": generate kwargs}``."""
    generator = torch.Generator().manual_seed(seed)
    ids = lambda length: torch.randint(3, config.vocab_size, (batch, length), generator=generator)  # noqa: E731
    source, target = ids(source_len), ids(target_len)
    if config.is_encoder_decoder:
        train = {"input_ids": source, "attention_mask": torch.ones_like(source), "labels": target}
    else:  # one sequence, the loss on the answer only (-100: ignored by the model's loss)
        tokens = torch.cat([source, target], dim=1)
        labels = torch.cat([torch.full_like(source, -100), target], dim=1)
        train = {"input_ids": tokens, "attention_mask": torch.ones_like(tokens), "labels": labels}
    prompt = {"input_ids": source, "attention_mask": torch.ones_like(source)}
    move = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
    return {"train": move(train), "prompt": move(prompt)}


def train_call(model: nn.Module, inputs: dict):
    """One training step in train mode (forward, token loss, backward, AdamW on what requires grad)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=PAPER_TEXT_LOOP["lr"], betas=TEXT_BETAS, weight_decay=0.0)

    def run():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        model(**inputs).loss.backward()
        optimizer.step()
    return run


def compile_everywhere(backend: str = "eager"):
    """A ``transformers.CompileConfig`` that compiles the decode step on any device with ``backend``:
    ``transformers`` compiles a static-cache decode step on accelerators only, so on the CPU this
    is how a quick check runs ``torch._dynamo`` over it (``eager``: traced, graph breaks and
    recompiles counted, no code generated)."""
    from transformers import CompileConfig

    config = CompileConfig(backend=backend)
    config._compile_all_devices = True  # transformers' own switch for devices it does not compile on
    return config


def generate_call(model: nn.Module, prompt: dict, new_tokens: int, pad_id: int, static_cache: bool = False,
                  compile_config=None):
    """Greedy generation of exactly ``new_tokens`` tokens per prompt, in eval mode.

    ``static_cache``: a static KV cache, with which ``transformers`` compiles the decode step
    (``torch.compile``, mode ``reduce-overhead``: CUDA graphs) on a GPU; the first calls compile.
    ``compile_config``: how it compiles instead (:func:`compile_everywhere` on the CPU).
    """
    config = model.config
    prompt_len = 1 if config.is_encoder_decoder else prompt["input_ids"].shape[1]  # T5: the start token
    extra = {"cache_implementation": "static"} if static_cache else {}
    if compile_config is not None:
        extra["compile_config"] = compile_config

    def run():
        model.eval()
        with torch.inference_mode():
            out = model.generate(**prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                 do_sample=False, num_beams=1, pad_token_id=pad_id, **extra)
        if out.shape[1] - prompt_len != new_tokens:
            raise AssertionError(f"generated {out.shape[1] - prompt_len} tokens, expected {new_tokens}")
    return run


def gate_pass_rate(model: nn.Module, inputs: dict) -> float:
    """Share of the kept (top-k) atoms with relevance >= delta, over every MoRAM layer, one eval forward."""
    passed, total = [0], [0]

    def hook(layer, args, _output):
        x = args[0].reshape(-1, layer.in_features).float()
        proj = x @ layer.keys.float().t()
        kept = proj.topk(layer.effective_topk, dim=-1).values
        relevance = kept / proj.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        passed[0] += int((relevance >= layer.threshold).sum())
        total[0] += relevance.numel()

    handles = [layer.register_forward_hook(hook) for layer in find_layers(model, MoRAMLinear).values()]
    model.eval()
    try:
        with torch.inference_mode():
            model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return passed[0] / max(total[0], 1)


# ---------------------------------------------------------------------- the measurement
def measure(models: Dict[str, nn.Module], inputs: dict, tasks: int, new_tokens: int, batch: int,
            repeats: int = 3, warmup: int = 1, std: float = 0.02, seed: int = 0) -> dict:
    """Grow ``models["moram"]`` to ``tasks`` tasks, then time training and generation; one result row.

    Generation runs MoRAM on a frozen bank (:func:`bench_copies.frozen_copy`, as after the task);
    ``models["moram"]`` keeps its last task's atoms trainable."""
    atoms = grow(models["moram"], tasks, std, seed)
    config = models["base"].config
    pad_id = config.pad_token_id if config.pad_token_id is not None else config.eos_token_id
    evaluated = dict(models, moram=frozen_copy(models["moram"]))
    gate = gate_pass_rate(evaluated["moram"], inputs["train"])
    gen = time_round_robin({name: generate_call(model, inputs["prompt"], new_tokens, pad_id)
                            for name, model in evaluated.items()}, repeats, warmup)
    train = time_round_robin({name: train_call(models[name], inputs["train"]) for name in ("lora", "moram")},
                             repeats, warmup)
    tokens = batch * new_tokens
    row = {
        "tasks": tasks, "atoms_per_layer": atoms, "gate_pass": gate,
        "trainable_moram": trainable_count(models["moram"]), "trainable_lora": trainable_count(models["lora"]),
        "train_s": train, "generate_s": gen,
        "train_moram_over_lora": train["moram"] / train["lora"],
        "generate_moram_over_base": gen["moram"] / gen["base"],
        "generate_lora_over_base": gen["lora"] / gen["base"],
        "tokens_per_s": {name: tokens / seconds for name, seconds in gen.items()},
    }
    row["train_goal_met"] = row["train_moram_over_lora"] <= TRAIN_GOAL
    row["generate_goal_met"] = row["generate_moram_over_base"] <= GENERATION_GOAL
    models["moram"].eval()
    models["lora"].eval()
    return row


def build_models(name: str, layers: Optional[int], device, dtype: torch.dtype, std: float = 0.02,
                 seed: int = 0, dropout: float = PAPER_LLM_OPTIONS["dropout"], **overrides) -> Dict[str, nn.Module]:
    """``{"base", "lora", "moram"}`` sharing the base's weights (module docstring: Memory); LoRA takes
    MoRAM's ``dropout`` on its input (the same dropout)."""
    base = build_base(name, model_config(name, layers, **overrides), device, dtype, seed)
    return {"base": base, "lora": with_lora(base, RANK, std, seed, dropout=dropout), "moram": with_moram(base, dropout)}


def table(model: str, rows: List[dict]) -> str:
    head = (f"{'model':9s} {'tasks':>5s} {'atoms/layer':>11s} {'train MoRAM/LoRA':>16s} {'gen MoRAM/base':>14s} "
            f"{'gen LoRA/base':>13s} {'tok/s base':>10s} {'tok/s LoRA':>10s} {'tok/s MoRAM':>11s} "
            f"{'gate pass':>9s}  train<={TRAIN_GOAL}  gen<={GENERATION_GOAL}")
    lines = [head]
    for r in rows:
        tps = r["tokens_per_s"]
        lines.append(
            f"{model:9s} {r['tasks']:5d} {r['atoms_per_layer']:11d} {r['train_moram_over_lora']:15.2f}x "
            f"{r['generate_moram_over_base']:13.2f}x {r['generate_lora_over_base']:12.2f}x {tps['base']:10.1f} "
            f"{tps['lora']:10.1f} {tps['moram']:11.1f} {r['gate_pass']:9.1%}  "
            f"{'PASS' if r['train_goal_met'] else 'OVER':>10s}  {'PASS' if r['generate_goal_met'] else 'OVER':>8s}")
    return "\n".join(lines)


def parse_tasks(text: str) -> List[int]:
    try:
        tasks = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tasks takes task counts like 4,15, got {text!r}") from None
    if not tasks or tasks[0] < 1:
        raise argparse.ArgumentTypeError(f"--tasks takes positive task counts like 4,15, got {text!r}")
    return tasks


def main(argv=None) -> List[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="t5-base")
    parser.add_argument("--layers", type=int, default=None, help="shrink the depth to N layers (CPU check)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                        help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--source-len", type=int, default=128, help="prompt tokens")
    parser.add_argument("--target-len", type=int, default=16, help="answer tokens trained")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens generated per prompt")
    parser.add_argument("--tasks", type=parse_tasks, default=[4, 15], help="task counts, e.g. 4,15")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls of each function first")
    parser.add_argument("--value-std", type=float, default=0.02, help="std of the atoms' values and LoRA's up")
    parser.add_argument("--dropout", type=float, default=PAPER_LLM_OPTIONS["dropout"],
                        help=f"MoRAM's dropout on the atoms' input (paper: {PAPER_LLM_OPTIONS['dropout']}; "
                             "0 shows what it costs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    parser.add_argument("--quick", action="store_true",
                        help="tiny widths (QUICK), 2 layers, few tokens, 1 repeat: checks the script only")
    add_timing_options(parser, repeats=5)
    args = parser.parse_args(argv)
    overrides = {}
    if args.quick:
        overrides = QUICK[args.model]
        args.layers, args.batch, args.source_len, args.target_len, args.new_tokens = QUICK_LAYERS, 2, 8, 2, 2
        args.tasks, args.repeats, args.warmup = [1, 2], 1, 0
    apply_threads(args)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    kernel = None
    if device.type == "cpu":
        kernel = routing_kernel.load() is not None  # MoRAM's CPU routing kernel, built before anything is timed

    models = build_models(args.model, args.layers, device, dtype, args.value_std, args.seed, args.dropout, **overrides)
    config = models["base"].config
    inputs = make_inputs(config, args.batch, args.source_len, args.target_len, device, args.seed)
    depth = getattr(config, MODELS[args.model][3][0])
    shrunk = depth != full_depth(args.model)
    targets = target_names(models["base"])
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} CPU threads"
    params = sum(p.numel() for p in models["base"].parameters())
    print(f"torch {torch.__version__}, {where}, load {os.getloadavg()[0]:.1f}, {dtype}, "
          f"attention {config._attn_implementation}"
          + (f", CPU routing kernel {'built' if kernel else 'not available'}" if kernel is not None else ""))
    print(f"model {args.model}: {params / 1e6:.0f}M parameters, {depth} layers"
          + (f" -- SHRUNK from {full_depth(args.model)} and tiny widths (--quick)" if args.quick else
             f" -- SHRUNK from {full_depth(args.model)} (--layers {args.layers}); embedding and LM head "
             "full size, so the ratios are not the full model's" if shrunk else " (full depth)"))
    print(f"MoRAM {dict(PAPER_LLM_OPTIONS, dropout=args.dropout)} vs LoRA rank {RANK}, dropout {args.dropout} (the "
          f"same), on {len(targets)} linears "
          f"({', '.join(sorted({t.rpartition('.')[2] for t in targets}))}); batch {args.batch}, "
          f"source {args.source_len}, target {args.target_len}, new tokens {args.new_tokens}; tasks {args.tasks}; "
          f"median of {args.repeats} after {args.warmup} warm-up; values N(0, {args.value_std}^2), seed {args.seed}")
    print(f"goals after 15 tasks: training step <= {TRAIN_GOAL}x LoRA, generation <= {GENERATION_GOAL}x "
          "the base model (shown for every row); generation on the frozen bank"
          + ("; --quick: tiny widths, every figure meaningless" if args.quick else ""))

    rows = []
    for tasks in args.tasks:
        row = measure(models, inputs, tasks, args.new_tokens, args.batch, args.repeats, args.warmup,
                      args.value_std, args.seed)
        rows.append(row)
        print(f"  {tasks} tasks: train ms LoRA {1e3 * row['train_s']['lora']:.1f}, MoRAM "
              f"{1e3 * row['train_s']['moram']:.1f} (trainable {row['trainable_lora']} / "
              f"{row['trainable_moram']}); generate ms base {1e3 * row['generate_s']['base']:.1f}, LoRA "
              f"{1e3 * row['generate_s']['lora']:.1f}, MoRAM {1e3 * row['generate_s']['moram']:.1f}", flush=True)
    print()
    print(table(args.model, rows))

    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        settings.update(overrides=overrides)
        settings.update(dtype=str(dtype).replace("torch.", ""), depth=depth, full_depth=full_depth(args.model),
                        shrunk=shrunk, parameters=params, targets=targets, rank=RANK,
                        moram=dict(PAPER_LLM_OPTIONS, dropout=args.dropout), device_name=where, torch=torch.__version__,
                        cpu_routing_kernel=kernel)
        payload = {"goals": {"train_moram_over_lora": TRAIN_GOAL, "generate_moram_over_base": GENERATION_GOAL,
                             "after_tasks": 15},
                   "settings": settings, "model": args.model, "rows": rows}
        if not all(math.isfinite(v) for r in rows for v in (r["train_moram_over_lora"],
                                                             r["generate_moram_over_base"])):
            raise RuntimeError("a ratio is not finite")
        atomic_write_text(args.json, json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")
    return rows


# sharing_copy: bench_copies' (bench_memory_text and its docstring read it here)
__all__ = ["GENERATION_GOAL", "MODELS", "QUICK", "QUICK_LAYERS", "RANK", "TRAIN_GOAL", "atoms_per_task", "build_base",
           "build_models", "check_growth", "compile_everywhere", "full_depth", "gate_pass_rate", "generate_call",
           "grow", "lora_layer", "main", "make_inputs", "measure", "model_config", "parse_tasks", "seeded_normal_",
           "sharing_copy", "table", "train_call", "trainable_count", "with_lora", "with_moram"]


if __name__ == "__main__":
    main()
