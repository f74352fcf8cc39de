"""LanguageModel: teacher-forced loss over the answer tokens only, greedy generation, errors."""

import pytest
import torch

from tiny_stream import FAMILIES, stream_tokenizer

PROMPTS = ["What is the colour of the following paragraph ? Answer:", "lorem ipsum dolor sit amet Answer:"]
ANSWERS = ["red", "bad"]


def model(family):
    from moram_avalanche.models.language_model import LanguageModel

    tokenizer = stream_tokenizer()
    return LanguageModel(FAMILIES[family](tokenizer), tokenizer)


def test_causal_loss_scores_only_the_answer_and_its_eos():
    lm = model("llama")
    tok = lm.tokenizer
    losses, counts = [], []
    for prompt, answer in zip(PROMPTS, ANSWERS):
        source = tok(prompt)["input_ids"]
        target = tok(answer, add_special_tokens=False)["input_ids"] + [lm.eos_id]
        logits = lm.model(input_ids=torch.tensor([source + target])).logits[0]
        # position i predicts token i + 1: the answer's tokens are predicted from len(source) - 1 on
        predicted = logits[len(source) - 1: len(source) + len(target) - 1]
        losses.append(torch.nn.functional.cross_entropy(predicted, torch.tensor(target), reduction="sum"))
        counts.append(len(target))
    expected = sum(losses) / sum(counts)
    assert lm.loss(PROMPTS, ANSWERS).item() == pytest.approx(expected.item(), rel=1e-5)


def test_causal_loss_projects_only_answer_positions_and_equals_the_models_own_loss():
    """The LM head sees only the positions that predict answer tokens (logits_to_keep), and the
    loss and its gradients equal transformers' own labels= loss over the full logits; a forward
    without logits_to_keep takes the full-logits path to the same value."""
    from moram_avalanche.models.language_model import _keeps_logits, causal_answer_logits

    lm = model("llama")
    for p in lm.model.parameters():
        p.requires_grad_(True)
    prompts, answers = PROMPTS + ["a"], ANSWERS + ["a longer answer than the others"]
    inputs, labels = lm._teacher_forced(prompts, answers)
    rows = []
    handle = lm.model.lm_head.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[:-1]))
    ours = lm.loss(prompts, answers)
    handle.remove()
    answer_tokens = sum(len(row) for row in lm._answer_ids(answers))
    if _keeps_logits(lm.model) == "mask":  # an older transformers keeps a tail (the next test)
        assert rows == [torch.Size([answer_tokens])] and answer_tokens < labels.numel()
    ours.backward()
    ours_grads = [p.grad.clone() for p in lm.model.parameters()]
    lm.model.zero_grad()
    theirs = lm.model(**inputs, labels=labels).loss
    theirs.backward()
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    for mine, reference in zip(ours_grads, (p.grad for p in lm.model.parameters())):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-7)

    class NoKeep(torch.nn.Module):  # a causal model whose forward takes no logits_to_keep
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    logits, targets = causal_answer_logits(NoKeep(lm.model), inputs, labels)
    assert logits.shape == (answer_tokens, lm.config.vocab_size)
    assert torch.nn.functional.cross_entropy(logits, targets).item() == pytest.approx(theirs.item(), rel=1e-6)


def test_an_older_transformers_whose_logits_to_keep_takes_only_an_int_keeps_the_tail():
    """transformers before ``slice_logits_to_keep`` (e.g. 5.17, a GPU image's) reads
    ``logits_to_keep`` as "the last k positions" only: the loss asks for the tail from the first
    position that predicts an answer token and picks the rows there -- the same value and
    gradients as the model's own labels= loss (a 2-D mask there fails: "too many indices")."""
    from moram_avalanche.models.language_model import _keeps_logits, causal_answer_logits

    lm = model("llama")
    assert _keeps_logits(lm.model) in ("mask", "last")  # "mask" from transformers 5.2x (the pinned 5.24)
    inner = lm.model
    asked = []

    class IntOnly(torch.nn.Module):  # LLaMA's forward as transformers 5.17 slices: hidden[:, -k:]
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, logits_to_keep=0):
            asked.append(logits_to_keep)
            if not isinstance(logits_to_keep, int):
                raise IndexError("too many indices for tensor of dimension 3")
            hidden = self.inner.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return type("Out", (), {"logits": self.inner.lm_head(hidden[:, -logits_to_keep:] if logits_to_keep
                                                                  else hidden)})()

    IntOnly.__module__ = "an_older_transformers_model"  # a module without slice_logits_to_keep
    for p in inner.parameters():
        p.requires_grad_(True)
    prompts, answers = PROMPTS, ["red", "a longer answer than the others"]  # long prompts: a tail to cut
    inputs, labels = lm._teacher_forced(prompts, answers)
    wrapped = IntOnly()
    assert _keeps_logits(wrapped) == "last"
    logits, targets = causal_answer_logits(wrapped, inputs, labels)
    first = int((labels[:, 1:] != -100).any(0).nonzero()[0])  # the first column that predicts
    assert asked == [labels.shape[1] - first] and 0 < asked[0] < labels.shape[1]
    ours = torch.nn.functional.cross_entropy(logits, targets)
    ours.backward()
    ours_grads = [p.grad.clone() for p in inner.parameters()]
    inner.zero_grad()
    theirs = inner(**inputs, labels=labels).loss
    theirs.backward()
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    for mine, reference in zip(ours_grads, (p.grad for p in inner.parameters())):
        torch.testing.assert_close(mine, reference, rtol=1e-5, atol=1e-7)


