"""WiSE-FT, LwF, LwF-VR and ZSCL: end to end on the synthetic stream, teachers, defaults, errors."""

import open_clip
import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.algorithms.schedules import ZSCL_MTIL_LR, DomainLR
from moram_avalanche.algorithms.virtual_vocab import virtual_vocabulary
from moram_avalanche.benchmarks.images.reference_sets import synthetic_reference
from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies import ZSCL, LwF, LwFVR, WiSEFT, get_strategy
from moram_avalanche.strategies.plugins.memory import PeakMemory, memory_footprint

BASELINES = ("wiseft", "lwf", "lwf-vr", "zscl")


def params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def tensor_references(count=6):
    images = torch.utils.data.TensorDataset(torch.randn(count, 3, 32, 32, generator=torch.Generator().manual_seed(3)))
    return {"reference_images": images, "reference_sentences": ["a cat.", "a red dog.", "two birds."]}


@pytest.mark.parametrize("name", BASELINES)
def test_two_experiences_of_the_synthetic_stream_end_to_end(name, tiny_clip, tokenizer):
    transform = open_clip.image_transform(32, is_train=False)
    benchmark = synthetic(("shapes", "colours"), train_size=12, test_size=12, train_transform=transform,
                          eval_transform=transform)
    before = params(tiny_clip)
    kwargs = {}
    if name == "zscl":
        images, sentences = synthetic_reference(transform, images=8, sentences=10)
        kwargs = {"reference_images": images, "reference_sentences": sentences, "average_every": 2}
    matrix, peak = AccuracyMatrix(), PeakMemory()
    strategy = get_strategy(name)(model=tiny_clip, tokenizer=tokenizer, iterations=3, warmup=1, lr=1e-4,
                                  train_mb_size=6, plugins=[peak], progress=False,
                                  evaluator=EvaluationPlugin(matrix, loggers=[]), **kwargs)
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    result = matrix.result()
    assert result.shape == (2, 2) and torch.isfinite(torch.as_tensor(result)).all()
    assert not same(params(tiny_clip), before)
    assert not tiny_clip.logit_scale.requires_grad
    assert tiny_clip.logit_scale.item() == before["logit_scale"].item()
    # memory: the proxy counts the model and what the strategy's plugins hold on top of it
    model_bytes = sum(p.numel() * p.element_size() for p in [*tiny_clip.parameters(), *tiny_clip.buffers()])
    extra = {k: v for k, v in peak.breakdown.items() if k not in ("model", "gradients", "optimizer")}
    copies = {"wiseft": 1, "lwf": 1, "lwf-vr": 1, "zscl": 3}[name]  # teacher / anchor / average
    assert sum(extra.values()) == pytest.approx(copies * model_bytes, rel=0.02)


