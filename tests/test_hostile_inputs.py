"""Hostile inputs to the lower rooms (utils/, benchmarks/), each refused before anything is
loaded or written: paths that would destroy or confuse, subtly broken datasets, devices and
sizes that cannot work, things that are not plugins. Each case asserts the error's type, that
its message names the file or value and the fix, that it is one line where the command line
prints it, and that nothing was written.
"""

import json
import os
import pickle

import pytest
from PIL import Image

from fake_data import bomb_png, cifar100, eurosat, flowers, food101, sun397
from moram_avalanche.utils.errors import UserError


# ---------------------------------------------------------------- helpers
def tree(root):
    """Every path under ``root`` (to see that nothing was written); links are not followed."""
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root)
                  for n in dirs + files)


def a_file(t, name="a-file"):
    path = t / name
    path.write_text("not a folder")
    return path


def a_loop(t, name="loop"):
    path = t / name
    os.symlink(path, path)  # a link to itself
    return path


def dangling(t, name="dangling"):
    path = t / name
    os.symlink(t / "gone", path)
    return path


def run_folder(t, **entries):
    """``t/run`` with ``entries``: name -> "file", "dir", "loop" or "dangling"."""
    folder = t / "run"
    folder.mkdir(exist_ok=True)
    for name, kind in entries.items():
        entry = folder / name.replace("__", ".")
        if kind == "file":
            entry.write_text("x")
        elif kind == "dir":
            entry.mkdir()
        elif kind == "loop":
            os.symlink(entry, entry)
        else:
            os.symlink(t / "gone", entry)
    return folder


def check_run(t, path, **kwargs):
    from moram_avalanche.utils.paths import check_run_path

    return check_run_path(path, "--log-dir", **kwargs)


def check_compare(t, strategies, **entries):
    from moram_avalanche.utils.paths import check_compare_path

    folder = t / "cmp"
    folder.mkdir()
    for name, kind in entries.items():
        entry = folder / name
        if kind == "file":
            entry.write_text("x")
        else:
            entry.mkdir(parents=True)
    return check_compare_path(folder, strategies, "--out")


def check_input(path, kind):
    from moram_avalanche.utils.paths import check_input_path

    return check_input_path(path, "--ref-images" if kind == "dir" else "--ref-sentences", kind=kind)


def data_root(t, *writers):
    root = t / "data"
    root.mkdir(exist_ok=True)
    for write in writers:
        write(root)
    return root


def build(protocol, root, order):
    from moram_avalanche.benchmarks import mtil, xtail

    return (xtail if protocol == "xtail" else mtil)(root, order=order)


def empty_class_folder(t):
    root = data_root(t, eurosat)
    (root / "eurosat/2750/Pasture").mkdir()
    return build("mtil", root, ["eurosat"])


def class_without_folder(t):
    root = data_root(t, sun397)
    with open(root / "SUN397/ClassName.txt", "a") as names:
        names.write("/b/bakery/shop\n")
    return build("mtil", root, ["sun397"])


def empty_domain(t):
    root = data_root(t, eurosat)
    for image in (root / "eurosat/2750").rglob("*.jpg"):
        image.unlink()
    return build("mtil", root, ["eurosat"])


def duplicate_class_names(t):
    root = data_root(t, eurosat)
    split = root / "eurosat/split_zhou_EuroSAT.json"
    data = json.loads(split.read_text())
    for part in ("train", "test"):
        for item in data[part]:
            if item[1] == 1:
                item[2] = "Annual Crop Land"
    split.write_text(json.dumps(data))
    return build("xtail", root, ["eurosat"])


def untrained_test_class(t):
    from moram_avalanche.benchmarks.images.datasets import ImageFiles
    from moram_avalanche.benchmarks.images.domains import DomainData
    from moram_avalanche.benchmarks.images.validate import check_domain

    train = ImageFiles(["a.jpg", "b.jpg"], [0, 0], name="X")
    test = ImageFiles(["c.jpg", "d.jpg"], [0, 1], name="X")
    check_domain(DomainData("X", ("cat", "dog"), train, test, t / "x"))


def zero_byte_mat(t):
    root = data_root(t, flowers)
    (root / "flowers-102/imagelabels.mat").write_bytes(b"")
    return build("mtil", root, ["flowers"])


