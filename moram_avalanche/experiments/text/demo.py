"""The offline text demo (``moram-avalanche demo --text``): SeqLoRA and MoRAM on the synthetic text stream.

1. A tiny T5 (:func:`tiny_t5_config`, built from a ``T5Config``) and a word-level tokenizer
   built in code (``tokenizers`` WordLevel over every word of the stream and of the
   pre-training mixture, wrapped in ``PreTrainedTokenizerFast``) get a brief pre-training on a
   separate generated mixture (:func:`pretraining_pairs`): classification tasks in the
   stream's prompt format on a disjoint world (other instructions, labels and cue words) and a
   label-reading task (name the option word planted in the paragraph, over every label word of
   both worlds), so the model starts out answering with one of the options. It never sees the
   stream's cue words. Model and tokenizer are saved with ``save_pretrained`` into
   ``cache_dir/moram-text-tiny-t5-<hash of the settings>/`` (written to a temporary folder, then
   renamed; a manifest with each file's SHA-256 tells a complete folder from a damaged one,
   which is pre-trained again with a warning), the cache folder of the CLIP demo
   (:func:`~moram_avalanche.experiments.demos.default_cache_dir`).
2. SeqLoRA (``seq-lora``) and MoRAM (``moram``, the paper's LLM options) learn the five tasks
   of ``synthetic-text`` in turn through the one run path
   (:func:`~moram_avalanche.experiments.compare.run_comparison` with a text :class:`Setup`, the
   model loaded as ``--model`` folders are: :func:`~.family.model_loader`):
   resumable per strategy, each writing ``results.json``, ``accuracy_matrix.csv`` / ``.png``,
   ``memory.json`` and ``time.json`` under ``out_dir/<strategy>/`` and its TensorBoard log
   under ``out_dir/tensorboard/<strategy>/``. Their options at the demo's budget are the app's
   data (:data:`~moram_avalanche.experiments.clip.recipes.TEXT_DEMO_OPTIONS`).
3. The language-model table -- per strategy OP (the average accuracy after the last task), BWT
   (the paper's definitions, :func:`~moram_avalanche.benchmarks.text.metrics.op_bwt`; positive
   BWT is forgetting), the last row of the accuracy matrix per task and the training time -- is
   printed and written to ``out_dir/summary.md``, ``table.md`` and ``table.csv`` by the
   comparison (:data:`~moram_avalanche.experiments.tables.TEXT_TABLES`), the summary followed by
   each task's chance level and the pre-training's result; ``accuracy_matrices.png`` shows the
   matrices side by side.

Defaults (:class:`TextDemoConfig`) and where they come from: the stream's format, tasks and cue
words are :mod:`~moram_avalanche.benchmarks.text.synthetic`'s; MoRAM's r, top-k, tau, delta and
dropout are the paper's LLM setting (:data:`moram_avalanche.text.PAPER_LLM_OPTIONS`), SeqLoRA's
rank and targets O-LoRA's T5 setting; the loop is the paper's (AdamW, constant learning rate)
with its budget scaled to the demo: a fixed number of minibatches per task instead of one
epoch over hundreds of examples, and a learning rate of 5e-3 instead of the paper's 1e-3 (set
for T5-large's thousands of steps: in the demo's 40 steps per task MoRAM then learns its tasks
barely above chance). The model's sizes, the pre-training and the stream's sizes are ours,
chosen so that the whole demo, pre-training included, runs in well under 3 minutes on 2 CPU
cores and both strategies learn every task far above chance (the diagonal of the accuracy
matrix); more pre-training made both strategies better, a model twice as wide trained worse at
this learning rate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from tqdm.auto import tqdm

from ...benchmarks.text.synthetic import FILLER, SYNTHETIC_TASKS, synthetic_text_tasks
from ...benchmarks.text.tasks import olora_prompt
from ...utils.files import atomic_write_text
from ..demos import run_family_demo
from ..family import Demo
from .loaders import text_model_loader

logger = logging.getLogger(__name__)

#: the cached model's folder name (before the hash of its settings)
TINY_T5_NAME = "moram-text-tiny-t5"
#: the file that lists a complete cached folder's files and their SHA-256
MANIFEST = "demo_pretraining.json"
#: bump when the pre-training changes in a way its settings do not show
PRETRAINING_VERSION = 1
#: what ``demo --text`` runs: the forgetting baseline and the method
TEXT_DEMO_STRATEGIES = ("seq-lora", "moram")
SPECIAL_TOKENS = ("<pad>", "</s>", "<unk>")

#: the pre-training world: instructions and labels disjoint from the stream's (SYNTHETIC_TASKS)
PRETRAIN_TASKS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "shape": ("What is the shape of the following paragraph? Choose one from the option.\n",
              ("circle", "square", "triangle")),
    "weather": ("What is the weather of the following paragraph? Choose one from the option.\n",
                ("sunny", "rainy")),
    "fruit": ("Which fruit does the following paragraph describe? Choose one from the option.\n",
              ("apple", "pear", "plum")),
    "season": ("What is the season of the following paragraph? Choose one from the option.\n",
               ("summer", "winter")),
    "vehicle": ("Which vehicle does the following paragraph describe? Choose one from the option.\n",
                ("car", "boat", "train")),
    "metal": ("What is the metal of the following paragraph? Choose one from the option.\n",
              ("gold", "iron", "silver")),
}
#: the label-reading task: the answer is the option word written in the paragraph
READING_INSTRUCTION = "Which word of the option is in the following paragraph? Choose one from the option.\n"


@dataclass
class TextDemoConfig:
    """Sizes and optimisation of the text demo (module docstring: where each comes from)."""

    # the tiny T5 (T5Config fields): 2 encoder and 2 decoder layers of width 64
    d_model: int = 64
    d_ff: int = 128
    d_kv: int = 16
    num_heads: int = 4
    num_layers: int = 2
    # its pre-training on the separate mixture: 600 AdamW steps of 32 pairs, one-cycle to 3e-3
    pretrain_steps: int = 600
    pretrain_batch: int = 32
    pretrain_pairs: int = 3000
    pretrain_lr: float = 3e-3
    # the stream (synthetic_text's sizes): 16 training and 16 test prompts per label, 4 filler
    # words around the cue (synthetic_text's default 8, where a prompt's words are mostly the
    # filler every task shares, left MoRAM forgetting nearly as much as SeqLoRA in a trial run)
    train_per_label: int = 16
    test_per_label: int = 16
    words: int = 4
    # the continual runs: 40 minibatches of 16 per task (about 15 passes over a task's 32-48
    # prompts) at a constant 5e-3; answers are one word and EOS
    iterations: int = 40
    batch_size: int = 16
    eval_batch_size: int = 64
    lr: float = 5e-3
    max_new_tokens: int = 3
    # no clipping of the gradients' norm (the strategies' default is the published runs' 1.0):
    # the rate and budget above were set without it, and the tiny T5 trains in float32
    max_grad_norm: Optional[float] = None
    # intra-op CPU threads while the demo runs: at these sizes one thread is about as fast as
    # two, and several slow down many times over when another process shares the cores; the
    # numbers then do not depend on the machine's core count either
    threads: int = 1
    seed: int = 0

    @classmethod
    def quick(cls) -> "TextDemoConfig":
        """A seconds-long version for tests (learns little: mostly chance or below)."""
        return cls(d_model=32, d_ff=64, d_kv=8, num_heads=4, num_layers=1, pretrain_steps=150,
                   pretrain_batch=16, pretrain_pairs=200, pretrain_lr=1e-2, train_per_label=2,
                   test_per_label=3, iterations=4, batch_size=8, max_new_tokens=2)


# ---------------------------------------------------------------- words and tokenizer
def stream_tasks(config: TextDemoConfig):
    """The demo's stream as :class:`~moram_avalanche.benchmarks.text.stream.TextStreamTask` (all five tasks)."""
    return synthetic_text_tasks(seed=config.seed, train_per_label=config.train_per_label,
                                test_per_label=config.test_per_label, words=config.words)


