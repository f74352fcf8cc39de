"""A saved MoRAM adapter loads through peft's own ``PeftModel.from_pretrained`` after ``import
moram_avalanche`` alone, whichever of peft and the package is imported first (``utils/after_import.py``:
peft has no plugin registry, and the package's names are imported lazily)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

HELPERS = Path(__file__).resolve().parents[1] / "helpers"

LOAD = """
import sys, torch
sys.path.insert(0, {helpers!r})
{imports}
from peft import PeftModel
from tiny_text import tiny_llama
model = PeftModel.from_pretrained(tiny_llama(seed=0), {folder!r})
ids = torch.arange(6).reshape(1, 6)
with torch.no_grad():
    logits = model(input_ids=ids).logits
    base = tiny_llama(seed=0)(input_ids=ids).logits
expected = torch.load({expected!r})
# the saved model's logits (to float rounding: this process may sum in another order, e.g. other thread
# counts), and not the base's (the atoms' values are far from zero)
print(type(model.peft_config["default"]).__name__, torch.allclose(logits, expected, rtol=1e-4, atol=1e-5),
      not torch.allclose(base, expected, rtol=1e-2, atol=1e-2))
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from peft import get_peft_model

    from moram_avalanche import MoRAMConfig
    from tiny_text import tiny_llama

    folder = tmp_path_factory.mktemp("moram_adapter")
    torch.manual_seed(1)
    model = get_peft_model(tiny_llama(seed=0), MoRAMConfig(task_type="CAUSAL_LM"))
    with torch.no_grad():  # values away from zero, so the adapter changes the output
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.normal_()
    model.save_pretrained(folder)
    with torch.no_grad():
        logits = model(input_ids=torch.arange(6).reshape(1, 6)).logits
    torch.save(logits, folder / "expected.pt")
    return folder


@pytest.mark.parametrize("imports", ["import moram_avalanche", "import peft\nimport moram_avalanche",
                                     "import moram_avalanche\nimport moram_avalanche.text"])
def test_the_adapter_loads_after_importing_the_package_alone(saved, imports):
    script = textwrap.dedent(LOAD).format(helpers=str(HELPERS), imports=imports, folder=str(saved),
                                         expected=str(saved / "expected.pt"))
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", script], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-3:] == ["MoRAMConfig", "True", "True"]


def test_importing_the_package_imports_neither_torch_nor_peft():
    done = subprocess.run([sys.executable, "-c", "import sys, moram_avalanche; "
                           "print(sorted(m for m in ('torch', 'peft', 'transformers') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr


def test_after_import_runs_once_and_a_failure_is_a_warning(tmp_path, monkeypatch):
    from moram_avalanche.utils.after_import import after_import

    (tmp_path / "fresh_module_for_after_import.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    record = lambda module: seen.append(module.VALUE)  # noqa: E731
    after_import("fresh_module_for_after_import", record)
    after_import("fresh_module_for_after_import", record)  # asked twice before the import: runs once
    assert seen == []
    import fresh_module_for_after_import  # noqa: F401
    assert seen == [1]
    assert not [f for f in sys.meta_path if getattr(f, "name", None) == "fresh_module_for_after_import"]  # none left
    after_import("fresh_module_for_after_import", lambda module: seen.append(2))  # already imported: now
    assert seen == [1, 2]
    with pytest.warns(RuntimeWarning, match="after importing fresh_module_for_after_import: ValueError: no"):
        after_import("fresh_module_for_after_import", lambda module: (_ for _ in ()).throw(ValueError("no")))
    sys.modules.pop("fresh_module_for_after_import")