class TeacherSpy(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.teacher_at_start, self.model_at_start, self.teacher_at_end, self.model_at_end = [], [], [], []

    def before_training_exp(self, strategy, **kwargs):
        self.teacher_at_start.append(params(strategy.distillation.teacher.model))
        self.model_at_start.append(params(strategy.model))

    def after_training_exp(self, strategy, **kwargs):
        self.teacher_at_end.append(params(strategy.distillation.teacher.model))
        self.model_at_end.append(params(strategy.model))


def run_two(strategy_class, model, tokenizer, make_stream, **kwargs):
    spy = TeacherSpy()
    strategy = strategy_class(model=model, tokenizer=tokenizer, iterations=2, warmup=0, lr=1e-3, train_mb_size=4,
                              plugins=[spy], evaluator=EvaluationPlugin(loggers=[]), progress=False, **kwargs)
    for experience in make_stream("all").train_stream[:2]:
        strategy.train(experience)
    return strategy, spy


def assert_frozen(teacher):
    assert not teacher.model.training
    assert all(not p.requires_grad and p.grad is None for p in teacher.model.parameters())


def test_the_zscl_teacher_is_zero_shot_clip_and_never_changes(tiny_clip, tokenizer, make_stream):
    zero_shot = params(tiny_clip)
    strategy, spy = run_two(ZSCL, tiny_clip, tokenizer, make_stream, **tensor_references())
    for snapshot in spy.teacher_at_start + spy.teacher_at_end:
        assert same(snapshot, zero_shot)
    assert not same(spy.model_at_start[1], zero_shot)  # while the student moved
    assert_frozen(strategy.distillation.teacher)
    assert strategy.distillation.last_loss is None  # released after the experience


def test_the_lwf_teacher_is_the_model_at_the_experience_start_and_stays_fixed(tiny_clip, tokenizer, make_stream):
    strategy, spy = run_two(LwF, tiny_clip, tokenizer, make_stream)
    for index in range(2):
        assert same(spy.teacher_at_start[index], spy.model_at_start[index])
        assert same(spy.teacher_at_end[index], spy.model_at_start[index])  # not the trained model
        assert not same(spy.model_at_end[index], spy.model_at_start[index])
    assert same(spy.teacher_at_start[1], spy.model_at_end[0])  # = the previous experience's model
    assert_frozen(strategy.distillation.teacher)


def test_lwf_distils_over_the_current_class_prompts_and_lwf_vr_over_its_sentences(tiny_clip, tokenizer,
                                                                                  make_stream):
    widths = []

    class Width(SupervisedPlugin):
        def before_backward(self, strategy, **kwargs):
            widths.append(strategy.distillation._text.shape[0])

    benchmark = make_stream("all")
    for cls, kwargs in ((LwF, {}), (LwFVR, {"sentences": 5})):
        strategy = cls(model=tiny_clip, tokenizer=tokenizer, iterations=1, warmup=0, train_mb_size=4, plugins=[Width()],
                       evaluator=EvaluationPlugin(loggers=[]), progress=False, **kwargs)
        strategy.train(benchmark.train_stream[1])  # domain "beta": 3 classes
    assert widths == [3, 5]


def test_lwf_distils_on_the_experience_images_with_the_eval_transform(tiny_clip, tokenizer):
    train_tf, eval_tf = (lambda image: torch.ones(3, 32, 32)), (lambda image: -torch.ones(3, 32, 32))
    benchmark = synthetic(("shapes",), train_size=12, test_size=6, train_transform=train_tf,
                          eval_transform=eval_tf)
    seen = {"distilled": [], "trained": []}

    class Batches(SupervisedPlugin):
        def before_backward(self, strategy, **kwargs):
            seen["trained"].append(strategy.mb_x.unique().tolist())

    strategy = LwF(model=tiny_clip, tokenizer=tokenizer, iterations=3, warmup=0, train_mb_size=4, distill_batch_size=5,
                   plugins=[Batches()], evaluator=EvaluationPlugin(loggers=[]), progress=False)
    teacher = strategy.distillation.teacher
    encode = teacher.encode_image

    def spy(images):
        seen["distilled"].append((len(images), images.unique().tolist()))
        return encode(images)

    teacher.encode_image = spy
    strategy.train(benchmark.train_stream[0])
    assert seen["trained"] == [[1.0]] * 3
    # 12 images in batches of 5, cycled: 5, 5, 2
    assert seen["distilled"] == [(5, [-1.0]), (5, [-1.0]), (2, [-1.0])]


def test_zscl_distils_on_the_reference_images_against_the_reference_sentences(tiny_clip, tokenizer,
                                                                             make_stream):
    images = torch.utils.data.TensorDataset(torch.full((7, 3, 32, 32), 7.0))
    strategy = ZSCL(model=tiny_clip, tokenizer=tokenizer, iterations=2, warmup=0, train_mb_size=4, progress=False,
                    evaluator=EvaluationPlugin(loggers=[]), reference_images=images,
                    reference_sentences=["a cat.", "a dog.", "a bird.", "a fish."])
    seen = []
    encode = strategy.distillation.teacher.encode_image
    strategy.distillation.teacher.encode_image = lambda x: seen.append(x.unique().tolist()) or encode(x)
    expected_text = strategy.distillation.teacher.encode_text(["a cat.", "a dog.", "a bird.", "a fish."], tokenizer)

    class Text(SupervisedPlugin):
        def before_backward(self, strategy, **kwargs):
            seen.append(torch.allclose(strategy.distillation._text, expected_text))

    strategy.plugins.insert(0, Text())
    strategy.train(make_stream("all").train_stream[0])
    assert seen == [True, [7.0], True, [7.0]]


def test_zscl_and_wiseft_defaults_follow_the_zscl_scripts(tiny_clip, tokenizer):
    strategy = ZSCL(model=tiny_clip, tokenizer=tokenizer, evaluator=EvaluationPlugin(loggers=[]),
                    **tensor_references())
    assert (strategy.label_smoothing, strategy.warmup, strategy.betas, strategy.weight_decay) == (0.2, 100, (0.9, 0.999), 0)
    assert strategy.train_mb_size == 64 and strategy.iterations == 500 and strategy.lr is ZSCL_MTIL_LR
    assert not strategy.text_to_image_loss
    d = strategy.distillation
    assert (d.temperature, d.image_weight, d.text_weight) == (2.0, 1.0, 1.0)
    assert strategy.l2_anchor.weight == 1.0 and strategy.weight_ensemble.every == 100
    assert strategy.l2_anchor.on == strategy.weight_ensemble.on == "cpu"
    wise = WiSEFT(model=tiny_clip, tokenizer=tokenizer, evaluator=EvaluationPlugin(loggers=[]))
    assert (wise.wise_merge.alpha, wise.wise_merge.anchor) == (0.8, "start")


def test_a_warmup_longer_than_the_budget_is_flagged(tiny_clip, tokenizer):
    with pytest.warns(UserWarning, match="warmup \\(100\\) >= iterations \\(50\\)"):
        WiSEFT(model=tiny_clip, tokenizer=tokenizer, iterations=50, evaluator=EvaluationPlugin(loggers=[]))


def test_zscl_mtil_learning_rates_by_domain():
    assert [ZSCL_MTIL_LR(d) for d in ("Aircraft", "fgvc-aircraft", "MNIST", "dtd", "cifar100")] == [
        5e-5, 5e-5, 5e-5, 1e-5, 1e-5]
    with pytest.raises(ValueError, match="positive"):
        DomainLR(0.0)


def test_a_domain_lr_sets_each_experience_optimizer(tiny_clip, tokenizer, make_stream):
    rates = []

    class Rate(SupervisedPlugin):
        def before_training_exp(self, strategy, **kwargs):
            rates.append(strategy.optimizer.param_groups[0]["initial_lr"])

    strategy = WiSEFT(model=tiny_clip, tokenizer=tokenizer, lr=DomainLR(1e-5, {"Beta": 7e-5}), iterations=1, warmup=0,
                      train_mb_size=4, plugins=[Rate()], evaluator=EvaluationPlugin(loggers=[]), progress=False)
    for experience in make_stream("all").train_stream[:2]:
        strategy.train(experience)
    assert rates == [1e-5, 7e-5]


def test_zscl_without_references_says_what_to_pass(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="ZSCL needs reference_images and reference_sentences: .*ImageFolder"):
        ZSCL(model=tiny_clip, tokenizer=tokenizer)
    refs = tensor_references()
    with pytest.raises(ValueError, match="ZSCL needs reference_sentences"):
        ZSCL(model=tiny_clip, tokenizer=tokenizer, reference_images=refs["reference_images"])
    with pytest.raises(ValueError, match="list of strings"):
        ZSCL(model=tiny_clip, tokenizer=tokenizer, reference_images=refs["reference_images"],
             reference_sentences="a cat.")
    with pytest.raises(ValueError, match="reference_sentences is empty"):
        ZSCL(model=tiny_clip, tokenizer=tokenizer, reference_images=refs["reference_images"],
             reference_sentences=[])
    pil, _ = synthetic_reference(lambda image: image, images=2, sentences=2)
    with pytest.raises(ValueError, match="image tensors .*eval transform"):
        ZSCL(model=tiny_clip, tokenizer=tokenizer, reference_images=pil, reference_sentences=["a cat."])
    with pytest.raises(ValueError, match="reference_images is empty"):
        ZSCL(model=tiny_clip, tokenizer=tokenizer, reference_images=[], reference_sentences=["a cat."])


def test_virtual_vocabulary_sentences(tokenizer):
    tokens = virtual_vocabulary(tokenizer, count=50, length=10, seed=3)
    sot, eot = tokenizer([""])[0, :2].tolist()
    assert tokens.shape == (50, 16)
    assert (tokens[:, 0] == sot).all() and (tokens[:, 11] == eot).all() and (tokens[:, 12:] == 0).all()
    words = tokens[:, 1:11]
    assert words.min() >= 0 and words.max() < sot and len(words.unique()) > 400
    assert torch.equal(tokens, virtual_vocabulary(tokenizer, count=50, length=10, seed=3))
    assert not torch.equal(tokens, virtual_vocabulary(tokenizer, count=50, length=10, seed=4))
    with pytest.raises(ValueError, match="length <= 14"):
        virtual_vocabulary(tokenizer, length=15)


def test_memory_footprint_counts_teacher_and_copies_but_no_teacher_gradients(tiny_clip, tokenizer, make_stream):
    spy = {}

    class Footprint(SupervisedPlugin):
        def after_training_iteration(self, strategy, **kwargs):
            spy.update(memory_footprint(strategy))

    strategy = ZSCL(model=tiny_clip, tokenizer=tokenizer, iterations=1, warmup=0, train_mb_size=4, weights_on="model",
                    plugins=[Footprint()], evaluator=EvaluationPlugin(loggers=[]), progress=False,
                    **tensor_references())
    strategy.train(make_stream("all").train_stream[0])
    model = spy["model"]
    trainable = sum(p.numel() * 4 for p in tiny_clip.parameters() if p.requires_grad)
    assert spy["gradients"] == trainable and spy["optimizer"] == pytest.approx(2 * trainable, rel=0.01)
    assert spy["L2Anchor"] == spy["WeightEnsemble"] == pytest.approx(model, rel=0.01)
    assert spy["ZSCLDistillation"] == pytest.approx(model, rel=0.01)  # teacher (+ a few text embeddings)
