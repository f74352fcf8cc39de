"""How the MoRAM release reads an answer out of a generated text before scoring it (TRACE tasks).

Pure string rules, one per task family, each a fact of the release (Artificer-AI-Lab/MoRAM,
``TRACE/``; reference ``language_models.md``), used by the metrics of
:mod:`~moram_avalanche.benchmarks.text.metrics`:

* :func:`answer_letter` -- ScienceQA (``evaluations/eval_ScienceQA.py``, ``resolve``): an answer
  is ``"B\\n<reasoning>"``; the letter is the first character of the stripped text.
* :func:`option_letter` -- C-STANCE and FOMC (``inference/infer_multi_command.py``,
  ``postprocess_predictions``): the first option letter standing alone as a word (matched case
  insensitively, so a lower-case "a" counts as "A", as in the release), else the first
  character of the text that is an option letter (any case), else the text unchanged.
* :func:`math_answer` and :func:`math_equal` -- NumGLUE-cm / -ds (``evaluations/
  qwen_math_parser.py``, ``calculate_math_accuracy`` with ``use_boxed=True``): the content of
  the last ``\\boxed{...}`` (normalised), else the last number in the text, else the stripped
  text; compared with the normalised reference as strings (case-insensitive), then as numbers
  (relative tolerance 1e-4, the reference also read as a percentage: x / 100 and x * 100),
  then without brackets, then as ``x = value``. The parser's symbolic path (sympy /
  latex2sympy on expressions neither side parses as a number) is left out: NumGLUE's answers
  are numbers.
* :func:`py150_literals` -- Py150 (``evaluations/eval_Py150.py``, ``postprocess``):
  ``<NUM_LIT>`` becomes ``0``, ``<STR_LIT>`` and ``<CHAR_LIT>`` vanish, ``<STR_LIT:x>`` (and the
  NUM / CHAR forms) becomes ``x``, in prediction and reference alike.

Nothing here scores; a rule maps a text to the string the release compares.
"""

from __future__ import annotations

import math
import re
from typing import Optional, Sequence

#: the option letters of TRACE's choice tasks (``infer_multi_command.py``: ``CHOICE_TASK_LABELS``)
TRACE_OPTION_LETTERS = {"C-STANCE": "ABC", "FOMC": "ABC"}

_LITERAL = re.compile(r"<(STR|NUM|CHAR)_LIT:(.*?)>", re.S)
_NUMBER = re.compile(r"-?\d+\.?\d*")


def answer_letter(text: str) -> Optional[str]:
    """ScienceQA's answer: the first character of the stripped text (None for an empty text)."""
    text = str(text).strip()
    return text[0] if text else None


def option_letter(text: str, letters: Sequence[str]) -> str:
    """The option a generated text names (module docstring); ``letters`` are the options, e.g. "ABC"."""
    letters = "".join(letters)
    if not letters or not all(len(letter) == 1 and letter.isupper() for letter in letters):
        raise ValueError(f"option letters must be upper-case single characters, e.g. 'ABC', got {letters!r}")
    text = str(text).strip()
    match = re.search(rf"\b([{letters}])\b", text, re.IGNORECASE)
    if match:
        return match.group(1).upper()
    return next((ch.upper() for ch in text if ch.upper() in letters), text)


def py150_literals(code: str) -> str:
    """Py150's literal placeholders resolved as the release resolves them (module docstring)."""
    code = str(code).replace("<NUM_LIT>", "0").replace("<STR_LIT>", "").replace("<CHAR_LIT>", "")
    return _LITERAL.sub(lambda match: match.group(2), code)


def boxed_content(text: str) -> str:
    """What the last ``boxed`` of ``text`` holds: its balanced ``{...}``, or what follows it up to
    a ``$``; "" without one."""
    if "boxed" not in text:
        return ""
    tail = text.split("boxed")[-1]
    if not tail.startswith("{"):
        return tail.split("$")[0].strip()
    depth, content = 1, []
    for ch in tail[1:]:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            break
        content.append(ch)
    return "".join(content)


def normalize_math(text: str) -> str:
    """The parts of the release's math normalisation (``strip_string``) that touch numeric answers:
    line breaks, a final ".", ``$``, ``\\%`` and ``%``, ``\\text{...}``, spaces, ``x = `` prefixes
    (a left side of at most two characters), trailing zeros after a decimal point, a leading "."."""
    text = str(text).strip().replace("\n", "").rstrip(".")
    text = re.sub(r"\\text\{(.*?)\}", r"\1", text)
    for mark in ("\\$", "$", "\\%", "%", "\\(", "\\)"):
        text = text.replace(mark, "")
    text = re.sub(r"(\d+)\.0*([^\d])", r"\1\2", text)
    text = re.sub(r"(\d+)\.0*$", r"\1", text)
    if text.startswith("."):
        text = "0" + text
    if text.count("=") == 1 and len(text.split("=")[0]) <= 2:
        text = text.split("=")[1]
    return text.replace(" ", "")


def math_answer(text: str) -> str:
    """The answer a generated text gives (module docstring): boxed, else the last number, else the text."""
    text = str(text).strip()
    boxed = boxed_content(text)
    if boxed:
        return normalize_math(boxed)
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else text


def _number(text: str) -> Optional[float]:
    """The release's ``parse_digits``: commas dropped; a number, or one ending in ``%`` (or a
    backslash) read as hundredths; None otherwise."""
    text = str(text).replace(",", "")
    try:
        return float(text)
    except ValueError:
        pass
    text = text[:-1] if text.endswith("%") else text
    text = text[:-1] if text.endswith("\\") else text
    try:
        return float(text) / 100
    except ValueError:
        return None


def _equation(text: str, other: str) -> Optional[str]:
    """The right side of ``text`` when it reads ``x = value`` (a left side of at most two
    characters) and ``other`` holds no "="."""
    if text.count("=") == 1 and len(text.split("=")[0].strip()) <= 2 and "=" not in other:
        return text.split("=")[1]
    return None


def math_equal(prediction: str, reference: str) -> bool:
    """Whether an extracted answer equals the normalised reference (module docstring)."""
    prediction, reference = str(prediction).strip(), str(reference).strip()
    if prediction.lower() == reference.lower():
        return True
    predicted, expected = _number(prediction), _number(reference)
    if predicted is not None and expected is not None:
        return any(math.isclose(predicted, candidate, rel_tol=1e-4)
                   for candidate in (expected / 100, expected, expected * 100))
    if not prediction:
        return False
    left, right = prediction, reference
    if (left.startswith("[") and left.endswith("]") and not right.startswith("(")) or \
            (left.startswith("(") and left.endswith(")") and not right.startswith("[")):
        left, right = left.strip("[]()"), right.strip("[]()")
    left, right = (re.sub(r"[{}()]", "", s).lower() for s in (left, right))
    if left == right:
        return True
    side = _equation(prediction, reference)
    if side is not None:
        return math_equal(side, reference)
    side = _equation(reference, prediction)
    return side is not None and math_equal(prediction, side)


__all__ = ["TRACE_OPTION_LETTERS", "answer_letter", "boxed_content", "math_answer", "math_equal",
           "normalize_math", "option_letter", "py150_literals"]
