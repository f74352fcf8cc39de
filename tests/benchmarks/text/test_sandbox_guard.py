"""The audit hook, called directly with the events CPython raises (the hook is never added to the
test's own interpreter): what it refuses in every sandbox, and what only under the Python guard."""

import os

import pytest

from moram_avalanche.benchmarks.text.sandbox.inside.guard import HiddenFrame, Refused, audit_hook


@pytest.fixture
def folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "outside.txt").write_text("keep")
    os.symlink(tmp_path / "outside.txt", work / "link-out")
    return work


EVERYWHERE = [("sys._getframe", (1,)), ("sys._current_frames", ()), ("sys.settrace", (None,)),
              ("sys.setprofile", (None,)), ("gc.get_objects", (None,)), ("gc.get_referrers", ((),)),
              ("gc.get_referents", ((),)), ("object.__getattr__", (None, "tb_frame")),
              ("object.__getattr__", (None, "gi_frame")), ("ctypes.dlopen", (None,)),
              ("ctypes.call_function", (0, ())), ("open", ("/proc/self/mem", "rb", 0)),
              ("open", ("/proc/1/mem", "rb", 0))]


@pytest.mark.parametrize("python_guard", [False, True])
@pytest.mark.parametrize("event,args", EVERYWHERE, ids=[f"{e}-{a[-1] if a else ''}" for e, a in EVERYWHERE])
def test_the_way_to_the_harness_memory_is_refused_in_every_sandbox(folder, python_guard, event, args):
    with pytest.raises(HiddenFrame):
        audit_hook(str(folder), python_guard=python_guard)(event, args)
    assert issubclass(HiddenFrame, ValueError)  # what sys._getframe's callers in the standard library handle


def allowed(folder, python_guard, event, args):
    try:
        audit_hook(str(folder), python_guard=python_guard)(event, args)
    except Refused:
        return False
    return True


def test_a_refusal_is_what_the_kernel_would_say():
    assert issubclass(Refused, PermissionError)  # caught by a program's ``except OSError``


def test_the_namespace_sandboxes_leave_the_rest_to_the_kernel(folder):
    for event, args in [("socket.__new__", (None, 1, 1, 0)), ("os.posix_spawn", ("/bin/true", [], {})),
                        ("open", ("/etc/hostname", "w", os.O_WRONLY)), ("os.kill", (1, 9)),
                        ("open", ("/proc/1/environ", "rb", 0)), ("object.__getattr__", (None, "f_code"))]:
        assert allowed(folder, False, event, args), event


def test_the_python_guard_refuses_sockets_processes_signals_and_environments(folder):
    refused = [("socket.__new__", (None, 1, 1, 0)), ("socket.connect", (None, ("127.0.0.1", 80))),
               ("socket.getaddrinfo", ("example.org", 80, 0, 0, 0)), ("os.system", (b"true",)),
               ("os.posix_spawn", ("/bin/true", [], {})), ("os.exec", ("/bin/true", [], None)),
               ("os.fork", ()), ("subprocess.Popen", ("true", [], None, None)), ("os.kill", (1, 9)),
               ("os.killpg", (1, 9)), ("open", ("/proc/1/environ", "rb", 0)),
               ("open", (f"/proc/{os.getppid()}/environ", "rb", 0))]
    for event, args in refused:
        assert not allowed(folder, True, event, args), event
    assert allowed(folder, True, "os.kill", (os.getpid(), 0))  # itself
    assert allowed(folder, True, "open", ("/etc/hostname", "r", os.O_RDONLY))  # reading is not refused


def test_the_python_guard_keeps_every_change_inside_the_working_folder(folder):
    inside, outside = str(folder / "new.txt"), str(folder.parent / "outside.txt")
    creat = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    ok = [("open", (inside, "w", creat)), ("open", ("relative.txt", "a", os.O_WRONLY | os.O_APPEND)),
          ("os.mkdir", (str(folder / "d"), 0o777, -1)), ("os.symlink", (outside, str(folder / "l"), -1)),
          ("os.rename", (inside, str(folder / "b"), -1, -1)), ("os.truncate", (3, 0)),
          ("os.remove", (inside, -1))]
    refused = [("open", (outside, "w", creat)), ("open", (outside, None, os.O_RDWR)),
               ("open", (str(folder / "link-out"), "a", os.O_WRONLY | os.O_APPEND)),  # a link out of the folder
               ("open", (str(folder / ".." / "outside.txt"), "w", creat)), ("os.truncate", (outside, 0)),
               ("os.mkdir", (str(folder.parent / "d"), 0o777, -1)), ("os.symlink", (inside, outside, -1)),
               ("os.link", (outside, inside, -1, -1)), ("os.rename", (outside, inside, -1, -1)),
               ("os.rename", (inside, outside, -1, -1)), ("os.remove", (outside, -1)), ("os.rmdir", ("/tmp", -1)),
               ("os.chmod", (outside, 0o777, -1)), ("os.utime", (outside, None, None, -1))]
    cwd = os.getcwd()
    os.chdir(folder)  # relative paths are read against the working folder, as in the sandbox
    try:
        for event, args in ok:
            assert allowed(folder, True, event, args), (event, args)
        for event, args in refused:
            assert not allowed(folder, True, event, args), (event, args)
            assert allowed(folder, False, event, args), (event, args)  # the kernel's job there
    finally:
        os.chdir(cwd)
    assert (folder.parent / "outside.txt").read_text() == "keep"
