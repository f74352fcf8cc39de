"""The CLIP family of the app: its record (:mod:`.family`), its loaders from the command line
(:mod:`.loaders`), its offline demo on a tiny CLIP (:mod:`.demo`), its recipes per strategy
(:mod:`.recipes`) and the paper's CLIP tables as data for the one pipeline of :mod:`..paper`: the tables
(:mod:`.paper_tables`, :mod:`.table_spec`), their streams (:mod:`.protocols`) and what ``reproduce``'s
settings mean for a CLIP run (:mod:`.reproduce`). Read by the app only through the family registry
(:mod:`moram_avalanche.experiments.families`); nothing here imports the text wing."""
