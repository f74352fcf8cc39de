"""The benchmark registry: one entry per name, read by every lookup; a user's benchmark enters by
registration alone; entries are checked when made; registering imports no stream."""

import json
import subprocess
import sys

import pytest

from moram_avalanche.benchmarks import (
    Benchmark,
    DataCheck,
    benchmark_entry,
    benchmark_family,
    benchmarks,
    describe_benchmarks,
    get_benchmark,
)
from moram_avalanche.benchmarks.registry import resolve

#: the package's benchmarks and their families, as the paper's protocols are (in registration order)
PACKAGE_BENCHMARKS = {"xtail": "clip", "mtil": "clip", "mtil-5shot": "clip", "synthetic": "clip",
                      "lm-cl": "text", "trace": "text", "superni": "text", "codealpaca": "text",
                      "synthetic-text": "text"}


def tiny_stream(data_root=None, **options):
    """A user's builder: one synthetic domain, six images per split."""
    from moram_avalanche.benchmarks.images.synthetic import synthetic

    return synthetic(("shapes",), train_size=6, test_size=6, **options)


TINY = Benchmark("tiny", "clip", tiny_stream, protocol="one toy domain, six images (a user's tests)")


def test_the_package_registers_each_benchmark_once_with_its_family():
    assert {name: entry.family for name, entry in benchmarks().items()} == PACKAGE_BENCHMARKS
    assert list(benchmarks()) == list(PACKAGE_BENCHMARKS)  # the order --help lists them in
    assert {name: benchmark_family(name) for name in PACKAGE_BENCHMARKS} == PACKAGE_BENCHMARKS
    assert benchmark_family("XTAIL") == "clip"  # names are looked up lower-cased, as --benchmark's


def test_each_builder_lies_in_its_familys_wing_and_says_whether_it_reads_a_data_root():
    # builders are named by strings, which import-linter cannot follow: the wings' independence is checked here
    wing = {"clip": "moram_avalanche.benchmarks.images.", "text": "moram_avalanche.benchmarks.text."}
    for name, entry in benchmarks().items():
        assert entry.build.__module__.startswith(wing[entry.family]), name
        if entry.check is not None:
            assert entry.check.run.__module__.startswith(wing[entry.family]), name
    on_disk = {name for name, entry in benchmarks().items() if entry.reads_from_disk}
    assert on_disk == {"xtail", "mtil", "mtil-5shot", "lm-cl", "trace", "superni", "codealpaca"}


def test_get_benchmark_gives_the_function_that_builds_the_stream():
    from moram_avalanche.benchmarks.images.streams import mtil_5shot, xtail
    from moram_avalanche.benchmarks.text.trace import trace

    assert get_benchmark("xtail") is xtail and get_benchmark("mtil-5shot") is mtil_5shot
    assert get_benchmark("trace") is trace
    stream = get_benchmark("synthetic")(None, order="digits", seed=3)  # the command line's one --order domain
    assert [experience.domain for experience in stream.train_stream] == ["digits"]


def test_a_users_benchmark_runs_through_get_benchmark_and_is_described(registered):
    assert registered(TINY) is TINY
    stream = get_benchmark("tiny")(None)
    assert [experience.domain for experience in stream.train_stream] == ["shapes"]
    assert len(stream.train_stream[0].dataset) == 6 and len(stream.test_stream[0].dataset) == 6
    assert benchmark_family("tiny") == "clip" and not benchmark_entry("tiny").reads_from_disk
    assert describe_benchmarks().endswith("; tiny: one toy domain, six images (a user's tests)")
    assert list(benchmarks())[-1] == "tiny"


def test_a_builder_named_by_its_module_is_imported_when_first_used(registered):
    registered(Benchmark("parsed", "text", "json:loads", protocol="a stream read from a JSON text"))
    assert get_benchmark("parsed") is json.loads
    assert get_benchmark("parsed")('{"task": 1}') == {"task": 1}


def test_an_unknown_name_is_one_error_listing_every_registered_name(registered):
    registered(TINY)
    expected = ("unknown benchmark 'imagenet'; available: codealpaca, lm-cl, mtil, mtil-5shot, superni, "
                "synthetic, synthetic-text, tiny, trace, xtail")
    for lookup in (get_benchmark, benchmark_family, benchmark_entry):
        with pytest.raises(ValueError) as info:
            lookup("imagenet")
        assert str(info.value) == expected


def test_a_name_is_registered_once_unless_replaced(registered):
    registered(TINY)
    with pytest.raises(ValueError, match="a benchmark named 'tiny' is registered already .*replace=True"):
        registered(Benchmark("tiny", "text", "json:loads", protocol="another"))
    assert benchmark_family("tiny") == "clip"
    registered(Benchmark("tiny", "text", "json:loads", protocol="another"), replace=True)
    assert benchmark_family("tiny") == "text"
    with pytest.raises(TypeError, match="register_benchmark takes a Benchmark"):
        registered({"name": "tiny"})


def test_the_registry_is_restored_after_a_test_that_registered():
    assert list(benchmarks()) == list(PACKAGE_BENCHMARKS)  # runs after the tests above, in file order


@pytest.mark.parametrize("fields, error, message", [
    ({"name": "XTail2"}, ValueError, "a benchmark name is lower case letters"),
    ({"name": "two words"}, ValueError, "a benchmark name is lower case letters"),
    ({"family": ""}, ValueError, "family must name a model family"),
    ({"builder": "streams.xtail"}, TypeError, r"'package.module:function'.*got 'streams.xtail'"),
    ({"builder": 3}, TypeError, "builder must be a function"),
    ({"protocol": " "}, ValueError, "protocol is the phrase --help gives it"),
    ({"check": tiny_stream}, TypeError, "check must be a DataCheck or None"),
])
def test_an_entry_is_checked_when_it_is_made(fields, error, message):
    with pytest.raises(error, match=message):
        Benchmark(**{"name": "tiny", "family": "clip", "builder": tiny_stream, "protocol": "toy", **fields})


def test_a_data_check_is_checked_when_it_is_made():
    with pytest.raises(TypeError, match="a data check must be a function"):
        DataCheck("no reference", layout="files")
    with pytest.raises(ValueError, match="layout is the text"):
        DataCheck(tiny_stream, layout="")
    with pytest.raises(TypeError, match="DataCheck.images is True or False"):
        DataCheck(tiny_stream, layout="files", images="yes")


def test_a_reference_that_names_nothing_says_so_and_a_missing_dependency_keeps_its_error(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="there is no module 'no_such_stream_module'"):
        resolve("no_such_stream_module:build", "the builder")
    with pytest.raises(ValueError, match="json has no 'no_such_function'"):
        resolve("json:no_such_function", "the builder")
    (tmp_path / "needs_a_library.py").write_text("import no_such_library_for_streams\n\ndef build(root): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:  # the module exists: its own import error, not ours
        resolve("needs_a_library:build", "the builder")
    assert info.value.name == "no_such_library_for_streams"


def test_registering_and_listing_import_no_stream():
    code = ("import sys\n"
            "from moram_avalanche.benchmarks import benchmarks, benchmark_family, describe_benchmarks\n"
            "from moram_avalanche.benchmarks.data_checks import data_check_names, describe_data_checks\n"
            "benchmarks(), benchmark_family('trace'), describe_benchmarks(), data_check_names(), describe_data_checks()\n"
            "print(sorted(m for m in ('torch', 'numpy', 'PIL', 'avalanche', 'tqdm') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
