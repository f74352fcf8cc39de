"""Rebuild the model and the data of a run from what its folder records.

Every run folder (``run``, ``compare``, the demo) holds one record, ``run.json``
(:mod:`~moram_avalanche.experiments.record`): its ``run`` part names the model, its weights,
the benchmark, its stream options and the data root (the demo's: its settings), its
``environment`` the cache folder and the weights' checksum. :func:`read_run_settings` reads it
(a 0.2 folder's records migrated, read only), and anything given explicitly (``--model``,
``--data-root``, ...) wins.

:func:`moram_model` then builds CLIP with the run's MoRAM layers -- the same layer names and
the options the run recorded (:attr:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin.layer_options`)
-- holding the final banks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Dict, Optional

from torch import nn

from ....clip.attention import split_attention
from ....clip.inject import replace_linears
from ....layers.base import find_layers
from ....layers.moram.layer import MoRAMLinear
from ....layers.moram.variants import moram_layer
from ...record import RECORD_NAME, read_record, weights_checksum
from .banks import check_model_layers, install_banks
from .records import RunRecord, parse_layer_name


@dataclass
class RunSettings:
    """What rebuilds a run's model and data.

    Attributes:
        model: the open_clip model name. pretrained: its tag or weights file (None: random).
        benchmark: ``xtail``, ``mtil`` or ``synthetic``; stream: its options (order, shots, ...).
        data_root: where the datasets are. cache_dir: the tiny demo CLIP's cache.
        seed: the seed set before the run built its model (what random weights depend on).
        weights_checksum: :func:`weights_checksum` of the run's CLIP, when recorded: the
            rebuilt model must match it.
        weights_origin: the tag a local weights file was published under (``openai``: built
            with QuickGELU, as :func:`~moram_avalanche.clip.load.load_clip` does for the run).
        source: where these settings were read (for the report).
    """

    model: str
    pretrained: Optional[str]
    benchmark: str
    stream: Dict[str, object] = field(default_factory=dict)
    data_root: Optional[str] = None
    cache_dir: Optional[str] = None
    seed: Optional[int] = None
    weights_checksum: Optional[float] = None
    source: str = "given"
    weights_origin: Optional[str] = None


def read_run_settings(log_dir, *, model: Optional[str] = None, pretrained: Optional[str] = None,
                      benchmark: Optional[str] = None, data_root: Optional[str] = None,
                      cache_dir: Optional[str] = None) -> RunSettings:
    """The settings of the run in ``log_dir``; the arguments given (not None) override them."""
    log_dir = Path(log_dir)
    found = _recorded(log_dir)
    given = {"model": model, "pretrained": pretrained, "benchmark": benchmark, "data_root": data_root,
             "cache_dir": cache_dir}
    given = {k: v for k, v in given.items() if v is not None}
    if found is None:
        if "model" not in given or "benchmark" not in given:
            raise ValueError(
                f"{log_dir} records no settings of its run (no {RECORD_NAME}): give the model and the benchmark of the run (--model, --pretrained, --benchmark, "
                "--data-root), or analyse without activation maps (--no-maps)")
        found = RunSettings(given["model"], None, given["benchmark"])
    if "pretrained" in given and given["pretrained"].lower() == "none":
        given["pretrained"] = None
    return replace(found, **given)


def _recorded(log_dir: Path) -> Optional[RunSettings]:
    record = read_record(log_dir, f"the run in {log_dir}")
    if record is None:
        return None
    settings, environment = dict(record.get("run") or {}), dict(record.get("environment") or {})
    source = str(log_dir / RECORD_NAME)
    if "demo" in settings:
        return _demo_settings(settings, source)
    if "model" in settings and "benchmark" in settings:
        pretrained = settings.get("pretrained")
        return RunSettings(settings["model"], None if str(pretrained).lower() == "none" else pretrained,
                           settings["benchmark"], dict(settings.get("stream") or {}),
                           settings.get("data_root"), environment.get("cache_dir"), settings.get("seed"),
                           environment.get("weights_checksum"), source, settings.get("weights_origin"))
    return None


def _demo_settings(settings: dict, path: str) -> RunSettings:
    """The demo's comparison: its tiny CLIP (cached weights file) on its synthetic stream."""
    demo = settings["demo"]
    stream = {key: demo[key] for key in ("train_size", "test_size", "seed", "label_space") if key in demo}
    return RunSettings(settings["model"], f"demo-cache:{settings['weights']}", "synthetic-demo", stream,
                       seed=demo.get("seed"), source=path)


