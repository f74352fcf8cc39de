"""Each domain's reader on the fake root: class names (with the protocols' rewrites), labels
that match the files, the 80/20 split, and the errors for missing or malformed files."""

import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from moram_avalanche.benchmarks.images.datasets import BadImages
from moram_avalanche.benchmarks.images.domains import SPECS, resolve_domain
from moram_avalanche.benchmarks.images.streams import read_domain
from moram_avalanche.benchmarks.readers import DataError, zscl_random_split

XTAIL_NAMES = {
    "Aircraft": ("707-320", "A300B4", "BAE 146-200"),
    "Caltech101": ("accordion", "car_side"),  # verbatim from the split file, "_" kept
    "DTD": ("banded", "bubbly"),
    "EuroSAT": ("Annual Crop Land satellite location", "Forest satellite location",
                "Sea or Lake satellite location"),
    "Flowers": ("pink primrose", "hard-leaved pocket orchid"),
    "Food": ("apple_pie", "baby_back_ribs"),
    "MNIST": tuple(f'number: "{d}"' for d in ("0 - zero", "1 - one", "2 - two", "3 - three",
                   "4 - four", "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine")),
    "OxfordPet": ("abyssinian", "american_bulldog"),
    "StanfordCars": ("2000 AM General Hummer SUV", "2012 Acura RL Sedan"),
    "SUN397": ("abbey", "outdoor apartment_building"),
}
MTIL_NAMES = {
    "Aircraft": ("707-320", "A300B4", "BAE 146-200"),
    "Caltech101": ("centered face", "accordion", "side of a car"),  # BACKGROUND_Google dropped
    "CIFAR100": ("apple", "aquarium fish", "baby"),
    "DTD": ("banded", "bubbly"),
    "EuroSAT": ("annual crop land", "forest", "lake or sea"),
    "Flowers": ("pink primrose", "hard-leaved pocket orchid"),
    "Food": ("apple pie", "baby back ribs"),
    "MNIST": ("0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
              "7 - seven", "8 - eight", "9 - nine"),
    "OxfordPet": ("Abyssinian", "American Bulldog"),
    "StanfordCars": ("AM General Hummer SUV 2000", "Acura RL Sedan 2012"),
    "SUN397": ("abbey", "apartment building/outdoor"),
}


def read(protocol, name, root):
    return read_domain(protocol, SPECS[name], root, BadImages())


@pytest.mark.parametrize("name", sorted(XTAIL_NAMES))
def test_xtail_class_names(fake_root, name):
    assert read("xtail", name, fake_root).classnames == XTAIL_NAMES[name]


@pytest.mark.parametrize("name", sorted(MTIL_NAMES))
def test_mtil_class_names(fake_root, name):
    assert read("mtil", name, fake_root).classnames == MTIL_NAMES[name]


def _folder_label(path, classnames_by_folder):
    return next(label for folder, label in classnames_by_folder.items() if f"/{folder}/" in path)


@pytest.mark.parametrize("protocol", ["xtail", "mtil"])
def test_labels_match_the_class_folders(fake_root, protocol):
    """Where the class is in the path, every item's label is that class's index."""
    folders = {"Food": {"apple_pie": 0, "baby_back_ribs": 1},
               "DTD": {"banded": 0, "bubbly": 1},
               "EuroSAT": {"AnnualCrop": 0, "Forest": 1, "SeaLake": 2},
               "SUN397": {"abbey": 0, "apartment_building/outdoor": 1}}
    for name, mapping in folders.items():
        data = read(protocol, name, fake_root)
        for split in (data.train, data.test):
            assert split.targets == [_folder_label(p, mapping) for p in split.paths]


def test_annotation_file_labels(fake_root):
    """Aircraft (txt), Flowers (.mat), Pets (txt) and Cars (.mat) labels, read back."""
    aircraft = read("mtil", "Aircraft", fake_root)
    lines = (fake_root / "fgvc-aircraft-2013b/data/images_variant_test.txt").read_text().splitlines()
    variants = list(MTIL_NAMES["Aircraft"])
    assert aircraft.test.targets == [variants.index(line.split(" ", 1)[1]) for line in lines]
    assert aircraft.test.paths[0].endswith(f"images/{lines[0].split()[0]}.jpg")

    flowers = read("mtil", "Flowers", fake_root)  # fake: first 18 images class 1, next 3 test...
    assert flowers.train.targets == [0] * 18 + [1] * 6 and flowers.test.targets == [0] * 3 + [1] * 3
    assert flowers.train.paths[0].endswith("jpg/image_00001.jpg")

    pets = read("mtil", "OxfordPet", fake_root)
    assert all(("american_bulldog" in p) == (y == 1) for p, y in zip(pets.test.paths, pets.test.targets))

    cars = read("mtil", "StanfordCars", fake_root)
    assert all(p.split("/")[-1].startswith(f"{y:02d}") for p, y in zip(cars.train.paths, cars.train.targets))
    assert all("/cars_test/" in p for p in cars.test.paths)


def test_mtil_80_20_split_is_zscl_random_split(fake_root):
    """Caltech101 / EuroSAT / SUN397 split with ZSCL's random_split(seed 42) over the sorted
    (class, file) order, recomputed here with torch's own random_split."""
    data = read("mtil", "EuroSAT", fake_root)
    files = sorted(p for p in (fake_root / "eurosat/2750").rglob("*.jpg"))
    n = len(files)
    train, test = torch.utils.data.random_split(
        range(n), [int(0.8 * n), n - int(0.8 * n)], generator=torch.Generator().manual_seed(42))
    assert data.train.paths == [str(files[i]) for i in train.indices]
    assert data.test.paths == [str(files[i]) for i in test.indices]
    assert zscl_random_split(n) == (list(train.indices), list(test.indices))


