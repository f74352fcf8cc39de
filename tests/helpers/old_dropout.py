"""The language models' layer as 0.7.3 computed it: autograd through ``F.dropout`` (what the
tests of the dropout made again in the backward, ``layers/moram/dropped.py``, hold it to)."""

from moram_avalanche.layers.moram.layer import MoRAMLinear, MoRAMRouting
from moram_avalanche.text.layer import DropoutMoRAMLinear


def autograd_through_dropout(self, x, dropout):
    """What ``read_dropped`` replaces: autograd over the atoms read on ``dropout(x)``."""
    return self.read(dropout(x))


def forward_before(self, x):
    """``DropoutMoRAMLinear.forward`` as 0.7.3 wrote it, word for word: autograd through the dropout,
    the base called before the atoms are read (the reference the order of dL/dx's sum is held to)."""
    if not self.training or self.atom_dropout.p == 0 or self.num_atoms == 0:
        return MoRAMLinear.forward(self, x)
    self.check_input(x)
    dropped = self.atom_dropout(x)
    base_out = self.base(x)
    return base_out + self.read(dropped).to(base_out.dtype)


def the_old_way(patch):
    """Autograd through ``F.dropout`` everywhere: the peft layer's banks (``read_dropped``) and the
    text layer's forward as it was."""
    patch.setattr(MoRAMRouting, "read_dropped", autograd_through_dropout)
    patch.setattr(DropoutMoRAMLinear, "forward", forward_before)
