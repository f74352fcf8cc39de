"""The installed package: console script and a light import."""

import subprocess
import sys

import pytest

from moram_avalanche import __version__
from moram_avalanche.cli import main


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"moram-avalanche {__version__}"


def test_importing_the_package_does_not_import_avalanche_or_open_clip():
    code = ("import sys, moram_avalanche; "
            "print(sorted(m for m in ('avalanche', 'open_clip', 'transformers', 'peft', 'torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
