"""The language-model wing of the strategies: :class:`~.loop.TextStrategy` (a language model's
token loss and generation over the shared :class:`~moram_avalanche.strategies.loop.ContinualLoop`)
and one module per method, registered for the ``"text"`` family
(:func:`~moram_avalanche.strategies.registry.text_strategies`): MoRAM and its variants
(:mod:`.moram`), SeqFT (:mod:`.finetune`), MTL (:mod:`.mtl`), SeqLoRA (:mod:`.seq_lora`), IncLoRA
(:mod:`.inc_lora`), O-LoRA (:mod:`.olora`), HiDeLoRA (:mod:`.hidelora`), OGD (:mod:`.ogd`),
TreeLoRA (:mod:`.treelora`), InfLoRA (:mod:`.inflora`), LFPT5 (:mod:`.lfpt5`), L2P (:mod:`.l2p`),
DualPrompt (:mod:`.dualprompt`), SAPT (:mod:`.sapt`), LoRI (:mod:`.lori`), ICL (:mod:`.icl`),
Avalanche's own strategies on the text loop (:mod:`.builtins`); what the adapter rows share
(targets: :mod:`.adapters`), what the prompt rows share (:mod:`.prompt`), and how a strategy's
``check_values`` reads its settings, each a frozen checked dataclass (:mod:`.settings`). Its own
plugins: :mod:`.plugins`. Nothing here imports the CLIP wing."""
