"""xtail() / mtil() on the fake root: orders, label spaces, few-shot sampling, bad images, and
one MoRAM experience + one evaluation through the strategy on each stream."""

import shutil
from collections import Counter

import pytest
from avalanche.training.plugins import EvaluationPlugin

from fake_data import SHORT, TRAIN  # the fake root's training images per class
from moram_avalanche.benchmarks import MTIL_ORDERS, XTAIL_ORDERS, BadImageError, DataError, mtil, xtail
from moram_avalanche.benchmarks.images.fewshot import domain_rng, few_shot_indices
from moram_avalanche.benchmarks.images.prompts import MORAM_TEMPLATES, RAIL_TEMPLATE, ZSCL_TEMPLATES
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear


@pytest.fixture
def keep_raw(monkeypatch):
    """Record the raw dataset of each experience (what xtail / mtil passed to clip_benchmark)."""
    import moram_avalanche.benchmarks.images.streams as streams

    original = streams.clip_benchmark

    def recording(domains, train_sets, test_sets, **kwargs):
        benchmark = original(domains, train_sets, test_sets, **kwargs)
        for stream, sets in ((benchmark.train_stream, train_sets), (benchmark.test_stream, test_sets)):
            for experience, raw in zip(stream, sets):
                experience.raw_dataset = raw
        return benchmark

    monkeypatch.setattr(streams, "clip_benchmark", recording)


def test_xtail_domains_offsets_and_prompts(fake_root):
    bench = xtail(fake_root)
    names = [e.domain for e in bench.train_stream]
    assert names == list(XTAIL_ORDERS[1]) == [e.domain for e in bench.test_stream]
    sizes = [len(e.classnames) for e in bench.train_stream]
    assert sizes == [3, 2, 2, 3, 2, 2, 10, 2, 2, 2]
    offsets = [e.label_offset for e in bench.test_stream]
    assert offsets == [sum(sizes[:i]) for i in range(len(sizes))]
    for experience in bench.test_stream:
        assert experience.label_space == "all" and len(experience.domains) == 10
        assert experience.template == MORAM_TEMPLATES[experience.domain]
        assert experience.task_label == experience.current_experience
        # the "all" space: global labels, the domain's local ones shifted by its offset
        first = experience.label_offset
        assert set(experience.dataset.targets) <= set(range(first, first + len(experience.classnames)))
    assert bench.train_stream[3].classnames[0] == "Annual Crop Land satellite location"


def test_xtail_order_2_is_the_papers_and_custom_orders_move_the_offsets(fake_root):
    # the column order of the paper's order-2 table (tab:few_xtail_order_2), whose Transfer row
    # has "--" under Cars, the first task -- not MTIL's order II without CIFAR-100
    paper = ["StanfordCars", "Aircraft", "OxfordPet", "Food", "SUN397", "MNIST", "Flowers", "DTD",
             "Caltech101", "EuroSAT"]
    bench = xtail(fake_root, order=2)
    assert [e.domain for e in bench.train_stream] == list(XTAIL_ORDERS[2]) == paper
    # fake class counts: Cars 2, Aircraft 3, Pets 2, Food 2, SUN397 2, MNIST 10, ...
    assert [e.label_offset for e in bench.test_stream][:7] == [0, 2, 5, 7, 9, 11, 21]
    custom = xtail(fake_root, order=["mnist", "oxford_flowers"], shots=2)
    assert [e.domain for e in custom.train_stream] == ["MNIST", "Flowers"]
    assert [e.label_offset for e in custom.test_stream] == [0, 10]


def test_xtail_shots_per_class(fake_root, keep_raw):
    bench = xtail(fake_root, shots=16)
    for experience in bench.train_stream:
        assert set(Counter(experience.dataset.targets).values()) == {16}
        assert len(set(experience.dataset.targets)) == len(experience.classnames)
    flowers = next(e for e in bench.train_stream if e.domain == "Flowers").raw_dataset
    full = [p for p, y in zip(flowers.paths, flowers.targets) if y == 0]
    short = [p for p, y in zip(flowers.paths, flowers.targets) if y == 1]
    assert len(set(full)) == 16 < TRAIN  # enough images: drawn without replacement
    assert len(short) == 16 and len(set(short)) == SHORT  # short class: with replacement
    mnist = next(e for e in bench.train_stream if e.domain == "MNIST").raw_dataset
    assert len(set(mnist.index.tolist())) == 160


