"""The language models' benchmarks, registered (:mod:`moram_avalanche.benchmarks.registry`): the
standard CL benchmark's orders 1-6 (:mod:`.stream`, :mod:`.tasks`), TRACE (:mod:`.trace`), SAPT's
SuperNI (:mod:`.superni`), CodeAlpaca tested on HumanEval (:mod:`.codealpaca`) and the offline
synthetic text stream (:mod:`.synthetic`). Builders and checks are named by their modules,
imported when a stream is built or a data root checked: registering them imports nothing heavy.

Each builder is ``(data_root, **stream options)``, its parameters the options it takes (a run
refuses any other, named by its flag).
"""

from __future__ import annotations

from ..registry import Benchmark, DataCheck, register_benchmark

FAMILY = "text"
_WING = "moram_avalanche.benchmarks.text"
_CHECKS = f"{_WING}.data_checks"

LM_CL = register_benchmark(Benchmark(
    "lm-cl", FAMILY, f"{_WING}.stream:lm_cl_from_options",
    protocol="the standard CL benchmark of language models (O-LoRA's; the MoRAM paper's T5 and LLaMA tables): "
             "--order 1-6 (4 or 15 tasks) from --data-root (CL_Benchmark or the release's files)",
    check=DataCheck(f"{_CHECKS}:check_lm_cl_layout", layout="the 15 text classification tasks (O-LoRA's "
                    "CL_Benchmark or the MoRAM release's LLM-CL-Benchmark)")))
TRACE = register_benchmark(Benchmark(
    "trace", FAMILY, f"{_WING}.trace:trace",
    protocol="TRACE's eight tasks from --data-root",
    check=DataCheck(f"{_CHECKS}:check_trace_layout", layout="TRACE's 8 tasks")))
SUPERNI = register_benchmark(Benchmark(
    "superni", FAMILY, f"{_WING}.superni:superni",
    protocol="SAPT's fifteen SuperNI tasks (the MoRAM paper's tab:sapt; ROUGE-L, AP / FT): --order 1-2 from "
             "--data-root (SAPT's CL_Benchmark)",
    check=DataCheck(f"{_CHECKS}:check_superni_layout",
                    layout="SAPT's 15 SuperNI tasks (CL_Benchmark or CL_Benchmark/SuperNI)")))
CODEALPACA = register_benchmark(Benchmark(
    "codealpaca", FAMILY, f"{_WING}.codealpaca:codealpaca",
    protocol="one task: CodeAlpaca-20k (code_alpaca_20k.json under --data-root) to train, HumanEval (greedy "
             "pass@1, generated code run sandboxed) to test",
    check=DataCheck(f"{_CHECKS}:check_codealpaca_layout", layout="code_alpaca_20k.json and the HumanEval problems")))
SYNTHETIC_TEXT = register_benchmark(Benchmark(
    "synthetic-text", FAMILY, f"{_WING}.synthetic:synthetic_text_from_options",
    protocol="an offline drawn text stream of toy classification tasks (language-model tests)"))

__all__ = ["CODEALPACA", "FAMILY", "LM_CL", "SUPERNI", "SYNTHETIC_TEXT", "TRACE"]