def vocabulary(config: TextDemoConfig) -> List[str]:
    """The tokenizer's words: the special tokens, then every word of the stream and of the
    pre-training mixture (sorted)."""
    from ...text.tiny import words_of

    words = set()
    for task in stream_tasks(config):
        words.update(words_of([p for pair in task.train + task.test for p in pair]))
    for instruction, labels in PRETRAIN_TASKS.values():
        words.update(words_of([instruction, *labels, *_cues(labels, "pre")]))
    words.update(words_of([READING_INSTRUCTION, "Option: , \nAnswer:", *FILLER]))
    return [*SPECIAL_TOKENS, *sorted(words - set(SPECIAL_TOKENS))]


def word_tokenizer(words: Sequence[str]):
    """A ``PreTrainedTokenizerFast`` over ``words`` (WordLevel; ids in order; pad 0, EOS 1, unk 2):
    :func:`moram_avalanche.text.tiny.vocabulary_tokenizer`."""
    from ...text.tiny import vocabulary_tokenizer

    return vocabulary_tokenizer(words)


def tiny_t5_config(config: TextDemoConfig, vocab_size: int):
    """The tiny T5's ``T5Config``: the demo's sizes, pad 0 / EOS 1 as the tokenizer's, no dropout
    in the model itself (MoRAM keeps its own dropout on the atoms' input)."""
    from transformers import T5Config

    return T5Config(vocab_size=vocab_size, d_model=config.d_model, d_ff=config.d_ff, d_kv=config.d_kv,
                    num_layers=config.num_layers, num_decoder_layers=config.num_layers,
                    num_heads=config.num_heads, relative_attention_num_buckets=16, dropout_rate=0.0,
                    decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)


