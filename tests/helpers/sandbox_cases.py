"""Shared pieces of the sandbox's tests (tests/benchmarks/text/test_sandbox_*.py): a toy problem,
completions written as plain code, the sandboxes to run each test in (skipped, with the reason,
where one is missing), and the harmless probes the tests use -- processes found by a marker in their
command line (and killed by pid afterwards), listeners on 127.0.0.1 and on unix sockets that the
test starts, an evaluating process with a canary in its environment."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid

import pytest

from moram_avalanche.benchmarks.text.sandbox import ISOLATIONS, isolation_missing

ADD = {"task_id": "Toy/0", "prompt": 'def add(a, b):\n    """Their sum."""\n',
       "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n",
       "entry_point": "add"}
RIGHT, WRONG = "    return a + b\n", "    return a - b\n"
#: every sandbox, strongest first (a test taking ``isolation`` runs in each)
SANDBOXES = list(ISOLATIONS)
#: the package's sandbox folder (loaded on its own by :func:`evaluate_in_child`)
SANDBOX_FOLDER = os.path.join(os.path.dirname(__file__), "..", "..", "moram_avalanche", "benchmarks", "text",
                              "sandbox")


def usable(name):
    """``name``, or the test skipped with the reason the sandbox is missing here."""
    missing = isolation_missing(name)
    if missing:
        pytest.skip(f"the {name} sandbox is missing here: {missing}")
    return name


def body(code):
    """``code`` (any indentation) as a function body: dedented, then indented four spaces."""
    return textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", "    ")


def new_marker():
    """A word no other process has in its command line."""
    return f"moram-sandbox-probe-{uuid.uuid4().hex}"


def sleeper(marker, seconds):
    """A command line that sleeps ``seconds`` with ``marker`` in it (a bounded process)."""
    return [sys.executable, "-c", f"import time; time.sleep({seconds})  # {marker}"]


def started(marker):
    """Body code that waits (up to 3 s) for a process carrying ``marker`` to show in ``/proc`` and
    returns a wrong answer when none does: a test of what becomes of a process the program starts
    then fails if the program could not start it."""
    return body(f"""
        import os as _os, time as _time
        _deadline = _time.monotonic() + 3
        def _running():
            for _name in _os.listdir('/proc'):
                try:
                    if {marker!r}.encode() in open('/proc/' + _name + '/cmdline', 'rb').read():
                        return True
                except Exception:
                    pass
            return False
        while not _running():
            if _time.monotonic() > _deadline:
                return a - b
            _time.sleep(0.02)
    """)


def marked_processes(marker):
    """The pids of the live processes whose command line holds ``marker`` (zombies excluded)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(name))
    return found


def kill_marked(marker):
    """SIGKILL, by pid, every process carrying ``marker``; their pids (the test's clean-up)."""
    pids = marked_processes(marker)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    return pids


@contextlib.contextmanager
def tcp_listener():
    """A non-blocking TCP listener on 127.0.0.1 (an ephemeral port), closed afterwards."""
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def unix_listener(path):
    """A non-blocking unix-socket listener at ``path``, closed and removed afterwards."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)  # as a system bus's or a container runtime's socket: anyone may connect
    server.listen()
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def accepted_any(server):
    """Whether someone connected to ``server`` (the connection closed again)."""
    try:
        connection, _ = server.accept()
    except BlockingIOError:
        return False
    connection.close()
    return True


def evaluate_in_child(problem, completion, isolation, env):
    """Run ``check_program`` in a fresh evaluating process with the environment ``env``; its
    Execution as a dict. The sandbox folder is loaded on its own there (as the harness loads its
    own): the package around it would import torch for seconds."""
    code = (f"import importlib.util, json, sys; folder = {os.path.abspath(SANDBOX_FOLDER)!r}; "
            "spec = importlib.util.spec_from_file_location('sandbox_alone', folder + '/__init__.py', "
            "submodule_search_locations=[folder]); package = importlib.util.module_from_spec(spec); "
            "sys.modules['sandbox_alone'] = package; spec.loader.exec_module(package); "
            "job = json.loads(sys.stdin.read()); "
            "print(json.dumps(package.check_program(job['problem'], job['completion'], isolation=job['isolation'])"
            ".__dict__))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          input=json.dumps({"problem": problem, "completion": completion, "isolation": isolation}))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
