"""What ``moram-avalanche check-data --benchmark NAME`` checks, per name: the layouts a data root
must hold for that benchmark, each check ``(root, verify_images, progress) -> (reports, text)``.

X-TAIL's split files (:mod:`.images.check`), torchvision's MTIL (what ``mtil-5shot`` reads too), the
language models' 15 classification tasks in either layout (:mod:`.text.tasks`), TRACE's 8
tasks (:mod:`.text.trace`) and SAPT's 15 SuperNI tasks (:mod:`.text.superni`) and CodeAlpaca with HumanEval
(:mod:`.text.codealpaca`); ``all`` is both CLIP layouts.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple


def _images(kind: str) -> Callable:
    def check(root, verify_images: bool = False, progress: bool = True):
        from .images.check import check_data, format_report

        reports = check_data(root, kind, verify_images=verify_images, progress=progress)
        return reports, format_report(reports, kind, root)
    return check


def _text_tasks(root, verify_images: bool = False, progress: bool = True):
    from .text.tasks import check_text_data, format_text_report

    reports = check_text_data(root)
    return reports, format_text_report(reports, root)


def _trace_tasks(root, verify_images: bool = False, progress: bool = True):
    from .text.trace import check_trace_data, format_trace_report

    reports = check_trace_data(root)
    return reports, format_trace_report(reports, root)


def _superni_tasks(root, verify_images: bool = False, progress: bool = True):
    from .text.superni import SUPERNI_TASKS, check_superni_data, format_superni_report
    from .text.superni_pseudo import pseudo_data_line

    reports = check_superni_data(root)
    return reports, format_superni_report(reports, root) + "\n" + pseudo_data_line(root, SUPERNI_TASKS)


def _codealpaca(root, verify_images: bool = False, progress: bool = True):
    from .text.codealpaca import check_codealpaca_data

    reports = check_codealpaca_data(root)
    report = reports[0]
    text = (f"codealpaca in {root}: {report.train} CodeAlpaca examples, {report.test} HumanEval problems "
            f"({report.folder})\nthe codealpaca stream can be built" if report.usable else
            f"codealpaca in {root}: {report.status}\n{report.message}\nthe codealpaca stream cannot be built")
    return reports, text


#: ``check-data --benchmark`` -> its layouts' checks, in the order they are reported
DATA_CHECKS: Dict[str, Tuple[Callable, ...]] = {
    "xtail": (_images("xtail"),), "mtil": (_images("mtil"),), "all": (_images("xtail"), _images("mtil")),
    "lm-cl": (_text_tasks,), "trace": (_trace_tasks,),
    "superni": (_superni_tasks,), "codealpaca": (_codealpaca,)}

__all__ = ["DATA_CHECKS"]