# ---------------------------------------------------------------- the pre-training mixture
def _cues(labels, world: str, per_label: int = 3) -> List[str]:
    return [f"{world}{label}{k}" for label in labels for k in range(per_label)]


def pretraining_pairs(n: int, seed: int, label_pool: Sequence[str], words: int = 8) -> List[Tuple[str, str]]:
    """``n`` (prompt, answer) pairs of the pre-training mixture (module docstring): half
    classification in the disjoint world (:data:`PRETRAIN_TASKS`), half label reading over
    ``label_pool``."""
    rng = random.Random(f"pretraining:{seed}")
    pool = sorted(set(label_pool))
    pairs = []
    for i in range(n):
        sentence = [rng.choice(FILLER) for _ in range(words)]
        if i % 2 == 0:
            instruction, labels = PRETRAIN_TASKS[rng.choice(sorted(PRETRAIN_TASKS))]
            answer = rng.choice(labels)
            planted = rng.choice(_cues((answer,), "pre"))
        else:
            instruction, labels = READING_INSTRUCTION, tuple(rng.sample(pool, rng.choice((2, 3))))
            answer = planted = rng.choice(labels)
        sentence.insert(rng.randrange(words + 1), planted)
        pairs.append((olora_prompt(instruction, labels, " ".join(sentence)), answer))
    return pairs


def label_pool() -> List[str]:
    """Every label word of both worlds (what the label-reading task names)."""
    return sorted({w for _, labels in [*SYNTHETIC_TASKS.values(), *PRETRAIN_TASKS.values()] for w in labels})


