"""The language-model family of the app: its record (:mod:`.family`), its loaders from the command
line (:mod:`.loaders`), its offline demo on a tiny T5 (:mod:`.demo`), its streams', tables' and
presets' settings (:mod:`.recipes`) and the paper's language-model tables with their protocols
(:mod:`.reproduce`). Read by the app only through the family registry
(:mod:`moram_avalanche.experiments.families`); nothing here imports the CLIP wing."""
