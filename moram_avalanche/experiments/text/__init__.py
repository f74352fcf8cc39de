"""The language-model family of the app: its record (:mod:`.family`), its loaders from the command
line (:mod:`.loaders`), its offline demo on a tiny T5 (:mod:`.demo`), its streams', tables' and
presets' settings (:mod:`.recipes`) and the paper's language-model tables as data for the one pipeline
of :mod:`..paper`: the tables (:mod:`.paper_tables`, :mod:`.table_spec`), their streams
(:mod:`.streams`: :mod:`.lm_cl_stream`, :mod:`.trace_stream`, :mod:`.superni_stream`,
:mod:`.codealpaca_stream` on :mod:`.stream_protocol`), a rehearsal's caps (:mod:`.rehearsal`) and what
``reproduce``'s settings mean for a language-model run (:mod:`.reproduce`). Read by the app only through the family registry
(:mod:`moram_avalanche.experiments.families`); nothing here imports the CLIP wing."""