# ---------------------------------------------------------------- the cached pre-trained model
def pretraining_settings(config: TextDemoConfig) -> dict:
    """What the cached model depends on (hashed into its folder name)."""
    model = {k: getattr(config, k) for k in ("d_model", "d_ff", "d_kv", "num_heads", "num_layers")}
    pretraining = {k: getattr(config, k) for k in ("pretrain_steps", "pretrain_batch", "pretrain_pairs",
                                                     "pretrain_lr", "words", "threads", "seed")}
    words = vocabulary(config)
    return {"model": model, "pretraining": pretraining, "version": PRETRAINING_VERSION,
            "vocabulary": hashlib.sha1("\n".join(words).encode()).hexdigest()}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def damage(folder: Path, settings: dict) -> Optional[str]:
    """Why cached ``folder`` cannot be used (None: complete and made with ``settings``)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        files = manifest["files"]
    except FileNotFoundError:
        return f"{MANIFEST} is missing"
    except (OSError, ValueError, KeyError, TypeError) as error:
        return f"{MANIFEST} is unreadable ({error.__class__.__name__})"
    if manifest.get("settings") != settings:
        return f"{MANIFEST} records other settings"
    for name, digest in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if _sha256(path) != digest:
            return f"{name} does not match its checksum"
    return None


def _remove_abandoned(cache_dir: Path) -> None:
    """Temporary folders of pre-trainings whose process is gone (``.NAME.PID.tmp``)."""
    for entry in cache_dir.glob(f".{TINY_T5_NAME}-*.tmp"):
        try:
            pid = int(entry.name.split(".")[-2])
            os.kill(pid, 0)
            continue  # a live pre-training (maybe another demo's): leave it
        except (ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        shutil.rmtree(entry, ignore_errors=True)


def pretrained_tiny_t5(cache_dir, config: TextDemoConfig, progress: bool = True) -> Path:
    """The folder of the pre-trained tiny T5 and its tokenizer (pre-trained once, then cached)."""
    cache_dir = Path(cache_dir)
    settings = pretraining_settings(config)
    key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    folder = cache_dir / f"{TINY_T5_NAME}-{key}"
    if folder.exists():
        why = damage(folder, settings)
        if why is None:
            return folder
        message = f"the cached tiny T5 in {folder} is damaged ({why}): pre-training it again"
        logger.warning(message)
        print(message, file=sys.stderr, flush=True)
        shutil.rmtree(folder)
    cache_dir.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(cache_dir)
    staging = cache_dir / f".{folder.name}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    with _threads(config.threads):
        report = _pretrain(config, staging, cache_dir, progress)
    files = {p.name: _sha256(p) for p in sorted(staging.iterdir()) if p.is_file()}
    atomic_write_text(staging / MANIFEST, json.dumps({"settings": settings, "files": files, **report},
                                                     indent=2) + "\n")
    try:
        staging.rename(folder)
    except OSError:  # another demo finished the same pre-training first: keep its folder
        shutil.rmtree(staging, ignore_errors=True)
        if damage(folder, settings) is not None:
            raise
    return folder


def _pretrain(config: TextDemoConfig, staging: Path, cache_dir: Path, progress: bool) -> dict:
    from transformers import T5ForConditionalGeneration

    from ...models.language_model import LanguageModel

    began = time.perf_counter()
    torch.manual_seed(config.seed)
    words = vocabulary(config)
    tokenizer = word_tokenizer(words)
    model = T5ForConditionalGeneration(tiny_t5_config(config, len(words)))
    lm = LanguageModel(model, tokenizer)
    pool = label_pool()
    pairs = pretraining_pairs(config.pretrain_pairs, config.seed, pool, config.words)
    held_out = pretraining_pairs(200, config.seed + 1, pool, config.words)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.pretrain_lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, config.pretrain_lr, total_steps=config.pretrain_steps)
    generator = torch.Generator().manual_seed(config.seed)
    if progress and not sys.stderr.isatty():
        print(f"pre-training the tiny T5 ({config.pretrain_steps} steps; cached in {cache_dir})",
              file=sys.stderr, flush=True)
    model.train()
    bar = tqdm(range(config.pretrain_steps), desc="pre-training tiny T5", disable=None if progress else True)
    for _ in bar:
        batch = torch.randperm(len(pairs), generator=generator)[: config.pretrain_batch].tolist()
        loss = lm.loss([pairs[i][0] for i in batch], [pairs[i][1] for i in batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    model.eval()
    answers = lm.generate([p for p, _ in held_out], 3)  # one word and EOS, and one to spare
    accuracy = 100.0 * sum(a == b for a, (_, b) in zip(answers, held_out)) / len(held_out)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    seconds = time.perf_counter() - began
    logger.info("pre-trained tiny T5 saved (%.0f s, %.1f%% on its held-out mixture)", seconds, accuracy)
    return {"held_out_accuracy": accuracy, "seconds": seconds, "final_loss": float(loss.item())}


# ---------------------------------------------------------------- the run
def text_demo_setup(config: TextDemoConfig, model_folder: Path, device: str, cache_dir: Path):
    """The :class:`~..run.Setup` of the demo's runs: the cached model loaded as a ``--model``
    folder is (:func:`~..loaders.text_model_loader`), the ``synthetic-text`` benchmark
    at the demo's sizes, the recipes of :data:`~..clip.recipes.TEXT_DEMO_OPTIONS`."""
    from ...benchmarks import get_benchmark
    from ..run import Setup

    build = get_benchmark("synthetic-text")
    return Setup(
        make_model=text_model_loader(SimpleNamespace(model=str(model_folder)), device),
        make_benchmark=lambda train_tf, eval_tf: build(
            None, seed=config.seed, train_per_label=config.train_per_label,
            test_per_label=config.test_per_label, words=config.words),
        options=lambda name, eval_tf: text_demo_options(name, config),
        settings={"benchmark": "synthetic-text", "text_demo": asdict(config), "model": model_folder.name},
        seed=config.seed, device=device, environment={"cache_dir": str(cache_dir), "device": device},
        family="text", tables=text_demo_tables(config, model_folder))


