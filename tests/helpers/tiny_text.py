"""Tiny random-init language models and a word-level tokenizer, built offline (no downloads).

Field names checked against transformers 5.24 (reference ``language_models.md``, offline test
models). Imported inside tests only, so collecting the suite does not import transformers.
"""

import torch

T5_KWARGS = dict(vocab_size=99, d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=4,
                 relative_attention_num_buckets=8, decoder_start_token_id=0, pad_token_id=0,
                 eos_token_id=1)
LLAMA_KWARGS = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, intermediate_size=37)


def tiny_t5(seed=0):
    """A 2-layer T5ForConditionalGeneration in eval mode (q, k, v, o; cross-attention EncDecAttention)."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    return T5ForConditionalGeneration(T5Config(**T5_KWARGS)).eval()


def tiny_llama(seed=0):
    """A 2-layer LlamaForCausalLM in eval mode (q_proj, k_proj, v_proj, o_proj)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**LLAMA_KWARGS)).eval()


WORDS = ("what is the topic of following paragraph choose one from option answer sports business "
         "world science good bad a b c").split()


def word_tokenizer(words=WORDS, eos=True):
    """A WordLevel ``tokenizers`` vocabulary wrapped in ``PreTrainedTokenizerFast``.

    ids: 0 <pad>, 1 </s>, 2 <unk>, then ``words``. ``eos=False`` leaves the EOS token out (a
    causal tokenizer without pad and EOS, to test the error).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in words:
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    special = {"unk_token": "<unk>"}
    if eos:
        special["eos_token"] = "</s>"
    return PreTrainedTokenizerFast(tokenizer_object=backend, **special)


def batch(seed=0, rows=2, length=7, answer=3):
    """Random input ids and labels for the tiny models (ids 3..98)."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(3, 99, (rows, length), generator=gen),
            torch.randint(3, 99, (rows, answer), generator=gen))
