"""Files: atomic writes with ordinary permissions, the temporaries a killed write leaves, output folders."""

import os
import stat

import pytest

from moram_avalanche.utils.files import TEMPORARY, atomic_write_text, check_output_folder, remove_temporaries


def test_atomic_writes_get_the_permissions_of_a_plain_file(tmp_path):
    old = os.umask(0o022)
    try:
        from moram_avalanche.utils import files

        path = atomic_write_text(tmp_path / "results.json", "{}")
        plain = tmp_path / "plain.txt"
        plain.write_text("")
        assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~files._UMASK
    finally:
        os.umask(old)


def test_only_the_temporaries_of_atomic_writes_are_removed(tmp_path):
    ours = [tmp_path / ".checkpoint.pt.k2j3h4_9.tmp", tmp_path / ".results.json.abcdefgh.tmp"]
    theirs = [tmp_path / "checkpoint.pt", tmp_path / ".hidden.tmp", tmp_path / "notes.abcdefgh.tmp"]
    for path in ours + theirs:
        path.write_text("x")
    (tmp_path / "sub").mkdir()
    nested = tmp_path / "sub" / ".checkpoint.pt.abcdefgh.tmp"
    nested.write_text("x")
    assert sorted(remove_temporaries(tmp_path)) == sorted(ours)
    assert all(p.exists() for p in theirs) and nested.exists()
    assert remove_temporaries(tmp_path / "missing") == []
    assert TEMPORARY.match(".checkpoint.pt.a1b2c3d4.tmp") and not TEMPORARY.match(".checkpoint.pt.tmp")


def test_output_folders_are_checked_without_being_created(tmp_path, monkeypatch):
    assert check_output_folder(tmp_path / "new" / "run", "--log-dir") == tmp_path / "new" / "run"
    assert not (tmp_path / "new").exists() and list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"--log-dir .*file/run: .*file is a file, not a folder"):
        check_output_folder(tmp_path / "file" / "run", "--log-dir")

    import tempfile

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(ValueError, match=r"--out .* cannot be written \(No space left on device\)"):
        check_output_folder(tmp_path / "x", "--out")
