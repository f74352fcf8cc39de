"""``moram-avalanche check-data``: which domains of a benchmark a data root can serve.

For every domain of the protocol: found / missing / malformed, with the reader's own message
(the file or folder it expected, the layout it understands, how to obtain what is missing),
the number of classes and of train / test images, and how many listed image files are absent.
With ``verify_images``, every file is also decoded and unreadable ones are counted (a run
skips those with a warning by default, so they do not make a domain unusable).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List

from tqdm.auto import tqdm

from ...utils.paths import check_input_path
from ..readers import DataError
from .datasets import IMAGE_ERRORS, BadImages, ImageFiles, read_rgb
from .streams import protocol_domains, read_domain
from .validate import domain_problems

SHOWN = 3  # example paths per problem


@dataclass
class DomainReport:
    """What ``check-data`` found for one domain."""

    name: str
    status: str  # "found", "missing" or "malformed"
    classes: int = 0
    train: int = 0
    test: int = 0
    missing_files: List[str] = field(default_factory=list)
    unreadable_files: List[str] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    message: str = ""
    folder: str = ""

    @property
    def usable(self) -> bool:
        return self.status == "found"


def check_data(root, benchmark: str = "xtail", *, verify_images: bool = False,
               progress: bool = True) -> List[DomainReport]:
    """One :class:`DomainReport` per domain of ``benchmark`` ("xtail" or "mtil") under ``root``."""
    root = check_input_path(root, "data root", kind="dir",
                            fix="give the folder that holds the datasets")
    reports = []
    for spec in protocol_domains(benchmark):
        bad_images = BadImages("skip")
        try:
            data = read_domain(benchmark, spec, root, bad_images, check=False)
        except DataError as error:
            reports.append(DomainReport(spec.name, error.status, message=str(error)))
            continue
        report = DomainReport(spec.name, "found", len(data.classnames), len(data.train),
                              len(data.test), folder=str(data.folder))
        problems = domain_problems(data)  # what the stream builders refuse (read_domain's check)
        if problems:
            report.status = "malformed"
            report.problems = problems
        paths = sorted({p for split in (data.train, data.test) if isinstance(split, ImageFiles)
                        for p in split.paths})
        for path in tqdm(paths, desc=f"check {spec.name}", disable=None if progress else True,
                         leave=False):  # None: terminals only
            if not os.path.isfile(path):
                report.missing_files.append(path)
            elif verify_images and not _decodes(path):
                report.unreadable_files.append(path)
        lines = [f"  problem:  {problem}" for problem in report.problems]
        if report.missing_files:
            report.status = "malformed"
            lines.append(
                f"  problem:  {len(report.missing_files)} of the {len(paths)} image files listed "
                f"by its split files are missing, e.g. {', '.join(report.missing_files[:SHOWN])}")
        if lines:
            report.message = "\n".join(
                [f"{spec.name}: {len(lines)} problem(s) in {data.folder}", *lines,
                 f"  fix:      complete or repair the dataset under {data.folder} (an interrupted "
                 "extraction?), use the split file that matches your copy, or leave the domain "
                 "out with --order"])
        reports.append(report)
    return reports


def _decodes(path: str) -> bool:
    """Whether a run can read ``path`` (decoded whole, in a mode :func:`.datasets.to_rgb` takes)."""
    try:
        read_rgb(path)
        return True
    except IMAGE_ERRORS:  # decompression bombs included
        return False


def format_report(reports: List[DomainReport], benchmark: str, root) -> str:
    """The table and the problems, as ``check-data`` prints them."""
    lines = [f"{benchmark} under {root}:", "",
             f"  {'domain':<13} {'status':<10} {'classes':>7} {'train':>7} {'test':>7}  notes"]
    for r in reports:
        notes = []
        if r.missing_files:
            notes.append(f"{len(r.missing_files)} image file(s) missing")
        if r.unreadable_files:
            notes.append(f"{len(r.unreadable_files)} unreadable (skipped with a warning in runs)")
        counts = (f"{r.classes:>7} {r.train:>7} {r.test:>7}" if r.classes
                  else f"{'-':>7} {'-':>7} {'-':>7}")
        lines.append(f"  {r.name:<13} {r.status:<10} {counts}  {'; '.join(notes) or r.folder}")
    problems = [r for r in reports if r.message]
    for r in problems:
        lines += ["", r.message]
    for r in reports:
        if r.unreadable_files:
            lines += ["", f"{r.name}: unreadable images, e.g. {', '.join(r.unreadable_files[:SHOWN])}"]
    usable = sum(r.usable for r in reports)
    verdict = ("the stream can be built" if usable == len(reports) else
               f"the full stream cannot be built: {len(reports) - usable} of {len(reports)} "
               "domains unavailable (a run may still use the others with an explicit order)")
    lines += ["", f"{usable}/{len(reports)} domains usable: {verdict}."]
    return "\n".join(lines)
