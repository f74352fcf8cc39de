"""A prefix of prompt vectors on LanguageModel: loss, answer logits, generation and sampling equal
hand-built ``inputs_embeds`` calls of the Hugging Face model, one unpadded row at a time."""

import pytest
import torch

from tiny_stream import FAMILIES, stream_tokenizer

PROMPTS = ["What is the colour of the following paragraph ? Answer:", "lorem ipsum Answer:",
           "a much longer prompt than the others so that padding matters here Answer:"]
ANSWERS = ["red", "bad and good", "a"]
P = 3


def model(family, prefix=True):
    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.text.soft_prompt import SoftPrompt

    tokenizer = stream_tokenizer()
    lm = LanguageModel(FAMILIES[family](tokenizer), tokenizer, compile_generation=False)
    with torch.no_grad():  # a random tiny model that speaks: never pad or EOS first, sharp logits
        head = lm.model.get_output_embeddings().weight
        head.mul_(20.0)
        head[[lm.pad_id, lm.eos_id]] = 0.0
        head[len(tokenizer):] = 0.0  # ids the tokenizer cannot decode
    if prefix:
        torch.manual_seed(7)
        lm.prefix = SoftPrompt(P, lm.config.hidden_size if not lm.seq2seq else lm.config.d_model, scale=0.5)
    return lm


