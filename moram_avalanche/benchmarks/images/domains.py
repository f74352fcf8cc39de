"""The eleven datasets of X-TAIL and MTIL: where each lives on disk and how to read it.

Each :class:`DomainSpec` knows its folder spellings, and reads its train / test split in the
two layouts of the protocols (sources: ../shared/reference/datasets.md §2-3):

* X-TAIL -- CoOp's ``split_zhou_*.json`` files (Aircraft: the FGVC txt files; MNIST:
  torchvision's IDX files), class names verbatim from the split file
  [MoRAM XTAIL/scenario_datasets/*.py, read from RAIL];
* MTIL -- torchvision's layouts, class names as ZSCL rewrites them, and ZSCL's seeded 80/20
  split where a dataset has no official one [ZSCL mtil/src/datasets/collections.py].

Readers return :class:`DomainData` with lazily loaded images (nothing decoded) and raise
:class:`~moram_avalanche.benchmarks.readers.DataError` for anything missing or malformed.
Folder names accepted for the same dataset: the MoRAM code's, RAIL's and CoOp's (DATASETS.md).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..readers import (
    COOP_DATASETS_MD,
    UnreadableJSON,
    find_dir,
    load_mat,
    malformed,
    read_coop_split,
    read_idx,
    read_json,
    read_lines,
    require,
    zscl_random_split,
)
from . import classnames as names
from .datasets import BadImages, ImageArrays, ImageFiles

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")


@dataclass
class DomainData:
    """One domain read from disk: class names (label order) and its lazy train / test data."""

    name: str
    classnames: Tuple[str, ...]
    train: object
    test: object
    folder: Path
    #: where each class's images are expected (a folder per class), for messages; None: no folders
    class_sources: Optional[Tuple[str, ...]] = None


Reader = Callable[[Path, BadImages], DomainData]


@dataclass(frozen=True)
class DomainSpec:
    """A dataset of the protocols: its canonical name, aliases and one reader per layout."""

    name: str
    aliases: Tuple[str, ...]
    read_xtail: Optional[Reader]
    read_mtil: Reader


# ----------------------------------------------------------------------------- X-TAIL readers
@dataclass(frozen=True)
class _CoopLayout:
    folders: Tuple[str, ...]       # dataset folder spellings (MoRAM code, RAIL, CoOp)
    image_roots: Tuple[str, ...]   # relative to the dataset folder; split relpaths join to it
    split_file: str
    source: str                    # what to download
    section: str                   # its section in CoOp's DATASETS.md

    def describe(self, name: str) -> str:
        return (f"<root>/{{{','.join(self.folders)}}}/{self.split_file} and the images under "
                f"<root>/<folder>/{{{','.join(self.image_roots)}}}/<relpath from the split file>")

    def fix(self, name: str) -> str:
        return (f"download {self.source} and {self.split_file} as {COOP_DATASETS_MD} describes "
                f"(section {self.section})")


def _xtail_coop(name: str, layout: _CoopLayout,
                rename: Callable[[str], str] = lambda n: n) -> Reader:
    def read(root: Path, bad_images: BadImages) -> DomainData:
        where = dict(domain=name, layout=layout.describe(name), fix=layout.fix(name))
        folder = find_dir(root, layout.folders, **where)
        splits, classnames = read_coop_split(folder / layout.split_file, **where)
        first = splits["train"][0][0]
        image_root = next((folder / r for r in layout.image_roots if (folder / r / first).exists()), None)
        if image_root is None:
            raise malformed(where, f"the images of {folder / layout.split_file} are not there",
                            expected=" or ".join(str(folder / r / first) for r in layout.image_roots))

        def files(items):
            return ImageFiles([image_root / rel for rel, _ in items], [y for _, y in items],
                              name=name, bad_images=bad_images)

        return DomainData(name, tuple(rename(c) for c in classnames), files(splits["train"]),
                          files(splits["test"]), folder)

    return read


_AIRCRAFT_FOLDERS = ("fgvc-aircraft-2013b/data", "fgvc_aircraft")
_AIRCRAFT_LAYOUT = ("<root>/{fgvc-aircraft-2013b/data,fgvc_aircraft}/{variants.txt, "
                    "images_variant_{train,test}.txt (lines '<image id> <variant>'), images/<id>.jpg}")
_AIRCRAFT_FIX = ("download fgvc-aircraft-2013b.tar.gz from "
                 "https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/ and extract it into <root>")


def _aircraft(rename: Callable[[str], str]) -> Reader:
    """FGVC-Aircraft at the variant level; identical files in both protocols
    [MoRAM scenario_datasets/fgvc.py; torchvision FGVCAircraft]."""

    def read(root: Path, bad_images: BadImages) -> DomainData:
        where = dict(domain="Aircraft", layout=_AIRCRAFT_LAYOUT, fix=_AIRCRAFT_FIX)
        folder = find_dir(root, _AIRCRAFT_FOLDERS, **where)
        variants = read_lines(folder / "variants.txt", **where)
        label = {v: i for i, v in enumerate(variants)}

        def split(kind):
            path = folder / f"images_variant_{kind}.txt"
            paths, targets = [], []
            for n, line in enumerate(read_lines(path, **where)):
                image_id, _, variant = line.partition(" ")
                if variant not in label:
                    raise malformed(where, f"{path} line {n + 1}: variant {variant!r} is not "
                                           "in variants.txt")
                paths.append(folder / "images" / f"{image_id}.jpg")
                targets.append(label[variant])
            return ImageFiles(paths, targets, name="Aircraft", bad_images=bad_images)

        return DomainData("Aircraft", tuple(rename(v) for v in variants), split("train"),
                          split("test"), folder)

    return read


_MNIST_FOLDERS = ("MNIST/raw", "mnist/MNIST/raw")
_MNIST_LAYOUT = ("<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (torchvision's "
                 "layout, uncompressed)")
_MNIST_FIX = ("torchvision.datasets.MNIST('<root>', download=True) on a machine with internet, "
              "then copy <root>/MNIST")


def _mnist(rename: Callable[[str], str]) -> Reader:
    """MNIST from torchvision's IDX files, memory-mapped [MoRAM collections.py MNIST; ZSCL same]."""

    def read(root: Path, bad_images: BadImages) -> DomainData:
        where = dict(domain="MNIST", layout=_MNIST_LAYOUT, fix=_MNIST_FIX)
        folder = find_dir(root, _MNIST_FOLDERS, **where)

        def split(prefix):
            images = read_idx(folder / f"{prefix}-images-idx3-ubyte", **where)
            labels = np.asarray(read_idx(folder / f"{prefix}-labels-idx1-ubyte", **where))
            if len(images) != len(labels) or (labels > 9).any():
                raise malformed(where, f"{folder}/{prefix}-*: {len(images)} images, "
                                       f"{len(labels)} labels (must match, labels 0-9)")
            return ImageArrays(images, labels.tolist(), name="MNIST", bad_images=bad_images,
                               source=str(folder / f"{prefix}-images-idx3-ubyte"))

        return DomainData("MNIST", tuple(rename(c) for c in names.MNIST_CLASSES), split("train"),
                          split("t10k"), folder)

    return read


