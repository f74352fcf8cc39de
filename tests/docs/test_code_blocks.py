"""Every fenced block of README.md, the documentation site's pages and examples/README.md is executed
or checked (issue 47: a snippet cannot rot again). The rule is in ``tests/helpers/code_blocks.py``."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from code_blocks import LANGUAGES, Block, blocks_of, command_lines, moram_argv, pages, python_script

ROOT = Path(__file__).resolve().parents[2]
PAGES = pages(ROOT)


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_fence_names_a_known_language(page):
    unknown = [f"{_id(page)}:{b.line} ({b.language or 'no language'})" for b in blocks_of(page)
               if b.language not in LANGUAGES]
    assert not unknown, f"fences must name one of {LANGUAGES}: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_not_run_blocks_are_python_that_compiles(page):
    for block in blocks_of(page):
        if block.not_run:
            assert block.language == "python", f"{_id(page)}:{block.line}: not-run is for python blocks only"
            compile(block.text, f"{_id(page)}:{block.line}", "exec")


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_data_blocks_parse(page):
    parsers = {"yaml": yaml.safe_load, "json": json.loads, "toml": tomllib.loads}
    for block in blocks_of(page):
        if block.language in parsers:
            try:
                parsers[block.language](block.text)
            except Exception as error:  # any parse error fails the page
                pytest.fail(f"{_id(page)}:{block.line}: the {block.language} block does not parse: {error}")


def _check_command(block: Block, command: str) -> None:
    from moram_avalanche.cli import build_parser

    where = f"{_id(block.page)}:{block.line}: {command!r}"
    argv = moram_argv(command)
    if argv is not None:
        try:
            build_parser().parse_args(argv)
        except SystemExit as stop:
            if stop.code not in (0, None):  # --help exits 0
                pytest.fail(f"{where} does not parse (see stderr above)")
        return
    words = command.split()
    if words[0] in ("python", "python3") and len(words) > 1 and words[1].startswith(("scripts/", "examples/")):
        assert (ROOT / words[1]).is_file(), f"{where} names a file that does not exist"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_shell_commands_parse(page, capsys):
    for block in blocks_of(page):
        if block.language == "bash":
            for command in command_lines(block.text):
                _check_command(block, command)


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.language == "python" and not b.not_run
                                                          for b in blocks_of(p))], ids=_id)
def test_python_blocks_run(page, tmp_path):
    """The page's python blocks, in order, in one fresh interpreter, offline, on one CPU thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", MORAM_AVALANCHE_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    (tmp_path / "work").mkdir()
    done = subprocess.run([sys.executable, "-c", python_script(blocks_of(page))], cwd=tmp_path / "work",
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{_id(page)}'s python blocks failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def test_the_rule_itself(tmp_path):
    """The parser of fences and commands on a page written here (an independent expectation)."""
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n<!-- not-run: needs a GPU -->\n```python\n"
                    "y = x.cuda()\n```\n\n- item\n\n  ```bash\n  OMP_NUM_THREADS=1 moram-avalanche demo \\\n"
                    "      --quick && python scripts/a.py # c\n  ```\n", encoding="utf-8")
    blocks = blocks_of(page)
    assert [(b.line, b.language, b.not_run) for b in blocks] == [(3, "python", None), (8, "python", "needs a GPU"),
                                                                 (14, "bash", None)]
    assert command_lines(blocks[2].text) == ["OMP_NUM_THREADS=1 moram-avalanche demo --quick",
                                             "python scripts/a.py # c"]
    assert moram_argv(command_lines(blocks[2].text)[0]) == ["demo", "--quick"]
    assert moram_argv("torchrun --nproc_per_node 2 -m moram_avalanche run --x") == ["run", "--x"]
    assert moram_argv("pip install -e .") is None
    script = python_script(blocks)
    assert "x = 1" in script and "y = x.cuda()" not in script
    (tmp_path / "open.md").write_text("```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="open.md:1: the fence opened here is never closed"):
        blocks_of(tmp_path / "open.md")
