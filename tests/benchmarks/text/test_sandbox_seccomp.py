"""The seccomp filter: its assembly checked by hand, and its effect in a child process that loads it
(socket families, namespaces, fork still working)."""

import json
import subprocess
import sys

import pytest

from moram_avalanche.benchmarks.text.sandbox.inside.seccomp import (
    ARCHITECTURES,
    RET_ALLOW,
    assemble,
    filter_program,
    seccomp_missing,
)
from sandbox_cases import SANDBOX_FOLDER


def test_labels_become_forward_offsets():
    code = [(0x20, 0, 0, 0), (0x15, "yes", "next", 7), (0x15, "next", "no", 8), ("yes",), (0x06, 0, 0, 1),
            ("no",), (0x06, 0, 0, 2)]
    assert assemble(code) == [(0x20, 0, 0, 0), (0x15, 1, 0, 7), (0x15, 0, 1, 8), (0x06, 0, 0, 1), (0x06, 0, 0, 2)]


@pytest.mark.parametrize("machine", list(ARCHITECTURES))
def test_every_jump_lands_inside_the_program_and_every_path_returns(machine):
    program = filter_program([2, 10], machine)
    assert program[0] == (0x20, 0, 0, 4) and program[-1] == (0x06, 0, 0, RET_ALLOW)
    for at, (code, jt, jf, _) in enumerate(program):
        if code & 0x07 == 0x05:  # a jump
            assert at + 1 + max(jt, jf) < len(program)
    assert sum(code == 0x06 for code, *_ in program) == 5  # allow x3, EPERM, ENOSYS
    arch, numbers, _ = ARCHITECTURES[machine]
    checked = {k for code, _, _, k in program if code == 0x15}
    assert {arch, 2, 10, *(numbers[name] for name in ("socket", "clone", "clone3", "unshare", "setns", "ptrace"))} <= checked


PROBE = r"""
import ctypes, errno, importlib.util, json, os, socket, sys
folder = sys.argv[1] + "/inside"
spec = importlib.util.spec_from_file_location("harness", folder + "/__init__.py", submodule_search_locations=[folder])
package = importlib.util.module_from_spec(spec); sys.modules["harness"] = package; spec.loader.exec_module(package)
from harness.seccomp import install_seccomp
install_seccomp(json.loads(sys.argv[2]))
def attempt(call):
    try:
        call()
        return "ok"
    except OSError as error:
        return errno.errorcode[error.errno]
libc = ctypes.CDLL(None, use_errno=True)
def unshare():
    if libc.unshare(0x10000000) == -1:
        raise OSError(ctypes.get_errno(), "unshare")
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
print(json.dumps({"inet": attempt(lambda: socket.socket(socket.AF_INET).close()),
                  "unix": attempt(lambda: socket.socket(socket.AF_UNIX).close()),
                  "netlink": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()),
                  "pair": attempt(lambda: [s.close() for s in socket.socketpair()]),
                  "unshare": attempt(unshare), "fork": attempt(fork)}))
"""


@pytest.mark.parametrize("families,inet", [([2, 10], "ok"), ([], "EPERM")], ids=["namespaces", "python-guard"])
def test_the_filter_refuses_what_it_says_in_a_process_that_loads_it(families, inet):
    if seccomp_missing():
        pytest.skip(seccomp_missing())
    done = subprocess.run([sys.executable, "-I", "-c", PROBE, SANDBOX_FOLDER, json.dumps(families)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"inet": inet, "unix": "EPERM", "netlink": "EPERM", "pair": "ok",
                                       "unshare": "EPERM", "fork": "ok"}