def load_run_model(settings: RunSettings, device="cpu"):
    """``(model, train_transform, eval_transform, tokenizer)`` of the run's CLIP (no MoRAM layers yet).

    Random weights (``pretrained`` None) are drawn after seeding with the run's seed, as the run
    drew them; a recorded :func:`weights_checksum` must match.
    """
    import math

    import torch

    from ....clip.load import load_clip
    from ....clip.registry import resolve_pretrained
    from ....utils.cache import default_cache_dir

    cache_dir = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
    pretrained = settings.pretrained
    if pretrained and pretrained.startswith("demo-cache:"):
        pretrained = str(cache_dir / pretrained.partition(":")[2])
        if not Path(pretrained).is_file():
            raise ValueError(f"the demo's pre-trained tiny CLIP {pretrained} is not in the cache: pass "
                             "the --cache-dir the demo used")
    pretrained = resolve_pretrained(settings.model, pretrained, cache_dir)  # weights the package makes: their file
    if settings.seed is not None:
        torch.manual_seed(settings.seed)
    loaded = load_clip(settings.model, pretrained=pretrained or None, device=device,
                       weights_origin=settings.weights_origin if pretrained else None)
    if settings.weights_checksum is not None:
        found = weights_checksum(loaded[0])
        if not math.isclose(found, settings.weights_checksum, rel_tol=1e-7):
            raise ValueError(
                f"the CLIP rebuilt from {settings.source} ({settings.model}, pretrained="
                f"{settings.pretrained}) is not the run's (weights checksum {found!r}, recorded "
                f"{settings.weights_checksum!r}): pass the run's weights (--pretrained)")
    return loaded


def load_run_benchmark(settings: RunSettings, train_transform, eval_transform):
    """The run's benchmark, built with the model's transforms."""
    if settings.benchmark == "synthetic-demo":
        from ....benchmarks.images.synthetic import synthetic

        return synthetic(train_transform=train_transform, eval_transform=eval_transform, **settings.stream)
    from ....benchmarks import get_benchmark

    stream = dict(settings.stream)
    if isinstance(stream.get("order"), str) and "," in stream["order"]:
        stream["order"] = stream["order"].split(",")
    return get_benchmark(settings.benchmark)(settings.data_root, train_transform=train_transform,
                                             eval_transform=eval_transform, **stream)


def moram_model(model: nn.Module, record: RunRecord, layer_options: Optional[Dict[str, dict]] = None
                ) -> nn.Module:
    """``model`` with the run's MoRAM layers (injected when it has none), holding the final banks.

    ``layer_options``: ``{layer: options}`` for a checkpoint that did not record them.
    """
    options = layer_options or record.layer_options
    if not find_layers(model, MoRAMLinear):
        missing = [name for name in record.banks if name not in options]
        if missing:
            raise ValueError(
                f"{record.log_dir} does not record how its MoRAM layers were built (a checkpoint "
                f"older than the analysis records, e.g. {missing[0]}): pass layer_options="
                "{name: {'atoms_per_task', 'topk', 'temperature', 'threshold'}} of the run")
        model.requires_grad_(False)
        layers = [parse_layer_name(name) for name in record.banks]
        if any(layer.projection in ("q", "k", "v", "out") for layer in layers):
            split_attention(model, sorted({layer.encoder for layer in layers}))
        for name in record.banks:
            replace_linears(model, [name], lambda linear, name=name: moram_layer(linear, **options[name]))
    check_model_layers(model, record)
    install_banks(model, record, record.tasks - 1)
    return model.eval()


def settings_dict(settings: RunSettings) -> dict:
    return asdict(settings)


__all__ = ["RunSettings", "load_run_benchmark", "load_run_model", "moram_model", "read_run_settings",
           "settings_dict", "weights_checksum"]