def garbage_mat(t):
    root = data_root(t, flowers)
    (root / "flowers-102/setid.mat").write_bytes(b"garbage" * 50)
    return build("mtil", root, ["flowers"])


def wrong_shaped_cifar(t):
    root = data_root(t, cifar100)
    with open(root / "cifar-100-python/train", "wb") as f:
        pickle.dump({"data": [[1, 2, 3]] * 4, "fine_labels": [0, 1, 2, 0]}, f)
    return build("mtil", root, ["cifar100"])


def garbage_cifar(t):
    root = data_root(t, cifar100)
    (root / "cifar-100-python/test").write_bytes(os.urandom(300))
    return build("mtil", root, ["cifar100"])


def binary_sentences(t):
    from moram_avalanche.benchmarks.images.reference_sets import read_sentences

    path = t / "captions.txt"
    path.write_bytes(b"a photo\n\x00\x01\x02\xff")
    return read_sentences(path)


def latin1_sentences(t):
    from moram_avalanche.benchmarks.images.reference_sets import read_sentences

    path = t / "captions.txt"
    path.write_bytes("a photo\nun caf\xe9\n".encode("latin-1"))
    return read_sentences(path)


def sentences_folder(t):
    from moram_avalanche.benchmarks.images.reference_sets import read_sentences

    (t / "captions").mkdir()
    return read_sentences(t / "captions")


def empty_ref_images(t):
    from moram_avalanche.benchmarks.images.reference_sets import image_folder

    (t / "refs").mkdir()
    return image_folder(t / "refs", transform=None)


def loose_ref_images(t):
    from moram_avalanche.benchmarks.images.reference_sets import image_folder

    (t / "refs").mkdir()
    Image.new("RGB", (4, 4)).save(t / "refs" / "one.png")
    return image_folder(t / "refs", transform=None)


def ref_images_without_images(t):
    from moram_avalanche.benchmarks.images.reference_sets import image_folder

    (t / "refs/n01/notes").mkdir(parents=True)
    (t / "refs/n01/readme.txt").write_text("x")
    return image_folder(t / "refs", transform=None)


def ref_images_loop(t):
    from moram_avalanche.benchmarks.images.reference_sets import image_folder

    return image_folder(a_loop(t, "refs"), transform=None)


def bomb_under_raise(t):
    from moram_avalanche.benchmarks.images.datasets import BadImages, ImageFiles

    Image.new("RGB", (4, 4)).save(t / "ok.png")
    data = ImageFiles([bomb_png(t / "bomb.png"), t / "ok.png"], [0, 0], name="Food",
                      bad_images=BadImages("raise", t / "log.jsonl"))
    return data[0]


def food_test_class_not_in_training(t):
    root = data_root(t, food101)
    meta = root / "food-101/meta/test.json"
    data = json.loads(meta.read_text())
    data["pizza"] = ["pizza/1"]
    meta.write_text(json.dumps(data))
    return build("mtil", root, ["food"])


def flowers_ids_beyond_labels(t):
    from scipy.io import savemat

    root = data_root(t, flowers)
    savemat(root / "flowers-102/setid.mat", {"trnid": [1, 9999], "tstid": [2]})
    return build("mtil", root, ["flowers"])


def class_folder_link_loop(t):
    root = data_root(t, eurosat)
    loop = root / "eurosat/2750/Pasture"
    os.symlink(loop, loop)
    return build("mtil", root, ["eurosat"])


def bomb_in_ref_images(t):
    from moram_avalanche.benchmarks.images.datasets import BadImages
    from moram_avalanche.benchmarks.images.reference_sets import image_folder

    (t / "refs/n01").mkdir(parents=True)
    bomb_png(t / "refs/n01/bomb.png")
    return image_folder(t / "refs", None, bad_images=BadImages("raise", t / "log.jsonl"))[0]


def lock_below_a_file(t):
    from moram_avalanche.utils.lock import RunFolderLock

    return RunFolderLock(a_file(t) / "run", "--log-dir").acquire()


def device(spec):
    from moram_avalanche.utils.devices import check_device

    return check_device(spec, "--device")


def banks_of_a_billion(t):
    from moram_avalanche.utils.memory import check_atom_banks_fit

    shapes = [(768, 2304), (768, 768), (768, 3072), (3072, 768)] * 12  # ViT-B/16's blocks
    return check_atom_banks_fit(shapes, 1_000_000_000, 10, "cpu")