def row_inputs(lm, prompt, answer=None):
    """One row by hand: the prefix's vectors, then the prompt's embeddings (and the answer's)."""
    source = lm._prompt_ids([prompt], None, None if lm.seq2seq or answer is None
                            else [lm.max_target_length - len(lm._answer_ids([answer])[0])])[0]
    ids = source + ([] if answer is None or lm.seq2seq else lm._answer_ids([answer])[0])
    embeds = lm.model.get_input_embeddings()(torch.tensor([ids]))
    return torch.cat([lm.prefix.weight.unsqueeze(0), embeds], 1), len(source)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_loss_equals_hand_built_inputs_embeds_rows(family):
    lm = model(family)
    total, count = 0.0, 0
    for prompt, answer in zip(PROMPTS, ANSWERS):
        target = lm._answer_ids([answer])[0]
        embeds, source = row_inputs(lm, prompt, answer)
        if lm.seq2seq:
            loss = lm.model(inputs_embeds=embeds, labels=torch.tensor([target])).loss
        else:  # the prompt vectors and the prompt are not scored; position i predicts token i + 1
            labels = torch.tensor([[-100] * (P + source) + target])
            loss = lm.model(inputs_embeds=embeds, labels=labels).loss
        total += loss.item() * len(target)
        count += len(target)
    assert lm.loss(PROMPTS, ANSWERS).item() == pytest.approx(total / count, rel=1e-5)
    logits = lm.answer_logits(PROMPTS, ANSWERS)
    targets = torch.tensor([token for row in lm._answer_ids(ANSWERS) for token in row])
    assert torch.nn.functional.cross_entropy(logits, targets).item() == pytest.approx(total / count, rel=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_prefix_changes_the_loss_and_gets_its_gradient(family):
    """A prefix that reached the model: another prefix gives another loss, and only the prefix
    (not the frozen model) receives a gradient."""
    lm = model(family)
    for parameter in lm.model.parameters():
        parameter.requires_grad_(False)
    loss = lm.loss(PROMPTS, ANSWERS)
    loss.backward()
    assert lm.prefix.weight.grad is not None and lm.prefix.weight.grad.abs().sum() > 0
    with torch.no_grad():
        lm.prefix.weight.add_(1.0)
    assert abs(lm.loss(PROMPTS, ANSWERS).item() - loss.item()) > 1e-5  # a tiny random model barely reads its input


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generate_equals_hand_built_inputs_embeds_rows(family):
    """Batched (padded) generation with the prefix equals generating each row alone from
    ``[prefix; prompt]`` embeddings: the padding is placed and masked right, only new tokens kept."""
    lm = model(family)
    together = lm.generate(PROMPTS, max_new_tokens=5)
    for prompt, answer in zip(PROMPTS, together):
        embeds, _ = row_inputs(lm, prompt)
        out = lm.model.generate(inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2], dtype=torch.long),
                                max_new_tokens=5, do_sample=False, num_beams=1, pad_token_id=lm.pad_id,
                                eos_token_id=lm.eos_id)[0].tolist()
        new = out[1:] if lm.seq2seq else out  # transformers returns only new tokens for inputs_embeds
        if lm.eos_id in new:
            new = new[: new.index(lm.eos_id)]
        assert answer and answer == lm.tokenizer.decode([t for t in new if t != lm.pad_id], skip_special_tokens=True).strip()
    assert together != model(family, prefix=False).generate(PROMPTS, max_new_tokens=5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sampling_reads_the_prefix(family):
    """Sampling with the same seed from a batch equals sampling each prompt alone (the padding is
    right), and returns n continuations per prompt."""
    lm = model(family)
    torch.manual_seed(3)
    one = lm.sample(PROMPTS[:1], 2, max_new_tokens=4)
    torch.manual_seed(3)
    assert lm.sample(PROMPTS[:1], 2, max_new_tokens=4) == one and len(one[0]) == 2
    many = lm.sample(PROMPTS, 2, max_new_tokens=4)
    assert len(many) == len(PROMPTS) and all(len(row) == 2 for row in many)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_prefix_is_the_plain_path(family):
    """prefix None: the model is called with input_ids (never inputs_embeds), as before."""
    lm = model(family, prefix=False)
    calls = []
    handle = lm.model.register_forward_pre_hook(lambda m, a, k: calls.append(sorted(k)), with_kwargs=True)
    lm.loss(PROMPTS, ANSWERS)
    lm.generate(PROMPTS[:1], max_new_tokens=2)
    handle.remove()
    assert calls and all("inputs_embeds" not in kw for kw in calls) and "input_ids" in calls[0]
    inputs, _ = lm._teacher_forced(PROMPTS, ANSWERS)
    assert sorted(inputs) == ["attention_mask", "input_ids"]


def test_pack_moves_padding_and_keeps_order():
    """Hand example: padding moved to one side, the other positions in their order, labels follow."""
    from moram_avalanche.models.language_model import _pack

    mask = torch.tensor([[1, 1, 0, 1, 0]])
    embeds = torch.arange(5.).view(1, 5, 1)
    labels = torch.tensor([[10, 11, 12, 13, 14]])
    e, m, lab = _pack(embeds, mask, labels, padding_first=False)
    assert e.flatten().tolist() == [0, 1, 3, 2, 4] and m.tolist() == [[1, 1, 1, 0, 0]]
    assert lab.tolist() == [[10, 11, 13, 12, 14]]
    e, m = _pack(embeds, mask, padding_first=True)
    assert e.flatten().tolist() == [2, 4, 0, 1, 3] and m.tolist() == [[0, 0, 1, 1, 1]]


def test_soft_prompt_and_prepend_refuse_bad_shapes():
    from moram_avalanche.text.soft_prompt import SoftPrompt, prepend

    with pytest.raises(ValueError, match="prompt length must be a positive int"):
        SoftPrompt(0, 4)
    with pytest.raises(ValueError, match=r"init must be \[length, dim\]"):
        SoftPrompt(2, 4, init=torch.zeros(3, 4))
    with pytest.raises(ValueError, match="hidden size"):
        prepend(torch.zeros(1, 2, 3), torch.zeros(1, 4, 5), torch.ones(1, 4))
    embeds, mask = SoftPrompt(2, 3, init=torch.ones(2, 3))(torch.zeros(2, 4, 3, dtype=torch.float64),
                                                           torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]]))
    assert embeds.dtype == torch.float64 and embeds[:, :2].eq(1).all() and embeds[:, 2:].eq(0).all()
    assert mask.tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]