def test_sampling_is_deterministic_per_seed_and_domain(fake_root, keep_raw):
    def subsets(**kwargs):
        bench = xtail(fake_root, **kwargs)
        return {e.domain: sorted(getattr(e.raw_dataset, "paths", None) or e.raw_dataset.index.tolist())
                for e in bench.train_stream}

    first, again, other = subsets(seed=1), subsets(seed=1), subsets(seed=2)
    assert first == again
    assert all(first[d] != other[d] for d in ("Aircraft", "EuroSAT", "Food", "MNIST"))
    reordered = subsets(seed=1, order=2)
    assert reordered == first  # a domain's subset does not depend on the stream order


def test_few_shot_indices_rules():
    targets = [0] * 10 + [1] * 3
    rng = domain_rng(0, "x")
    picked = few_shot_indices(targets, 5, rng, replace_short=True)
    zeros, ones = picked[:5], picked[5:]
    assert len(set(zeros)) == 5 and all(targets[i] == 0 for i in zeros)
    assert len(ones) == 5 and set(ones) <= {10, 11, 12}
    kept = few_shot_indices(targets, 5, domain_rng(0, "x"), replace_short=False)
    assert kept[5:] == [10, 11, 12]  # MTIL: a short class keeps what it has
    with pytest.raises(ValueError, match="shots must be >= 1"):
        few_shot_indices(targets, 0, rng, replace_short=True)


def test_mtil_full_and_five_shot(fake_root):
    bench = mtil(fake_root)
    assert [e.domain for e in bench.train_stream] == list(MTIL_ORDERS["I"])
    assert sum(len(e.classnames) for e in bench.train_stream) == 3 + 3 + 3 + 2 + 3 + 2 + 2 + 10 + 2 + 2 + 2
    for experience in bench.test_stream:
        assert experience.label_space == "domain"
        assert experience.eval_templates == ZSCL_TEMPLATES[experience.domain]
        assert experience.template == ZSCL_TEMPLATES[experience.domain][0]
    food = bench.train_stream[6]
    assert food.domain == "Food" and len(food.dataset) == TRAIN + SHORT  # full training set
    few = mtil(fake_root, shots=5, order="II")
    assert [e.domain for e in few.train_stream] == list(MTIL_ORDERS["II"])
    for experience in few.train_stream:
        assert set(Counter(experience.dataset.targets).values()) == {5}


def test_mtil_5shot_is_the_papers_mtil_one_name_away(fake_root):
    from moram_avalanche.benchmarks import MTIL_PAPER_SHOTS, benchmark_entry, get_benchmark, mtil_5shot

    bench = get_benchmark("mtil-5shot")(fake_root, order="I")
    assert [e.domain for e in bench.train_stream] == list(MTIL_ORDERS["I"])
    assert bench.protocol == "mtil" and bench.shots == 5
    for experience in bench.train_stream:  # every fake class has at least 5 training images
        assert set(Counter(experience.dataset.targets).values()) == {5}
    protocol = benchmark_entry("mtil-5shot").protocol  # the registry's words say the builder's shots
    assert "5 shots" in protocol and f"{MTIL_PAPER_SHOTS} shots" in protocol and "paper" in protocol
    with pytest.raises(ValueError, match="mtil-5shot is MTIL with 5 training images per class"):
        mtil_5shot(fake_root, shots=16)


def test_test_shots_keep_a_few_test_images_per_class(fake_root):
    whole, few = xtail(fake_root, shots=2), xtail(fake_root, shots=2, test_shots=2)
    for full, cut in zip(whole.test_stream, few.test_stream):
        counts, full_counts = Counter(cut.dataset.targets), Counter(full.dataset.targets)
        assert set(counts) == set(full_counts)  # every class kept, at most 2 images each
        assert all(counts[label] == min(2, n) for label, n in full_counts.items())
    with pytest.raises(ValueError, match="test_shots must be a positive integer"):
        mtil(fake_root, test_shots=0)


def test_prompt_presets(fake_root):
    rail = xtail(fake_root, prompts="rail", shots=1)
    assert {e.template for e in rail.test_stream} == {RAIL_TEMPLATE}
    zscl = xtail(fake_root, prompts="zscl", shots=1)
    assert zscl.test_stream[0].template == "a photo of a {}, a type of aircraft."
    with pytest.raises(ValueError, match="prompts must be one of"):
        xtail(fake_root, prompts="coop")


