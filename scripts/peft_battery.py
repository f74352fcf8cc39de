"""Run peft's own tuner battery on MoRAM: ``tests/test_custom_models.py`` of huggingface/peft.

peft checks every tuner it ships through ``PeftCommonTester`` on small local models, one row of
``TEST_CASES`` per configuration. This script adds MoRAM rows to a checkout of peft's tests the way
that file adds other tuners (its rows are below, in our words; nothing of peft is copied here),
runs the tests that name MoRAM with this package importable, and sorts the outcome: passed,
skipped, failed with MoRAM's merge refusal (merging is refused by design: the routing weights
depend on the input), failed otherwise (listed). Usage::

    git clone https://github.com/huggingface/peft /tmp/peft      # or any checkout of its tests/
    python scripts/peft_battery.py /tmp/peft                       # --extra PATH for test-only modules

peft's test helpers import ``diffusers`` and ``datasets``; ``--extra`` adds a folder holding them
(e.g. ``pip install --no-deps --target /tmp/extra diffusers``) to the test run's path only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: MoRAM's rows of TEST_CASES: (name, model id of the file's models, config class, config kwargs)
ROWS = '''    # MoRAM (moram-avalanche scripts/peft_battery.py)
    ("Vanilla MLP 1 MoRAM", "MLP", MoRAMConfig, {"target_modules": "lin0"}),
    ("Vanilla MLP 2 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin0"]}),
    ("Vanilla MLP 3 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin1"]}),
    ("Vanilla MLP 4 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin0", "lin1"]}),
    ("Vanilla MLP 5 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin0"], "modules_to_save": ["lin1"]}),
    ("Vanilla MLP 6 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin0", "lin1"], "modules_to_save": ["lin1"]}),
    ("Vanilla MLP 7 MoRAM", "MLP", MoRAMConfig,
     {"target_modules": ["lin0"], "atoms_per_task": 4, "topk": None, "threshold": 0.0, "dropout": 0.0}),
    ("Vanilla MLP 8 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin0"], "temperature": None, "topk": 2}),
    ("Vanilla MLP 9 MoRAM", "MLP", MoRAMConfig, {"target_modules": ["lin0", "lin1"], "exclude_modules": ["lin1"]}),
    ("Embedding + transformers Conv1D 1 MoRAM", "EmbConv1D", MoRAMConfig, {"target_modules": ["conv1d"]}),
'''
#: MoRAM's rows of MULTIPLE_ACTIVE_ADAPTERS_TEST_CASES: two adapters on the same and on other layers
MULTI = '''    # MoRAM (moram-avalanche scripts/peft_battery.py)
    ("MoRAM Same", "moram", MoRAMConfig, {"target_modules": ["lin0"], "init_weights": False},
     {"target_modules": ["lin0"], "init_weights": False}),
    ("MoRAM Different", "moram", MoRAMConfig, {"target_modules": ["lin0"], "init_weights": False},
     {"target_modules": ["lin1"], "init_weights": False}),
'''
IMPORT = "from moram_avalanche.text import MoRAMConfig  # moram-avalanche scripts/peft_battery.py\n"
REFUSAL = "cannot be merged into the base weights"


def insert_before_end(text: str, list_name: str, rows: str) -> str:
    """``text`` with ``rows`` appended to the module-level list ``list_name = [...]``."""
    start = text.find(f"\n{list_name} = [")
    if start < 0:
        raise SystemExit(f"{list_name} not found: is this peft's tests/test_custom_models.py?")
    end = text.find("\n]", start)
    return text[:end + 1] + rows + text[end + 1:]


def add_rows(path: Path) -> None:
    """Add MoRAM's rows and import to peft's ``test_custom_models.py`` (once)."""
    text = path.read_text()
    if IMPORT in text:
        return
    text = insert_before_end(text, "TEST_CASES", ROWS)
    text = insert_before_end(text, "MULTIPLE_ACTIVE_ADAPTERS_TEST_CASES", MULTI)
    first_import = text.find("\nimport ")
    text = text[:first_import + 1] + IMPORT + text[first_import + 1:]
    path.write_text(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("peft", type=Path, help="a checkout of huggingface/peft (its tests/ folder is used)")
    parser.add_argument("--extra", action="append", default=[], help="a folder to put on the tests' path")
    args = parser.parse_args(argv)
    tests = args.peft / "tests" / "test_custom_models.py"
    add_rows(tests)
    report = Path(tempfile.mkdtemp()) / "report.xml"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               PYTHONPATH=os.pathsep.join([*args.extra, str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # -o addopts=: peft's pyproject.toml asks for coverage (pytest-cov), which a test run here needs not have
    subprocess.run([sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                    "-k", "MoRAM", "--tb=line", f"--junitxml={report}"], cwd=args.peft, env=env, check=False)
    if not report.is_file():
        sys.exit(f"peft's tests did not run (no report at {report}): see pytest's error above")
    counts = {"passed": 0, "skipped": 0, "refused merging": 0, "failed": 0}
    others = []
    for case in ElementTree.parse(report).iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if case.find("skipped") is not None:
            counts["skipped"] += 1
        elif failure is None:
            counts["passed"] += 1
        elif REFUSAL in (failure.get("message") or "") + (failure.text or ""):
            counts["refused merging"] += 1
        else:
            counts["failed"] += 1
            others.append(f"{case.get('name')}: {(failure.get('message') or '').splitlines()[0][:160]}")
    print("peft battery on MoRAM:", ", ".join(f"{v} {k}" for k, v in counts.items()))
    for line in others:
        print("  failed:", line)
    return 1 if others else 0


if __name__ == "__main__":
    sys.exit(main())