# ------------------------------------------------------------------------------ MTIL readers
def _tv(name: str, folders: Sequence[str], layout: str, fix: str) -> dict:
    return dict(domain=name, layout=f"<root>/{{{','.join(folders)}}}/" + layout, fix=fix)


def _image_files(folder: Path) -> List[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def _image_folder_80_20(name, root, folders, layout, fix, rename: Dict[str, str],
                        bad_images: BadImages, skip=()) -> DomainData:
    """One folder of images per class (sorted classes, files sorted by name), split 80/20
    with ZSCL's seed; class names from ``rename`` (folder -> name) or ``_`` -> space."""
    where = _tv(name, folders, layout, fix)
    folder = find_dir(root, folders, **where)
    broken = sorted(p.name for p in folder.iterdir() if p.is_symlink() and not p.exists())
    if broken:
        raise malformed(where, f"{folder}: {', '.join(broken[:5])} are symbolic links that cannot "
                               "be followed (dangling, or a loop): a class would be left out")
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in skip)
    if not classes:
        raise malformed(where, f"{folder} has no class folders")
    paths, targets = [], []
    for label, cls in enumerate(classes):
        files = _image_files(folder / cls)
        paths += files
        targets += [label] * len(files)
    data = ImageFiles(paths, targets, name=name, bad_images=bad_images)
    train, test = zscl_random_split(len(data))
    classnames = tuple(rename.get(c, names.underscores_to_spaces(c)) for c in classes)
    return DomainData(name, classnames, data.subset(train), data.subset(test), folder,
                      tuple(str(folder / c) for c in classes))


