"""The offline demo: ZeroShot, FineTune and MoRAM (all eight strategies with ``full``) on the
synthetic stream.

1. A tiny open_clip model (registered with open_clip by the package as :data:`TINY_NAME`,
   :mod:`moram_avalanche.clip.registry`) gets a brief contrastive pre-training on captioned
   images of a separate synthetic world
   (:func:`~moram_avalanche.benchmarks.images.synthetic.caption_pairs`), so it starts with some
   zero-shot ability. The weights are cached (``cache_dir``) and loaded through
   :func:`~moram_avalanche.clip.load.load_clip` as a local weights file; at the default
   settings they are the tiny CLIP's ``synthetic`` weights (:func:`synthetic_weights`,
   ``load_clip(TINY_NAME, pretrained="synthetic")``, ``--pretrained synthetic``).
2. The strategies are compared with :func:`~moram_avalanche.experiments.compare.run_comparison` on the
   synthetic stream (resumable per strategy): each writes ``results.json``,
   ``accuracy_matrix.csv`` / ``.png``, ``memory.json`` and ``time.json`` under
   ``out_dir/<strategy>/``, and logs to ``out_dir/tensorboard/<strategy>/``.
3. The summary (Transfer / Average / Last, peak memory -- the CUDA allocator's peak on a GPU,
   else a CPU proxy counted from the tensors the strategy holds
   (:class:`~moram_avalanche.strategies.plugins.memory.PeakMemory`) -- and training time) and the
   paper-style per-domain table are printed and written to ``out_dir/summary.md``,
   ``table.md`` and ``table.csv``; ``accuracy_matrices.png`` shows the matrices side by side.

The baselines run at the demo's iteration budget with their other settings scaled to it;
each strategy's scaled recipe is the app's data (:data:`~moram_avalanche.experiments.clip.recipes.DEMO_OPTIONS`),
a function of :class:`DemoConfig`:
warm-up and ZSCL's averaging period keep their share of ZSCL's few-shot budget (100 of 500
iterations), LwF and ZSCL distil on batches of 16 images (half the training batch, where the
reference uses the training batch size: it keeps the full demo within a few minutes on 2 CPU
cores). Strategies that take reference data (ZSCL's images and sentences, MoE-Adapters' DDAS
images) get a small synthetic reference set
(:func:`~moram_avalanche.benchmarks.images.reference_sets.synthetic_reference`). MoE-Adapters' DDAS
reads seeded random convolution features
(:func:`~moram_avalanche.algorithms.ddas.random_conv_features`; the release's ImageNet AlexNet
is not available offline), with 100 / 200 autoencoder iterations; InfLoRA trains at lr 5e-3
(its 5e-4 is set for 500 iterations, the demo runs 80).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ...clip.registry import TINY_CONFIG, TINY_NAME
from ...strategies.moram_setting import MORAM
from ...utils.files import atomic_write, remove_temporaries
from ...utils.log_notes import note_dropped
from ..demos import run_family_demo
from ..family import Demo

logger = logging.getLogger(__name__)


@dataclass
class DemoConfig:
    """Sizes and optimisation of the demo (scaled down from the paper to run on a laptop CPU)."""

    pretrain_steps: int = 300
    pretrain_batch: int = 128
    pretrain_pairs: int = 3000
    pretrain_lr: float = 2e-3
    iterations: int = 80
    batch_size: int = 32
    train_size: int = 100
    test_size: int = 60
    label_space: str = "domain"
    finetune_lr: float = 3e-4
    baseline_warmup: int = 16
    zscl_average_every: int = 16
    distill_batch_size: int = 16
    reference_images: int = 64
    reference_sentences: int = 200
    moe_lr: float = 1e-3
    ae_iterations: int = 100
    ae_reference_iterations: int = 200
    inflora_lr: float = 5e-3
    moram_lr: float = 1e-2
    atoms_per_task: int = MORAM.atoms_per_task
    topk: int = MORAM.topk
    seed: int = 0

    @classmethod
    def quick(cls) -> "DemoConfig":
        """A seconds-long version for tests."""
        return cls(pretrain_steps=20, pretrain_pairs=256, pretrain_batch=64, iterations=8,
                   batch_size=16, train_size=14, test_size=14, atoms_per_task=4, topk=4,
                   baseline_warmup=2, zscl_average_every=2, distill_batch_size=8, reference_images=16,
                   reference_sentences=20, ae_iterations=4, ae_reference_iterations=4)


def register_tiny_clip(cache_dir=None) -> str:
    """Deprecated (0.7; removed in 0.8): the package registers :data:`TINY_NAME` with open_clip
    itself (:func:`~moram_avalanche.clip.registry.register_model_configs`, which
    :func:`~moram_avalanche.clip.load.load_clip` calls); ``cache_dir`` is not used. Returns the name."""
    from ...clip.registry import register_model_configs

    warnings.warn("register_tiny_clip is deprecated: load_clip registers the package's models "
                  "(moram_avalanche.clip.registry.register_model_configs); it goes in 0.8",
                  DeprecationWarning, stacklevel=2)
    register_model_configs()
    return TINY_NAME


def synthetic_weights(cache_dir, progress: bool = True) -> Path:
    """The tiny CLIP's ``synthetic`` weights (:data:`~moram_avalanche.clip.registry.MADE_WEIGHTS`):
    its pre-training at the demo's default settings, :class:`DemoConfig` (trained once, then
    cached in ``cache_dir``)."""
    return pretrained_tiny_clip(cache_dir, DemoConfig(), progress=progress)


def pretrained_tiny_clip(cache_dir, config: DemoConfig, progress: bool = True) -> Path:
    """Weights of the tiny CLIP after its synthetic pre-training (trained once, then cached)."""
    from ...benchmarks.images.synthetic import caption_pairs
    from ...clip.load import load_clip

    remove_temporaries(cache_dir)  # of a pre-training killed while it saved
    settings = {"config": TINY_CONFIG, "steps": config.pretrain_steps, "batch": config.pretrain_batch,
                "pairs": config.pretrain_pairs, "lr": config.pretrain_lr, "seed": config.seed, "v": 1}
    key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    path = Path(cache_dir) / f"{TINY_NAME}-{key}.pt"
    if path.exists():
        return path
    torch.manual_seed(config.seed)
    with note_dropped("", "No pretrained weights loaded"):  # random weights are the point here
        model, _, eval_tf, tokenizer = load_clip(TINY_NAME, pretrained=None)
    images, captions = caption_pairs(config.pretrain_pairs, seed=config.seed + 1000)
    pixels = torch.stack([eval_tf(image) for image in images])
    tokens = tokenizer(captions)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.pretrain_lr, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, config.pretrain_lr,
                                                   total_steps=config.pretrain_steps)
    generator = torch.Generator().manual_seed(config.seed)
    model.train()
    began = time.perf_counter()
    if progress and not sys.stderr.isatty():
        print(f"pre-training the tiny CLIP ({config.pretrain_steps} steps; cached in {cache_dir})",
              file=sys.stderr, flush=True)
    bar = tqdm(range(config.pretrain_steps), desc="pre-training tiny CLIP", disable=None if progress else True)
    for _ in bar:
        batch = torch.randperm(len(captions), generator=generator)[: config.pretrain_batch]
        image = F.normalize(model.encode_image(pixels[batch]), dim=-1)
        text = F.normalize(model.encode_text(tokens[batch]), dim=-1)
        logits = model.logit_scale.exp() * image @ text.t()
        # duplicated captions in a batch are positives too (soft targets)
        same = (tokens[batch][:, None, :] == tokens[batch][None, :, :]).all(-1).float()
        targets = same / same.sum(1, keepdim=True)
        loss = (F.cross_entropy(logits, targets) + F.cross_entropy(logits.t(), targets)) / 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, 4.6052)
    atomic_write(path, lambda f: torch.save(model.state_dict(), f), mode="wb")
    logger.info("pre-trained tiny CLIP saved to %s (%.0f s)", path, time.perf_counter() - began)
    return path


#: what ``moram-avalanche demo`` runs: the reference row, the forgetting baseline, the method
DEMO_STRATEGIES = ("zeroshot", "finetune", "moram")
#: ``moram-avalanche demo --full``: every baseline of the paper's CLIP tables that runs offline
FULL_DEMO_STRATEGIES = ("zeroshot", "finetune", "wiseft", "lwf", "zscl", "moe-adapters", "inflora", "moram")


def run_demo(out_dir, *, cache_dir=None, config: Optional[DemoConfig] = None,
             strategies=DEMO_STRATEGIES, progress: bool = True, device: str = "cpu") -> Dict[str, dict]:
    """Run the demo (a :func:`~moram_avalanche.experiments.compare.run_comparison` on the synthetic
    stream, :func:`~moram_avalanche.experiments.demos.run_family_demo`); returns ``{strategy:
    results.json content + {"memory": ..., "time": ...}}``.

    ``strategies``: :data:`DEMO_STRATEGIES` (default) or :data:`FULL_DEMO_STRATEGIES` (any
    registered names). Run again in the same ``out_dir``, finished strategies are not run again
    and others join the table; a folder holding a demo made with other settings (another
    version's :class:`DemoConfig`) is started over, with a warning.
    """
    return run_family_demo(DEMO, out_dir, cache_dir=cache_dir, config=config, strategies=strategies,
                           progress=progress, device=device)


def demo_setup(config: DemoConfig, cache_dir, device: str, progress: bool = True):
    """The :class:`~..run.Setup` of the demo's runs: the tiny CLIP pre-trained once (cached in
    ``cache_dir``), the synthetic stream at the demo's sizes, each strategy's demo options
    (:func:`demo_options`)."""
    from ...benchmarks.images.synthetic import synthetic
    from ...clip.load import load_clip
    from ..run import Setup

    weights = pretrained_tiny_clip(cache_dir, config, progress=progress)
    return Setup(
        make_model=lambda: load_clip(TINY_NAME, pretrained=str(weights)),
        make_benchmark=lambda train_tf, eval_tf: synthetic(
            train_size=config.train_size, test_size=config.test_size, seed=config.seed,
            label_space=config.label_space, train_transform=train_tf, eval_transform=eval_tf),
        options=lambda name, eval_tf: demo_options(name, config, eval_tf),
        settings={"demo": asdict(config), "model": TINY_NAME, "weights": Path(weights).name},
        seed=config.seed, device=device, environment={"cache_dir": str(cache_dir), "device": device},
    )


#: the CLIP family's demo (:func:`~moram_avalanche.experiments.demos.run_family_demo`)
DEMO = Demo(title="the demo", strategies=DEMO_STRATEGIES, full_strategies=FULL_DEMO_STRATEGIES, out="runs/demo",
            config=DemoConfig, key="demo", prepare=demo_setup, context=lambda config: contextlib.nullcontext())


def demo_options(name: str, config: DemoConfig, eval_transform) -> dict:
    """The keyword arguments of strategy ``name`` in the demo: the shared budget, the strategy's
    own small-budget recipe and, if it takes any, the synthetic reference data (see the module
    docstring)."""
    from ...benchmarks.images.reference_sets import synthetic_reference
    from ...strategies.registry import get_strategy
    from .recipes import demo_recipe

    needs = get_strategy(name).needs
    # evaluation in training-size batches, as when the README's demo table was made: a larger
    # batch (the strategies' default) may change the last bits of a GEMM, and the demo's
    # numbers are meant to stay the same from release to release
    kwargs = dict(train_mb_size=config.batch_size, eval_mb_size=config.batch_size)
    if needs.trains:
        kwargs.update(iterations=config.iterations)
    kwargs.update(demo_recipe(name, config))
    if needs.references:
        images, sentences = synthetic_reference(eval_transform, images=config.reference_images,
                                                sentences=config.reference_sentences,
                                                seed=config.seed + 2000)
        kwargs.update(needs.reference_arguments(images=images, sentences=sentences))
    return kwargs


__all__ = ["DEMO", "DEMO_STRATEGIES", "FULL_DEMO_STRATEGIES", "TINY_CONFIG", "TINY_NAME", "DemoConfig",
           "demo_options", "demo_setup", "pretrained_tiny_clip", "register_tiny_clip", "run_demo", "synthetic_weights"]