def banks_on_a_small_gpu(t):
    from moram_avalanche.utils.memory import check_atom_banks_fit

    return check_atom_banks_fit([(512, 512)] * 24, 100_000, 11, "cuda:0", available=2 * 1024 ** 3)


def plugins(value):
    from moram_avalanche.strategies.plugins.validate import check_plugins

    return check_plugins(value)


def a_plugin():
    from avalanche.training.plugins import EWCPlugin

    return EWCPlugin(ewc_lambda=1.0)


def a_plugin_class():
    from avalanche.training.plugins import EWCPlugin

    return EWCPlugin


def same_plugin_twice():
    plugin = a_plugin()
    return plugins([plugin, plugin])


# (id, call(tmp_path), error type, fragments of the message)
HOSTILE = [
    # ---- run folders: paths that destroy or confuse
    ("--log-dir ''", lambda t: check_run(t, ""), ValueError,
     ["--log-dir is empty ('')", "the current folder", "give a folder name"]),
    ("--log-dir of blanks", lambda t: check_run(t, "  "), ValueError, ["--log-dir is empty"]),
    ("--log-dir not a path", lambda t: check_run(t, 3), ValueError, ["must be a path", "got int 3"]),
    ("--log-dir is the data root", lambda t: check_run(t, data_root(t), data_roots=[t / "data"]),
     ValueError, ["is the data root itself", "give a folder outside the data root"]),
    ("--log-dir inside the data root", lambda t: check_run(t, data_root(t) / "runs/x", data_roots=[t / "data"]),
     ValueError, ["lies inside the data root", "would be read as data"]),
    ("--log-dir holding the data root", lambda t: check_run(t, t, data_roots=[data_root(t)]), ValueError,
     ["holds the data root"]),
    ("--log-dir reaching the data root by a link", lambda t: (
        os.symlink(data_root(t), t / "alias"), check_run(t, t / "alias" / "run", data_roots=[t / "data"])),
     ValueError, ["lies inside the data root"]),
    ("--log-dir a symlink loop", lambda t: check_run(t, a_loop(t)), ValueError,
     ["loop", "loops back on itself", "remove or repair the link"]),
    ("--log-dir a dangling link", lambda t: check_run(t, dangling(t)), ValueError,
     ["dangling", "which does not exist", "gone"]),
    ("--log-dir under a dangling link", lambda t: check_run(t, dangling(t) / "run"), ValueError,
     ["lies under", "which does not exist"]),
    ("--log-dir is a file", lambda t: check_run(t, a_file(t)), ValueError,
     ["expected a folder, found a file", "move the file away"]),
    ("--log-dir below a file", lambda t: check_run(t, a_file(t) / "run"), ValueError,
     ["expected a folder, found a file", "a-file is a file, not a folder"]),
    ("tb/ is a file", lambda t: check_run(t, run_folder(t, tb="file")), ValueError,
     ["tb should be a folder, found a file", "move it away"]),
    ("accuracy_matrix.csv is a folder", lambda t: check_run(t, run_folder(t, accuracy_matrix__csv="dir")),
     ValueError, ["accuracy_matrix.csv should be a file, found a folder"]),
    ("bad_images.jsonl is a folder", lambda t: check_run(t, run_folder(t, bad_images__jsonl="dir")),
     ValueError, ["bad_images.jsonl should be a file, found a folder"]),
    ("checkpoint.pt is a folder", lambda t: check_run(t, run_folder(t, checkpoint__pt="dir")), ValueError,
     ["checkpoint.pt should be a file, found a folder"]),
    ("checkpoint.prev.pt a dangling link", lambda t: check_run(t, run_folder(t, checkpoint__prev__pt="dangling")),
     ValueError, ["checkpoint.prev.pt is a symbolic link", "which does not exist", "remove it"]),
    ("results.json a link loop", lambda t: check_run(t, run_folder(t, results__json="loop")), ValueError,
     ["results.json is (or lies under) a symbolic link that loops"]),
    ("settings.json is a folder", lambda t: check_run(t, run_folder(t, settings__json="dir")), ValueError,
     ["settings.json should be a file, found a folder"]),
    ("run.json is a folder", lambda t: check_run(t, run_folder(t, run__json="dir")), ValueError,
     ["run.json should be a file"]),
    ("compare: a strategy folder is a file", lambda t: check_compare(t, ["moram", "lwf"], lwf="file"),
     ValueError, ["--out", "lwf should be a folder, found a file"]),
    ("compare: tensorboard/ is a file", lambda t: check_compare(t, ["moram"], tensorboard="file"),
     ValueError, ["tensorboard should be a folder, found a file"]),
    ("compare: a strategy's checkpoint.pt is a folder",
     lambda t: check_compare(t, ["moram"], **{"moram/checkpoint.pt": "dir"}), ValueError,
     ["--out moram/", "checkpoint.pt should be a file, found a folder"]),
    ("a lock below a file", lock_below_a_file, ValueError,
     ["--log-dir", "a-file/run cannot be locked: Not a directory", "give a folder you can write in"]),
    # ---- input paths
    ("--ref-images missing", lambda t: check_input(t / "nowhere", "dir"), ValueError,
     ["--ref-images", "nowhere: no such folder"]),
    ("--ref-images a file", lambda t: check_input(a_file(t), "dir"), ValueError,
     ["expected a folder, found a file"]),
    ("--ref-sentences a folder", lambda t: check_input(t, "file"), ValueError,
     ["--ref-sentences", "expected a file, found a folder"]),
    ("--ref-sentences a link loop", lambda t: check_input(a_loop(t), "file"), ValueError,
     ["loops back on itself"]),
    ("--ref-sentences a dangling link", lambda t: check_input(dangling(t), "file"), ValueError,
     ["dangling link"]),
    # ---- subtly broken datasets
    ("an empty class folder", empty_class_folder, ValueError,
     ["EuroSAT train: class(es) 2 'pasture land' have no images at all", "2750/Pasture", "empty class folder"]),
    ("a class listed without a folder", class_without_folder, ValueError,
     ["SUN397 train: class(es) 2 'bakery/shop' have no images at all", "SUN397/b/bakery/shop"]),
    ("a domain without images", empty_domain, ValueError,
     ["EuroSAT train: no images (the domain is empty)", "EuroSAT test: no images"]),
    ("two labels with one class name", duplicate_class_names, ValueError,
     ["labels [0, 1] are all named 'Annual Crop Land satellite location'", "can never be predicted"]),
    ("test classes without training data", untrained_test_class, ValueError,
     ["X test: class(es) 1 'dog' have test images but no training images"]),
    ("a zero-byte .mat", zero_byte_mat, ValueError,
     ["Flowers", "cannot read", "imagelabels.mat", "truncated", "download 102flowers.tgz"]),
    ("a garbage .mat", garbage_mat, ValueError, ["Flowers", "setid.mat", "Unknown mat file type"]),
    ("a wrong-shaped CIFAR pickle", wrong_shaped_cifar, ValueError,
     ["CIFAR100", "cifar-100-python/train: 'data' has shape (4, 3)", "[N, 3072]"]),
    ("a garbage CIFAR pickle", garbage_cifar, ValueError, ["CIFAR100", "cannot read", "cifar-100-python/test"]),
    ("a binary --ref-sentences file", binary_sentences, ValueError,
     ["captions.txt: expected text, found a binary file", "one sentence per line"]),
    ("a latin-1 --ref-sentences file", latin1_sentences, ValueError,
     ["captions.txt: expected UTF-8 text, found byte 0xe9 on line 2", "iconv"]),
    ("a folder as --ref-sentences", sentences_folder, ValueError, ["captions: expected a file, found a folder"]),
    ("an empty --ref-images folder", empty_ref_images, ValueError,
     ["refs: expected class sub-folders of images, found nothing usable"]),
    ("--ref-images with loose images", loose_ref_images, ValueError,
     ["found 1 image file(s) directly in it, e.g. one.png", "move them into a sub-folder"]),
    ("--ref-images without image files", ref_images_without_images, ValueError,
     ["its 1 sub-folder(s) hold no image files"]),
    ("--ref-images a link loop", ref_images_loop, ValueError, ["refs is (or lies under) a symbolic link that loops"]),
    ("a test class of Food not in training", food_test_class_not_in_training, ValueError,
     ["food-101/meta/test.json: classes ['pizza'] have test images but are not in meta/train.json"]),
    ("Flowers ids beyond imagelabels.mat", flowers_ids_beyond_labels, ValueError,
     ["setid.mat: trnid holds image ids 1..9999, but imagelabels.mat labels images 1..30"]),
    ("a class folder that is a link loop", class_folder_link_loop, ValueError,
     ["2750: Pasture are symbolic links that cannot be followed", "a class would be left out"]),
    ("a decompression bomb in --ref-images", bomb_in_ref_images, UserError,
     ["cannot read image", "refs/n01/bomb.png", "DecompressionBombError"]),
    ("a decompression bomb under --on-bad-image raise", bomb_under_raise, UserError,
     ["cannot read image", "bomb.png", "DecompressionBombError", "--on-bad-image skip"]),
    # ---- devices and sizes
    ("--device meta", lambda t: device("meta"), ValueError, ["--device 'meta': the meta device holds no data"]),
    ("--device xla", lambda t: device("xla"), ValueError, ["device type 'xla' is not supported"]),
    ("--device cpu:1", lambda t: device("cpu:1"), ValueError, ["there is one CPU device"]),
    ("--device 1.5", lambda t: device(1.5), ValueError, ["must be a device name", "got float 1.5"]),
    ("a billion atoms per task", banks_of_a_billion, ValueError,
     ["MoRAM's atom banks (1000000000 atoms per task x 10 tasks x 48 layers) need 7.0 PiB", "cpu has",
      "lower atoms_per_task (--set atoms_per_task=N; the paper's is 16)"]),
    ("atom banks beyond a GPU", banks_on_a_small_gpu, ValueError, ["need", "but cuda:0 has 2.0 GiB free"]),
    ("a million tasks", lambda t: __import__("moram_avalanche.utils.checks", fromlist=["x"]).check_int_range(
        "--tasks", 1_000_000, high=1000, hint="the streams have 10 or 11 tasks"), ValueError,
     ["--tasks must be an int in [1, 1000] (the streams have 10 or 11 tasks), got 1000000"]),
    # ---- things that are not plugins
    ("plugins='ewc'", lambda t: plugins("ewc"), TypeError,
     ["plugins must be a list of plugin instances, got the string 'ewc'", "plugins=[EWCPlugin(ewc_lambda=1.0)]"]),
    ("plugins=[object()]", lambda t: plugins([object()]), TypeError,
     ["plugins[0] (object", "is not an Avalanche plugin", "avalanche.core.SupervisedPlugin"]),
    ("a plugin class", lambda t: plugins([a_plugin_class()]), TypeError,
     ["plugins[0] is the class EWCPlugin, not an instance; call it", "EWCPlugin(...)"]),
    ("the plugin class as plugins", lambda t: plugins(a_plugin_class()), TypeError,
     ["got the class EWCPlugin; pass plugins=[EWCPlugin(...)]"]),
    ("one plugin, not a list", lambda t: plugins(a_plugin()), TypeError,
     ["got one plugin (EWCPlugin", "wrap it: plugins=[plugin]"]),
    ("a set of plugins", lambda t: plugins({a_plugin()}), TypeError, ["got set", "pass a list"]),
    ("a plugin name in the list", lambda t: plugins(["ewc"]), TypeError, ["plugins[0] is the string 'ewc'"]),
    ("one plugin twice", lambda t: same_plugin_twice(), ValueError, ["plugins[1]", "is listed twice"]),
]


@pytest.mark.parametrize("call, error, fragments", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_a_hostile_input_is_refused_clearly_and_nothing_is_written(call, error, fragments, tmp_path):
    from moram_avalanche.arguments import is_user_error, report_error
    from moram_avalanche.benchmarks.readers import DataError
    from moram_avalanche.utils.paths import LOCK_NAME

    with pytest.raises(error) as info:
        call(tmp_path)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert is_user_error(info.value), type(info.value)  # the command line prints it, no traceback
    if not isinstance(info.value, DataError):  # a dataset's report lists its problems line by line
        assert "\n" not in report_error("run", info.value), message
    # nothing was written: no probe, lock or temporary left, no run folder made in the data
    after = tree(tmp_path)
    assert not any(p.endswith(".tmp") or LOCK_NAME in p for p in after), after
    assert not (tmp_path / "data" / "runs").exists() and not (tmp_path / "gone").exists()


def test_there_are_at_least_twenty_five_cases():
    assert len(HOSTILE) >= 25
