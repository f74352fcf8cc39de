"""The atom bank of a MoRAM layer as plain state: frozen rows in buffers, the current task's rows in parameters.

A bank of ``R`` rank-1 atoms is keys ``A`` ``[R, d_in]`` and values ``B`` ``[R, d_out]`` (one row
per atom, frozen atoms first, in insertion order). :class:`MoRAMBank` keeps

* ``frozen_keys`` ``[F, d_in]`` and ``frozen_values`` ``[F, d_out]``: buffers, every atom of the
  tasks before the current one;
* ``new_keys`` ``[r, d_in]`` and ``new_values`` ``[r, d_out]``: ``nn.Parameter`` objects, the
  current task's atoms (None when the bank is frozen);
* ``atom_task`` ``[R]``: the expansion (task) that added each atom; ``atom_mass`` and
  ``atom_hits`` ``[R]``: the activation statistics recorded for pruning.

While a task trains, the frozen and the trainable rows of each side are views of one ``[R, width]``
tensor (:func:`share_storage`; made by :meth:`~AtomStore.expand`, loading and ``.to()``), so a
forward reads the whole bank without joining it and sees an optimizer's in-place step at once;
:meth:`~AtomStore.rows` keeps the bank a forward reads per dtype (issue "GPU path II": nothing
re-joined or re-cast per call). The state dicts keep their keys; :class:`MoRAMBank`'s ``atom_keys`` and
``atom_values`` share that buffer (:meth:`MoRAMBank.saved_rows`).

The storage is one mixin, :class:`AtomStore`, kept by two hosts:

* :class:`MoRAMBank` -- the bank of a layer over one frozen ``nn.Linear`` (``self.base``), the
  base of :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear`; its state dict keys are below;
* :class:`AtomBank` -- a bank without a base, for a layer that holds several banks by name (the
  peft layer keeps one per adapter, ``moram_avalanche.text``); its state dict is the module's own
  (``frozen_keys``, ``frozen_values``, ``new_keys``, ``new_values``, ``atom_task``: every parameter
  under its own name, what FSDP and peft's state-dict functions expect), and it also loads the
  layer's keys below (checkpoints of 0.5.0 adapters).

Growth follows the method reference ("continual expansion"): :meth:`MoRAMBank.expand` freezes
every atom and appends ``atoms_per_task`` trainable ones, keys Kaiming-uniform with
``a = sqrt(5)`` as ``nn.Linear.weight``, values zero (so the layer's output is unchanged at the
start of a task). :meth:`MoRAMBank.prune` is the optional post-training pruning (99% of the
activation mass kept).

State dict keys (stable since 0.2.0; a checkpoint holds only these, :attr:`MoRAMBank.STATE_KEYS`):
``atom_keys`` ``[R, d_in]``, ``atom_values`` ``[d_out, R]`` (the layout of :attr:`MoRAMBank.values`),
``num_frozen`` (0-d long), ``atom_task`` ``[R]``. Loading resizes the bank, so atoms saved after
several tasks load into a freshly injected model. ``load_state_dict(..., assign=True)`` (torch's
meta-device loading: peft's ``low_cpu_mem_usage=True``) replaces the tensors instead of copying
into them, so a bank created on the meta device loads. Routing lives in
:class:`~moram_avalanche.layers.moram.layer.MoRAMLinear`; this module is storage only. Pure torch.
"""

from __future__ import annotations

import contextlib
import math
from typing import NamedTuple, Optional, Tuple

import torch
from torch import nn

from ..base import GrowingAdapter, LinearWrapper


