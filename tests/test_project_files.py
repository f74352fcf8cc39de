"""The files every open-source library has (LICENSE, CITATION.cff, CHANGELOG.md), held to the package.

The citation's version and the changelog's entries follow ``moram_avalanche.__version__``, so a
release that bumps the version without them fails here; README keeps no changelog of its own.
"""

import configparser
import re
from pathlib import Path

import yaml

import moram_avalanche

ROOT = Path(__file__).resolve().parents[1]
PAPER_TITLE = "Little by Little: Continual Learning via Incremental Mixture of Rank-1 Associative Memory Experts"


def setup_metadata() -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config["metadata"]


def minor(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    assert match, f"not a version: {version!r}"
    return int(match.group(1)), int(match.group(2))


def test_license_is_mit_and_shipped():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 " in text
    metadata = setup_metadata()
    assert metadata["license"] == "MIT"
    assert metadata["license_files"].split() == ["LICENSE"]


def test_citation_matches_the_package_and_names_the_paper():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert citation["type"] == "software"
    assert citation["title"] == setup_metadata()["name"]
    assert citation["version"] == moram_avalanche.__version__
    assert citation["license"] == setup_metadata()["license"]
    assert citation["authors"] and all(author.get("name") or author.get("family-names")
                                       for author in citation["authors"])
    paper = citation["preferred-citation"]
    assert paper["type"] == "conference-paper"
    assert paper["title"] == PAPER_TITLE
    assert paper["year"] == 2026
    assert "ICML 2026" in paper["conference"]["name"]
    assert paper["repository-code"] == "https://github.com/Artificer-AI-Lab/MoRAM"
    # CFF's schema requires the paper's authors; the release's BibTeX lists six, Lu first, Gong last
    names = [(author["given-names"], author["family-names"]) for author in paper["authors"]]
    assert len(names) == 6 and names[0] == ("Haodong", "Lu") and names[-1] == ("Dong", "Gong")
    assert paper["url"] == "https://arxiv.org/abs/2506.21035"
    assert "arXiv:2506.21035" in [identifier["value"] for identifier in paper["identifiers"]]
    assert "arxiv.org/abs/2506.21035" in (ROOT / "README.md").read_text()  # the paper's link up front


def test_changelog_has_every_version_newest_first():
    text = (ROOT / "CHANGELOG.md").read_text()
    entries = re.findall(r"^## (\d+\.\d+\.\d+)\b", text, flags=re.M)
    assert entries == sorted(entries, key=lambda v: tuple(map(int, v.split("."))), reverse=True), entries
    assert len(entries) == len(set(entries)), entries
    major, current = minor(moram_avalanche.__version__)
    assert major == 0, "extend this test's range past 0.x"
    expected = [f"0.{m}.0" for m in range(3, current + 1)]
    assert not set(expected) - set(entries), f"CHANGELOG.md lacks {sorted(set(expected) - set(entries))}"
    release = re.match(r"\d+\.\d+\.\d+", moram_avalanche.__version__).group(0)
    assert release in entries, f"CHANGELOG.md has no entry for {release}"


def test_readme_points_to_the_changelog_and_holds_none():
    readme = (ROOT / "README.md").read_text()
    assert not re.search(r"^#+ .*Changes in", readme, flags=re.M)
    assert "Changes in" not in readme  # nor a pointer to a section that moved
    assert "[CHANGELOG.md](CHANGELOG.md)" in readme
    if minor(moram_avalanche.__version__) < (0, 8):  # 0.7.0's key fact: 0.6's names work until 0.8
        assert "until 0.8" in readme
