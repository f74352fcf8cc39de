"""0.6's benchmark tables for one version: read-only views of the registry, each with a
DeprecationWarning naming the reading line and what to read instead; 0.6's module paths keep the
room's names."""

import subprocess
import sys
from argparse import Namespace

import pytest

import moram_avalanche.benchmarks as room


def test_the_old_tables_hold_what_0_6_held_and_warn():
    from moram_avalanche.benchmarks.images.streams import mtil, mtil_5shot, xtail
    from moram_avalanche.benchmarks.text.trace import trace

    with pytest.warns(DeprecationWarning, match="benchmarks.BENCHMARK_FAMILIES is deprecated .*benchmark_family"):
        families = room.BENCHMARK_FAMILIES
    assert dict(families) == {"xtail": "clip", "mtil": "clip", "mtil-5shot": "clip", "synthetic": "clip",
                              "lm-cl": "text", "trace": "text", "superni": "text", "codealpaca": "text",
                              "synthetic-text": "text"}
    with pytest.warns(DeprecationWarning, match="benchmarks.BENCHMARKS is deprecated"):
        clip = room.BENCHMARKS
    assert set(clip) == {"xtail", "mtil", "mtil-5shot", "synthetic"}
    assert (clip["xtail"], clip["mtil"], clip["mtil-5shot"]) == (xtail, mtil, mtil_5shot)
    with pytest.warns(DeprecationWarning, match="benchmarks.TEXT_BENCHMARKS is deprecated"):
        text = room.TEXT_BENCHMARKS
    assert set(text) == {"lm-cl", "trace", "superni", "codealpaca", "synthetic-text"} and text["trace"] is trace
    with pytest.warns(DeprecationWarning, match=r"benchmarks.BENCHMARK_PROTOCOLS is deprecated .*\.protocol"):
        protocols = room.BENCHMARK_PROTOCOLS
    assert protocols["trace"] == "TRACE's eight tasks from --data-root"
    with pytest.raises(TypeError):  # a view: registering goes through register_benchmark
        protocols["tiny"] = "a toy"


def test_the_old_data_checks_table_is_the_choices_with_their_functions():
    from moram_avalanche.benchmarks.images.data_checks import check_mtil_layout, check_xtail_layout
    from moram_avalanche.benchmarks.text.data_checks import check_codealpaca_layout

    with pytest.warns(DeprecationWarning, match="data_checks.DATA_CHECKS is deprecated .*data_checks\\(name\\)"):
        from moram_avalanche.benchmarks.data_checks import DATA_CHECKS
    assert set(DATA_CHECKS) == {"xtail", "mtil", "all", "lm-cl", "trace", "superni", "codealpaca"}
    assert DATA_CHECKS["all"] == (check_xtail_layout, check_mtil_layout)
    assert DATA_CHECKS["codealpaca"] == (check_codealpaca_layout,)


def test_the_warning_names_the_line_that_read_the_old_name():
    with pytest.warns(DeprecationWarning) as caught:
        room.BENCHMARK_FAMILIES  # noqa: B018
    assert [warning.filename for warning in caught] == [__file__]


def test_family_of_of_0_6_is_benchmark_family():
    import moram_avalanche.experiments.from_arguments as from_arguments

    with pytest.warns(DeprecationWarning, match=r"family_of\(args\) is deprecated .*benchmark_family\(args.benchmark\)"):
        family_of = from_arguments.family_of
    assert family_of(Namespace(benchmark="superni")) == "text" and family_of(Namespace(benchmark="mtil")) == "clip"
    with pytest.raises(AttributeError):
        from_arguments.no_such_name  # noqa: B018


def test_an_old_module_path_does_not_replace_a_name_the_room_imports_on_first_use():
    # 0.6's benchmarks/clip_benchmark.py and synthetic_text.py: modules then, functions of the room now
    code = ("import warnings; warnings.simplefilter('ignore')\n"
            "import moram_avalanche.benchmarks.clip_benchmark, moram_avalanche.benchmarks.synthetic_text\n"
            "from moram_avalanche.benchmarks import clip_benchmark, synthetic_text\n"
            "print(type(clip_benchmark).__name__, type(synthetic_text).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["function", "function"]