def _mtil_caltech101(root: Path, bad_images: BadImages) -> DomainData:
    """Torchvision's Caltech101 (101 categories: BACKGROUND_Google dropped, Faces_easy kept),
    ZSCL's descriptive names, ZSCL's seeded 80/20 split over (sorted category, image) order.
    Images are listed sorted by file name, which is torchvision's image_0001... order."""
    return _image_folder_80_20(
        "Caltech101", root, ("caltech101/101_ObjectCategories", "caltech-101/101_ObjectCategories"),
        "<category>/image_0001.jpg ...",
        "download caltech-101.zip from https://data.caltech.edu/records/mzrjq-6wc02 and extract "
        "101_ObjectCategories.tar.gz into <root>/caltech101", names.CALTECH101_MTIL,
        bad_images, skip=("BACKGROUND_Google",))


def _mtil_cifar100(root: Path, bad_images: BadImages) -> DomainData:
    """CIFAR-100 from the python pickles (held in memory as uint8: the format allows nothing
    else), fine labels, names with ``_`` -> space [ZSCL cifar10.py CIFAR100]."""
    folders = ("cifar-100-python",)
    where = _tv("CIFAR100", folders, "{train,test,meta} (python pickles)",
                "download cifar-100-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html "
                "and extract it into <root>")
    folder = find_dir(root, folders, **where)

    def unpickle(name, keys):
        path = require(folder / name, **where)
        try:
            with open(path, "rb") as f:
                data = pickle.load(f, encoding="latin1")
        except (OSError, pickle.UnpicklingError, EOFError, ValueError, KeyError, AttributeError,
                ImportError, IndexError, TypeError) as error:  # what garbage makes pickle raise
            raise malformed(where, f"cannot read {path} ({type(error).__name__}: {error})") from None
        if not isinstance(data, dict) or any(k not in data for k in keys):
            raise malformed(where, f"{path} lacks {list(keys)}")
        return data

    classes = unpickle("meta", ["fine_label_names"])["fine_label_names"]
    if not isinstance(classes, (list, tuple)) or not all(isinstance(c, str) for c in classes):
        raise malformed(where, f"{folder / 'meta'}: 'fine_label_names' is not a list of class names")

    def split(name):
        data = unpickle(name, ["data", "fine_labels"])
        path = folder / name
        try:
            array = np.asarray(data["data"], dtype=np.uint8)
            labels = [int(y) for y in data["fine_labels"]]
        except (TypeError, ValueError) as error:
            raise malformed(where, f"{path}: 'data' is not a uint8 array or 'fine_labels' not ints "
                                   f"({error})") from None
        if array.ndim != 2 or array.shape[1] != 3 * 32 * 32 or len(array) != len(labels):
            raise malformed(where, f"{path}: 'data' has shape {array.shape} and there are "
                                   f"{len(labels)} labels",
                            expected="'data' of shape [N, 3072] (32x32 RGB, uint8) and N 'fine_labels'")
        array = array.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return ImageArrays(array, labels, name="CIFAR100", bad_images=bad_images,
                           source=str(folder / name))

    return DomainData("CIFAR100", tuple(names.underscores_to_spaces(c) for c in classes),
                      split("train"), split("test"), folder)


def _mtil_dtd(root: Path, bad_images: BadImages) -> DomainData:
    """DTD partition 1 (``labels/{train,test}1.txt``), torchvision's layout ``dtd/dtd`` (or
    CoOp's single ``dtd``); classes sorted from the train list [torchvision DTD; ZSCL DTD]."""
    folders = ("dtd/dtd", "dtd")
    where = _tv("DTD", folders, "{images/<class>/<file>, labels/{train,test}1.txt}",
                "download dtd-r1.0.1.tar.gz from https://www.robots.ox.ac.uk/~vgg/data/dtd/ and "
                "extract it into <root>/dtd")
    folder = next((root / f for f in folders if (root / f / "labels").is_dir()), None)
    if folder is None:
        folder = find_dir(root, folders, **where)
    lists = {k: read_lines(folder / "labels" / f"{k}1.txt", **where) for k in ("train", "test")}
    if not lists["train"]:
        raise malformed(where, f"{folder / 'labels' / 'train1.txt'} lists no images")
    classes = sorted({line.split("/")[0] for line in lists["train"]})
    label = {c: i for i, c in enumerate(classes)}

    def split(kind):
        rows = [line.split("/", 1) for line in lists[kind]]
        bad = [line for line, row in zip(lists[kind], rows) if len(row) != 2 or row[0] not in label]
        if bad:
            raise malformed(where, f"labels/{kind}1.txt: line {bad[0]!r} is not '<train class>/<file>'")
        return ImageFiles([folder / "images" / c / f for c, f in rows], [label[c] for c, _ in rows],
                          name="DTD", bad_images=bad_images)

    return DomainData("DTD", tuple(names.underscores_to_spaces(c) for c in classes),
                      split("train"), split("test"), folder)


