"""Shared fixtures: a tiny random-init open_clip model (no downloads)."""

import json
import os

import pytest
import torch

from tiny_clip import STREAM_CLASSES, TINY_CONFIG, TINY_NAME, TensorDomain

if not torch.cuda.is_available():
    # the GPU path's Triton kernels run on CPU tensors in Triton's interpreter (read when Triton is
    # first imported, so set before any test imports it); with a GPU they run compiled on CUDA
    os.environ.setdefault("TRITON_INTERPRET", "1")



@pytest.fixture(scope="session")
def tiny_clip_name(tmp_path_factory):
    """Register a tiny model config with open_clip; returns its name."""
    import open_clip

    path = tmp_path_factory.mktemp("open_clip_configs") / f"{TINY_NAME}.json"
    path.write_text(json.dumps(TINY_CONFIG))
    open_clip.add_model_config(path)
    return TINY_NAME


@pytest.fixture
def tiny_clip():
    """A fresh random-init tiny open_clip CLIP in eval mode."""
    import open_clip

    torch.manual_seed(0)
    return open_clip.CLIP(**TINY_CONFIG).eval()


@pytest.fixture
def one_thread():
    """One intra-op thread: far faster for tiny tensors on a shared, loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def registered():
    """``registered(entry, replace=False)``: a benchmark registered for one test; afterwards the registry
    holds what it held before, in the same order."""
    from moram_avalanche.benchmarks import benchmarks, register_benchmark, unregister_benchmark

    before = dict(benchmarks())
    yield register_benchmark
    for name in list(benchmarks()):
        unregister_benchmark(name)
    for entry in before.values():
        register_benchmark(entry)


@pytest.fixture
def make_stream():
    """Build a 3-domain benchmark of random tensors: make_stream(label_space, train_sizes)."""
    from moram_avalanche.benchmarks import Domain, clip_benchmark

    def build(label_space="all", train_sizes=(8, 5, 3), test_size=6):
        domains = [Domain(name, classes, f"a {{}} from {name}.") for name, classes in STREAM_CLASSES.items()]
        train = [TensorDomain(n, len(d.classnames), i) for i, (n, d) in enumerate(zip(train_sizes, domains))]
        test = [TensorDomain(test_size, len(d.classnames), 10 + i) for i, d in enumerate(domains)]
        return clip_benchmark(domains, train, test, label_space=label_space)

    return build


@pytest.fixture
def tokenizer():
    import open_clip

    simple = open_clip.tokenizer.SimpleTokenizer(context_length=16)
    return lambda texts: simple(texts)


# ---------------------------------------------------------------- fake X-TAIL / MTIL data root
@pytest.fixture(scope="session")
def fake_root(tmp_path_factory):
    """A read-only (by convention) fake root with every domain; copy it before changing it."""
    from fake_data import make_fake_root

    return make_fake_root(tmp_path_factory.mktemp("data"))


@pytest.fixture
def fresh_root(tmp_path):
    """A fake root of this test's own, free to damage."""
    from fake_data import make_fake_root

    return make_fake_root(tmp_path / "data")


@pytest.fixture
def tiny_transforms():
    from torchvision import transforms

    tf = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()])
    return tf, tf
