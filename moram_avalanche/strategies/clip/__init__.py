"""The CLIP wing of the strategies: :class:`~.loop.CLIPStrategy` (CLIP's scoring, loss,
evaluation and budget over the shared :class:`~moram_avalanche.strategies.loop.ContinualLoop`) and
one thin subclass per strategy -- MoRAM and its routing ablations (:mod:`.moram`), ZeroShot,
FineTune, FineTuneAlone, WiSE-FT, LwF and LwF-VR, ZSCL, iCaRL, MoE-Adapters, InfLoRA, SeqLoRA and
MoE-LoRA, RAIL, CoDyRA -- and Avalanche's own strategies on CLIP (:mod:`.builtins`). Its own
plugins: :mod:`.plugins`. Nothing here imports the text wing."""
