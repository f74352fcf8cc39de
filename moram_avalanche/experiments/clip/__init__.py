"""The CLIP family of the app: its record (:mod:`.family`), its loaders from the command line
(:mod:`.loaders`), its offline demo on a tiny CLIP (:mod:`.demo`), its recipes per strategy
(:mod:`.recipes`) and the paper's CLIP tables with their protocols and plan (:mod:`.paper_tables`,
:mod:`.reproduce`). Read by the app only through the family registry
(:mod:`moram_avalanche.experiments.families`); nothing here imports the text wing."""
