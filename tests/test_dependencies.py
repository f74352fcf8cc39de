"""setup.cfg's ``install_requires`` held to the two proven installs: ``constraints.txt`` (CI's set,
the newest) and ``constraints-oldest.txt`` (the GPU image's torch 2.11, Triton 3.6 and
transformers 5.17). Both must install, and each lower bound must be a version one of them proved,
so that the ranges a user's pip reads say only what a run of the suite has shown."""

import configparser
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROVEN = ("constraints.txt", "constraints-oldest.txt")
# floors set by the APIs the package calls, below both proven sets (setup.cfg keeps them loose so
# that a user's scientific stack is not upgraded for nothing)
API_FLOORS = {"numpy", "matplotlib", "scikit-learn", "scipy", "pillow", "ninja"}


def options() -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config["options"]


def requirements() -> list[Requirement]:
    lines = options()["install_requires"].splitlines()
    return [Requirement(line) for line in (line.strip() for line in lines) if line and not line.startswith("#")]


def pins(name: str) -> dict[str, Version]:
    found = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        assert "==" in line, f"{name}: not an exact pin: {line!r}"
        package, version = line.split("==")
        found[canonicalize_name(package)] = Version(version)
    return found


def test_both_proven_sets_satisfy_every_requirement():
    for name in PROVEN:
        pinned = pins(name)
        for requirement in requirements():
            version = pinned.get(canonicalize_name(requirement.name))
            assert version is not None, f"{name} pins no {requirement.name}"
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{name}'s {requirement.name} {version} is outside setup.cfg's {requirement}")


def test_each_lower_bound_is_a_version_a_proven_set_installed():
    newest, oldest = (pins(name) for name in PROVEN)
    for requirement in requirements():
        key = canonicalize_name(requirement.name)
        if key in API_FLOORS:
            continue
        floors = [Version(spec.version) for spec in requirement.specifier if spec.operator in (">=", "==")]
        assert len(floors) == 1, f"{requirement}: one lower bound (>=) or one exact pin (==) expected"
        assert floors[0] == min(newest[key], oldest[key]), (
            f"{requirement}: its lower bound should be the oldest proven version, {min(newest[key], oldest[key])}")


def test_the_gpu_images_torch_is_kept_and_only_the_metrics_are_exact():
    """The reason for the ranges: a user's CUDA torch (the GPU image's 2.11) must satisfy them, and
    pip replaces nothing else for an exact pin but the metric packages (their scores are the paper's)."""
    by_name = {canonicalize_name(r.name): r for r in requirements()}
    for package, version in (("torch", "2.11.0"), ("torchvision", "0.26.0"), ("transformers", "5.17.0")):
        assert by_name[package].specifier.contains(version), by_name[package]
    exact = {key for key, r in by_name.items() if any(spec.operator == "==" for spec in r.specifier)}
    assert exact == {"rouge", "fuzzywuzzy", "sacrebleu", "rouge-score", "nltk"}


def test_python_requires_admits_no_python_a_direct_requirement_refuses():
    """``python_requires`` said 3.10 while torch 2.15, transformers 5.24 and quadprog 0.1.14 (the
    installed set) need 3.11: its floor must be a Python every installed requirement accepts."""
    python = SpecifierSet(options()["python_requires"])
    floors = [spec.version for spec in python if spec.operator == ">="]
    assert len(floors) == 1, f"python_requires: one lower bound expected, got {python}"
    for requirement in requirements():
        try:
            needs = distribution(requirement.name).metadata.get("Requires-Python")
        except PackageNotFoundError:
            raise AssertionError(f"{requirement.name} is not installed: install with -c constraints.txt") from None
        assert not needs or SpecifierSet(needs).contains(floors[0]), (
            f"{requirement.name} requires Python {needs}, but setup.cfg admits {python}")
