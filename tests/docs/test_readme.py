"""README.md is the front door (issue 47): short, the set-up commands first, three quick starts, and
every relative link (to a file, or to a heading of a page) resolves -- the documentation site checks
its own links when it builds; README is outside it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc (MkDocs) and GitHub make it for plain text."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set:
    inside = False
    anchors = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            inside = not inside
        elif not inside and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = README.splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines: move detail to a docs/ page"
    assert lines[3:5] == ['pip install -c constraints.txt -e . && moram-avalanche demo',
                          'pip install -c constraints.txt -e ".[test]" && python -m pytest -q']
    assert len(re.findall(r"^## Quick start \d", README, flags=re.M)) == 3


def test_every_relative_link_of_readme_resolves():
    bad = []
    for match in _LINK.finditer(README):
        target = match["target"]
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path if path else ROOT / "README.md"
        if not page.exists():
            bad.append(f"{target}: no file {path}")
        elif anchor and anchor not in _anchors(page):
            bad.append(f"{target}: {path} has no heading with anchor #{anchor}")
    assert not bad, bad


def test_the_slug_rule():
    assert _slug(" Quick start 1: MoRAM in your own `Avalanche` loop (CLIP)") == \
        "quick-start-1-moram-in-your-own-avalanche-loop-clip"
