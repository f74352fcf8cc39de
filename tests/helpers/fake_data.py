"""A fake data root holding all eleven datasets in both layouts (X-TAIL split files next to the
torchvision files, as one real root can), tiny images, real class and folder names.

Per domain: 2-3 classes; one class with fewer than 16 training images (the with-replacement
path of X-TAIL sampling), the others with 18-20 (the without-replacement path).
"""

import json
import pickle
import struct
import zlib

import numpy as np
from PIL import Image

TRAIN, SHORT, TEST = 18, 6, 3  # training images per class (SHORT for the short class), test


def _image(path):
    """An 8 x 8 JPEG of one colour that depends on the file name only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    colour = tuple(int(c) for c in np.random.default_rng(zlib.crc32(path.name.encode())).integers(0, 256, 3))
    Image.new("RGB", (8, 8), colour).save(path)


def _counts(classes):
    """(train, test) images per class: the last class is short."""
    return [(SHORT if i == len(classes) - 1 else TRAIN, TEST) for i in range(len(classes))]


def _coop_json(path, train, test):
    path.write_text(json.dumps({"train": train, "val": [], "test": test}))


def _write_idx(path, array, magic):
    path.parent.mkdir(parents=True, exist_ok=True)
    header = magic.to_bytes(4, "big") + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def aircraft(root):
    data = root / "fgvc-aircraft-2013b" / "data"
    variants = ["707-320", "A300B4", "BAE 146-200"]
    data.mkdir(parents=True)
    (data / "variants.txt").write_text("\n".join(variants) + "\n")
    lines = {"train": [], "val": [], "test": []}
    image_id = 1000000
    for variant, (n_train, n_test) in zip(variants, _counts(variants)):
        for split, n in (("train", n_train), ("test", n_test)):
            for _ in range(n):
                image_id += 1
                _image(data / "images" / f"{image_id}.jpg")
                lines[split].append(f"{image_id} {variant}")
    for split, rows in lines.items():
        (data / f"images_variant_{split}.txt").write_text("\n".join(rows) + "\n")


def caltech101(root):
    base = root / "caltech101"
    cats = base / "101_ObjectCategories"
    _image(cats / "BACKGROUND_Google" / "image_0001.jpg")
    # CoOp's split: Faces_easy and BACKGROUND_Google ignored, names verbatim (car_side)
    train, test = [], []
    for label, (cat, n) in enumerate((("accordion", TRAIN + TEST), ("car_side", SHORT + TEST))):
        for i in range(1, n + 1):
            _image(cats / cat / f"image_{i:04d}.jpg")
            (train if i <= n - TEST else test).append([f"{cat}/image_{i:04d}.jpg", label, cat])
    for i in range(1, TRAIN + 1):
        _image(cats / "Faces_easy" / f"image_{i:04d}.jpg")
    _coop_json(base / "split_zhou_Caltech101.json", train, test)


def cifar100(root):
    base = root / "cifar-100-python"
    base.mkdir(parents=True)
    names = ["apple", "aquarium_fish", "baby"]
    rng = np.random.default_rng(0)
    for split, n in (("train", 10), ("test", 2)):
        labels = [y for y in range(3) for _ in range(n)]
        data = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)
        with open(base / split, "wb") as f:
            pickle.dump({"data": data, "fine_labels": labels, "coarse_labels": labels}, f)
    with open(base / "meta", "wb") as f:
        pickle.dump({"fine_label_names": names, "coarse_label_names": names}, f)


def dtd(root):
    """Images only in torchvision's dtd/dtd/images; the CoOp split file in dtd/ points into
    them (the image-root alias of the X-TAIL reader)."""
    base = root / "dtd" / "dtd"
    classes = ["banded", "bubbly"]
    rows = {"train": [], "test": []}
    train, test = [], []
    for label, (cls, (n_train, n_test)) in enumerate(zip(classes, _counts(classes))):
        for i in range(n_train + n_test):
            name = f"{cls}_{i:04d}.jpg"
            _image(base / "images" / cls / name)
            split = "train" if i < n_train else "test"
            rows[split].append(f"{cls}/{name}")
            (train if split == "train" else test).append([f"{cls}/{name}", label, cls])
    (base / "labels").mkdir()
    for split, lines in rows.items():
        (base / "labels" / f"{split}1.txt").write_text("\n".join(lines) + "\n")
    _coop_json(root / "dtd" / "split_zhou_DescribableTextures.json", train, test)


def eurosat(root):
    base = root / "eurosat"
    classes = [("AnnualCrop", "Annual Crop Land"), ("Forest", "Forest"), ("SeaLake", "Sea or Lake")]
    train, test = [], []
    for label, ((folder, name), (n_train, n_test)) in enumerate(zip(classes, _counts(classes))):
        for i in range(1, n_train + n_test + 1):
            _image(base / "2750" / folder / f"{folder}_{i}.jpg")
            (train if i <= n_train else test).append([f"{folder}/{folder}_{i}.jpg", label, name])
    _coop_json(base / "split_zhou_EuroSAT.json", train, test)


def flowers(root):
    from scipy.io import savemat

    base = root / "flowers-102"
    names = ["pink primrose", "hard-leaved pocket orchid"]
    labels, ids = [], {"trnid": [], "valid": [], "tstid": []}
    train, test = [], []
    image = 0
    for label, (n_train, n_test) in enumerate(_counts(names)):
        for i in range(n_train + n_test):
            image += 1
            _image(base / "jpg" / f"image_{image:05d}.jpg")
            labels.append(label + 1)
            is_train = i < n_train
            ids["trnid" if is_train else "tstid"].append(image)
            (train if is_train else test).append([f"image_{image:05d}.jpg", label, names[label]])
    savemat(base / "imagelabels.mat", {"labels": np.array(labels)})
    savemat(base / "setid.mat", {k: np.array(v) for k, v in ids.items()})
    _coop_json(base / "split_zhou_OxfordFlowers.json", train, test)


def food101(root):
    base = root / "food-101"
    classes = ["apple_pie", "baby_back_ribs"]
    meta = {"train": {}, "test": {}}
    train, test = [], []
    for label, (cls, (n_train, n_test)) in enumerate(zip(classes, _counts(classes))):
        for i in range(n_train + n_test):
            entry = f"{cls}/{1000 + i}"
            _image(base / "images" / f"{entry}.jpg")
            split = "train" if i < n_train else "test"
            meta[split].setdefault(cls, []).append(entry)
            (train if split == "train" else test).append([f"{entry}.jpg", label, cls])
    (base / "meta").mkdir()
    for split, data in meta.items():
        (base / "meta" / f"{split}.json").write_text(json.dumps(data))
    _coop_json(base / "split_zhou_Food101.json", train, test)


def mnist(root):
    raw = root / "MNIST" / "raw"
    rng = np.random.default_rng(1)
    for prefix, per_class in (("train", 17), ("t10k", 2)):
        labels = np.repeat(np.arange(10), per_class)
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (len(labels), 28, 28)), 2051)
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", labels, 2049)


def oxford_pets(root):
    base = root / "oxford-iiit-pet"
    breeds = ["Abyssinian", "american_bulldog"]
    rows = {"trainval": [], "test": []}
    train, test = [], []
    for label, (breed, (n_train, n_test)) in enumerate(zip(breeds, _counts(breeds))):
        for i in range(1, n_train + n_test + 1):
            image_id = f"{breed}_{i}"
            _image(base / "images" / f"{image_id}.jpg")
            split = "trainval" if i <= n_train else "test"
            rows[split].append(f"{image_id} {label + 1} {label + 1} {i}")
            (train if split == "trainval" else test).append([f"{image_id}.jpg", label, breed.lower()])
    (base / "annotations").mkdir()
    for split, lines in rows.items():
        (base / "annotations" / f"{split}.txt").write_text("\n".join(lines) + "\n")
    _coop_json(base / "split_zhou_OxfordPets.json", train, test)


def stanford_cars(root):
    from scipy.io import savemat

    base = root / "stanford_cars"
    names = ["AM General Hummer SUV 2000", "Acura RL Sedan 2012"]
    coop = ["2000 AM General Hummer SUV", "2012 Acura RL Sedan"]
    annotations = {"cars_train": [], "cars_test": []}
    train, test = [], []
    for label, (n_train, n_test) in enumerate(_counts(names)):
        for i in range(n_train + n_test):
            folder = "cars_train" if i < n_train else "cars_test"
            fname = f"{label:02d}{i:03d}.jpg"
            _image(base / folder / fname)
            annotations[folder].append((fname, label + 1))
            (train if folder == "cars_train" else test).append([f"{folder}/{fname}", label, coop[label]])

    def struct(rows):
        array = np.zeros(len(rows), dtype=[("fname", object), ("class", np.int32)])
        for k, (fname, cls) in enumerate(rows):
            array[k] = (fname, cls)
        return {"annotations": array}

    (base / "devkit").mkdir()
    savemat(base / "devkit" / "cars_meta.mat", {"class_names": np.array(names, dtype=object)})
    savemat(base / "devkit" / "cars_train_annos.mat", struct(annotations["cars_train"]))
    savemat(base / "cars_test_annos_withlabels.mat", struct(annotations["cars_test"]))
    _coop_json(base / "split_zhou_StanfordCars.json", train, test)


def sun397(root):
    base = root / "SUN397"
    classes = [("/a/abbey", "abbey"), ("/a/apartment_building/outdoor", "outdoor apartment_building")]
    train, test = [], []
    for label, ((path, name), (n_train, n_test)) in enumerate(zip(classes, _counts(classes))):
        for i in range(n_train + n_test):
            rel = f"{path.lstrip('/')}/sun_{label}{i:04d}.jpg"
            _image(base / rel)
            (train if i < n_train else test).append([rel, label, name])
    (base / "ClassName.txt").write_text("\n".join(p for p, _ in classes) + "\n")
    _coop_json(base / "split_zhou_SUN397.json", train, test)


WRITERS = {
    "Aircraft": aircraft, "Caltech101": caltech101, "CIFAR100": cifar100, "DTD": dtd,
    "EuroSAT": eurosat, "Flowers": flowers, "Food": food101, "MNIST": mnist,
    "OxfordPet": oxford_pets, "StanfordCars": stanford_cars, "SUN397": sun397,
}


def make_fake_root(root):
    for write in WRITERS.values():
        write(root)
    return root


def bomb_png(path, side=100_000):
    """A PNG whose header claims ``side`` x ``side`` pixels (a decompression bomb), 60 bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))
    return path