def joined(frozen: torch.Tensor, new: Optional[torch.Tensor], dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Frozen rows then trainable rows ``[F + r, width]`` in ``dtype`` (differentiable in ``new``)."""
    dtype = dtype or frozen.dtype
    if new is None:
        return frozen.to(dtype=dtype)
    if frozen.shape[0] == 0:
        return new.to(dtype=dtype)
    return torch.cat([frozen.to(dtype=dtype), new.to(dtype=dtype)])


def version_of(tensor: torch.Tensor) -> Optional[int]:
    """``tensor._version`` (bumped by every in-place edit), or None for an inference tensor (made under
    ``torch.inference_mode()``, which keeps no version counter and is edited in place only inside it)."""
    return None if tensor.is_inference() else tensor._version


def stamp_of(tensor: torch.Tensor) -> tuple:
    """What an in-place edit, a swapped storage or a resized, transposed or reinterpreted ``.data`` of
    ``tensor`` changes: its version (:func:`version_of`), data pointer, shape, strides and dtype
    (``.data`` swapped for its own transpose, a square one's, keeps all but the strides; for a
    ``.view(dtype)`` of the same size, all but the dtype)."""
    return version_of(tensor), tensor.data_ptr(), tensor.shape, tensor.stride(), tensor.dtype


def rows_stamp(keys: torch.Tensor, values: torch.Tensor) -> Optional[tuple]:
    """``stamp_of(keys) + stamp_of(values)``: what a copy kept of a bank's two row tensors is checked
    against at each call (one flat tuple: it runs at every call that reads a kept copy); None where
    a tensor has no storage to point at (a ``torch.func`` transform's wrapper, made anew at each
    call: nothing is kept from it)."""
    try:
        return (None if keys.is_inference() else keys._version, keys.data_ptr(), keys.shape, keys.stride(), keys.dtype,
                None if values.is_inference() else values._version, values.data_ptr(), values.shape, values.stride(),
                values.dtype)
    except RuntimeError:  # "Cannot access data pointer of Tensor that doesn't have storage"
        return None


def storage_marks(module: nn.Module) -> tuple:
    """Where each tensor of ``module`` (and its submodules) lives: data pointer, dtype and device --
    what a ``.to()`` or ``.half()`` that moves or casts anything changes."""
    return tuple((t.data_ptr(), t.dtype, t.device) for t in (*module.parameters(), *module.buffers()))


#: the bank's four row tensors, by name: frozen rows in buffers, the current task's in parameters
ROW_NAMES = ("frozen_keys", "frozen_values", "new_keys", "new_values")
_MISSING = object()
_PLAIN_HOSTS = {}  # class -> whether it defines none of ROW_NAMES itself (a property, say)


def registered(module: nn.Module, name: str, registry: str):
    """``getattr(module, name)`` for one of the bank's row tensors, found where ``nn.Module`` finds it
    -- the instance's own dictionary first (where FSDP's unsharded views go), then ``registry``
    (``"_parameters"`` or ``"_buffers"``) -- without ``nn.Module.__getattr__``'s half microsecond (a
    call reads the bank's size; issue "GPU path II", item 7). A class that defines the name
    itself (a parametrization's property) is read by ``getattr``."""
    host = type(module)
    plain = _PLAIN_HOSTS.get(host)
    if plain is None:
        plain = _PLAIN_HOSTS[host] = not any(hasattr(host, row) for row in ROW_NAMES)
    if plain:
        found = module.__dict__.get(name, _MISSING)
        if found is _MISSING:
            found = module.__dict__[registry].get(name, _MISSING)
        if found is not _MISSING:
            return found
    return getattr(module, name)


def row_tensors(module: nn.Module) -> tuple:
    """``(frozen_keys, frozen_values, new_keys, new_values)`` of ``module``, each as ``getattr`` finds
    it, in one call: from the registries where the class defines none of the names and the instance's
    own dictionary shadows none (FSDP puts its unsharded views there), else by ``getattr``. What
    :func:`registered` reads for one name, for the four that a call on the long way reads (the
    bank's size and its rows: four ``nn.Module.__getattr__`` calls cost about 26 thousand
    instructions; issue "GPU path II")."""
    host = type(module)
    plain = _PLAIN_HOSTS.get(host)
    if plain is None:
        plain = _PLAIN_HOSTS[host] = not any(hasattr(host, row) for row in ROW_NAMES)
    own = module.__dict__
    if plain and not ("frozen_keys" in own or "frozen_values" in own or "new_keys" in own or "new_values" in own):
        buffers, parameters = own["_buffers"], own["_parameters"]
        frozen_keys, frozen_values = buffers.get("frozen_keys", _MISSING), buffers.get("frozen_values", _MISSING)
        new_keys, new_values = parameters.get("new_keys", _MISSING), parameters.get("new_values", _MISSING)
        if not (frozen_keys is _MISSING or frozen_values is _MISSING or new_keys is _MISSING or new_values is _MISSING):
            return frozen_keys, frozen_values, new_keys, new_values
    return module.frozen_keys, module.frozen_values, module.new_keys, module.new_values


class BankRows(NamedTuple):
    """The bank in one dtype, as one forward reads it (:meth:`MoRAMBank.rows`)."""

    keys: torch.Tensor  # A [R, d_in], frozen rows first; no autograd
    values: torch.Tensor  # B [R, d_out], the trainable rows times new_value_scale; no autograd
    num_frozen: int  # F: rows F.. are the trainable ones
    new_keys: Optional[torch.Tensor]  # the trainable keys as autograd sees them (cast), or None
    new_values: Optional[torch.Tensor]  # the trainable values as autograd sees them (cast, scaled), or None
    keys_t: Optional[torch.Tensor] = None  # A^T [d_in, R], a view of keys kept with them (None: keys.t())


def with_keys_t(keys, values, num_frozen, new_keys=None, new_values=None) -> BankRows:
    """:class:`BankRows` with its ``keys_t`` view, for rows that are kept across calls."""
    return BankRows(keys, values, num_frozen, new_keys, new_values, keys.t())


def owns_storage(rows: torch.Tensor) -> bool:
    """Whether ``rows`` is all of its storage (not a view into a larger tensor)."""
    return rows.untyped_storage().nbytes() == rows.numel() * rows.element_size()


def share_storage(frozen: torch.Tensor, new: nn.Parameter) -> torch.Tensor:
    """Re-home ``frozen`` ``[F, width]`` and ``new`` ``[r, width]`` in one ``[F + r, width]`` tensor:
    returns its first ``F`` rows (a view: the new frozen buffer) and points ``new``'s data at the
    rest (``new`` stays the same Parameter, so an optimizer holding it keeps it). Rows on the meta
    device, or of two devices or dtypes, are left as they are (``frozen`` is returned)."""
    if frozen.is_meta or new.is_meta or frozen.dtype != new.dtype or frozen.device != new.device:
        return frozen
    with torch.no_grad():
        whole = torch.cat([frozen.detach(), new.detach()])
    new.data = whole[frozen.shape[0]:]
    return whole[:frozen.shape[0]]


def live_rows(frozen: torch.Tensor, new: torch.Tensor) -> Optional[torch.Tensor]:
    """The one tensor ``[F + r, width]`` whose rows are ``frozen`` then ``new`` (:func:`share_storage`),
    or None when they are not views of one (after ``.to()`` by FSDP, a deep copy, ...)."""
    whole = frozen._base
    if (whole is None or whole.dim() != 2 or not whole.is_contiguous() or frozen.dtype != new.dtype
            or whole.shape[0] != frozen.shape[0] + new.shape[0] or whole.shape[1] != frozen.shape[1]
            or frozen.data_ptr() != whole.data_ptr() or new.data_ptr() != whole[frozen.shape[0]:].data_ptr()):
        return None
    return whole


def normal_tensors():
    """A context in which new tensors are normal ones even inside ``torch.inference_mode()``: the
    rows kept across calls may be saved for a later training step's backward."""
    if torch.compiler.is_compiling() or not torch.is_inference_mode_enabled():
        return contextlib.nullcontext()
    return torch.inference_mode(False)


def new_rows(count: int, width: int, init: str, like: torch.Tensor) -> nn.Parameter:
    """``count`` fresh trainable rows, ``"kaiming"`` (``nn.Linear.weight``'s init) or ``"zero"``.

    Drawn in float32 on the CPU, then moved to ``like``'s device and dtype, so the draw does
    not depend on where the layer lives.
    """
    rows = torch.empty(count, width)
    if init == "kaiming":
        nn.init.kaiming_uniform_(rows, a=math.sqrt(5))
    else:
        rows.zero_()
    return nn.Parameter(rows.to(device=like.device, dtype=like.dtype))


def check_finite(name: str, rows) -> None:
    """A ValueError when the floating-point ``rows`` hold NaN or infinite entries."""
    rows = torch.as_tensor(rows)
    if rows.is_floating_point() and not bool(torch.isfinite(rows).all()):
        raise ValueError(f"{name} hold NaN or infinite entries ({int((~torch.isfinite(rows)).sum())} of "
                         f"{rows.numel()}): load atoms from an intact checkpoint")


class AtomStore:
    """The storage of one bank of atoms (module docstring); a mixin of an ``nn.Module``.

    Its host provides ``in_features``, ``out_features``, ``atoms_per_task`` and :attr:`template`
    (the device and dtype new rows are made like) and calls :meth:`init_atoms` once.
    """

    def init_atoms(self, like: torch.Tensor, persistent: bool = False) -> None:
        """Register an empty bank made like ``like``; ``persistent``: the frozen rows and
        ``atom_task`` are in the module's own state dict (:class:`AtomBank`)."""
        #: factor on the trainable atoms' values in the forward (frozen atoms: 1). 1 is the paper;
        #: the MoRAM release trains its new atoms at ``lora_alpha / r`` and freezes them unscaled
        #: (``language_models.md``), an option of the text family. Not saved: values are stored
        #: unscaled, as the release stores them.
        self.new_value_scale = 1.0
        #: how :meth:`expand` draws new values: zero (the paper: the output is unchanged at the
        #: start of a task), or ``"kaiming"`` like the keys (peft's ``init_weights=False``)
        self.values_init = "zero"
        self._recording = False
        self._cast_rows = {}  # dtype -> (frozen_keys, frozen_values, their rows_stamp, BankRows of the frozen bank)
        self._live = None  # (frozen_keys, frozen_values, new_keys, new_values, data pointers, BankRows or None)
        self._eval_rows = {}  # dtype -> (the four row tensors, the frozen rows' rows_stamp, BankRows, trainable tails)
        like = torch.empty(0, device=like.device, dtype=like.dtype)
        self.register_buffer("frozen_keys", like.new_zeros(0, self.in_features), persistent=persistent)
        self.register_buffer("frozen_values", like.new_zeros(0, self.out_features), persistent=persistent)
        self.register_parameter("new_keys", None)
        self.register_parameter("new_values", None)
        self.register_buffer("atom_task", torch.zeros(0, dtype=torch.long, device=like.device),
                             persistent=persistent)
        self.register_buffer("atom_mass", torch.zeros(0, device=like.device), persistent=False)
        self.register_buffer("atom_hits", torch.zeros(0, dtype=torch.long, device=like.device),
                             persistent=False)

    # ------------------------------------------------------------------ sizes and rows
    @property
    def num_frozen(self) -> int:
        return registered(self, "frozen_keys", "_buffers").shape[0]

    @property
    def num_trainable(self) -> int:
        new_keys = registered(self, "new_keys", "_parameters")
        return 0 if new_keys is None else new_keys.shape[0]

    @property
    def num_atoms(self) -> int:
        """``R``: the frozen atoms and the trainable ones (read at every call: :func:`row_tensors`)."""
        frozen_keys, _, new_keys, _ = row_tensors(self)
        return frozen_keys.shape[0] + (0 if new_keys is None else new_keys.shape[0])

    @property
    def keys(self) -> torch.Tensor:
        """All keys ``[num_atoms, in_features]``, frozen first, in insertion order (detached)."""
        return joined(self.frozen_keys, self.new_keys).detach()

    @property
    def values(self) -> torch.Tensor:
        """All values ``[out_features, num_atoms]``, frozen first, in insertion order (detached)."""
        return joined(self.frozen_values, self.new_values).detach().t()

    def rows(self, dtype: torch.dtype) -> BankRows:
        """The whole bank in ``dtype`` for one forward: keys and values joined (frozen rows first).

        Nothing is joined or cast per call where it can be kept:

        * a frozen bank: the buffers in their own dtype, else a copy cast once per dtype and kept
          until the buffers change (:meth:`frozen_rows`);
        * a task's trainable atoms in the bank's own dtype (at scale 1): the one buffer per side
          whose trainable rows are the parameters' own storage (:func:`share_storage`, made by
          :meth:`expand` and loading), so an optimizer's in-place step is seen without a copy;
        * other dtypes without autograd (evaluation under autocast while a task trains): a joined
          copy kept per dtype, its trainable rows copied in at each call;
        * other dtypes with autograd, under ``torch.compile``, or when the rows are no longer views
          of one buffer (FSDP, a deep copy): the trainable rows cast and joined at each call
          (:meth:`joined_rows`).
        """
        tensors = row_tensors(self)  # (read once: the four row tensors)
        new_keys = tensors[2]
        if new_keys is None:
            return self.frozen_bank(dtype, tensors[:2])
        if torch.compiler.is_compiling():
            return self.joined_rows(dtype, tensors)
        if dtype == new_keys.dtype and self.new_value_scale == 1:
            live = self.live_bank(tensors)
            if live is not None:
                return live
        if torch.is_grad_enabled():
            return self.joined_rows(dtype, tensors)
        return self.eval_bank(dtype, tensors)

    def joined_rows(self, dtype: torch.dtype, tensors: Optional[tuple] = None) -> BankRows:
        """The bank in ``dtype``, the trainable rows cast and joined at this call (frozen rows: kept).
        ``tensors``: the four row tensors as the caller read them (:func:`row_tensors`; None: read here)."""
        tensors = row_tensors(self) if tensors is None else tensors
        frozen_keys, frozen_values = self.frozen_rows(dtype, tensors[:2])
        new_keys, new_values = tensors[2].to(dtype=dtype), tensors[3].to(dtype=dtype)
        if self.new_value_scale != 1:
            new_values = new_values * self.new_value_scale
        with torch.no_grad():
            keys = torch.cat([frozen_keys, new_keys]) if frozen_keys.shape[0] else new_keys.detach()
            values = torch.cat([frozen_values, new_values]) if frozen_values.shape[0] else new_values.detach()
        return BankRows(keys, values, frozen_keys.shape[0], new_keys, new_values)

    def live_bank(self, tensors: Optional[tuple] = None) -> Optional[BankRows]:
        """The bank as the one buffer per side that holds the trainable parameters' rows (no copy),
        or None when the rows are not views of one (checked by identity and data pointers: a swapped
        ``.data`` keeps the first). ``tensors``: the four row tensors as the caller read them
        (:func:`row_tensors`; None: read here)."""
        fk, fv, nk, nv = row_tensors(self) if tensors is None else tensors
        pointers = (fk.data_ptr(), fv.data_ptr(), nk.data_ptr(), nv.data_ptr())
        live = self._live
        if (live is None or live[0] is not fk or live[1] is not fv or live[2] is not nk or live[3] is not nv
                or live[4] != pointers):
            keys, values = live_rows(fk, nk), live_rows(fv, nv)
            rows = None if keys is None or values is None else with_keys_t(keys, values, fk.shape[0], nk, nv)
            live = self._live = (fk, fv, nk, nv, pointers, rows)
        return live[5]

    def eval_bank(self, dtype: torch.dtype, tensors: Optional[tuple] = None) -> BankRows:
        """The bank in ``dtype`` without autograd: a joined copy kept per dtype, the trainable rows
        (``atoms_per_task`` of them) copied into it at each call (so every change of theirs is seen).
        ``tensors``: the four row tensors as the caller read them (:func:`row_tensors`; None: read here)."""
        fk, fv, nk, nv = row_tensors(self) if tensors is None else tensors
        entry, stamp = self._eval_rows.get(dtype), rows_stamp(fk, fv)
        if (entry is None or entry[0] is not fk or entry[1] is not fv or entry[2] is not nk or entry[3] is not nv
                or stamp is None or entry[4] != stamp):
            with normal_tensors():
                rows = self.joined_rows(dtype, (fk, fv, nk, nv))
            rows = with_keys_t(rows.keys, rows.values, rows.num_frozen, nk, nv)
            tails = (rows.keys[rows.num_frozen:], rows.values[rows.num_frozen:])
            if stamp is not None:
                self._eval_rows[dtype] = (fk, fv, nk, nv, stamp, rows, tails)
            return rows
        key_tail, value_tail = entry[6]
        key_tail.copy_(nk)
        value_tail.copy_(nv)
        if self.new_value_scale != 1:
            value_tail.mul_(self.new_value_scale)
        return entry[5]

    def frozen_bank(self, dtype: torch.dtype, tensors: Optional[tuple] = None) -> BankRows:
        """The frozen bank in ``dtype`` (:meth:`frozen_rows`), kept with its transposed keys.
        ``tensors``: the frozen keys and values as the caller read them (None: read here)."""
        keys, values = (self.frozen_keys, self.frozen_values) if tensors is None else tensors
        entry = self._cast_rows.get(dtype)
        compiling = torch.compiler.is_compiling()
        stamp = None if compiling else rows_stamp(keys, values)
        if (entry is None or entry[0] is not keys or entry[1] is not values
                or (not compiling and (stamp is None or entry[2] != stamp))):
            with normal_tensors():
                if keys.dtype == dtype:  # the buffers themselves (they hold no autograd history)
                    cast_keys, cast_values = keys, values
                else:
                    cast_keys, cast_values = keys.detach().to(dtype), values.detach().to(dtype)
            entry = (keys, values, stamp, with_keys_t(cast_keys, cast_values, keys.shape[0]))
            if compiling or stamp is not None:  # (a wrapper without storage: made anew each call, not kept)
                self._cast_rows[dtype] = entry
        return entry[3]

    def frozen_rows(self, dtype: torch.dtype, tensors: Optional[tuple] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(frozen keys, frozen values)`` in ``dtype``: the buffers themselves in their own dtype,
        else a copy cast once and kept until the buffers change (expand, freeze, load, prune,
        ``.to()``, an in-place edit, which bumps their version, or their ``.data`` swapped:
        :func:`rows_stamp`; under ``torch.compile`` only a replaced buffer is noticed). ``tensors``:
        the frozen keys and values as the caller read them (None: read here)."""
        keys, values = (self.frozen_keys, self.frozen_values) if tensors is None else tensors
        if keys.dtype == dtype:
            return keys, values
        rows = self.frozen_bank(dtype, (keys, values))
        return rows.keys, rows.values

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_cast_rows"] = {}  # derived copies: never pickled or deep-copied with the layer
        state["_live"], state["_eval_rows"] = None, {}
        return state

    def __setstate__(self, state):
        """Restore a pickled or deep-copied bank, its trainable rows shared again
        (:meth:`share_trainable_rows`): a copy keeps each view's storage but not that it is a view,
        so without it the copy would join its rows at every call, and its state dict would not alias
        them (an EMA copy updated through ``state_dict().values()``: :meth:`MoRAMBank.saved_rows`)."""
        state.setdefault("_cast_rows", {})
        state.setdefault("_live", None)  # layers pickled before 0.8
        state.setdefault("_eval_rows", {})
        state.setdefault("new_value_scale", 1.0)  # layers pickled before 0.6
        state.setdefault("values_init", "zero")
        super().__setstate__(state)
        self.share_trainable_rows()

    def splits_as(self, num_atoms: int, num_frozen: int) -> bool:
        """Whether the bank has trainable atoms and already holds ``num_atoms`` of which ``num_frozen`` frozen."""
        return self.new_keys is not None and (num_atoms, num_frozen) == (self.num_atoms, self.num_frozen)

    # ------------------------------------------------------------------ growth
    def expand(self) -> int:
        """Freeze every atom and append ``atoms_per_task`` new trainable ones; returns the new size.

        An optimizer built before this call does not hold the new parameters: rebuild it or add
        them (the growth plugin does it through the strategy's model adaptation).
        """
        self.freeze()
        # the next task's index (a bank on the meta device has no values to read: placeholders)
        task = int(self.atom_task.max()) + 1 if self.num_atoms and not self.atom_task.is_meta else 0
        self.new_keys = new_rows(self.atoms_per_task, self.in_features, "kaiming", self.frozen_keys)
        self.new_values = new_rows(self.atoms_per_task, self.out_features, self.values_init, self.frozen_values)
        self.share_trainable_rows()
        self.atom_task = torch.cat([self.atom_task, self.atom_task.new_full((self.atoms_per_task,), task)])
        self.reset_stats()
        return self.num_atoms

    def share_trainable_rows(self) -> None:
        """Keep the frozen and the trainable rows of each side in one buffer (:func:`share_storage`),
        the trainable parameters' data its last rows, unless they already are."""
        if self.new_keys is None:
            return
        if live_rows(self.frozen_keys, self.new_keys) is None:
            self.frozen_keys = share_storage(self.frozen_keys, self.new_keys)
        if live_rows(self.frozen_values, self.new_values) is None:
            self.frozen_values = share_storage(self.frozen_values, self.new_values)

    def _apply(self, fn, recurse=True):
        """``nn.Module._apply`` (``.to()``, ``.half()``, ...), then the rows shared again
        (:meth:`share_trainable_rows`): a move copies each tensor on its own. Where it moved or
        cast anything, the copies kept of the rows go at once (the next forward makes them again
        where they are needed: after ``model.cpu()`` no copy stays on the GPU); a ``.to()`` that
        changes nothing (a strategy's, before each evaluation) keeps them."""
        before = storage_marks(self)
        module = super()._apply(fn, recurse)
        if storage_marks(self) != before:
            self.forget_copies()
        self.share_trainable_rows()
        return module

    def forget_copies(self) -> None:
        """Let go of every copy kept of the rows (a host that keeps copies of its own adds them)."""
        self._cast_rows, self._live, self._eval_rows = {}, None, {}

    def freeze(self) -> None:
        """Move the current task's atoms to the frozen rows (they stay in the bank, no longer trained)."""
        if self.new_keys is not None:
            self.frozen_keys = joined(self.frozen_keys, self.new_keys.detach())
            self.frozen_values = joined(self.frozen_values, self.new_values.detach())
        self.new_keys = self.new_values = None

    def select_atoms(self, keep: torch.Tensor) -> None:
        """Keep only the atoms where the bool ``keep`` ``[num_atoms]`` is True, in order (frozen bank)."""
        if self.num_trainable:
            raise RuntimeError("select_atoms() needs a frozen bank: call freeze() first")
        self.frozen_keys, self.frozen_values = self.frozen_keys[keep], self.frozen_values[keep]
        self.atom_task = self.atom_task[keep]
        self.reset_stats()

    # ------------------------------------------------------------------ loading
    def load_atoms(self, keys: torch.Tensor, values: torch.Tensor, num_frozen: int,
                   atom_task: Optional[torch.Tensor] = None, *, assign: bool = False,
                   **extra: torch.Tensor) -> None:
        """Replace the whole bank.

        Args:
            keys: ``[R, in_features]``.
            values: ``[out_features, R]`` (the layout of :attr:`values`).
            num_frozen: the first ``num_frozen`` atoms are frozen, the rest trainable.
            atom_task: ``[R]`` non-decreasing task index of each atom; by default
                consecutive blocks of ``atoms_per_task``.
            assign: replace the bank's tensors by the rows, in their dtype, never copy into
                them (torch's ``load_state_dict(assign=True)``); a bank on the meta device is
                always replaced, by rows on the device they come on.
            extra: a variant's other per-atom rows, by state-dict key (e.g. ``router_weight``);
                this layer keeps none.

        When the bank already has this split (same size, same number frozen, trainable atoms),
        the parameters are updated in place, so an optimizer holding them keeps working.
        Replaced trainable parameters keep ``requires_grad`` of the ones they replace.
        """
        if extra:
            raise ValueError(f"{type(self).__name__} keeps no {sorted(extra)} rows (its rows: "
                             f"['atom_keys', 'atom_values'])")
        keys, values = torch.as_tensor(keys), torch.as_tensor(values)
        check_finite("keys", keys)
        check_finite("values", values)
        if keys.dim() != 2 or keys.shape[1] != self.in_features:
            raise ValueError(
                f"keys must be [num_atoms, in_features={self.in_features}], got {tuple(keys.shape)}"
            )
        if values.dim() != 2 or values.shape != (self.out_features, keys.shape[0]):
            raise ValueError(
                f"values must be [out_features={self.out_features}, num_atoms={keys.shape[0]}] "
                f"(the layout of MoRAMLinear.values), got {tuple(values.shape)}"
            )
        num_atoms, num_frozen = keys.shape[0], int(num_frozen)
        if not 0 <= num_frozen <= num_atoms:
            raise ValueError(f"num_frozen must be in [0, {num_atoms}], got {num_frozen}")
        device = self.load_device(keys)
        if atom_task is None:
            atom_task = torch.arange(num_atoms) // self.atoms_per_task
        atom_task = torch.as_tensor(atom_task).to(device=device, dtype=torch.long)
        if atom_task.shape != (num_atoms,) or bool((atom_task.diff() < 0).any()):
            raise ValueError(
                f"atom_task must be a non-decreasing [num_atoms={num_atoms}] tensor of task "
                f"indices, got {tuple(atom_task.shape)}"
            )
        in_place = not self.replaces(assign) and self.splits_as(num_atoms, num_frozen)
        self.frozen_keys, self.new_keys = self.split_rows(
            keys, num_frozen, self.frozen_keys, self.new_keys, in_place, device, keep_dtype=assign)
        self.frozen_values, self.new_values = self.split_rows(
            values.t(), num_frozen, self.frozen_values, self.new_values, in_place, device, keep_dtype=assign)
        self.atom_task = atom_task.clone()
        self.reset_stats()

    def replaces(self, assign: bool) -> bool:
        """Whether loading replaces the tensors (``assign``, or any of them on the meta device)."""
        return assign or any(t is not None and t.is_meta
                             for t in (self.frozen_keys, self.frozen_values, self.new_keys, self.new_values))

    def load_device(self, rows: torch.Tensor) -> torch.device:
        """Where loaded rows go: the bank's device, or the rows' own when the bank is on meta."""
        like = self.template
        return rows.device if like.is_meta else like.device

    def split_rows(self, rows: torch.Tensor, num_frozen: int, frozen: torch.Tensor,
                   new: Optional[nn.Parameter], in_place: bool, device: Optional[torch.device] = None,
                   keep_dtype: bool = False):
        """``(frozen rows, trainable parameter or None)`` holding ``rows`` ``[R, width]`` (copied).

        ``in_place``: copy into the existing ``frozen`` buffer and ``new`` parameter instead.
        ``device``: where new tensors go (default: the bank's). ``keep_dtype``: in the rows' own
        dtype (torch's ``assign``: the module takes the state's tensors), else in the bank's.
        """
        like = self.template
        rows = rows.to(device=like.device if device is None else device,
                       dtype=rows.dtype if keep_dtype else like.dtype)
        if in_place:
            with torch.no_grad():
                frozen.copy_(rows[:num_frozen])
                new.copy_(rows[num_frozen:])
            return frozen, new
        if rows.shape[0] == num_frozen:
            return rows.clone(memory_format=torch.contiguous_format), None
        whole = rows.clone(memory_format=torch.contiguous_format)  # one buffer: the trainable rows are views
        requires_grad = True if new is None else new.requires_grad
        return whole[:num_frozen], nn.Parameter(whole[num_frozen:], requires_grad=requires_grad)

    # ------------------------------------------------------------------ activation statistics
    @property
    def recording(self) -> bool:
        return self._recording

    def start_recording(self) -> None:
        """Accumulate per-atom mass (sum of mixture weights) and hit counts on every forward."""
        self._recording = True

    def stop_recording(self) -> None:
        self._recording = False

    def reset_stats(self) -> None:
        device = self.frozen_keys.device
        self.atom_mass = torch.zeros(self.num_atoms, device=device)
        self.atom_hits = torch.zeros(self.num_atoms, dtype=torch.long, device=device)

    @torch.no_grad()
    def record(self, idx: Optional[torch.Tensor], weights: torch.Tensor) -> None:
        """Add mixture weights to the statistics: ``weights`` ``[N, k]`` of the kept atoms ``idx``
        ``[N, k]``, or (``idx`` None) dense ``[N, num_atoms]`` weights, zero off the kept atoms."""
        if idx is None:
            weights = weights.detach().reshape(-1, self.num_atoms)
            self.atom_mass += weights.sum(0, dtype=self.atom_mass.dtype)
            self.atom_hits += (weights > 0).sum(0)
            return
        flat_idx, flat_w = idx.reshape(-1), weights.detach().reshape(-1)
        self.atom_mass.index_add_(0, flat_idx, flat_w.to(self.atom_mass.dtype))
        self.atom_hits.index_add_(0, flat_idx, (flat_w > 0).long())

    def prune(self, keep_mass: float = 0.99, newest_only: bool = True) -> torch.Tensor:
        """Drop atoms outside the smallest set that covers ``keep_mass`` of the recorded mass.

        Optional post-training pruning of the MoRAM paper (99% of the activation mass kept;
        about 30% storage saved). Candidates are the atoms of the latest task
        (``newest_only``, the paper's per-task pruning: older atoms were judged on their own
        task) or the whole bank. Kept atoms keep their order (:meth:`select_atoms`). The bank
        must be frozen.

        Returns the indices (in the bank before pruning) of the dropped atoms.
        """
        if not 0 < keep_mass <= 1:
            raise ValueError(f"keep_mass must be in (0, 1], got {keep_mass}")
        if self.num_trainable:
            raise RuntimeError(
                "prune() needs a frozen bank: call freeze() first (the trainable atoms are "
                "held by an optimizer)."
            )
        if self.num_atoms == 0:
            return torch.zeros(0, dtype=torch.long, device=self.frozen_keys.device)
        start = 0
        if newest_only:
            start = int(torch.searchsorted(self.atom_task, self.atom_task[-1]))
        mass = self.atom_mass[start:].double()
        total = float(mass.sum())
        if total <= 0:
            raise RuntimeError(
                "no activation mass recorded for the candidate atoms: call start_recording() "
                "before the forward passes whose usage should decide the pruning."
            )
        order = torch.argsort(mass, descending=True, stable=True)
        cumulative = torch.cumsum(mass[order], 0)
        # smallest n with cumulative[n-1] >= keep_mass * total
        needed = int(torch.searchsorted(cumulative, cumulative.new_tensor(keep_mass * total))) + 1
        keep = torch.ones(self.num_atoms, dtype=torch.bool, device=mass.device)
        keep[start:] = False
        keep[start + order[: min(needed, order.numel())]] = True
        dropped = torch.nonzero(~keep).flatten()
        if dropped.numel():
            mass_kept, hits_kept = self.atom_mass[keep], self.atom_hits[keep]
            self.select_atoms(keep)
            self.atom_mass, self.atom_hits = mass_kept, hits_kept
        return dropped


class MoRAMBank(AtomStore, LinearWrapper, GrowingAdapter):
    """A frozen ``nn.Linear`` (``self.base``) and a growing bank of rank-1 atoms (module docstring).

    Args:
        base: the pre-trained ``nn.Linear``; frozen and kept by composition.
        atoms_per_task: atoms appended by each :meth:`expand` (the paper's ``r``).
    """

    STATE_KEYS = ("atom_keys", "atom_values", "num_frozen", "atom_task")

    def __init__(self, base: nn.Linear, atoms_per_task: int) -> None:
        super().__init__(base)
        self.atoms_per_task = atoms_per_task
        self.init_atoms(self.template)

    # ------------------------------------------------------------------ state dict
    def saved_rows(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(atom_keys [R, in_features], atom_values [out_features, R])`` as the state dict holds them.

        Detached tensors that share the bank's storage, as ``nn.Module.state_dict()`` shares each
        parameter's: the one buffer per side while a task trains (:func:`share_storage`), the frozen
        buffers of a frozen bank. So a copy into them is a copy into the atoms: an EMA model updated
        through ``state_dict().values()`` (timm's ``ModelEmaV2``/``V3``) averages the trainable atoms
        too. Each tensor is all of its storage, so ``torch.save`` writes no row twice. Where the rows
        are not views of one buffer (a ``.data`` replaced on one side, a dtype per side), joined copies."""
        frozen_keys, frozen_values, new_keys, new_values = row_tensors(self)
        if new_keys is not None:
            keys, values = live_rows(frozen_keys, new_keys), live_rows(frozen_values, new_values)
            if keys is not None and values is not None:
                return keys.detach(), values.detach().t()
        return self.keys, self.values  # (a frozen bank's: its buffers themselves, :func:`joined`)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "atom_keys"], destination[prefix + "atom_values"] = self.saved_rows()
        destination[prefix + "num_frozen"] = torch.tensor(self.num_frozen)
        destination[prefix + "atom_task"] = self.atom_task.detach()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        found = {key: state_dict.get(prefix + key) for key in self.state_keys}
        missing = [prefix + key for key in self.state_keys if key != "atom_task" and found[key] is None]
        if missing:
            missing_keys.extend(missing)
        else:
            extra = {key: found[key] for key in self.state_keys if key not in MoRAMBank.STATE_KEYS}
            try:
                self.load_atoms(found["atom_keys"], found["atom_values"], int(found["num_frozen"]),
                                found["atom_task"], assign=bool(local_metadata.get("assign_to_params_buffers")),
                                **extra)
            except ValueError as err:
                error_msgs.append(f"While loading atoms of {prefix[:-1] or type(self).__name__}: {err}")
        if strict:
            unexpected_keys.extend(unknown_keys(state_dict, prefix, self.state_keys, self._modules))


class AtomBank(AtomStore, nn.Module):
    """A bank of atoms without a base: one of several a layer holds by name (module docstring).

    Args:
        in_features, out_features: the widths of the keys and the values.
        atoms_per_task: atoms appended by each :meth:`expand` (the paper's ``r``).
        like: a tensor on the device and of the dtype the bank is made in.

    Its state dict is the module's own: ``frozen_keys`` ``[F, in_features]``, ``frozen_values``
    ``[F, out_features]``, ``atom_task`` ``[R]``, and while a task trains ``new_keys`` /
    ``new_values`` (the parameters, under their names). It loads that, or the layer's keys of
    :class:`MoRAMBank` (``atom_keys``, ``atom_values`` ``[out_features, R]``, ``num_frozen``,
    ``atom_task``), resizing to fit. While a task trains, the frozen and the trainable rows of a
    side share one buffer, so each is saved as a copy of its own rows (safetensors refuses tensors
    that share storage, and ``torch.save`` writes a view's whole buffer): an EMA model updated
    through ``state_dict().values()`` misses the trainable atoms here; average ``parameters()``
    instead (``torch.optim.swa_utils.AveragedModel``).
    """

    #: the keys of :class:`MoRAMBank`'s state dict, which this bank also loads
    LAYER_KEYS = MoRAMBank.STATE_KEYS

    def __init__(self, in_features: int, out_features: int, atoms_per_task: int, like: torch.Tensor) -> None:
        super().__init__()
        self.in_features, self.out_features, self.atoms_per_task = int(in_features), int(out_features), int(atoms_per_task)
        self.init_atoms(like, persistent=True)

    @property
    def template(self) -> torch.Tensor:
        """An empty tensor on the bank's own device and of its dtype (the frozen values')."""
        rows = self.frozen_values
        return torch.empty(0, device=rows.device, dtype=rows.dtype)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the atoms are stored in."""
        return self.frozen_values.dtype

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if not keep_vars:  # the rows share one buffer per side: each saved on its own (safetensors refuses aliases)
            for name in ("frozen_keys", "frozen_values", "new_keys", "new_values"):
                rows = destination.get(prefix + name)
                if rows is not None and not rows.is_meta and not owns_storage(rows):
                    destination[prefix + name] = rows.clone()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        local = {key[len(prefix):]: value for key, value in state_dict.items() if key.startswith(prefix)}
        assign = bool(local_metadata.get("assign_to_params_buffers"))
        known = ("frozen_keys", "frozen_values", "new_keys", "new_values", "atom_task") + self.LAYER_KEYS
        if strict:
            unexpected_keys.extend(unknown_keys(state_dict, prefix, known, self._modules))
        try:
            if "atom_keys" in local or "atom_values" in local:  # the layer's keys (a 0.5.0 adapter)
                missing = [key for key in ("atom_keys", "atom_values", "num_frozen") if key not in local]
                if not missing:
                    self.load_atoms(local["atom_keys"], local["atom_values"], int(local["num_frozen"]),
                                    local.get("atom_task"), assign=assign)
            else:
                missing = self.missing_module_keys(local)
                if not missing:
                    self.check_module_rows(local)
                    new_keys, new_values = local.get("new_keys"), local.get("new_values")
                    keys = local["frozen_keys"] if new_keys is None else torch.cat([local["frozen_keys"], new_keys])
                    values = local["frozen_values"] if new_values is None else torch.cat([local["frozen_values"], new_values])
                    self.load_atoms(keys, values.t(), local["frozen_keys"].shape[0], local["atom_task"], assign=assign)
        except (ValueError, RuntimeError) as err:
            error_msgs.append(f"While loading the atom bank {prefix[:-1] or type(self).__name__}: {err}")
            return
        missing_keys.extend(prefix + key for key in missing)

    def check_module_rows(self, local) -> None:
        """A ValueError unless every row tensor of the module form is ``[rows, width]`` of this bank."""
        for key, width, name in (("frozen_keys", self.in_features, "in_features"),
                                 ("new_keys", self.in_features, "in_features"),
                                 ("frozen_values", self.out_features, "out_features"),
                                 ("new_values", self.out_features, "out_features")):
            rows = local.get(key)
            if rows is not None and (rows.dim() != 2 or rows.shape[1] != width):
                raise ValueError(f"{key} must be [rows, {name}={width}], got {tuple(rows.shape)}: a bank "
                                 "of another layer or model?")

    def missing_module_keys(self, local) -> list:
        """The module-form keys ``local`` lacks: nothing of the bank at all (then every key the bank
        holds now), or rows that ``atom_task`` counts but the state does not hold."""
        if not local:
            return list(self.state_dict())
        missing = [key for key in ("frozen_keys", "frozen_values", "atom_task") if key not in local]
        if missing:
            return missing
        trainable = local["atom_task"].shape[0] - local["frozen_keys"].shape[0]
        if trainable > 0 or "new_keys" in local or "new_values" in local:
            missing = [key for key in ("new_keys", "new_values") if key not in local]
        return missing

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"atoms={self.num_frozen}/{self.num_atoms} (frozen/total)")


def unknown_keys(state_dict, prefix: str, known, children) -> list:
    """The keys of ``state_dict`` under ``prefix`` that are neither ``known`` local keys nor under
    one of ``children`` (torch's ``unexpected_keys`` for a module that loads its own state)."""
    known, children = set(known), set(children)
    out = []
    for key in state_dict:
        if key.startswith(prefix):
            local = key[len(prefix):]
            if local not in known and local.split(".", 1)[0] not in children:
                out.append(key)
    return out


__all__ = ["AtomBank", "AtomStore", "BankRows", "MoRAMBank", "ROW_NAMES", "check_finite", "joined", "live_rows", "new_rows",
           "normal_tensors", "owns_storage", "registered", "row_tensors", "rows_stamp", "share_storage", "stamp_of", "storage_marks", "version_of",
           "with_keys_t"]
