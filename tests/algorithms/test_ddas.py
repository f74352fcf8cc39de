"""DDAS: autoencoders over frozen features pick a task, fall back to plain CLIP, per sample or per batch."""

import io
import urllib.error

import pytest
import torch
from torch import nn

from moram_avalanche.algorithms.ddas import DDAS, DomainAutoencoder, alexnet_features

pytestmark = pytest.mark.usefixtures("one_thread")


PATTERNS = {}


def pattern(name):
    """A fixed random image per domain ("texture"); samples are that pattern plus small noise."""
    if name not in PATTERNS:
        PATTERNS[name] = torch.randn(3, 4, 4, generator=torch.Generator().manual_seed(len(PATTERNS) + 7)) * 3
    return PATTERNS[name]


def domain(name, count, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.utils.data.TensorDataset(pattern(name) + 0.05 * torch.randn(count, 3, 4, 4, generator=gen))


def fitted(threshold=0.01, routing="sample", reference=None):
    torch.manual_seed(0)
    ddas = DDAS(nn.Identity(), hidden=4, threshold=threshold, routing=routing, iterations=60,
                reference_iterations=60, lr=0.02, batch_size=16)
    if reference:
        ddas.fit_reference(domain(reference, 32))
    ddas.fit_task(domain("a", 32))
    ddas.fit_task(domain("b", 32))
    return ddas


def images(name, count, seed=1):
    return domain(name, count, seed).tensors[0]


def test_autoencoder_shape_and_per_sample_error():
    ae = DomainAutoencoder(10, hidden=3)
    assert [m.__class__.__name__ for m in (*ae.encoder, *ae.decoder)] == ["Linear", "ReLU", "Linear", "Sigmoid"]
    x = torch.rand(4, 10)
    assert torch.allclose(ae.errors(x), ((ae(x) - x) ** 2).mean(1))


def test_picks_the_autoencoder_of_the_domain_and_falls_back_above_the_threshold():
    ddas = fitted(threshold=0.01)
    errors = ddas.errors(images("a", 4))
    assert errors.shape == (2, 4) and (errors[0] < errors[1]).all()
    assert ddas.select(images("a", 5)).tolist() == [0] * 5
    assert ddas.select(images("b", 5)).tolist() == [1] * 5
    unseen = ddas.errors(images("c", 5)).min(0).values
    assert (unseen > 0.01).all()  # so the threshold sends them to plain CLIP
    assert ddas.select(images("c", 5)).tolist() == [-1] * 5
    ddas.threshold = float(unseen.max()) + 1  # a loose threshold lets them through
    assert (ddas.select(images("c", 5)) >= 0).all()


def test_the_reference_autoencoder_sends_its_domain_to_plain_clip():
    ddas = fitted(threshold=10.0, reference="c")  # the threshold never triggers
    assert ddas.select(images("c", 4)).tolist() == [-1] * 4
    assert ddas.select(images("a", 4)).tolist() == [0] * 4  # task ids do not count the reference
    assert ddas.select(images("b", 4)).tolist() == [1] * 4


def test_per_sample_routing_differs_from_the_release_per_batch_routing_on_a_mixed_batch():
    mixed = torch.cat([images("a", 5), images("b", 2)])
    per_sample = fitted(routing="sample", threshold=10.0).select(mixed)
    per_batch = fitted(routing="batch", threshold=10.0).select(mixed)
    assert per_sample.tolist() == [0] * 5 + [1] * 2
    assert per_batch.tolist() == [0] * 7  # the batch-mean error of the majority domain wins
    assert fitted(routing="batch", threshold=10.0).select(images("b", 3)).tolist() == [1] * 3


def test_no_trained_task_means_plain_clip():
    ddas = DDAS(nn.Identity(), iterations=1)
    assert ddas.select(torch.randn(3, 3, 4, 4)).tolist() == [-1, -1, -1]


def test_state_round_trip_through_a_weights_only_checkpoint():
    ddas = fitted(reference="c")
    buffer = io.BytesIO()
    torch.save(ddas.state_dict(), buffer)
    buffer.seek(0)
    other = DDAS(nn.Identity(), hidden=4)
    other.load_state_dict(torch.load(buffer, weights_only=True))
    batch = torch.cat([images("a", 3), images("b", 3), images("c", 3)])
    assert torch.equal(other.errors(batch), ddas.errors(batch))
    other.threshold = ddas.threshold
    assert torch.equal(other.select(batch), ddas.select(batch))


def test_features_are_the_sigmoid_of_the_flattened_extractor_output():
    extractor = nn.Conv2d(3, 2, 2)
    ddas = DDAS(extractor)
    x = torch.randn(2, 3, 5, 5)
    assert torch.allclose(ddas.features(x), torch.sigmoid(extractor(x).flatten(1)))
    assert not any(p.requires_grad for p in extractor.parameters())


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="routing"):
        DDAS(nn.Identity(), routing="domain")
    with pytest.raises(TypeError, match="nn.Module"):
        DDAS(lambda x: x)