def text_demo_options(name: str, config: TextDemoConfig) -> dict:
    """Strategy ``name``'s keyword arguments in the demo: the shared budget (minibatches per
    task, batch, generated tokens) and its recipe (:data:`~..clip.recipes.TEXT_DEMO_OPTIONS`)."""
    from .recipes import text_demo_recipe

    return {"iterations": config.iterations, "train_mb_size": config.batch_size,
            "eval_mb_size": config.eval_batch_size, "max_new_tokens": config.max_new_tokens,
            "max_grad_norm": config.max_grad_norm, **text_demo_recipe(name, config)}


def chance(config: TextDemoConfig) -> Dict[str, float]:
    """Accuracy (%) per task of answering with a uniformly drawn option."""
    return {task.name: 100.0 / len(task.label_words) for task in stream_tasks(config)}


def text_demo_tables(config: TextDemoConfig, model_folder: Path):
    """The language-model tables (:data:`~..tables.TEXT_TABLES`), the summary followed by the
    chance level of each task and what the tiny T5 was pre-trained on."""
    from ..tables import TEXT_TABLES, Tables

    levels = chance(config)
    manifest = json.loads((model_folder / MANIFEST).read_text())
    notes = ("Chance (a random option): " + ", ".join(f"{k} {v:.1f}" for k, v in levels.items())
             + f" (mean {sum(levels.values()) / len(levels):.1f}). The tiny T5 ({model_folder.name}) was "
             f"pre-trained for {config.pretrain_steps} steps on a separate generated mixture "
             f"({manifest['held_out_accuracy']:.1f}% on its held-out pairs) and never saw these tasks.")
    return Tables(TEXT_TABLES.markdown, TEXT_TABLES.csv, lambda results: TEXT_TABLES.summary(results) + "\n" + notes)


def run_demo_text(out_dir, *, cache_dir=None, config: Optional[TextDemoConfig] = None,
                  strategies: Sequence[str] = TEXT_DEMO_STRATEGIES, progress: bool = True,
                  device: str = "cpu") -> Dict[str, dict]:
    """Run the text demo (module docstring; :func:`~moram_avalanche.experiments.demos.run_family_demo`);
    returns ``{strategy: results.json content + {"memory": ..., "time": ...}}``.

    Run again in the same ``out_dir``, finished strategies are not run again and an interrupted
    one continues from its checkpoint; a folder holding a text demo made with other settings
    (another :class:`TextDemoConfig`) is started over, with a warning.
    """
    return run_family_demo(TEXT_DEMO, out_dir, cache_dir=cache_dir, config=config, strategies=strategies,
                           progress=progress, device=device)


def prepare_text_demo(config: TextDemoConfig, cache_dir: Path, device: str, progress: bool = True):
    """The text demo's :class:`~..run.Setup`: the tiny T5 pre-trained once (cached) and its runs'
    setup (:func:`text_demo_setup`, whose tables add the chance levels: :func:`text_demo_tables`)."""
    return text_demo_setup(config, pretrained_tiny_t5(cache_dir, config, progress=progress), device, cache_dir)


@contextlib.contextmanager
def text_demo_context(config: TextDemoConfig):
    """The demo's surroundings: ``config.threads`` CPU threads, no ``transformers`` progress bars."""
    with _quiet_transformers(), _threads(config.threads):
        yield


#: the language-model family's demo (:func:`~moram_avalanche.experiments.demos.run_family_demo`)
TEXT_DEMO = Demo(title="the text demo", strategies=TEXT_DEMO_STRATEGIES, full_strategies=(), out="runs/demo-text",
                 config=TextDemoConfig, key="text_demo", prepare=prepare_text_demo, context=text_demo_context)


@contextlib.contextmanager
def _threads(count: int):
    """``count`` intra-op CPU threads inside the block (torch's setting restored after it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def _quiet_transformers():
    """No ``transformers`` progress bars (loading and writing a tiny model's one shard)."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


__all__ = ["MANIFEST", "PRETRAIN_TASKS", "TEXT_DEMO", "TEXT_DEMO_STRATEGIES", "TINY_T5_NAME", "TextDemoConfig", "chance",
           "damage", "label_pool", "prepare_text_demo", "pretrained_tiny_t5", "pretraining_pairs",
           "pretraining_settings", "run_demo_text", "stream_tasks", "text_demo_context", "text_demo_options",
           "text_demo_setup",
           "text_demo_tables", "tiny_t5_config", "vocabulary", "word_tokenizer"]
