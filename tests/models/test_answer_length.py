"""How long a generated answer may be and how it comes back (:class:`PromptCut`'s ``max_length`` and ``strip``),
and sampling stopped at a stop sequence: bigcode-evaluation-harness's HumanEval generation by hand.

The harness passes ``max_length=512`` to ``generate`` (main.py ``--max_length_generation``, "prompt+generation"):
a prompt of p tokens leaves ``512 - p`` for its completion. Its ``EndOfFunctionCriteria`` stops a row once the
text of its new tokens holds a stop sequence; the kept completion (cut at the first one) is the same.
"""

import torch

from moram_avalanche.benchmarks.text.humaneval import completion_of
from moram_avalanche.models.language_model import LanguageModel, PromptCut
from tiny_stream import FAMILIES, stream_tokenizer

PROMPTS = ["red green blue small", "blue"]  # 4 tokens and 1 token (the word-level tokenizer adds none)


class GenerateSpy:
    """Records the new tokens of every ``generate`` call (after a causal model's prompt, a seq2seq model's start)."""

    def __init__(self, lm):
        self.rows, self.steps, inner = [], [], lm.model.generate

        def spy(**options):
            out = inner(**options)
            self.rows.append(lm._new_tokens(out, options).tolist())
            self.steps.append(options["max_new_tokens"])
            return out

        lm.model.generate = spy


def causal():
    tokenizer = stream_tokenizer()
    lm = LanguageModel(FAMILIES["llama"](tokenizer, seed=0), tokenizer, compile_generation=False)
    assert [len(tokenizer(p)["input_ids"]) for p in PROMPTS] == [4, 1]
    return lm


def decoded(lm, row):
    return lm.tokenizer.decode([t for t in row if t != lm.pad_id], skip_special_tokens=True)


def test_max_length_bounds_each_prompt_and_its_answer_together():
    lm = causal()
    spy = GenerateSpy(lm)
    unbounded = lm.generate(PROMPTS, 8)
    rows = spy.rows[0]
    assert lm.eos_id not in rows[0][:3] and lm.eos_id not in rows[1][:6]
    assert unbounded == [decoded(lm, row).strip() for row in rows]
    # max_length 7: 7 - 4 = 3 tokens for the first prompt, 7 - 1 = 6 for the second, within max_new_tokens 8
    bounded = lm.generate(PROMPTS, 8, cuts=[PromptCut(max_length=7)] * 2)
    assert bounded == [decoded(lm, rows[0][:3]).strip(), decoded(lm, rows[1][:6]).strip()]
    assert spy.steps[1] == 6  # no step beyond the longest budget
    # max_length 4: nothing left after the first prompt (the harness returns the prompt alone), 3 for the second;
    # max_new_tokens 2 bounds the second below that
    assert lm.generate(PROMPTS, 8, cuts=[PromptCut(max_length=4)] * 2) == ["", decoded(lm, rows[1][:3]).strip()]
    assert lm.generate(PROMPTS, 2, cuts=[PromptCut(max_length=4)] * 2) == ["", decoded(lm, rows[1][:2]).strip()]
    # without max_length, max_new_tokens alone, as before
    assert lm.generate(PROMPTS, 8, cuts=[PromptCut()] * 2) == unbounded


def test_sampling_keeps_the_same_bound():
    lm = causal()
    greedy = lm.generate(PROMPTS, 8, cuts=[PromptCut(max_length=7)] * 2)
    torch.manual_seed(0)
    sampled = lm.sample(PROMPTS, 2, 8, top_k=1, cuts=[PromptCut(max_length=7)] * 2)  # top-k 1: the greedy token
    assert [[text.strip() for text in texts] for texts in sampled] == [[answer] * 2 for answer in greedy]


def test_an_answer_comes_back_stripped_or_as_decoded():
    lm = causal()
    decode = lm.tokenizer.decode
    lm.tokenizer.decode = lambda ids, **options: "\n    " + decode(ids, **options) + " "  # a code completion's edges
    stripped = lm.generate(PROMPTS[1:], 3)
    raw = lm.generate(PROMPTS[1:], 3, cuts=[PromptCut(strip=False)])
    assert raw == ["\n    " + stripped[0] + " "]


def test_sampling_stops_at_a_stop_sequence_and_keeps_what_the_cut_keeps():
    lm = causal()
    spy = GenerateSpy(lm)
    torch.manual_seed(0)
    whole = lm.sample(PROMPTS[1:], 2, 8, top_k=1)[0]
    row = spy.rows[0][0]
    stop = decoded(lm, row[2:3])  # the third token's word
    assert stop and stop not in decoded(lm, row[:2])
    torch.manual_seed(0)
    stopped = lm.sample(PROMPTS[1:], 2, 8, top_k=1, stop_sequences=(stop,))[0]
    assert stopped == [decoded(lm, row[:3])] * 2  # the step that wrote the stop was the last
    assert spy.rows[1][0][3:] in ([], [lm.pad_id] * len(spy.rows[1][0][3:]))
    assert [completion_of(text, (stop,)) for text in stopped] == [completion_of(text, (stop,)) for text in whole]


def test_a_seq2seq_models_max_length_counts_its_answer_alone():
    tokenizer = stream_tokenizer()
    lm = LanguageModel(FAMILIES["t5"](tokenizer, seed=0), tokenizer)
    spy = GenerateSpy(lm)
    lm.generate(PROMPTS, 5)
    rows = spy.rows[0]
    assert all(lm.eos_id not in row[:2] for row in rows)
    # transformers' max_length counts a seq2seq model's decoder tokens: 2 for each answer, whatever its prompt
    bounded = lm.generate(PROMPTS, 5, cuts=[PromptCut(max_length=2)] * 2)
    assert bounded == [decoded(lm, row[:2]).strip() for row in rows]


def test_top_k_zero_reaches_generate(monkeypatch):
    lm = causal()
    seen = {}
    inner = lm.model.generate

    def spy(**options):
        seen.update(options)
        return inner(**options)

    monkeypatch.setattr(lm.model, "generate", spy)
    lm.sample(PROMPTS[1:], 1, 2, temperature=0.2, top_p=0.95, top_k=0)
    assert (seen["top_k"], seen["temperature"], seen["top_p"]) == (0, 0.2, 0.95)