def test_missing_alexnet_weights_offline_say_how_to_fetch_them(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    with pytest.raises(RuntimeError, match="pre-fetch.*feature_extractor="):
        alexnet_features()
    with pytest.raises(RuntimeError, match="does not exist"):
        alexnet_features(tmp_path / "missing.pth")


def test_alexnet_features_drop_the_last_relu_and_maxpool(tmp_path):
    from torchvision.models import alexnet

    torch.manual_seed(0)
    path = tmp_path / "alexnet.pth"
    torch.save(alexnet().state_dict(), path)
    features = alexnet_features(path)
    assert isinstance(features[-1], nn.Conv2d) and len(features) == 11
    assert features(torch.randn(1, 3, 224, 224)).shape == (1, 256, 13, 13)
    assert not any(p.requires_grad for p in features.parameters()) and not features.training


class CountingAdam(torch.optim.Adam):
    """Adam that records the learning rate of every step it takes."""

    runs = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lrs = []
        CountingAdam.runs.append(self.lrs)

    def step(self, closure=None):
        self.lrs.append(self.param_groups[0]["lr"])
        return super().step(closure)


@pytest.mark.parametrize("decay_every, expected", [
    (None, [0.5] * 7),  # the release's schedule never decays within an MTIL run
    (3, [0.5, 0.5, 0.5, 0.05, 0.05, 0.05, 0.005]),  # x0.1 after every 3 steps
])
def test_autoencoders_take_exactly_their_iterations_in_steps_with_the_decay(monkeypatch, decay_every,
                                                                           expected):
    monkeypatch.setattr(torch.optim, "Adam", CountingAdam)
    CountingAdam.runs = []
    ddas = DDAS(nn.Identity(), hidden=2, iterations=7, reference_iterations=4, lr=0.5, batch_size=3,
                decay_every=decay_every)
    ddas.fit_reference(domain("c", 5))  # 5 images in batches of 3: cycles the loader
    ddas.fit_task(domain("a", 5))
    reference, task = CountingAdam.runs
    assert task == pytest.approx(expected)
    assert reference == pytest.approx(expected[:4])


def test_feature_size_mismatch_fails_early_naming_both_sizes():
    ddas = DDAS(nn.AvgPool2d(8), hidden=2, iterations=1, reference_iterations=1)
    big = torch.utils.data.TensorDataset(torch.randn(4, 3, 64, 64))  # 3 x 8 x 8 = 192 features
    small = torch.utils.data.TensorDataset(torch.randn(4, 3, 32, 32))  # 3 x 4 x 4 = 48 features
    ddas.fit_reference(big)
    with pytest.raises(ValueError, match="read 192 features, the images of task 0: 48.*the model's transform"):
        ddas.fit_task(small)
    assert ddas.tasks == []
    with pytest.raises(ValueError, match="read 192 features, the images to route: 48"):
        ddas.errors(small.tensors[0])
    ddas.fit_reference(small)  # a new reference replaces the old one: its size is free
    ddas.fit_task(small)
    assert ddas.select(small.tensors[0]).shape == (4,)
    state = ddas.state_dict()
    state["reference"] = DomainAutoencoder(192, 2).state_dict()
    with pytest.raises(ValueError, match=r"\[48, 192\] features.*the model's transform"):
        DDAS(nn.AvgPool2d(8)).load_state_dict(state)
