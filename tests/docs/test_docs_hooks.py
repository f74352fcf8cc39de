"""The documentation site's generators (docs/hooks/), without MkDocs: the command-line reference
lists every sub-command and option of the real parser; the demo's tables render a run folder's
files exactly; the API check finds a public name without a docstring or left off the pages."""

import argparse
import sys
import textwrap
from pathlib import Path

import pytest

from code_blocks import blocks_of

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))

import api_coverage  # noqa: E402  (docs/hooks/ is no package)
import cli_reference  # noqa: E402
import demo_tables  # noqa: E402
import house_comments  # noqa: E402
import page_markers  # noqa: E402

from moram_avalanche.cli import COMMANDS, build_parser  # noqa: E402


def section(markdown: str, command: str) -> str:
    """The part of the reference about ``command``: from its heading to the next one."""
    start = markdown.index(f"## `moram-avalanche {command}`")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end != -1 else len(markdown)]


def test_cli_reference_lists_every_sub_command_and_option_of_the_real_parser():
    parser = build_parser()
    markdown = cli_reference.cli_reference_markdown(parser, COMMANDS)
    (sub_parsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub_parsers.choices) == list(COMMANDS)
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == [f"## `moram-avalanche {name}`" for name in COMMANDS]
    for name, sub in sub_parsers.choices.items():
        text = section(markdown, name)
        rows = [line for line in text.splitlines() if line.startswith("| `")]
        arguments = [a for a in sub._actions if a.dest != "help"]
        assert len(rows) == len(arguments), name
        for action, row in zip(arguments, rows):
            for option in action.option_strings or [action.metavar]:
                assert f"`{option}" in row or f", {option}" in row, (name, option, row)
    # defaults as --help gives them, checked by hand
    assert "| `--share SHARE` | `0.99` |" in section(markdown, "analyze")
    assert "| `--images IMAGES` | `16` |" in section(markdown, "analyze")
    assert "| `--model MODEL` | `ViT-B-16` |" in section(markdown, "cost")
    assert "| `--benchmark BENCHMARK` | required |" in section(markdown, "run")
    assert "| `--full` | off |" in section(markdown, "demo")
    assert "| `LOG_DIR` | required |" in section(markdown, "analyze")
    assert "99%" in section(markdown, "analyze") and "99%%" not in markdown


def test_cli_reference_fences_follow_the_code_block_rule(tmp_path):
    page = tmp_path / "command-line.md"
    page.write_text(cli_reference.cli_reference_markdown(build_parser(), COMMANDS))
    blocks = blocks_of(page)
    assert len(blocks) == 1 + len(COMMANDS)  # the top usage, then one per sub-command
    assert {block.language for block in blocks} == {"text"}


def test_cli_reference_of_a_small_parser_exactly():
    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    go = commands.add_parser("go")
    go.add_argument("target", metavar="TARGET", help="where <to> go")
    go.add_argument("--speed", type=float, default=1.5, help="a|b in 50%% of cases (default: %(default)s)")
    go.add_argument("--dry", action="store_true", help="only_print *this*; keep `a_b|c` as written")
    info = type("Command", (), {"help": "go somewhere", "description": None})
    expected = textwrap.dedent("""\
        ```text
        usage: tool [-h] COMMAND ...
        ```

        ## `tool go`

        go somewhere.

        ```text
        usage: tool go [-h] [--speed SPEED] [--dry] TARGET
        ```

        | argument | default | help |
        |---|---|---|
        | `TARGET` | required | where &lt;to> go |
        | `--speed SPEED` | `1.5` | a\\|b in 50% of cases (default: 1.5) |
        | `--dry` | off | only\\_print \\*this\\*; keep `a_b|c` as written |
        """)
    assert cli_reference.cli_reference_markdown(parser, {"go": info}) == expected


def write_demo(folder: Path) -> None:
    (folder / "moram").mkdir(parents=True)
    (folder / "zeroshot").mkdir()
    (folder / "finetune").mkdir()  # no matrix (an interrupted strategy): no table
    (folder / "summary.md").write_text("| strategy | Last |\n|---|---|\n| zeroshot | 21.4 |\n| moram | 22.9 |\n\n"
                                       "Peak memory: a note.\n")
    (folder / "table.md").write_text("| Metric | Strategy | a | b |\n|---|---|---:|---:|\n| Last | moram | 7.1 | 7.2 |\n")
    (folder / "moram" / "accuracy_matrix.csv").write_text("trained_on,a,b\na,21.4286,14.2857\nb,28.5714,7.1429\n")
    (folder / "zeroshot" / "accuracy_matrix.csv").write_text("trained_on,a,b\na,50.0000,\nb,49.9500,0.0400\n")


def test_demo_tables_render_a_run_folder_exactly(tmp_path):
    write_demo(tmp_path)
    expected = textwrap.dedent("""\
        **Summary** (`summary.md`):

        | strategy | Last |
        |---|---|
        | zeroshot | 21.4 |
        | moram | 22.9 |

        Peak memory: a note.

        **Transfer / Average / Last per domain** (`table.md`):

        | Metric | Strategy | a | b |
        |---|---|---:|---:|
        | Last | moram | 7.1 | 7.2 |

        **Accuracy matrices** (`<strategy>/accuracy_matrix.csv`: a row per domain trained on, a column per domain evaluated, accuracy in %):

        *zeroshot*

        | after training on | a | b |
        |---|---:|---:|
        | a | 50.0 |  |
        | b | 50.0 | 0.0 |

        *moram*

        | after training on | a | b |
        |---|---:|---:|
        | a | 21.4 | 14.3 |
        | b | 28.6 | 7.1 |
        """)
    assert demo_tables.demo_tables_markdown(tmp_path) == expected


