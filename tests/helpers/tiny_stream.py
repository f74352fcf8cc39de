"""Tiny language models sized to the synthetic text stream's words, built offline (no downloads).

The word-level tokenizer of :mod:`tests.tiny_text` built over every word of the synthetic
stream's tasks, with ``<pad>`` registered as the pad token, and the tiny T5 / LLaMA of the same
module with a vocabulary that fits it.
"""

import torch

from tiny_text import LLAMA_KWARGS, T5_KWARGS

TASKS = ("colour", "mood", "size")


def stream_words(order=TASKS, seed=0):
    from moram_avalanche.benchmarks.text.synthetic import synthetic_text_tasks

    words = []
    for task in synthetic_text_tasks(order, seed=seed):
        for prompt, answer in task.train + task.test:
            words += prompt.replace(",", " , ").replace("?", " ? ").replace(".", " . ").replace(":", " : ").split()
            words.append(answer)
    return sorted(set(words))


def stream_tokenizer(order=TASKS, seed=0):
    from moram_avalanche.text.tiny import SPECIAL, vocabulary_tokenizer

    return vocabulary_tokenizer([*SPECIAL, *stream_words(order, seed)])


def vocab_size(tokenizer):
    return max(99, len(tokenizer))


def stream_t5(tokenizer, seed=0):
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    return T5ForConditionalGeneration(T5Config(**{**T5_KWARGS, "vocab_size": vocab_size(tokenizer)})).eval()


def stream_llama(tokenizer, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    from moram_avalanche.text.load import prepare_tokenizer

    prepare_tokenizer(tokenizer, seq2seq=False)
    torch.manual_seed(seed)
    config = LlamaConfig(**{**LLAMA_KWARGS, "vocab_size": vocab_size(tokenizer)}, pad_token_id=0,
                         eos_token_id=1, bos_token_id=1)
    return LlamaForCausalLM(config).eval()


FAMILIES = {"t5": stream_t5, "llama": stream_llama}
