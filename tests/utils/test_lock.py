"""RunFolderLock: one process owns a run folder; a killed owner never blocks the next run."""

import os
import signal
import subprocess
import sys
import time

import pytest

from moram_avalanche.utils.files import remove_temporaries
from moram_avalanche.utils.lock import FolderLockedError, RunFolderLock, folder_owner
from moram_avalanche.utils.paths import LOCK_NAME, check_run_path, is_new_folder

HOLD = """
import sys, time
from moram_avalanche.utils.lock import RunFolderLock
with RunFolderLock(sys.argv[1], "--log-dir"):
    print("held", flush=True)
    time.sleep(120)
"""


def holder(folder):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE,
                               text=True, env=env)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_process_is_refused_with_the_owner_named_and_a_killed_owner_releases(tmp_path):
    folder = tmp_path / "run"
    process = holder(folder)
    try:
        with pytest.raises(FolderLockedError) as info:
            RunFolderLock(folder, "--log-dir").acquire()
        message = str(info.value)
        assert f"--log-dir {folder} is in use by process {process.pid} on " in message
        assert "command: -c" in message and "started " in message
        assert "give another folder" in message and "\n" not in message
        assert folder_owner(folder).startswith(f"process {process.pid} ")
    finally:
        process.send_signal(signal.SIGKILL)  # no clean-up runs: the OS drops the lock
        process.wait()
    assert (folder / LOCK_NAME).exists()  # the stale file stays and does not block
    assert folder_owner(folder) is None
    with RunFolderLock(folder) as lock:
        assert lock.held and str(os.getpid()) in (folder / LOCK_NAME).read_text()
    assert not lock.held


def test_the_same_process_locking_twice_is_refused_not_deadlocked(tmp_path):
    with RunFolderLock(tmp_path / "run"):
        started = time.monotonic()
        with pytest.raises(FolderLockedError, match="already in use by this process"):
            RunFolderLock(tmp_path / "run").acquire()
        assert time.monotonic() - started < 5
    with RunFolderLock(tmp_path / "run"):  # released: taken again
        pass


def test_the_lock_file_is_no_temporary_and_leaves_a_folder_new(tmp_path):
    folder = tmp_path / "run"
    with RunFolderLock(folder):
        (folder / ".checkpoint.pt.abcd1234.tmp").write_bytes(b"half")
        assert remove_temporaries(folder) == [folder / ".checkpoint.pt.abcd1234.tmp"]
        assert (folder / LOCK_NAME).exists()
        assert is_new_folder(folder)
        assert check_run_path(folder) == folder  # an expected entry, a file
        (folder / "results.json").write_text("{}")
        assert not is_new_folder(folder)
    assert is_new_folder(tmp_path / "missing") and not is_new_folder(tmp_path / "run" / "results.json")