def test_demo_tables_without_a_run_say_how_to_make_one(tmp_path):
    with pytest.raises(demo_tables.DemoRunMissing) as raised:
        demo_tables.demo_tables_markdown(tmp_path / "runs" / "demo")
    message = str(raised.value)
    assert "\n" not in message
    assert "run `moram-avalanche demo` first" in message and "MORAM_AVALANCHE_DOCS_DEMO" in message


def test_demo_folder_is_the_variable_or_runs_demo(tmp_path, monkeypatch):
    monkeypatch.delenv("MORAM_AVALANCHE_DOCS_DEMO", raising=False)
    assert demo_tables.demo_folder(tmp_path) == tmp_path / "runs" / "demo"
    monkeypatch.setenv("MORAM_AVALANCHE_DOCS_DEMO", "/elsewhere/demo")
    assert demo_tables.demo_folder(tmp_path) == Path("/elsewhere/demo")


def test_marker_is_replaced_only_on_its_own_line_and_missed_when_absent():
    marker = page_markers.MarkerLine("thing")
    page = "# Title\n\nsee <!-- thing --> inline\n<!-- thing -->\nafter\n"
    assert marker.replace(page, "a.md", lambda: "GENERATED\n") == "# Title\n\nsee <!-- thing --> inline\nGENERATED\nafter\n"
    assert marker.pages == ["a.md"]
    marker.start()
    warnings = []
    marker.warn_if_unused(type("Logger", (), {"warning": lambda *args: warnings.append(args)}))
    assert len(warnings) == 1


FAKE_MODULE = '''\
"""A fake public package."""

from .inner import Helper, helper

#: a documented constant
LIMIT = 3
BARE = (1, 2)
SHARED = 7
"""a constant documented by a string below it"""


def documented():
    """Says what it does."""


def undocumented():
    pass


__all__ = ["BARE", "Helper", "LIMIT", "SHARED", "documented", "helper", "undocumented", "unrendered", "__version__"]
__version__ = "1.0"


def unrendered():
    """Documented, but on no page."""
'''

FAKE_INNER = '''\
"""Where the helpers are defined."""


class Helper:
    """A documented class."""


def helper():
    return 1
'''


def test_api_check_finds_undocumented_and_unrendered_names(tmp_path, monkeypatch):
    package = tmp_path / "fakepublic"
    package.mkdir()
    (package / "__init__.py").write_text(FAKE_MODULE)
    (package / "inner.py").write_text(FAKE_INNER)
    page = tmp_path / "fake.md"
    page.write_text("# Fake\n\n::: fakepublic\n    options:\n      members: [BARE, LIMIT, SHARED, documented, undocumented]\n\n"
                    "::: fakepublic.inner\n    options:\n      members: [Helper, helper]\n\n::: fakepublic.missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    failures, counts = api_coverage.check(["fakepublic"], [page])
    assert counts == {"modules": 1, "names": 8, "rendered": 9}  # __version__ exempt
    assert sorted(failures) == sorted([
        "fake.md: ::: fakepublic.missing does not resolve (module 'fakepublic' has no attribute 'missing')",
        "fakepublic.unrendered is in __all__ but no API page renders it: add '::: fakepublic.unrendered' to a page "
        "of docs/api/",
        "fake.md: fakepublic.BARE has no docstring: write a '#:' comment line above its assignment",
        "fake.md: fakepublic.undocumented has no docstring: write a docstring",
        "fake.md: fakepublic.inner.helper has no docstring: write a docstring",
    ])


def test_api_check_follows_imports_to_where_a_name_is_defined(tmp_path, monkeypatch):
    package = tmp_path / "fakereexport"
    package.mkdir()
    (package / "__init__.py").write_text('"""Re-exports."""\n\nfrom .inner import Helper, helper\n\n__all__ = ["Helper", "helper"]\n')
    (package / "inner.py").write_text(FAKE_INNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert api_coverage.docstring_of("fakereexport", "Helper") == "A documented class."
    assert api_coverage.docstring_of("fakereexport", "helper") is None
    assert api_coverage.suggestion("fakereexport", "Helper", sys.modules["fakereexport.inner"].Helper) == \
        "fakereexport.inner.Helper"


def test_house_docstring_habits_read_as_markdown():
    lines = ["x = 1", "#: first line", "#: second line", "LIMIT = 3"]
    assert house_comments.comment_above(lines, 4) == ("first line second line", 2)
    assert house_comments.comment_above(lines, 1) == ("", 1)
    assert house_comments.plain_roles("see :class:`~.loop.CLIPStrategy` and :func:`run_one`, :mod:`.moram`") == \
        "see `CLIPStrategy` and `run_one`, `moram`"
    docstring = "Summary.\n\nArgs:\n    a: one.\n    b, c: two\n        lines.\n\nReturns:\n    x, y: kept.\n"
    assert house_comments.split_grouped_parameters(docstring) == \
        "Summary.\n\nArgs:\n    a: one.\n    b: two\n        lines.\n    c: two\n        lines.\n\nReturns:\n    x, y: kept.\n"
