"""The ``--tiny`` stand-in for a Hub model in the language-model examples: a tiny random T5 and a
word-level tokenizer over the tasks' words, saved as a model folder (offline, in a second).

Not an example itself: ``peft_trainer_two_tasks.py`` and ``language_model_moram.py`` call
:func:`save_tiny_t5` under ``--tiny`` and then load the folder as they load a Hub name
(``load_language_model(folder)``), so the rest of each script is what runs with real weights.
The model and tokenizer are the package's (:mod:`moram_avalanche.text.tiny`: the sizes of the
offline test models, T5 of width 32 with 2 layers).
"""

__all__ = ["save_tiny_t5"]


def save_tiny_t5(folder, tasks) -> str:
    """Save a tiny random T5 and a tokenizer knowing every word of ``tasks``
    (``TextStreamTask``s) into ``folder``; returns its path."""
    from moram_avalanche.text.tiny import tiny_language_model, word_tokenizer

    tokenizer = word_tokenizer(text for task in tasks for pair in task.train + task.test for text in pair)
    tiny_language_model("t5", tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