def test_bad_arguments_are_clear(fake_root, tmp_path):
    with pytest.raises(ValueError, match="X-TAIL order must be one of"):
        xtail(fake_root, order=3)
    with pytest.raises(ValueError, match="not part of X-TAIL"):
        xtail(fake_root, order=["cifar100", "dtd"])
    with pytest.raises(ValueError, match="distinct domains"):
        mtil(fake_root, order=["dtd", "DTD"])
    with pytest.raises(ValueError, match="shots must be a positive integer"):
        xtail(fake_root, shots=0)
    with pytest.raises(ValueError, match="nowhere: no such folder"):
        xtail(tmp_path / "nowhere")


def test_builder_reports_every_unavailable_domain(fake_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(fake_root, root)
    shutil.rmtree(root / "food-101")
    (root / "dtd" / "split_zhou_DescribableTextures.json").write_text("[]")
    with pytest.raises(DataError) as info:
        xtail(root)
    message = str(info.value)
    assert "2 of 10 domains unavailable" in message
    assert "Food: no dataset folder" in message and "DTD: malformed split file" in message
    assert f"check-data --root {root} --benchmark xtail" in message


def test_corrupt_image_is_skipped_and_counted_or_stops(fake_root, tmp_path, recwarn):
    root = tmp_path / "data"
    shutil.copytree(fake_root, root)
    broken = root / "food-101" / "images" / "apple_pie" / "1000.jpg"
    broken.write_bytes(b"not a jpeg")
    bench = mtil(root, order=["food"], bad_image_log=tmp_path / "bad.jsonl")
    data = bench.train_stream[0].dataset
    images = [data[i] for i in range(len(data))]
    assert len(images) == TRAIN + SHORT and all(label == 0 for _, label, _ in images[:TRAIN])
    assert bench.bad_images.skipped() == {str(broken): "Food"}
    assert any(str(broken) in str(w.message) and "Food" in str(w.message) for w in recwarn)

    strict = mtil(root, order=["food"], on_bad_image="raise")
    data = strict.train_stream[0].dataset
    with pytest.raises(BadImageError, match=f"{broken}.*'Food'"):
        for i in range(len(data)):
            data[i]


@pytest.mark.parametrize("build", [xtail, mtil])
def test_moram_runs_one_experience_and_one_evaluation(build, fake_root, tiny_clip, tokenizer,
                                                      tiny_transforms):
    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies import MoRAM

    bench = build(fake_root, shots=2, train_transform=tiny_transforms[0],
                  eval_transform=tiny_transforms[1])
    matrix = AccuracyMatrix()
    strategy = MoRAM(model=tiny_clip, tokenizer=tokenizer, atoms_per_task=2, topk=2, iterations=2,
                     train_mb_size=4, eval_mb_size=16, progress=False,
                     evaluator=EvaluationPlugin(matrix, loggers=[]))
    strategy.train(bench.train_stream[0])
    strategy.eval(bench.test_stream)
    row = matrix.result()
    assert row.shape == (1, len(bench.test_stream)) and ((0 <= row) & (row <= 100)).all()
    assert matrix.report()["skipped_images"] == {"count": 0, "files": {}}
    assert all(layer.num_frozen == 2 for layer in find_layers(tiny_clip, MoRAMLinear).values())


def test_images_skipped_in_worker_processes_are_recorded(fake_root, tmp_path):
    """Workers hold copies of the record; the shared log file still sees every skip."""
    import torch

    root = tmp_path / "data"
    shutil.copytree(fake_root / "food-101", root / "food-101")
    broken = root / "food-101" / "images" / "baby_back_ribs" / "1001.jpg"
    broken.write_bytes(b"")
    bench = mtil(root, order=["food"], train_transform=lambda image: torch.zeros(1))
    loader = torch.utils.data.DataLoader(bench.train_stream[0].dataset.train(), batch_size=8,
                                         num_workers=1)
    labels = torch.cat([batch[1] for batch in loader]).tolist()  # (the warning is the worker's)
    assert labels == [0] * TRAIN + [1] * SHORT
    assert bench.bad_images.skipped() == {str(broken): "Food"}
