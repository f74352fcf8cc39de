"""A MoRAM peft config for ``tiny_layers.TwoLinears`` and the library's own layer to hold an adapter to."""

import copy


def config(**kwargs):
    """A ``MoRAMConfig`` on both of ``TwoLinears``' layers (four atoms a task, k 2), ``kwargs`` over it."""
    from moram_avalanche.text import MoRAMConfig

    options = dict(target_modules=["lin0", "lin1"], atoms_per_task=4, topk=2, temperature=0.5,
                   threshold=0.1, dropout=0.0, init_weights=False)
    return MoRAMConfig(**{**options, **kwargs})


def reference(layer, adapter):
    """The library's own MoRAMLinear over a copy of the base, holding ``adapter``'s atoms."""
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    bank = layer.moram_bank[adapter]
    ref = MoRAMLinear(copy.deepcopy(layer.base_layer), **bank.options)
    ref.load_atoms(bank.keys, bank.values, bank.num_frozen, bank.atom_task)
    return ref.eval()


__all__ = ["config", "reference"]