def _mtil_eurosat(root: Path, bad_images: BadImages) -> DomainData:
    """EuroSAT RGB as an image folder (sorted classes, sorted files), ZSCL's names and seeded
    80/20 split [ZSCL collections.py EuroSAT; torchvision EuroSAT]."""
    return _image_folder_80_20(
        "EuroSAT", root, ("eurosat/2750",), "<Class>/*.jpg",
        "download EuroSAT.zip (RGB) from https://github.com/phelber/EuroSAT and extract it so "
        "that <root>/eurosat/2750/<Class>/ exists", names.EUROSAT_MTIL, bad_images)


def _mtil_flowers(root: Path, bad_images: BadImages) -> DomainData:
    """Flowers102 official train / test (``setid.mat`` trnid / tstid), labels from
    ``imagelabels.mat``, names from the hard-coded list [ZSCL Flowers; torchvision Flowers102]."""
    folders = ("flowers-102", "oxford_flowers")
    where = _tv("Flowers", folders, "{jpg/image_00001.jpg ..., imagelabels.mat, setid.mat}",
                "download 102flowers.tgz, imagelabels.mat and setid.mat from "
                "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/ into <root>/flowers-102")
    folder = find_dir(root, folders, **where)
    labels = np.asarray(load_mat(folder / "imagelabels.mat", ["labels"], **where)["labels"]).ravel()
    ids = load_mat(folder / "setid.mat", ["trnid", "tstid"], **where)
    if labels.min() < 1 or labels.max() > len(names.FLOWERS102):
        raise malformed(where, f"imagelabels.mat labels span {labels.min()}..{labels.max()}, "
                        f"expected 1..{len(names.FLOWERS102)}")

    def split(key):
        image_ids = np.asarray(ids[key]).ravel().astype(int)
        if image_ids.size and (image_ids.min() < 1 or image_ids.max() > len(labels)):
            raise malformed(where, f"{folder / 'setid.mat'}: {key} holds image ids "
                                   f"{image_ids.min()}..{image_ids.max()}, but imagelabels.mat "
                                   f"labels images 1..{len(labels)}")
        return ImageFiles([folder / "jpg" / f"image_{i:05d}.jpg" for i in image_ids],
                          (labels[image_ids - 1] - 1).tolist(), name="Flowers", bad_images=bad_images)

    return DomainData("Flowers", names.FLOWERS102[:int(labels.max())], split("trnid"),
                      split("tstid"), folder)


def _mtil_food(root: Path, bad_images: BadImages) -> DomainData:
    """Food-101 official split from ``meta/{train,test}.json``, classes sorted, ``_`` -> space
    [torchvision Food101; ZSCL Food]."""
    folders = ("food-101",)
    where = _tv("Food", folders, "{images/<class>/<id>.jpg, meta/{train,test}.json}",
                "download food-101.tar.gz from https://data.vision.ee.ethz.ch/cvl/datasets_extra/"
                "food-101/ and extract it into <root>")
    folder = find_dir(root, folders, **where)

    def meta(kind):
        path = require(folder / "meta" / f"{kind}.json", **where)
        try:
            data = read_json(path)
        except UnreadableJSON as error:
            raise malformed(where, str(error)) from None
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise malformed(where, f"{path} is not {{class: ['class/id', ...]}}")
        return data

    train_meta, test_meta = meta("train"), meta("test")
    classes = sorted(train_meta)
    unknown = sorted(set(test_meta) - set(train_meta))
    if unknown:
        raise malformed(where, f"{folder / 'meta' / 'test.json'}: classes {unknown[:5]} have test "
                               "images but are not in meta/train.json (no training images)")

    def split(data):
        label = {c: i for i, c in enumerate(classes)}
        pairs = [(folder / "images" / f"{entry}.jpg", label[c]) for c in classes for entry in data.get(c, [])]
        return ImageFiles([p for p, _ in pairs], [y for _, y in pairs], name="Food",
                          bad_images=bad_images)

    return DomainData("Food", tuple(names.underscores_to_spaces(c) for c in classes),
                      split(train_meta), split(test_meta), folder)


