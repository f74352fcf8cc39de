"""What the lower rooms accept: run and input paths, devices, sizes (the refusals are in
tests/test_hostile_inputs.py)."""

import pytest
import torch

from moram_avalanche.utils.devices import check_device, resolve_device
from moram_avalanche.utils.memory import (
    ATOM_BOOKKEEPING_BYTES,
    atom_bank_bytes,
    check_atom_banks_fit,
    check_fits,
    format_bytes,
)
from moram_avalanche.utils.paths import check_compare_path, check_input_path, check_run_path


def test_run_paths_that_are_fine(tmp_path):
    assert check_run_path(tmp_path / "new" / "run") == tmp_path / "new" / "run"
    assert not (tmp_path / "new").exists()  # nothing created
    run = tmp_path / "run"
    (run / "tb").mkdir(parents=True)
    (run / "results.json").write_text("{}")
    (tmp_path / "data").mkdir()
    assert check_run_path(run, data_roots=[tmp_path / "data", None, "synthetic"]) == run
    assert check_run_path(str(tmp_path / "data-runs"), data_roots=[str(tmp_path / "data")])  # a sibling
    (tmp_path / "cmp" / "moram" / "tb").mkdir(parents=True)
    assert check_compare_path(tmp_path / "cmp", ["moram", "lwf"]) == tmp_path / "cmp"


def test_input_paths_that_are_fine(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "f.txt")
    assert check_input_path(tmp_path / "link", "--ref-sentences", kind="file") == tmp_path / "link"
    assert check_input_path(tmp_path, "--data-root") == tmp_path
    assert check_input_path(tmp_path / "f.txt", "x", kind="any") == tmp_path / "f.txt"
    with pytest.raises(ValueError, match="kind must be one of"):
        check_input_path(tmp_path, "x", kind="folder")


def test_devices_that_are_fine():
    assert check_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert check_device(" AUTO ") in ("cuda", "cpu")
    assert check_device("cpu") == "cpu" == check_device(torch.device("cpu"))
    assert check_device("cpu:0") == "cpu:0"
    assert resolve_device("cpu", "--device") == "cpu"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_indices_are_checked():
    count = torch.cuda.device_count()
    assert check_device(f"cuda:{count - 1}") == f"cuda:{count - 1}"
    with pytest.raises(ValueError, match=f"this machine has {count} CUDA GPU"):
        check_device(f"cuda:{count}")
    assert check_fits(1024, "cuda") == 1024


def test_atom_bank_arithmetic():
    # one layer 8 -> 4, 2 atoms per task, 3 tasks, float32
    bank = 6 * ((8 + 4) * 4 + ATOM_BOOKKEEPING_BYTES)
    assert atom_bank_bytes([(8, 4)], 2, 3, training=False) == bank
    assert atom_bank_bytes([(8, 4)], 2, 3) == bank + 3 * 2 * 12 * 4 + bank
    assert atom_bank_bytes([(8, 4)] * 5, 2, 3, training=False) == 5 * bank
    assert atom_bank_bytes([], 16, 10) == 0
    with pytest.raises(ValueError, match="atoms_per_task must be an int >= 0, got 2.5"):
        atom_bank_bytes([(8, 4)], 2.5, 3)
    with pytest.raises(ValueError, match=r"\(d_in, d_out\) pairs of positive ints, got \(8, 0\)"):
        atom_bank_bytes([(8, 0)], 2, 3)


def test_sizes_that_fit():
    shapes = [(768, 2304), (768, 768), (768, 3072), (3072, 768)] * 12
    size = check_atom_banks_fit(shapes, 16, 10, "cpu", available=8 * 1024 ** 3)  # the paper's: MBs
    assert size < 200 * 1024 ** 2
    assert check_fits(10 ** 15, "mps") == 10 ** 15  # free memory unknown: not refused
    assert check_fits(1, "cpu") == 1  # this machine's RAM is queried
    assert format_bytes(1536) == "1.5 KiB" and format_bytes(12) == "12 B"


def test_an_unwritable_run_folder_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    import tempfile

    from moram_avalanche.utils.paths import PathError

    (tmp_path / "run").mkdir()
    mkstemp = tempfile.mkstemp

    def denied(*args, dir=None, **kwargs):
        if str(dir) == str(tmp_path / "run"):
            raise PermissionError(13, "Permission denied")
        return mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", denied)  # root ignores chmod: refuse the write itself
    with pytest.raises(PathError, match=r"--log-dir .*run cannot be written \(Permission denied\) at "):
        check_run_path(tmp_path / "run")
    assert list((tmp_path / "run").iterdir()) == []
