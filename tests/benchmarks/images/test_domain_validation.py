"""One validation for the stream builders and check-data: they refuse and report the same
problems, every problem of every domain, and bad images (decompression bombs included) are
skipped and counted like any other."""

import pickle

import pytest
from PIL import Image

from fake_data import bomb_png, cifar100, eurosat, flowers, sun397
from moram_avalanche.benchmarks import mtil
from moram_avalanche.benchmarks.images.check import check_data, format_report
from moram_avalanche.benchmarks.images.datasets import BadImages, ImageFiles
from moram_avalanche.benchmarks.images.reference_sets import image_folder, read_sentences
from moram_avalanche.benchmarks.readers import DataError


def broken_root(tmp_path):
    """Four MTIL domains, each broken in its own way."""
    root = tmp_path / "data"
    for write in (eurosat, sun397, flowers, cifar100):
        write(root)
    (root / "eurosat/2750/Pasture").mkdir()  # an empty class folder
    (root / "eurosat/2750/Ruins").mkdir()  # and another
    with open(root / "SUN397/ClassName.txt", "a") as names:  # a class without a folder
        names.write("/b/bakery/shop\n")
    (root / "flowers-102/imagelabels.mat").write_bytes(b"")  # zero bytes
    with open(root / "cifar-100-python/train", "wb") as f:  # wrong shape
        pickle.dump({"data": [[0] * 10] * 3, "fine_labels": [0, 1, 2]}, f)
    return root


def test_check_data_and_the_builder_report_the_same_problems_of_every_domain(tmp_path):
    root = broken_root(tmp_path)
    order = ["eurosat", "sun397", "flowers", "cifar100"]
    reports = {r.name: r for r in check_data(root, "mtil", progress=False)}  # nothing lost to one domain
    assert [reports[n].status for n in ("EuroSAT", "SUN397", "Flowers", "CIFAR100")] == ["malformed"] * 4
    assert reports["DTD"].status == "missing"
    assert "'pasture land'" in reports["EuroSAT"].message and "2750/Ruins" in reports["EuroSAT"].message
    assert "'bakery/shop'" in reports["SUN397"].message
    assert "imagelabels.mat" in reports["Flowers"].message
    assert "(3, 10)" in reports["CIFAR100"].message
    text = format_report(list(reports.values()), "mtil", root)
    assert "EuroSAT       malformed" in text and "SUN397        malformed" in text
    with pytest.raises(DataError) as info:
        mtil(root, order=order)
    built = str(info.value)
    assert "4 of 4 domains unavailable" in built
    for name in ("EuroSAT", "SUN397"):
        for problem in reports[name].problems:  # the very sentences check-data printed
            assert problem in built
    assert list((root / "eurosat/2750/Pasture").iterdir()) == []  # nothing written into the data


def test_a_domain_check_data_calls_found_is_one_the_builder_accepts(tmp_path):
    root = tmp_path / "data"
    eurosat(root)
    reports = {r.name: r for r in check_data(root, "mtil", progress=False)}
    assert reports["EuroSAT"].status == "found" and reports["EuroSAT"].problems == []
    assert len(mtil(root, order=["eurosat"]).train_stream) == 1


def test_a_decompression_bomb_is_skipped_counted_and_named(tmp_path):
    root = tmp_path / "data"
    eurosat(root)
    bomb = root / "eurosat/2750/Forest/Forest_3.jpg"
    bomb_png(bomb)  # a PNG under a .jpg name: PIL reads the header, not the suffix
    reports = {r.name: r for r in check_data(root, "mtil", verify_images=True, progress=False)}
    assert reports["EuroSAT"].status == "found"
    assert reports["EuroSAT"].unreadable_files == [str(bomb)]
    Image.new("RGB", (4, 4)).save(tmp_path / "ok.png")
    log = tmp_path / "bad.jsonl"
    data = ImageFiles([bomb, tmp_path / "ok.png"], [0, 0], name="EuroSAT", bad_images=BadImages("skip", log))
    with pytest.warns(UserWarning, match="Forest_3.jpg of dataset 'EuroSAT'.*DecompressionBombError"):
        image, label = data[0]
    assert image.size == (4, 4) and label == 0
    assert data.bad_images.skipped() == {str(bomb): "EuroSAT"}


def test_reference_readers_accept_what_they_can_use(tmp_path):
    (tmp_path / "refs/empty").mkdir(parents=True)  # an empty class folder: skipped, not refused
    (tmp_path / "refs/n01").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "refs/n01/a.png")
    assert len(image_folder(tmp_path / "refs", transform=None)) == 1
    (tmp_path / "c.tsv").write_text("filepath\ttitle\nx.jpg\ta dog\ny.jpg\t\n", encoding="utf-8")
    assert read_sentences(tmp_path / "c.tsv") == ["a dog"]
    (tmp_path / "c.txt").write_bytes("\ufeffun café\n\n".encode("utf-8"))
    assert read_sentences(tmp_path / "c.txt") == ["un café"]


def test_a_decompression_bomb_among_the_reference_images_is_skipped(tmp_path):
    (tmp_path / "refs/n01").mkdir(parents=True)
    bomb_png(tmp_path / "refs/n01/a.png")
    Image.new("RGB", (4, 4)).save(tmp_path / "refs/n01/b.png")
    images = image_folder(tmp_path / "refs", transform=None, bad_images=BadImages("skip", tmp_path / "bad.jsonl"))
    with pytest.warns(UserWarning, match="a.png of dataset 'reference image folder'"):
        image, label = images[0]
    assert image.size == (4, 4) and len(images) == 2 and images.classes == ["n01"]
