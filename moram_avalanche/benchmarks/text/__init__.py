"""The text streams of the language-model family, one experience per task with ``(prompt, answer,
task)`` items (:mod:`.stream`): the standard CL benchmark's orders 1-6 (:mod:`.tasks`), TRACE
(:mod:`.trace`), SAPT's SuperNI (:mod:`.superni`, its pseudo-samples :mod:`.superni_pseudo`),
CodeAlpaca tested on HumanEval (:mod:`.codealpaca`, :mod:`.humaneval`, run in :mod:`.code_sandbox`),
MMLU's columns (:mod:`.mmlu`), the offline synthetic stream (:mod:`.synthetic`), and their
metrics (:mod:`.metrics`; the release's answer reading: :mod:`.release_answers`). Nothing here
imports the images wing."""