def _mtil_pets(root: Path, bad_images: BadImages) -> DomainData:
    """Oxford-IIIT Pet trainval / test, torchvision's title-case breed names [torchvision
    OxfordIIITPet; ZSCL OxfordPet]."""
    folders = ("oxford-iiit-pet", "oxford_pets")
    where = _tv("OxfordPet", folders, "{images/<Breed>_<n>.jpg, annotations/{trainval,test}.txt "
                "(lines '<image id> <class 1..37> <species> <breed id>')}",
                "download images.tar.gz and annotations.tar.gz from "
                "https://www.robots.ox.ac.uk/~vgg/data/pets/ and extract them into <root>/oxford-iiit-pet")
    folder = find_dir(root, folders, **where)

    def rows(kind):
        path = folder / "annotations" / f"{kind}.txt"
        out = []
        for line in read_lines(path, **where):
            if line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) < 2 or not parts[1].isdigit():
                raise malformed(where, f"{path}: line {line!r} is not '<image id> <class id> ...'")
            out.append((parts[0], int(parts[1]) - 1))
        return out

    train_rows, test_rows = rows("trainval"), rows("test")
    by_label = {label: names.oxford_pet_name(image_id) for image_id, label in train_rows}
    if sorted(by_label) != list(range(len(by_label))):
        raise malformed(where, "annotations/trainval.txt class ids must be 1..C")

    def split(items):
        return ImageFiles([folder / "images" / f"{i}.jpg" for i, _ in items], [y for _, y in items],
                          name="OxfordPet", bad_images=bad_images)

    return DomainData("OxfordPet", tuple(by_label[i] for i in range(len(by_label))),
                      split(train_rows), split(test_rows), folder)


def _mtil_cars(root: Path, bad_images: BadImages) -> DomainData:
    """Stanford Cars official train / test from the devkit ``.mat`` files, names from
    ``cars_meta.mat`` with ``_`` -> space [torchvision StanfordCars; ZSCL StanfordCars]."""
    folders = ("stanford_cars",)
    where = _tv("StanfordCars", folders, "{devkit/cars_meta.mat, devkit/cars_train_annos.mat, "
                "cars_test_annos_withlabels.mat, cars_train/, cars_test/}",
                "the original host is gone (torchvision cannot download it): use a mirror of "
                "car_devkit.tgz, cars_train.tgz, cars_test.tgz and cars_test_annos_withlabels.mat, "
                "e.g. the Kaggle copy linked from CoOp's DATASETS.md")
    folder = find_dir(root, folders, **where)
    classes = [str(c) for c in np.atleast_1d(
        load_mat(folder / "devkit" / "cars_meta.mat", ["class_names"], **where)["class_names"])]

    def split(mat, images):
        annotations = np.atleast_1d(load_mat(mat, ["annotations"], **where)["annotations"])
        try:
            items = [(str(a["fname"]), int(a["class"]) - 1) for a in annotations]
        except (ValueError, IndexError, KeyError) as error:
            raise malformed(where, f"{mat}: annotations lack 'fname' / 'class' ({error})") from None
        if any(not 0 <= y < len(classes) for _, y in items):
            raise malformed(where, f"{mat}: class ids outside 1..{len(classes)}")
        return ImageFiles([folder / images / f for f, _ in items], [y for _, y in items],
                          name="StanfordCars", bad_images=bad_images)

    return DomainData("StanfordCars", tuple(names.underscores_to_spaces(c) for c in classes),
                      split(folder / "devkit" / "cars_train_annos.mat", "cars_train"),
                      split(folder / "cars_test_annos_withlabels.mat", "cars_test"), folder)


def _mtil_sun397(root: Path, bad_images: BadImages) -> DomainData:
    """SUN397 (classes from ``ClassName.txt``), ZSCL's seeded 80/20 split. Deviation: ZSCL
    splits torchvision's ``Path.rglob`` order, which depends on the file system; we sort the
    image paths first, so the split is the same on every machine (datasets.md §5.3)."""
    folders = ("SUN397", "sun397/SUN397")
    where = _tv("SUN397", folders, "{ClassName.txt (lines '/a/abbey'), a/abbey/sun_*.jpg ...}",
                "download SUN397.tar.gz from https://vision.princeton.edu/projects/2010/SUN/ and "
                "extract it into <root>")
    folder = find_dir(root, folders, **where)
    class_paths = read_lines(folder / "ClassName.txt", **where)
    pairs = []
    for label, class_path in enumerate(class_paths):
        pairs += [(p, label) for p in (folder / class_path.lstrip("/")).glob("sun_*.jpg")]
    pairs.sort(key=lambda pair: pair[0].relative_to(folder).as_posix())
    classnames = tuple(names.underscores_to_spaces(names.sun397_name(c)) for c in class_paths)
    data = ImageFiles([p for p, _ in pairs], [y for _, y in pairs], name="SUN397",
                      bad_images=bad_images)
    train, test = zscl_random_split(len(data))
    return DomainData("SUN397", classnames, data.subset(train), data.subset(test), folder,
                      tuple(str(folder / c.lstrip("/")) for c in class_paths))


