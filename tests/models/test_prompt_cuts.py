"""How a long prompt is cut, and what reaches ``generate``: the MoRAM release's rules by hand.

A causal model keeps a prompt's end (the release's tokenizer truncates on the left) and, in
training, shares ``max_source_length + max_target_length`` with the answer; a task may keep
its prompt's head up to its own limit (TRACE's MeetingBank); a seq2seq model keeps what its
tokenizer keeps (T5: the head, O-LoRA's). The tokenizer here adds a BOS like LLaMA's, which must
survive the cut.
"""

import pytest
import torch

WORDS = [f"w{i}" for i in range(40)] + ["Summary", ":", "the", "answer", "is", "short"]


def bos_tokenizer():
    """A word-level tokenizer adding ``<s>`` before every text (LLaMA's habit); pads on the left."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "<s>": 3}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece(prefix="##")
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 3)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>",
                                        pad_token="<pad>", bos_token="<s>")
    tokenizer.padding_side = "left"
    return tokenizer


def causal(max_source_length=8, max_target_length=6):
    from transformers import LlamaConfig, LlamaForCausalLM

    from moram_avalanche.models.language_model import LanguageModel
    from tiny_text import LLAMA_KWARGS

    tokenizer = bos_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(**LLAMA_KWARGS, pad_token_id=0, eos_token_id=1, bos_token_id=3)
    return LanguageModel(LlamaForCausalLM(config).eval(), tokenizer, max_source_length=max_source_length,
                         max_target_length=max_target_length)


def ids(tokenizer, words):
    return [tokenizer.convert_tokens_to_ids(word) for word in words]


LONG = [f"w{i}" for i in range(30)] + ["Summary", ":"]  # the cue is the last two words
PROMPT = " ".join(LONG)


class GenerateSpy:
    """Records the keywords and input ids of ``model.generate`` and answers with one EOS."""

    def __init__(self, lm):
        self.calls = []
        original = lm.model.generate

        def spy(**kwargs):
            self.calls.append(kwargs)
            return original(**{**kwargs, "max_new_tokens": 1})

        lm.model.generate = spy


def test_a_causal_prompt_keeps_its_last_words_and_its_bos_when_answered():
    lm = causal(max_source_length=8)
    spy = GenerateSpy(lm)
    lm.generate([PROMPT], max_new_tokens=3)
    row = spy.calls[0]["input_ids"][0].tolist()
    # BOS, then the prompt's last 7 words: "w23" ... "w29", "Summary", ":"
    assert row == [3] + ids(lm.tokenizer, LONG[-7:])


def test_in_training_the_prompt_gets_what_the_answer_leaves():
    from moram_avalanche.models.language_model import IGNORE_INDEX

    lm = causal(max_source_length=8, max_target_length=6)
    answer = "the answer is short"  # 4 words + EOS: 5 of the 6 answer tokens
    inputs, labels = lm._teacher_forced([PROMPT], [answer])
    row = inputs["input_ids"][0].tolist()
    # prompt and answer cut together at 8 + 6 = 14 tokens, the whole answer kept: the prompt gets
    # 14 - 5 = 9 tokens, BOS and its last 8 words
    target = ids(lm.tokenizer, answer.split()) + [1]
    assert row == [3] + ids(lm.tokenizer, LONG[-8:]) + target
    assert labels[0].tolist() == [IGNORE_INDEX] * 9 + target


def test_a_task_may_keep_the_head_of_its_prompts_up_to_its_own_limit():
    from moram_avalanche.models.language_model import PromptCut

    lm = causal(max_source_length=8)
    spy = GenerateSpy(lm)
    # MeetingBank in the release: the transcript's beginning, up to --meetingbank_max_prompt_len tokens
    lm.generate([PROMPT, PROMPT], 3, cuts=[PromptCut(12, "head"), PromptCut()])
    rows = spy.calls[0]["input_ids"].tolist()
    assert rows[0] == [3] + ids(lm.tokenizer, LONG[:11])
    assert rows[1] == [0] * 4 + [3] + ids(lm.tokenizer, LONG[-7:])  # left-padded to the longest


def test_a_seq2seq_prompt_keeps_what_its_tokenizer_keeps():
    from moram_avalanche.models.language_model import LanguageModel
    from tiny_stream import FAMILIES, stream_tokenizer

    tokenizer = stream_tokenizer()
    lm = LanguageModel(FAMILIES["t5"](tokenizer), tokenizer, max_source_length=3)
    assert lm.keep == "head" and tokenizer.truncation_side == "right"  # O-LoRA's T5: the beginning
    words = "what is the colour".split()
    assert lm._prompt_ids([" ".join(words)], None) == [ids(tokenizer, words[:3])]


def test_a_stream_task_that_declares_no_cut_leaves_each_model_its_own_end():
    """A task of a stream (lm-cl's, TRACE's but MeetingBank) declares no cut: T5 keeps its prompt's
    head (O-LoRA's right truncation), a causal model its end; a declared end wins on either."""
    from moram_avalanche.benchmarks.text.stream import TextStreamTask
    from moram_avalanche.models.language_model import LanguageModel, prompt_cuts
    from tiny_stream import FAMILIES, stream_tokenizer

    tokenizer = stream_tokenizer()
    words = "what is the colour".split()
    prompt = " ".join(words)
    plain = TextStreamTask("plain", ((prompt, "red"),), ((prompt, "red"),))
    tail = TextStreamTask("tail", ((prompt, "red"),), ((prompt, "red"),), keep="tail")
    assert plain.keep is None and prompt_cuts([plain], [0]) is None
    t5 = LanguageModel(FAMILIES["t5"](tokenizer), tokenizer, max_source_length=3)
    assert t5._prompt_ids([prompt], prompt_cuts([plain], [0])) == [ids(tokenizer, words[:3])]
    assert t5._prompt_ids([prompt], prompt_cuts([tail], [0])) == [ids(tokenizer, words[-3:])]
    lm = causal(max_source_length=8)
    spy = GenerateSpy(lm)
    lm.generate([PROMPT], 3, cuts=prompt_cuts([TextStreamTask("p", ((PROMPT, "w1"),), ((PROMPT, "w1"),))], [0]))
    assert spy.calls[0]["input_ids"][0].tolist() == [3] + ids(lm.tokenizer, LONG[-7:])


def test_the_release_decoding_reaches_generate():
    from moram_avalanche.models.language_model import Decoding

    lm = causal()
    spy = GenerateSpy(lm)
    lm.generate(["w1 w2"], 3)
    lm.generate(["w1 w2"], 3, decoding=Decoding(repetition_penalty=1.2, no_repeat_ngram_size=3))
    plain, release = spy.calls
    # plain greedy says its neutral values by name: no model folder's generation_config.json sets them
    assert plain["repetition_penalty"] == 1.0 and plain["no_repeat_ngram_size"] == 0
    assert plain["do_sample"] is False and plain["num_beams"] == 1
    assert release["repetition_penalty"] == 1.2 and release["no_repeat_ngram_size"] == 3
    assert release["do_sample"] is False  # still greedy (infer_part.py: do_sample=False)
    with pytest.raises(ValueError, match="repetition_penalty must be a positive number"):
        Decoding(repetition_penalty=0)
    with pytest.raises(ValueError, match="no_repeat_ngram_size must be a non-negative int"):
        Decoding(no_repeat_ngram_size=-1)
