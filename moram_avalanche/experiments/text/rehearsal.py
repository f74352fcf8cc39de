"""What a rehearsal of a language-model table caps (``reproduce --rehearse``): the whole plan on the
real data, capped, with a tiny random-init model of the table's architecture
(:mod:`moram_avalanche.text.tiny`), so a missing file or a crash shows in minutes, offline,
before a GPU-day. The steps per task are every family's
(:data:`~moram_avalanche.experiments.paper.settings.REHEARSAL_ITERATIONS`)."""

from __future__ import annotations

#: examples per task (training, test)
REHEARSAL_TRAIN = 8
REHEARSAL_TEST = 4
#: generated tokens per answer (the longest label word of the 15 tasks is two words)
REHEARSAL_NEW_TOKENS = 4

__all__ = ["REHEARSAL_NEW_TOKENS", "REHEARSAL_TEST", "REHEARSAL_TRAIN"]