# ------------------------------------------------------------------------------ the table
def _coop(folders, image_roots, split_file, source, section):
    return _CoopLayout(tuple(folders), tuple(image_roots), split_file, source, section)


SPECS: Dict[str, DomainSpec] = {spec.name: spec for spec in (
    DomainSpec("Aircraft", ("aircraft", "fgvc_aircraft", "fgvcaircraft"),
               _aircraft(lambda v: v), _aircraft(names.underscores_to_spaces)),
    DomainSpec("Caltech101", ("caltech101", "caltech-101", "caltech"), _xtail_coop(
        "Caltech101", _coop(("caltech101", "caltech-101"), ("101_ObjectCategories",),
                            "split_zhou_Caltech101.json", "101_ObjectCategories.tar.gz", "Caltech101")),
        _mtil_caltech101),
    DomainSpec("CIFAR100", ("cifar100", "cifar-100"), None, _mtil_cifar100),
    DomainSpec("DTD", ("dtd", "describabletextures"), _xtail_coop(
        "DTD", _coop(("dtd",), ("images", "dtd/images"), "split_zhou_DescribableTextures.json",
                     "dtd-r1.0.1.tar.gz", "DTD")), _mtil_dtd),
    DomainSpec("EuroSAT", ("eurosat",), _xtail_coop(
        "EuroSAT", _coop(("eurosat",), ("2750",), "split_zhou_EuroSAT.json", "EuroSAT.zip",
                     "EuroSAT"),
        rename=lambda n: n + names.XTAIL_EUROSAT_SUFFIX), _mtil_eurosat),
    DomainSpec("Flowers", ("flowers", "oxford_flowers", "flowers102", "oxfordflowers"), _xtail_coop(
        "Flowers", _coop(("flowers-102", "oxford_flowers"), ("jpg",), "split_zhou_OxfordFlowers.json",
                         "102flowers.tgz", "Flowers102")), _mtil_flowers),
    DomainSpec("Food", ("food", "food101", "food-101"), _xtail_coop(
        "Food", _coop(("food-101",), ("images",), "split_zhou_Food101.json", "food-101.tar.gz",
                  "Food101")),
        _mtil_food),
    DomainSpec("MNIST", ("mnist",), _mnist(names.xtail_mnist_name), _mnist(lambda c: c)),
    DomainSpec("OxfordPet", ("oxfordpet", "oxford_pets", "pets", "oxfordpets"), _xtail_coop(
        "OxfordPet", _coop(("oxford-iiit-pet", "oxford_pets"), ("images",),
                           "split_zhou_OxfordPets.json", "images.tar.gz", "OxfordPets")), _mtil_pets),
    DomainSpec("StanfordCars", ("stanfordcars", "stanford_cars", "cars"), _xtail_coop(
        "StanfordCars", _coop(("stanford_cars",), (".",), "split_zhou_StanfordCars.json",
                              "the Stanford Cars images and devkit", "StanfordCars")), _mtil_cars),
    DomainSpec("SUN397", ("sun397", "sun"), _xtail_coop(
        "SUN397", _coop(("SUN397", "sun397"), (".", "SUN397"), "split_zhou_SUN397.json",
                        "SUN397.tar.gz", "SUN397")), _mtil_sun397),
)}


def resolve_domain(name: str) -> DomainSpec:
    """The spec of ``name``, given as its canonical name or any alias (case-insensitive)."""
    key = name.lower()
    for spec in SPECS.values():
        if key == spec.name.lower() or key in spec.aliases:
            return spec
    raise ValueError(f"unknown domain {name!r}; known: {', '.join(SPECS)} (or their aliases, "
                     "e.g. the MoRAM release's keys oxford_flowers, food101, oxford_pets)")
