"""check-data: the report on a damaged root, its exit status, and the command line."""

import json
import shutil

import pytest

from moram_avalanche.benchmarks.images.check import check_data, format_report
from moram_avalanche.cli import main


def damaged(fake_root, tmp_path):
    """A copy of the fake root with Food missing and DTD's split file malformed."""
    root = tmp_path / "data"
    shutil.copytree(fake_root, root)
    shutil.rmtree(root / "food-101")
    (root / "dtd" / "split_zhou_DescribableTextures.json").write_text('{"train": [["x.jpg", "0", "a"]]}')
    return root


def test_report_on_a_root_with_a_missing_domain_and_a_malformed_split_file(fake_root, tmp_path):
    root = damaged(fake_root, tmp_path)
    reports = {r.name: r for r in check_data(root, "xtail", progress=False)}
    assert list(reports) == ["Aircraft", "Caltech101", "DTD", "EuroSAT", "Flowers", "Food", "MNIST",
                             "OxfordPet", "StanfordCars", "SUN397"]
    assert reports["Food"].status == "missing"
    assert str(root / "food-101") in reports["Food"].message
    assert reports["DTD"].status == "malformed"
    assert "split_zhou_DescribableTextures.json" in reports["DTD"].message
    assert "DATASETS.md" in reports["DTD"].message  # how to obtain the split file
    assert reports["Aircraft"].status == "found"
    assert (reports["Aircraft"].classes, reports["Aircraft"].train, reports["Aircraft"].test) == (3, 42, 9)
    assert (reports["MNIST"].classes, reports["MNIST"].train, reports["MNIST"].test) == (10, 170, 20)
    text = format_report(list(reports.values()), "xtail", root)
    assert "8/10 domains usable" in text and "cannot be built" in text
    # MTIL reads the same root through torchvision's layout: DTD's own files are intact there
    mtil = {r.name: r.status for r in check_data(root, "mtil", progress=False)}
    assert mtil["DTD"] == "found" and mtil["Food"] == "missing" and mtil["CIFAR100"] == "found"


def test_missing_and_unreadable_image_files(fake_root, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(fake_root, root)
    (root / "eurosat/2750/Forest/Forest_2.jpg").unlink()
    (root / "oxford-iiit-pet/images/Abyssinian_1.jpg").write_bytes(b"\xff\xd8 truncated")
    reports = {r.name: r for r in check_data(root, "xtail", verify_images=True, progress=False)}
    assert reports["EuroSAT"].status == "malformed"
    assert reports["EuroSAT"].missing_files == [str(root / "eurosat/2750/Forest/Forest_2.jpg")]
    assert reports["OxfordPet"].status == "found"  # runs skip unreadable images
    assert reports["OxfordPet"].unreadable_files == [str(root / "oxford-iiit-pet/images/Abyssinian_1.jpg")]


def test_cli_exit_status(fake_root, tmp_path, capsys):
    assert main(["check-data", "--root", str(fake_root), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "10/10 domains usable" in out and "11/11 domains usable" in out
    root = damaged(fake_root, tmp_path)
    assert main(["check-data", "--root", str(root), "--benchmark", "xtail", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "Food          missing" in out and "DTD           malformed" in out
    assert main(["check-data", "--root", str(tmp_path / "none")]) == 2
    assert "none: no such folder" in capsys.readouterr().err


def test_cli_run_on_xtail_with_stream_options(fake_root, tmp_path, capsys):
    """A zero-shot run over two domains; a corrupt test image is skipped and counted."""
    root = tmp_path / "data"
    for folder in ("MNIST", "dtd"):
        shutil.copytree(fake_root / folder, root / folder)
    broken = root / "dtd/dtd/images/bubbly/bubbly_0007.jpg"  # a test image (6 train + 3 test)
    broken.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="cannot read image .*bubbly_0007.jpg of dataset 'DTD'"):
        code = main(["run", "--benchmark", "xtail", "--data-root", str(root), "--strategy", "zeroshot",
                     "--model", "moram-synthetic-tiny", "--pretrained", "none", "--shots", "1",
                     "--order", "mnist,dtd", "--prompts", "rail", "--cache-dir", str(tmp_path / "cache"),
                     "--log-dir", str(tmp_path / "run"), "--no-progress",
                     "--num-workers", "0"])  # decoded in this process: pytest sees the warning
    assert code == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "run" / "results.json").read_text())
    assert report["domains"] == ["MNIST", "DTD"]
    assert report["skipped_images"] == {"count": 1, "files": {str(broken): "DTD"}}
    assert str(broken) in (tmp_path / "run" / "bad_images.jsonl").read_text()
    with pytest.raises(SystemExit) as exit_:  # an argparse error: one line, status 2
        main(["run", "--benchmark", "xtail", "--strategy", "zeroshot", "--shots", "x",
              "--data-root", str(fake_root), "--model", "moram-synthetic-tiny", "--pretrained", "none",
              "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(tmp_path / "bad")])
    assert exit_.value.code == 2
    assert "argument --shots: must be a positive integer or 'full', got 'x'" in capsys.readouterr().err
