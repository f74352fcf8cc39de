"""What a MoRAM run keeps for its analysis, read back from its log folder.

A run folder (``run --log-dir``, or ``OUT/<strategy>`` of a ``compare``) holds
``checkpoint.pt`` (:mod:`moram_avalanche.experiments.checkpoint`): the final atom banks of every
MoRAM layer and the state of the :class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin`
-- per task, the activation mass recorded while training, what pruning dropped and a
fingerprint of the bank kept. That is all the paper's figures need from the run: frozen atoms
never change, so the bank after task ``t`` is the final bank's atoms of tasks ``<= t``
(:mod:`.banks`), and no per-task copy of the atoms is stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import torch

from ....clip.inject import TARGET_PATHS
from ...checkpoint import read_latest_run_state
from ...runner import CHECKPOINT_NAME

#: checkpoint entries of a MoRAM layer that are not rows of a bank
_SCALAR_KEYS = ("num_frozen", "atom_task")
#: a bank stored as ``[width, R]`` in the state dict (the rest are ``[R, width]``)
TRANSPOSED_BANKS = ("atom_values",)

TOWER_NAMES = {"visual": "image", "text": "text"}


class LayerName(NamedTuple):
    """Where a MoRAM layer sits in CLIP, parsed from its dotted name."""

    name: str  # e.g. visual.transformer.resblocks.7.attn.k_proj
    encoder: str  # "visual" or "text"
    block: int  # 0-based index of the residual block
    projection: str  # q, k, v, out, fc, proj (the release's "qkvoinout" names)

    @property
    def label(self) -> str:
        """Short and readable: ``image L8 k`` (1-based block, as the paper counts layers)."""
        return f"{TOWER_NAMES.get(self.encoder, self.encoder)} L{self.block + 1} {self.projection}"


def parse_layer_name(name: str) -> LayerName:
    """The tower, block and projection of a MoRAM layer of an open_clip model, from its name."""
    encoder = "visual" if name.startswith("visual.") else "text"
    projection = next((target for target, path in TARGET_PATHS.items() if name.endswith("." + path)),
                      name.rpartition(".")[2])
    numbers = re.findall(r"\.(\d+)\.", name)
    return LayerName(name, encoder, int(numbers[-1]) if numbers else 0, projection)


@dataclass
class RunRecord:
    """A MoRAM run read from its folder (see the module docstring).

    Attributes:
        log_dir: the folder.
        strategy: the class name of the strategy that wrote the checkpoint.
        domains: the domains trained, in order (task ``t`` is ``domains[t]``).
        banks: per layer, its checkpoint entries (``atom_keys [R, d_in]``, ``atom_values
            [d_out, R]``, ``num_frozen``, ``atom_task [R]``, and any other bank of a variant,
            e.g. ``router_weight``), after the last task.
        history: the MoRAMPlugin's history (one entry per task).
        pruned: atoms dropped per task and layer (empty without pruning).
        layer_options: how each layer was built (``MoRAMLinear.options``); empty for a
            checkpoint written before the plugin recorded it.
        prune_mass: the share of each task's mass pruning kept (None: no pruning, or not recorded).
    """

    log_dir: Path
    strategy: str
    domains: List[str]
    banks: Dict[str, Dict[str, torch.Tensor]]
    history: List[dict]
    pruned: List[Dict[str, int]]
    layer_options: Dict[str, dict] = field(default_factory=dict)
    prune_mass: Optional[float] = None

    @property
    def tasks(self) -> int:
        return len(self.history)

    @property
    def layers(self) -> List[LayerName]:
        return [parse_layer_name(name) for name in self.banks]

    def widths(self, name: str) -> Dict[str, int]:
        """Entries per atom of each bank of layer ``name`` (``atom_keys``: d_in, ...)."""
        return {key: int(rows.shape[0] if key in TRANSPOSED_BANKS else rows.shape[1])
                for key, rows in self.banks[name].items() if key not in _SCALAR_KEYS}

    def parameters_per_atom(self, name: str) -> int:
        """Stored numbers per atom of layer ``name``: ``d_in + d_out`` (+ a router row's ``d_in``)."""
        return sum(self.widths(name).values())


def find_moram_state(stateful: dict) -> Optional[dict]:
    """The MoRAMPlugin's saved state among a checkpoint's ``stateful`` entries, or None."""
    found = [state for key, state in stateful.items() if key.endswith(":MoRAMPlugin")]
    return found[0] if found else None


def check_clip_run(log_dir: Path) -> None:
    """The analysis draws CLIP's figures (activation maps on image tokens, atoms per layer of the
    two towers): a run of another family, as its record names it (``run.benchmark``), is refused
    in one line saying what the analysis supports, before its checkpoint is read (a language
    model's run has no image domains, and read as CLIP's it looked inconsistent)."""
    from ....benchmarks import benchmarks
    from ...record import read_record

    record = read_record(log_dir) or {}
    benchmark = (record.get("run") or {}).get("benchmark")
    entry = benchmarks().get(benchmark) if isinstance(benchmark, str) else None
    family = entry.family if entry is not None else None
    if family not in (None, "clip"):
        raise ValueError(f"{log_dir} holds a {record.get('strategy') or 'strategy'} run on --benchmark {benchmark} "
                         f"(a language model): analyze draws the figures of CLIP runs (activation maps on image "
                         f"tokens, atoms per layer of the two towers) and supports no other family; read this "
                         f"run's {log_dir / 'results.json'} (OP, BWT), or compare runs with `moram-avalanche compare`")


def load_run(log_dir) -> RunRecord:
    """Read the MoRAM run in ``log_dir``; a clear ValueError when it holds none."""
    log_dir = Path(log_dir)
    check_clip_run(log_dir)
    path = log_dir / CHECKPOINT_NAME
    if not path.is_file():
        runs = sorted(p.parent.name for p in log_dir.glob(f"*/{CHECKPOINT_NAME}")) if log_dir.is_dir() else []
        hint = (f"; it holds the runs {runs}: analyse one of them, e.g. {log_dir / runs[0]}" if runs else
                ": give the --log-dir of a `run`, or a strategy folder OUT/<strategy> of a `compare`")
        raise ValueError(f"{log_dir} has no {CHECKPOINT_NAME}{hint}")
    state, path = read_latest_run_state(path, doing="reading")  # as a resumed run reads it: a damaged one falls back
    plugin = find_moram_state(state.get("stateful", {}))
    banks = _banks(state.get("model", {}))
    if plugin is None or not banks:
        raise ValueError(
            f"{log_dir} holds a {state.get('strategy', 'unknown')} run without MoRAM atoms: the "
            "analysis reads the atom banks and activation records of a strategy with a "
            "MoRAMPlugin (moram and its routing ablations)")
    history = list(plugin["history"])
    domains = [d["name"] for d in state.get("seen_domains", [])]
    if len(domains) != len(history):
        raise ValueError(f"{path}: {len(domains)} domains trained but {len(history)} MoRAM records; "
                         "the checkpoint is inconsistent")
    return RunRecord(log_dir, state.get("strategy", "MoRAM"), domains, banks, history,
                     list(plugin["pruned"]), dict(plugin.get("layer_options", {})), plugin.get("prune_mass"))


def _banks(model_state: dict) -> Dict[str, Dict[str, torch.Tensor]]:
    """Per MoRAM layer (a name with ``atom_keys``), its checkpoint entries."""
    names = [key[: -len(".atom_keys")] for key in model_state if key.endswith(".atom_keys")]
    banks = {}
    for name in names:
        prefix = name + "."
        banks[name] = {key[len(prefix):]: value for key, value in model_state.items()
                       if key.startswith(prefix) and "." not in key[len(prefix):]}
    return banks


__all__ = ["LayerName", "RunRecord", "TOWER_NAMES", "TRANSPOSED_BANKS", "find_moram_state", "load_run",
           "parse_layer_name"]
