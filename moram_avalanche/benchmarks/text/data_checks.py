"""What ``moram-avalanche check-data`` checks of the text layouts, each check ``(root,
verify_images=False, progress=True) -> (reports, text)`` (a text layout has no images to decode
and no progress to show): the 15 classification tasks in either layout (:mod:`.tasks`), TRACE's 8
tasks (:mod:`.trace`), SAPT's 15 SuperNI tasks with their pseudo-samples (:mod:`.superni`,
:mod:`.superni_pseudo`) and CodeAlpaca with HumanEval (:mod:`.codealpaca`). Registered with their
benchmarks (:mod:`.entries`)."""

from __future__ import annotations

from .codealpaca import check_codealpaca_data
from .superni import SUPERNI_TASKS, check_superni_data, format_superni_report
from .superni_pseudo import pseudo_data_line
from .tasks import check_text_data, format_text_report
from .trace import check_trace_data, format_trace_report


def check_lm_cl_layout(root, verify_images: bool = False, progress: bool = True):
    """``check-data --benchmark lm-cl``: the 15 classification tasks under ``root``, and the report."""
    reports = check_text_data(root)
    return reports, format_text_report(reports, root)


def check_trace_layout(root, verify_images: bool = False, progress: bool = True):
    """``check-data --benchmark trace``: TRACE's 8 tasks under ``root``, and the report."""
    reports = check_trace_data(root)
    return reports, format_trace_report(reports, root)


def check_superni_layout(root, verify_images: bool = False, progress: bool = True):
    """``check-data --benchmark superni``: SAPT's 15 SuperNI tasks under ``root`` and their pseudo-samples,
    and the report."""
    reports = check_superni_data(root)
    return reports, format_superni_report(reports, root) + "\n" + pseudo_data_line(root, SUPERNI_TASKS)


def check_codealpaca_layout(root, verify_images: bool = False, progress: bool = True):
    """``check-data --benchmark codealpaca``: CodeAlpaca-20k and the HumanEval problems under ``root``, a
    local MMLU copy's rows when there is one (what ``reproduce codealpaca`` reads), and the report."""
    reports = check_codealpaca_data(root)
    report = reports[0]
    text = (f"codealpaca in {root}: {report.train} CodeAlpaca examples, {report.test} HumanEval problems "
            f"({report.folder})\nthe codealpaca stream can be built" if report.usable else
            f"codealpaca in {root}: {report.status}\n{report.message}\nthe codealpaca stream cannot be built")
    mmlu = [r for r in reports if r.name == "mmlu"]
    if not mmlu:
        text += (f"\nMMLU: no local copy under {root} (reproduce codealpaca scores lm-eval's cais/mmlu; a "
                 "rehearsal needs hendrycks/test's data/test/<subject>_test.csv)")
    elif mmlu[0].usable:
        text += f"\nMMLU: {mmlu[0].test} test questions, every row readable ({mmlu[0].folder})"
    else:
        text += f"\nMMLU: {mmlu[0].status}\n{mmlu[0].message}\nreproduce codealpaca cannot score MMLU from it"
    return reports, text


__all__ = ["check_codealpaca_layout", "check_lm_cl_layout", "check_superni_layout", "check_trace_layout"]
