"""What ``moram-avalanche check-data`` checks of the image layouts, each check ``(root,
verify_images=False, progress=True) -> (reports, text)``: X-TAIL's split files and torchvision's
MTIL (what ``mtil-5shot`` reads too), domain by domain (:mod:`.check`). Registered with their
benchmarks (:mod:`.entries`)."""

from __future__ import annotations

from typing import List, Tuple

from .check import DomainReport, check_data, format_report


def _checked(kind: str, root, verify_images: bool, progress: bool) -> Tuple[List[DomainReport], str]:
    reports = check_data(root, kind, verify_images=verify_images, progress=progress)
    return reports, format_report(reports, kind, root)


def check_xtail_layout(root, verify_images: bool = False, progress: bool = True) -> Tuple[List[DomainReport], str]:
    """``check-data --benchmark xtail``: X-TAIL's domains under ``root`` (CoOp's split files), and the report."""
    return _checked("xtail", root, verify_images, progress)


def check_mtil_layout(root, verify_images: bool = False, progress: bool = True) -> Tuple[List[DomainReport], str]:
    """``check-data --benchmark mtil``: MTIL's domains under ``root`` (torchvision's layout), and the report."""
    return _checked("mtil", root, verify_images, progress)


__all__ = ["check_mtil_layout", "check_xtail_layout"]