def test_mnist_and_cifar_images_are_rgb_and_match_the_files(fake_root):
    mnist = read("xtail", "MNIST", fake_root)
    raw = (fake_root / "MNIST/raw/t10k-images-idx3-ubyte").read_bytes()
    first = np.frombuffer(raw[16:16 + 784], dtype=np.uint8).reshape(28, 28)
    image = mnist.test[0][0]
    assert image.mode == "RGB" and image.size == (28, 28)
    assert (np.asarray(image)[..., 0] == first).all() and (np.asarray(image)[..., 2] == first).all()
    assert mnist.test.targets == [d for d in range(10) for _ in range(2)]

    cifar = read("mtil", "CIFAR100", fake_root)
    image, label = cifar.train[0]
    assert image.size == (32, 32) and label == 0 and len(cifar.train) == 30


@pytest.mark.parametrize("alias,name", [("oxford_flowers", "Flowers"), ("food101", "Food"),
                                        ("oxford_pets", "OxfordPet"), ("sun397", "SUN397"),
                                        ("CIFAR100", "CIFAR100"), ("stanford_cars", "StanfordCars")])
def test_release_keys_resolve(alias, name):
    assert resolve_domain(alias).name == name


def test_unknown_domain_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown domain 'imagenet'.*Aircraft"):
        resolve_domain("imagenet")


def test_alternative_folder_spellings(tmp_path, fake_root):
    """RAIL / CoOp spellings: oxford_flowers/, fgvc_aircraft/, sun397/SUN397 + JSON in sun397/."""
    shutil.copytree(fake_root / "flowers-102", tmp_path / "oxford_flowers")
    shutil.copytree(fake_root / "fgvc-aircraft-2013b" / "data", tmp_path / "fgvc_aircraft")
    (tmp_path / "sun397").mkdir()
    shutil.copytree(fake_root / "SUN397", tmp_path / "sun397" / "SUN397")
    shutil.move(tmp_path / "sun397/SUN397/split_zhou_SUN397.json", tmp_path / "sun397")
    assert read("xtail", "Flowers", tmp_path).classnames == XTAIL_NAMES["Flowers"]
    assert read("xtail", "Aircraft", tmp_path).classnames == XTAIL_NAMES["Aircraft"]
    sun = read("xtail", "SUN397", tmp_path)
    assert sun.train.paths[0].startswith(str(tmp_path / "sun397" / "SUN397" / "a"))
    assert read("mtil", "SUN397", tmp_path).classnames == MTIL_NAMES["SUN397"]


def test_missing_domain_names_every_accepted_folder(tmp_path):
    with pytest.raises(DataError) as info:
        read("xtail", "Flowers", tmp_path)
    error = info.value
    assert error.status == "missing"
    assert str(tmp_path / "flowers-102") in str(error) and str(tmp_path / "oxford_flowers") in str(error)
    assert "split_zhou_OxfordFlowers.json" in str(error) and "DATASETS.md" in str(error)


@pytest.mark.parametrize("content,problem", [
    ("{not json", "not readable JSON"),
    (json.dumps({"train": []}), "needs the keys 'train' and 'test'"),
    (json.dumps({"train": [["a.jpg", 0]], "val": [], "test": [["b.jpg", 0, "x"]]}), "item 0 of 'train'"),
    (json.dumps({"train": [["a.jpg", 1, "x"]], "val": [], "test": [["b.jpg", 1, "x"]]}), "labels must be 0..C-1"),
    (json.dumps({"train": [["a.jpg", 0, "x"], ["b.jpg", 0, "y"]], "val": [], "test": [["b.jpg", 0, "x"]]}),
     "named both 'x' and 'y'"),
])
def test_malformed_split_files(fresh_root, content, problem):
    path = fresh_root / "eurosat" / "split_zhou_EuroSAT.json"
    path.write_text(content)
    with pytest.raises(DataError, match=problem) as info:
        read("xtail", "EuroSAT", fresh_root)
    assert info.value.status == "malformed" and str(path) in str(info.value)


def test_wrong_image_folder_is_reported_with_the_expected_path(fresh_root):
    shutil.rmtree(fresh_root / "eurosat" / "2750")
    with pytest.raises(DataError, match="images of .*split_zhou_EuroSAT.json are not there") as info:
        read("xtail", "EuroSAT", fresh_root)
    assert str(fresh_root / "eurosat" / "2750" / "AnnualCrop" / "AnnualCrop_1.jpg") in str(info.value)


def test_malformed_torchvision_files(fresh_root):
    (fresh_root / "MNIST/raw/train-images-idx3-ubyte").write_bytes(b"\x1f\x8b" + bytes(30))  # gzip
    with pytest.raises(DataError, match="(?s)not an uncompressed IDX file.*gunzip"):
        read("mtil", "MNIST", fresh_root)
    (fresh_root / "fgvc-aircraft-2013b/data/images_variant_train.txt").write_text("1000001 Concorde\n")
    with pytest.raises(DataError, match="variant 'Concorde' is not in variants.txt"):
        read("mtil", "Aircraft", fresh_root)
    (fresh_root / "flowers-102" / "setid.mat").unlink()
    with pytest.raises(DataError, match="missing file .*setid.mat"):
        read("mtil", "Flowers", fresh_root)


def test_images_are_decoded_lazily(fake_root, monkeypatch):
    opened = []
    original = Image.open
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a[0]) or original(*a, **k))
    data = read("mtil", "Food", fake_root)
    assert opened == []  # reading the layout opens no image
    data.train[3]
    assert opened == [data.train.paths[3]]
