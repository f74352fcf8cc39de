"""The language-model strategies' own plugins: Avalanche's plugins on text batches, gradient
accumulation, the per-task cosine, and each text baseline's procedure (O-LoRA, OGD, TreeLoRA,
HiDeLoRA, InfLoRA, LFPT5, L2P, DualPrompt, SAPT; L2P's and DualPrompt's on one base,
:mod:`.prompt_term`), HumanEval sampling and MMLU evaluation."""
