"""The parameter columns of the CodeAlpaca table: what an adapter adds to a decoder, and what MoRAM
activates per token, from the model's configuration alone (no weights).

A target linear maps ``d_in`` to ``d_out`` (:func:`linear_shapes`, per block of a LLaMA-shaped
decoder: q ``h -> H d``, k and v ``h -> K d``, o ``H d -> h``, gate and up ``h -> i``, down
``i -> h``, with h the hidden size, H / K the query / key-value heads, d the head dimension, i the
MLP's width; times the number of blocks). Then, summed over the targets:

* LoRA of rank r: ``r (d_in + d_out)`` per target (A is ``r x d_in``, B is ``d_out x r``), every
  one of them used by every token: added = activated;
* MoRAM with ``n`` atoms per target (``atoms_per_task`` x tasks) and top-k ``k``: each atom is a
  key ``a_i`` (``d_in``) and a value ``b_i`` (``d_out``), so **added = n (d_in + d_out)**; a token
  reads every key to score the atoms but mixes the values of only its top-k atoms, and the
  paper counts the atoms a token uses: **activated = k (d_in + d_out)** per target (the keys of
  the other ``n - k`` atoms only route).
* LoRI (juzhengz/LoRI) counts what trains, as its paper and code do (``print_trainable_parameters``
  after freezing every ``lora_A``): the frozen random ``A`` is not counted, so LoRI-D is
  ``r d_out`` per target (``B``) and LoRI-S the entries its model-wide mask keeps,
  ``int((1 - sparsity) * r * sum d_out)`` (the code's ``k``; entries tied at the threshold
  aside); every one of them is used by every token: added = activated.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Tuple

#: the projections of a LLaMA-shaped block, by name
LLAMA_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def linear_shapes(config, targets: Sequence[str] = LLAMA_PROJECTIONS) -> List[Tuple[str, int, int]]:
    """``[(name, d_in, d_out)]`` of every target linear of a LLaMA-shaped decoder (every block).

    ``config``: a ``transformers`` configuration with ``hidden_size``, ``intermediate_size``,
    ``num_attention_heads``, ``num_hidden_layers`` (``num_key_value_heads`` and ``head_dim`` when
    the model has them). A target outside :data:`LLAMA_PROJECTIONS` is a ValueError.
    """
    unknown = [t for t in targets if t not in LLAMA_PROJECTIONS]
    if unknown:
        raise ValueError(f"parameter counts know the projections {', '.join(LLAMA_PROJECTIONS)} of LLaMA-shaped "
                         f"decoders, not {unknown}")
    missing = [k for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers")
               if not isinstance(getattr(config, k, None), int)]
    if missing:
        raise ValueError(f"a LLaMA-shaped configuration needs {', '.join(missing)} to count adapter parameters "
                         f"(got a {type(config).__name__})")
    h, i, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    d = getattr(config, "head_dim", None) or h // heads
    shapes = {"q_proj": (h, heads * d), "k_proj": (h, kv * d), "v_proj": (h, kv * d), "o_proj": (heads * d, h),
              "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}
    return [(f"layers.{layer}.{t}", *shapes[t]) for layer in range(config.num_hidden_layers) for t in targets]


def _width(shapes: Iterable[Tuple[str, int, int]]) -> int:
    return sum(d_in + d_out for _, d_in, d_out in shapes)


def lora_parameters(shapes, rank: int) -> Dict[str, int]:
    """``{"added", "activated"}`` of rank-``rank`` LoRA on ``shapes`` (module docstring)."""
    added = rank * _width(shapes)
    return {"added": added, "activated": added}


def moram_parameters(shapes, atoms: int, topk: int) -> Dict[str, int]:
    """``{"added", "activated"}`` of MoRAM with ``atoms`` atoms per target and top-``topk`` routing."""
    if topk > atoms:
        raise ValueError(f"top-k ({topk}) cannot exceed the atoms per layer ({atoms})")
    width = _width(shapes)
    return {"added": atoms * width, "activated": topk * width}


def lori_parameters(shapes, rank: int, sparsity: float = 0.0) -> Dict[str, int]:
    """``{"added", "activated"}`` of LoRI with rank ``rank`` on ``shapes``: the trained entries of
    ``B`` (module docstring); ``sparsity`` 0: LoRI-D, 0.9: LoRI-S's CodeAlpaca mask."""
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity!r} (LoRI-S: 0.9)")
    total = rank * sum(d_out for _, _, d_out in shapes)
    kept = total if sparsity == 0 else int((1 - sparsity) * total)
    return {"added": kept, "activated": kept}


__all__ = ["LLAMA_PROJECTIONS", "linear_shapes", "lori_parameters", "lora_parameters", "moram_parameters"]