def test_seq2seq_loss_is_the_decoders_over_the_answer():
    lm = model("t5")
    tok = lm.tokenizer
    total, count = 0.0, 0
    for prompt, answer in zip(PROMPTS, ANSWERS):
        labels = tok(answer)["input_ids"] + [lm.eos_id]
        out = lm.model(input_ids=torch.tensor([tok(prompt)["input_ids"]]), labels=torch.tensor([labels]))
        total += out.loss.item() * len(labels)
        count += len(labels)
    assert lm.loss(PROMPTS, ANSWERS).item() == pytest.approx(total / count, rel=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_answer_logits_are_the_positions_the_loss_scores(family):
    """One row per answer token (its EOS included), in batch order: their cross-entropy is the loss."""
    lm = model(family)
    logits = lm.answer_logits(PROMPTS, ANSWERS)
    targets = torch.tensor([token for row in lm._answer_ids(ANSWERS) for token in row])
    assert logits.shape == (len(targets), lm.config.vocab_size)
    expected = lm.loss(PROMPTS, ANSWERS).item()
    assert torch.nn.functional.cross_entropy(logits, targets).item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_batched_generation_equals_one_prompt_at_a_time(family):
    lm = model(family)
    together = lm.generate(PROMPTS, max_new_tokens=4)
    alone = [lm.generate([prompt], max_new_tokens=4)[0] for prompt in PROMPTS]
    assert together == alone and all(isinstance(a, str) for a in together)
    assert lm.generate([], 3) == []


def test_training_makes_generation_answer():
    lm = model("t5")
    optimizer = torch.optim.AdamW(lm.parameters(), lr=1e-2)
    lm.train()
    for _ in range(40):
        optimizer.zero_grad()
        lm.loss(PROMPTS, ANSWERS).backward()
        optimizer.step()
    lm.eval()
    assert lm.generate(PROMPTS, 3) == ANSWERS


def test_errors():
    from moram_avalanche.models.language_model import LanguageModel

    lm = model("t5")
    with pytest.raises(ValueError, match="one answer per prompt"):
        lm.loss(PROMPTS, ANSWERS[:1])
    with pytest.raises(TypeError, match="expected strings"):
        lm.loss([1, 2], ANSWERS)
    with pytest.raises(TypeError, match="transformers model"):
        LanguageModel(torch.nn.Linear(2, 2), lm.tokenizer)
    with pytest.raises(ValueError, match="max_source_length"):
        LanguageModel(lm.model, lm.tokenizer, max_source_length=0)


def test_the_loop_scores_each_answer_with_its_tasks_metric():
    from moram_avalanche.benchmarks.text.metrics import rouge_l, sari
    from moram_avalanche.experiments.metrics import TopOneAccuracy
    from moram_avalanche.strategies.text.loop import sample_scores

    assert sample_scores(["Red.", "blue"], ["red", "green"], "exact_match").tolist() == [1.0, 0.0]
    # ROUGE-L by hand: LCS 3 of 3 predicted and 4 reference words: F1 = 2 * 1 * 3/4 / (1 + 3/4)
    assert sample_scores(["the cat sat"], ["the cat sat down"], "rouge_l").tolist() == pytest.approx([6 / 7])
    # the mean of the samples' scores is the metric over the batch (SARI against the prompts)
    sources = ["About 95 species are currently accepted.", "the cat sat on the mat"]
    predictions = ["About 95 you now get in.", "the cat sat"]
    references = [["About 95 species are currently known.", "About 95 species are now accepted.",
                   "95 species are now accepted."], ["a cat sat"]]
    scores = sample_scores(predictions, references, "sari", sources=sources)
    assert 100 * scores.mean().item() == pytest.approx(sari(predictions, references, sources=sources))
    assert 100 * scores[0].item() == pytest.approx(26.9536, abs=1e-4)  # the published reference value
    with pytest.raises(ValueError, match="sources"):
        sample_scores(predictions, references, "sari")
    # the accuracy matrix's counter sums fractions, and refuses a score outside [0, 1]
    counter = TopOneAccuracy()
    counter.update_scores(sample_scores(["the cat sat", "x"], ["the cat sat down", "x"], "rouge_l"))
    correct, total = counter.compute().tolist()
    assert total == 2 and 100 * correct / total == pytest.approx(rouge_l(["the cat sat", "x"],
                                                                         ["the cat sat down", "x"]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        counter.update_scores(torch.tensor([1.5]))
