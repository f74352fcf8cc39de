"""The reaper on its own (in a child process, as it makes itself a subreaper): every process below
it gone when the program's process ends, and the program killed at the deadline. The probes are
sleepers of a few seconds found by a marker and killed by pid afterwards."""

import json
import subprocess
import sys

from sandbox_cases import SANDBOX_FOLDER, kill_marked, marked_processes, new_marker

REAPED = r"""
import importlib.util, json, os, sys, time
folder = sys.argv[1] + "/inside"
spec = importlib.util.spec_from_file_location("harness", folder + "/__init__.py", submodule_search_locations=[folder])
package = importlib.util.module_from_spec(spec); sys.modules["harness"] = package; spec.loader.exec_module(package)
from harness.reaper import run_reaped
sleeper = [sys.executable, "-c", "import time; time.sleep(10)  # " + sys.argv[2]]
def daemonize():  # a daemon: fork, setsid, fork, close everything, exec; the middle one leaves
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 256)
            os.execv(sys.executable, sleeper)
        os._exit(0)
    os.posix_spawn(sys.executable, sleeper, dict(os.environ), setsid=True)
    deadline = time.monotonic() + 5
    while running() < 2:  # both sleepers up before the program ends (else exit code 4: nothing tested)
        if time.monotonic() > deadline:
            os._exit(4)
        time.sleep(0.02)
    os._exit(int(sys.argv[3]))
def running():
    count = 0
    for name in os.listdir("/proc"):
        try:
            count += ("time.sleep(10)  # " + sys.argv[2]).encode() in open("/proc/" + name + "/cmdline", "rb").read()
        except OSError:
            pass
    return count
def hang():
    signal = __import__("signal")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
target = daemonize if sys.argv[3] != "hang" else hang
print(json.dumps(run_reaped(target, float(sys.argv[4]))))
"""


def reaped(marker, how, kill_after):
    done = subprocess.run([sys.executable, "-I", "-c", REAPED, SANDBOX_FOLDER, marker, how, str(kill_after)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_descendant_is_gone_when_the_program_ends():
    marker = new_marker()
    try:
        assert reaped(marker, "3", 8) == "exit code 3"
        assert marked_processes(marker) == []
    finally:
        left = kill_marked(marker)
    assert left == []


def test_the_program_is_killed_at_the_deadline():
    assert reaped(new_marker(), "hang", 0.5) == "killed after 0.5 s"
