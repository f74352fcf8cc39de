"""``analyze``: the paper's figures from any MoRAM run, written to ``LOG_DIR/analysis/``.

:func:`analyze` reads the run (:mod:`.records`), and writes under ``LOG_DIR/analysis/``:

* ``activation_map_task<t>_after<t'>.png`` (paper Figs. 3, 6-8): the mixture weight of every atom
  of one layer (default: the K projection of the image encoder's layer 8 of 12, or its middle
  layer) on every token of a test image of task ``t``, in the model as it was after task ``t'``,
  the image's patches under their tokens; for the paper's scenarios (:mod:`.scenarios`);
* ``activation_ratios.png`` (Fig. 5): each atom's averaged activation ratio in those scenarios;
* ``atoms_for_99.png`` and ``cumulative_mass.png`` (Figs. 9-11): per layer and projection, both
  towers, the atoms needed for 99% of the cumulative activation mass after all tasks, and the
  sorted cumulative curves of a few layers (:mod:`.mass`);
* ``pruning.png`` (+ ``pruning.csv``): atoms kept and storage saved per task and layer (:mod:`.pruning`);
* ``report.md`` embedding every picture with tables and definitions, ``analysis.json`` with the
  numbers, and the same pictures in the run's TensorBoard log (an ``analysis`` run beside the
  training curves, replaced on each analysis).

The maps and ratios run the model on the run's data (rebuilt from the run's settings,
:mod:`.source`); the mass and pruning sections need only the run's records (``maps=False``
skips the rest).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ....utils.files import atomic_write_text, check_output_folder
from ...viz import save_png
from . import figures
from .activations import layer_activations
from .banks import install_banks
from .mass import atoms_for_mass, cumulative_curve, final_bank_mass, mass_counts
from .pruning import overall_saved_share, per_task, pruned, pruning_rows
from .records import TOWER_NAMES, RunRecord, load_run, parse_layer_name
from .samples import check_domains, displayable, task_images, task_prompts, token_labels
from .scenarios import Scenario, default_block, default_scenarios, parse_scenarios
from .source import load_run_benchmark, load_run_model, moram_model, read_run_settings, settings_dict

logger = logging.getLogger(__name__)

ANALYSIS_DIR = "analysis"
REPORT_NAME = "report.md"
#: the TensorBoard run the pictures go to, inside the run's TensorBoard folder
TENSORBOARD_RUN = "analysis"


@dataclass
class AnalysisOptions:
    """What to draw.

    Attributes:
        encoder: the tower of the activation maps, "visual" (the paper's) or "text".
        layer: its block, 1-based (None: 8 of 12 as the paper, else the middle one).
        projection: q, k (the paper's), v, out, fc or proj.
        scenarios: ``"DATA@AFTER,..."`` (1-based), or None for the paper's
            (:func:`~.scenarios.default_scenarios`).
        image: which test image (0-based) of the data task each map shows.
        images: test images (text: class prompts) averaged for the activation ratios.
        share: the share of the cumulative mass the atom counts cover (paper: 0.99).
        curves: blocks (1-based) whose cumulative curves are drawn (None: first, map layer, last).
        maps: draw the activation maps and ratios (needs the run's model and data).
    """

    encoder: str = "visual"
    layer: Optional[int] = None
    projection: str = "k"
    scenarios: Optional[str] = None
    image: int = 0
    images: int = 16
    share: float = 0.99
    curves: Optional[Sequence[int]] = None
    maps: bool = True

    def check(self) -> None:
        if self.encoder not in TOWER_NAMES:
            raise ValueError(f"encoder must be one of {tuple(TOWER_NAMES)}, got {self.encoder!r}")
        if self.projection not in figures.PROJECTIONS:
            raise ValueError(f"projection must be one of {figures.PROJECTIONS}, got {self.projection!r}")
        if self.layer is not None and self.layer < 1:
            raise ValueError(f"layer is 1-based (the paper's layer 8 of 12), got {self.layer}")
        if self.image < 0 or self.images < 1:
            raise ValueError(f"image must be >= 0 and images >= 1, got {self.image} and {self.images}")
        if not 0 < self.share <= 1:
            raise ValueError(f"share must be in (0, 1], got {self.share}")


def analyze(log_dir, *, data_root: Optional[str] = None, options: Optional[AnalysisOptions] = None,
            model=None, benchmark=None, eval_transform=None, tokenizer=None,
            layer_options: Optional[Dict[str, dict]] = None, settings: Optional[dict] = None,
            device="cpu", tensorboard: bool = True, progress: bool = True, out=None) -> Path:
    """Write the analysis of the MoRAM run in ``log_dir`` (see the module docstring).

    Args:
        log_dir: the run's folder (``run --log-dir``, or ``OUT/<strategy>`` of a ``compare``).
        data_root: where the run's datasets are now (default: where the run read them).
        options: what to draw (:class:`AnalysisOptions`).
        model: the run's CLIP, as ``load_clip`` returns it (a tuple) or a module (then give
            ``eval_transform`` and ``tokenizer`` as needed); default: rebuilt from the run's
            settings. MoRAM layers are injected when it has none.
        benchmark: the run's benchmark; default: rebuilt from the run's settings.
        layer_options: ``{layer: options}`` for a checkpoint that predates their record.
        settings: overrides of the recorded settings (``model``, ``pretrained``, ``benchmark``,
            ``cache_dir``).
        device: where the model runs.
        tensorboard: also write the pictures to the run's TensorBoard log.
        out: where to write (default ``log_dir/analysis``); checked writable before anything
            is computed (a read-only run folder: give another).

    Returns the path of ``report.md``.
    """
    options = options or AnalysisOptions()
    options.check()
    out = check_output_folder(Path(log_dir) / ANALYSIS_DIR, "the run's analysis folder (--out DIR writes elsewhere)"
                              ) if out is None else check_output_folder(out, "--out")
    if tensorboard and not _writable(tensorboard_dir(Path(log_dir))):
        tensorboard = False  # a read-only run folder: the report and pictures go to `out` alone
    record = load_run(log_dir)
    scenarios = (parse_scenarios(options.scenarios, record.tasks) if options.scenarios
                 else default_scenarios(record.tasks))
    layer = map_layer(record, options) if options.maps else None
    # everything is computed first; files are written at the end, each atomically
    images, texts, sections = {}, {}, []
    numbers = {"run": _run_summary(record), "options": asdict(options)}
    steps = tqdm(total=2 + (len(scenarios) if options.maps else 0), desc="analysis",
                 disable=None if progress else True)  # None: terminals only
    if options.maps:
        bundle = _model_and_data(record, data_root, model, benchmark, eval_transform, tokenizer,
                                 layer_options, settings or {}, device)
        numbers["run"]["settings"] = bundle.pop("settings")
        maps = _maps(record, layer, scenarios, options, bundle, steps)
        images.update(maps["images"])
        sections.append(_maps_section(record, layer, scenarios, maps))
        numbers["activations"] = maps["numbers"]
    sections.append(_mass_section(record, options, layer, images, texts, numbers))
    steps.update()
    sections.append(_pruning_section(record, images, texts, numbers, options.share))
    steps.update()
    steps.close()

    _remove_stale(out, set(images) | set(texts))
    for name, image in images.items():
        save_png(image, out / name)
    for name, text in texts.items():
        atomic_write_text(out / name, text)
    report = _report(record, sections)
    atomic_write_text(out / "analysis.json", json.dumps(numbers, indent=2, default=_jsonable) + "\n")
    path = atomic_write_text(out / REPORT_NAME, report)
    if tensorboard:
        write_tensorboard(tensorboard_dir(record.log_dir), images, report)
    return path


def _writable(folder: Path) -> bool:
    """Whether ``folder`` (or, when it does not exist yet, its nearest existing parent) can be written."""
    import os

    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK)


#: the files an analysis writes besides report.md and analysis.json (older ones are removed)
OUTPUT_PATTERNS = ("activation_map_*.png", "activation_ratios.png", "atoms_for_99.png", "atoms_for_99.csv",
                   "cumulative_mass.png", "pruning.png", "pruning.csv")


def _remove_stale(out: Path, keep: set) -> None:
    """Remove what an earlier analysis wrote and this one does not (other scenarios, say)."""
    for pattern in OUTPUT_PATTERNS:
        for path in out.glob(pattern):
            if path.name not in keep:
                path.unlink()


# ---------------------------------------------------------------------- the map layer
def map_layer(record: RunRecord, options: AnalysisOptions) -> str:
    """The dotted name of the layer the maps show (a clear error when the run has none there)."""
    mine = [layer for layer in record.layers if layer.encoder == options.encoder]
    if not mine:
        raise ValueError(f"the run has no MoRAM layers in the {TOWER_NAMES[options.encoder]} encoder "
                         f"(its layers: {sorted({layer.encoder for layer in record.layers})})")
    depth = 1 + max(layer.block for layer in mine)
    block = default_block(depth) if options.layer is None else options.layer - 1
    for layer in mine:
        if layer.block == block and layer.projection == options.projection:
            return layer.name
    have = sorted({layer.projection for layer in mine})
    raise ValueError(f"the run has no MoRAM layer at {TOWER_NAMES[options.encoder]} layer {block + 1} "
                     f"{options.projection} (layers 1..{depth}, projections {have})")


def _curve_layers(record: RunRecord, options: AnalysisOptions, layer: Optional[str]) -> List[str]:
    names = []
    for encoder in ("visual", "text"):
        mine = [item for item in record.layers if item.encoder == encoder]
        if not mine:
            continue
        depth = 1 + max(item.block for item in mine)
        blocks = ([b - 1 for b in options.curves] if options.curves
                  else sorted({0, default_block(depth), depth - 1}))
        projection = options.projection if any(i.projection == options.projection for i in mine) else mine[0].projection
        names += [item.name for b in blocks for item in mine if item.block == b and item.projection == projection]
    return names


# ---------------------------------------------------------------------- activation maps
def _model_and_data(record, data_root, model, benchmark, eval_transform, tokenizer, layer_options,
                    overrides, device) -> dict:
    settings = None
    train_transform = None
    if model is None or benchmark is None:
        settings = read_run_settings(record.log_dir, data_root=data_root, **overrides)
    if model is None:
        model, train_transform, eval_transform, tokenizer = load_run_model(settings, device)
    elif isinstance(model, tuple):
        model, train_transform, eval_transform, tokenizer = model
    if benchmark is None:
        if eval_transform is None:
            raise ValueError("give eval_transform with a model module, or the tuple load_clip returns")
        benchmark = load_run_benchmark(settings, train_transform or eval_transform, eval_transform)
    check_domains(benchmark, record.domains)
    model = moram_model(model.to(device), record, layer_options)
    return {"model": model, "benchmark": benchmark, "eval_transform": eval_transform,
            "tokenizer": tokenizer, "device": device,
            "settings": settings_dict(settings) if settings is not None else "given"}


def _inputs(bundle: dict, encoder: str, task: int, count: int):
    """The model inputs of ``count`` samples of task ``task`` and, for pictures, what they show."""
    if encoder == "visual":
        images = task_images(bundle["benchmark"], task, count)
        return images.to(bundle["device"]), displayable(images, bundle["eval_transform"]).numpy()
    if bundle["tokenizer"] is None:
        raise ValueError("maps of the text encoder need the tokenizer (pass tokenizer=...)")
    prompts = task_prompts(bundle["benchmark"], task, count)
    return bundle["tokenizer"](prompts).to(bundle["device"]), prompts


def _maps(record: RunRecord, layer: str, scenarios: Sequence[Scenario], options: AnalysisOptions,
          bundle: dict, steps) -> dict:
    model, encoder = bundle["model"], options.encoder
    images, numbers = {}, []
    ratio_panels = []
    for scenario in scenarios:
        install_banks(model, record, scenario.after)
        count = max(options.images, options.image + 1)
        inputs, shown = _inputs(bundle, encoder, scenario.data, count)
        if options.image >= inputs.shape[0]:
            raise ValueError(f"task {scenario.data + 1} has {inputs.shape[0]} test samples; "
                             f"image {options.image} does not exist")
        acts = layer_activations(model, layer, inputs, encoder=encoder)
        weights, owner = acts.weights, acts.atom_task.numpy()
        valid = _valid_tokens(inputs, encoder, weights.shape[-1])
        title = (f"Mixture weights of the {len(owner)} atoms of {parse_layer_name(layer).label}: "
                 f"{_sample_name(encoder, options.image)} of task {scenario.data + 1} "
                 f"({record.domains[scenario.data]}), model after task {scenario.after + 1} "
                 f"({record.domains[scenario.after]})")
        one = weights[options.image].numpy()
        if encoder == "visual":
            grid = _patch_grid(model)
            images[f"activation_map_{scenario.slug}.png"] = figures.activation_map(
                one, owner, title=title, image=shown[options.image], grid=grid)
        else:
            length = int(valid[options.image].sum())
            names = token_labels(bundle["tokenizer"], shown[options.image], length)
            images[f"activation_map_{scenario.slug}.png"] = figures.activation_map(
                one[:, :length], owner, title=title, token_names=names)
        per_token = (weights * valid[:, None, :]).sum(dim=(0, 2)) / valid.sum()
        ratios = per_token.numpy()
        ratio_panels.append({"label": f"{scenario.label}: data of {record.domains[scenario.data]}, model "
                                      f"after {record.domains[scenario.after]}",
                             "ratios": ratios, "atom_task": owner})
        by_task = {int(t) + 1: float(ratios[owner == t].sum()) for t in np.unique(owner)}
        numbers.append({"scenario": scenario.label, "data_task": scenario.data + 1,
                        "after_task": scenario.after + 1, "samples": int(inputs.shape[0]),
                        "ratios": ratios.tolist(), "atom_task": (owner + 1).tolist(), "share_by_task": by_task})
        steps.update()
    install_banks(model, record, record.tasks - 1)
    samples = "class prompts" if encoder == "text" else "test images"
    images["activation_ratios.png"] = figures.activation_ratios(
        ratio_panels, title=f"Averaged activation ratio of each atom of {parse_layer_name(layer).label} "
                            f"(mean mixture weight over the tokens of up to {options.images} {samples})")
    return {"images": images, "numbers": numbers}


def _valid_tokens(inputs: torch.Tensor, encoder: str, length: int) -> torch.Tensor:
    """``[B, L]`` 1 for the tokens that count: every image token; a prompt's tokens up to its end."""
    if encoder == "visual":
        return torch.ones(inputs.shape[0], length)
    ends = inputs.argmax(dim=-1).cpu()  # CLIP's end-of-text token has the largest id
    return (torch.arange(length)[None, :] <= ends[:, None]).float()


def _patch_grid(model) -> tuple:
    grid = getattr(model.visual, "grid_size", None)
    if grid is None:
        raise ValueError("the image encoder has no grid_size: is it an open_clip VisionTransformer?")
    return tuple(int(g) for g in grid)


def _sample_name(encoder: str, index: int) -> str:
    return f"test image {index}" if encoder == "visual" else f"prompt of class {index}"


# ---------------------------------------------------------------------- sections
def _run_summary(record: RunRecord) -> dict:
    return {"log_dir": str(record.log_dir), "strategy": record.strategy, "tasks": record.tasks,
            "domains": record.domains, "layers": len(record.banks),
            "atoms": {name: int(bank["atom_task"].numel()) for name, bank in record.banks.items()}}


def _maps_section(record, layer, scenarios, maps) -> str:
    where = parse_layer_name(layer)
    lines = ["## Which atoms fire on which tokens (paper Figs. 3, 5-8)", "",
             f"Layer: **{where.label}** (`{layer}`). Each map shows the mixture weight `w_i` of every atom "
             "(rows, grouped by the task that added it) on every token (columns) of one sample, as the "
             "model computes it at inference after the task named (top-k, softmax at the temperature, "
             "and the relevance gate), with the image's patches under their tokens. The model after "
             "task t' holds the atoms of tasks 1..t' (frozen atoms never change).", ""]
    for scenario in scenarios:
        name = f"activation_map_{scenario.slug}.png"
        lines += [f"### {scenario.label}: data of {record.domains[scenario.data]}, model after "
                  f"{record.domains[scenario.after]}", "", f"![{scenario.label}]({name})", ""]
    lines += ["### Averaged activation ratio per atom (Fig. 5)", "",
              "The mean mixture weight of each atom over every token of the samples (a token's weights "
              "sum to at most 1), per scenario; the table gives the share taken by each task's atoms.", "",
              "![activation ratios](activation_ratios.png)", ""]
    tasks = sorted({t for entry in maps["numbers"] for t in entry["share_by_task"]})
    lines += ["| scenario | " + " | ".join(f"atoms of task {t}" for t in tasks) + " |",
              "|---|" + "---|" * len(tasks)]
    for entry in maps["numbers"]:
        cells = [f"{entry['share_by_task'][t]:.3f}" if t in entry["share_by_task"] else "" for t in tasks]
        lines.append(f"| {entry['scenario']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _mass_section(record: RunRecord, options: AnalysisOptions, layer: Optional[str], images: dict,
                  texts: dict, numbers: dict) -> str:
    rows = mass_counts(record, options.share)
    if sum(row.total_mass for row in rows) <= 0:
        return ("## Atoms carrying the activation mass\n\nNo activation mass was recorded in this run "
                "(`record_activations=False`), so there is nothing to count.\n")
    images["atoms_for_99.png"] = figures.mass_counts(rows, share=options.share, tasks=record.tasks)
    curves = {}
    for name in _curve_layers(record, options, layer):
        mass, where = final_bank_mass(record, name).mass, parse_layer_name(name)
        curves[where.label] = {"encoder": where.encoder, "curve": cumulative_curve(mass),
                               "needed": atoms_for_mass(mass, options.share)}
    images["cumulative_mass.png"] = figures.cumulative_curves(curves, share=options.share, tasks=record.tasks)
    numbers["atoms_for_share"] = [asdict(row) for row in rows]
    texts["atoms_for_99.csv"] = _mass_csv(rows)
    lines = [f"## Atoms needed for {options.share:.0%} of the cumulative activation mass (paper Figs. 9-11)", "",
             "While each task trains, every layer adds each token's mixture weights to its atoms' mass. An "
             "atom's cumulative mass is the sum over every task it took part in; the count of a layer is the "
             f"smallest number of its atoms (largest first) holding {options.share:.0%} of the layer's total, "
             f"after all {record.tasks} tasks. Cells: atoms needed / atoms in the layer.", "",
             "![atoms needed](atoms_for_99.png)", "", "![cumulative curves](cumulative_mass.png)", ""]
    for encoder in ("visual", "text"):
        mine = [row for row in rows if row.encoder == encoder]
        if not mine:
            continue
        projections = [p for p in figures.PROJECTIONS if any(r.projection == p for r in mine)]
        lines += [f"### {TOWER_NAMES[encoder]} encoder", "",
                  "| layer | " + " | ".join(projections) + " |", "|---|" + "---|" * len(projections)]
        for block in sorted({r.block for r in mine}):
            cells = []
            for projection in projections:
                match = [r for r in mine if r.block == block and r.projection == projection]
                cells.append(f"{match[0].needed} / {match[0].atoms}" if match else "")
            lines.append(f"| {block + 1} | " + " | ".join(cells) + " |")
        mean = np.mean([r.needed / r.atoms for r in mine if r.atoms])
        lines += ["", f"On average {mean:.0%} of a layer's atoms carry {options.share:.0%} of its mass.", ""]
    return "\n".join(lines)


def _pruning_section(record: RunRecord, images: dict, texts: dict, numbers: dict, share: float) -> str:
    hypothetical = not pruned(record)
    head = ["## Pruning: atoms kept and storage saved (paper: about 30% saved)", ""]
    try:
        rows = pruning_rows(record, hypothetical=hypothetical, share=share)
    except ValueError as err:
        return "\n".join(head + [f"Nothing to show: {err}.", ""])
    images["pruning.png"] = figures.pruning(rows, hypothetical=hypothetical, share=share)
    texts["pruning.csv"] = _pruning_csv(rows)
    totals = per_task(rows)
    saved = overall_saved_share(rows)
    numbers["pruning"] = {"hypothetical": hypothetical, "saved_share": saved, "per_task": totals}
    if hypothetical:
        head.append("This run did not prune (`prune_mass=None`). Shown: what keeping, after each task, the "
                    f"smallest set of the task's new atoms that covers {share:.0%} of the mass recorded while "
                    "training it would keep and save.")
    else:
        kept = f"{record.prune_mass:.0%}" if record.prune_mass is not None else "its `prune_mass` share"
        head.append(f"After each task the run kept the smallest set of the task's new atoms covering {kept} "
                    "of the mass recorded while training the task, and dropped the rest.")
    head += ["Storage counts stored numbers: an atom holds a key (d_in) and a value (d_out), plus a router "
             "row (d_in) in the external-router ablation. Per layer: `pruning.csv`.", "",
             "![pruning](pruning.png)", "",
             "| task | domain | atoms added | atoms kept | parameters added | parameters saved | saved |",
             "|---|---|---|---|---|---|---|"]
    for row in totals:
        head.append(f"| {row['task'] + 1} | {record.domains[row['task']]} | {row['atoms_added']} | "
                    f"{row['atoms_kept']} | {row['parameters_added']:,} | {row['parameters_saved']:,} | "
                    f"{row['saved_share']:.1%} |")
    verb = "would save" if hypothetical else "saved"
    head += ["", f"Over all tasks pruning {verb} **{saved:.1%}** of the atoms' storage.", ""]
    return "\n".join(head)


def _report(record: RunRecord, sections: List[str]) -> str:
    intro = [f"# Analysis of {record.log_dir}", "",
             f"{record.strategy} run, {record.tasks} tasks: " + ", ".join(
                 f"{i + 1}. {d}" for i, d in enumerate(record.domains)) + ".",
             f"{len(record.banks)} MoRAM layers; numbers in `analysis.json`. Tasks are numbered from 1 in "
             "the order they were learned.", ""]
    return "\n".join(intro) + "\n" + "\n".join(sections)


def _mass_csv(rows) -> str:
    lines = ["layer,encoder,block,projection,atoms,needed,total_mass"]
    lines += [f"{r.layer},{r.encoder},{r.block + 1},{r.projection},{r.atoms},{r.needed},{r.total_mass:.6g}"
              for r in rows]
    return "\n".join(lines) + "\n"


def _pruning_csv(rows) -> str:
    lines = ["task,layer,atoms_added,atoms_kept,parameters_per_atom,parameters_saved"]
    lines += [f"{r.task + 1},{r.layer},{r.added},{r.kept},{r.per_atom},{r.saved}" for r in rows]
    return "\n".join(lines) + "\n"


def _jsonable(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


# ---------------------------------------------------------------------- TensorBoard
def tensorboard_dir(log_dir) -> Path:
    """Where the run's TensorBoard log is: ``LOG_DIR/tb`` (``run``), ``OUT/tensorboard/<strategy>``
    (``compare``), else ``LOG_DIR/tb``; the analysis is a run inside it."""
    log_dir = Path(log_dir)
    compared = log_dir.parent / "tensorboard" / log_dir.name
    base = compared if compared.is_dir() and not (log_dir / "tb").is_dir() else log_dir / "tb"
    return base / TENSORBOARD_RUN


def write_tensorboard(tb_dir: Path, images: Dict[str, object], report: str) -> None:
    """One event file with every picture (``Analysis/<name>``) and the report, replacing an earlier one."""
    from torch.utils.tensorboard import SummaryWriter

    staging = tb_dir.with_name(tb_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    writer = SummaryWriter(str(staging))
    for name, image in images.items():
        writer.add_image(f"Analysis/{Path(name).stem}", np.asarray(image), 0, dataformats="HWC")
    writer.add_text("Analysis/report", report, 0)
    writer.close()
    shutil.rmtree(tb_dir, ignore_errors=True)
    staging.rename(tb_dir)


__all__ = ["ANALYSIS_DIR", "AnalysisOptions", "REPORT_NAME", "TENSORBOARD_RUN", "analyze", "map_layer",
           "tensorboard_dir", "write_tensorboard"]
