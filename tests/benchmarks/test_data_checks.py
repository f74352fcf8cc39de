"""check-data reads the registry: its choices, its checks (``all``: every image layout) and its help; a
user's registered check is one more choice, run by the command line."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from moram_avalanche.benchmarks import Benchmark, DataCheck, benchmark_entry
from moram_avalanche.benchmarks.data_checks import ALL, data_check_names, data_checks, describe_data_checks
from moram_avalanche.cli import main


def count_tasks(root, verify_images=False, progress=True):
    """A user's check: usable when ``root`` holds a ``tasks.txt``."""
    found = (Path(root) / "tasks.txt").is_file()
    return [SimpleNamespace(usable=found)], f"tiny in {root}: {'found' if found else 'no tasks.txt'}"


TINY = Benchmark("tiny", "text", "json:loads", protocol="a toy text stream (a user's tests)",
                 check=DataCheck(count_tasks, layout="a tasks.txt"))


def test_the_choices_are_the_image_layouts_all_then_the_other_layouts():
    assert data_check_names() == ("xtail", "mtil", "all", "lm-cl", "trace", "superni", "codealpaca")


def test_all_is_every_image_layout_in_order_and_each_layout_its_own_check():
    from moram_avalanche.benchmarks.images.data_checks import check_mtil_layout, check_xtail_layout
    from moram_avalanche.benchmarks.text.data_checks import check_trace_layout

    assert [check.run for check in data_checks(ALL)] == [check_xtail_layout, check_mtil_layout]
    assert data_checks("trace") == (benchmark_entry("trace").check,)
    assert data_checks("trace")[0].run is check_trace_layout
    with pytest.raises(ValueError, match="unknown check-data layout 'mtil-5shot'; available: all, codealpaca"):
        data_checks("mtil-5shot")  # its data is mtil's: no check of its own


def test_the_help_says_what_each_layout_is_and_what_all_checks():
    assert describe_data_checks() == (
        "which layout to check (default: all, every image layout: xtail, mtil): xtail: X-TAIL's split files; "
        "mtil: torchvision's layout (also what mtil-5shot reads); lm-cl: the 15 text classification tasks "
        "(O-LoRA's CL_Benchmark or the MoRAM release's LLM-CL-Benchmark); trace: TRACE's 8 tasks; superni: "
        "SAPT's 15 SuperNI tasks (CL_Benchmark or CL_Benchmark/SuperNI); codealpaca: code_alpaca_20k.json and "
        "the HumanEval problems")


def test_a_users_check_is_a_choice_of_the_command_line_and_runs(registered, tmp_path, capsys):
    registered(TINY)
    assert data_check_names()[-1] == "tiny"
    assert TINY.check not in data_checks(ALL)  # not an image layout
    assert describe_data_checks().endswith("; tiny: a tasks.txt")
    assert main(["check-data", "--root", str(tmp_path), "--benchmark", "tiny"]) == 1
    assert capsys.readouterr().out == f"tiny in {tmp_path}: no tasks.txt\n"
    (tmp_path / "tasks.txt").write_text("colour\n")
    assert main(["check-data", "--root", str(tmp_path), "--benchmark", "tiny"]) == 0
    assert capsys.readouterr().out == f"tiny in {tmp_path}: found\n"


def test_a_users_image_layout_joins_all(registered, tmp_path, capsys):
    registered(Benchmark("tiny", "clip", "json:loads", protocol="a toy image stream",
                         check=DataCheck(count_tasks, layout="a tasks.txt", images=True)))
    assert data_check_names() == ("xtail", "mtil", "tiny", "all", "lm-cl", "trace", "superni", "codealpaca")
    assert [check.layout for check in data_checks(ALL)] == [
        "X-TAIL's split files", "torchvision's layout (also what mtil-5shot reads)", "a tasks.txt"]
    assert "(default: all, every image layout: xtail, mtil, tiny)" in describe_data_checks()
