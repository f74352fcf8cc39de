"""Tiny random-init language models and a word-level tokenizer, built offline.

For rehearsals (``reproduce --rehearse``) and demos: no download, no weights. The tokenizer is a
``tokenizers`` WordLevel vocabulary over the words of the given texts (split as its
``Whitespace`` pre-tokenizer splits them: runs of word characters, runs of punctuation), with
``<pad>`` 0, ``</s>`` 1 and ``<unk>`` 2, wrapped in ``PreTrainedTokenizerFast``; decoding joins
words with spaces. The models are the sizes of the reference's offline test models
(``language_models.md``: T5 d_model 32, 2 layers, 4 heads; LLaMA hidden 32, 2 layers, 4 heads,
2 key-value heads) with a vocabulary that fits the tokenizer.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch

#: the reference's offline T5 and LLaMA sizes (vocabulary set from the tokenizer)
TINY_T5 = dict(d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=4, relative_attention_num_buckets=8)
TINY_LLAMA = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=37)
#: the special tokens and their ids
SPECIAL = {"<pad>": 0, "</s>": 1, "<unk>": 2}


def words_of(texts: Iterable[str]):
    """The distinct pre-tokenized words of ``texts``, sorted (the vocabulary's order)."""
    from tokenizers import pre_tokenizers

    split = pre_tokenizers.Whitespace()
    return sorted({word for text in texts for word, _ in split.pre_tokenize_str(text)})


def vocabulary_tokenizer(vocabulary: Sequence[str]):
    """A word-level ``PreTrainedTokenizerFast`` whose ids are the positions in ``vocabulary``
    (which must hold ``<pad>``, ``</s>`` and ``<unk>``); decoding joins words with spaces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {}
    for word in vocabulary:
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece(prefix="##")  # joins words with single spaces
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>",
                                   pad_token="<pad>")


def word_tokenizer(texts: Iterable[str]):
    """A word-level ``PreTrainedTokenizerFast`` knowing every word of ``texts`` (after
    :data:`SPECIAL`)."""
    return vocabulary_tokenizer([*SPECIAL, *words_of(texts)])


def tiny_language_model(architecture: str, tokenizer, *, seed: int = 0):
    """A tiny random-init ``T5ForConditionalGeneration`` ("t5") or ``LlamaForCausalLM``
    ("llama") for ``tokenizer`` (a causal model's tokenizer is prepared in place: left padding),
    in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM, T5Config, T5ForConditionalGeneration

    from .load import prepare_tokenizer

    vocab = max(len(tokenizer), 8)
    torch.manual_seed(seed)
    if architecture == "t5":
        config = T5Config(**TINY_T5, vocab_size=vocab, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        return T5ForConditionalGeneration(config).eval()
    if architecture == "llama":
        prepare_tokenizer(tokenizer, seq2seq=False)
        config = LlamaConfig(**TINY_LLAMA, vocab_size=vocab, pad_token_id=0, eos_token_id=1, bos_token_id=1)
        return LlamaForCausalLM(config).eval()
    raise ValueError(f"no tiny model for architecture {architecture!r}; known: t5, llama")


__all__ = ["SPECIAL", "TINY_LLAMA", "TINY_T5", "tiny_language_model", "vocabulary_tokenizer", "word_tokenizer",
           "words_of"]
