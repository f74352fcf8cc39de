"""The CLIP family's benchmarks, registered (:mod:`moram_avalanche.benchmarks.registry`): X-TAIL,
MTIL and the paper's few-shot MTIL read from disk (:mod:`.streams`), and the offline synthetic
stream (:mod:`.synthetic`). Builders and checks are named by their modules, imported when a stream is
built or a data root checked: registering them imports neither torch nor PIL.

Each builder is ``(data_root, train_transform=..., eval_transform=..., **stream options)``.
"""

from __future__ import annotations

from ..registry import Benchmark, DataCheck, register_benchmark

FAMILY = "clip"
_WING = "moram_avalanche.benchmarks.images"
_CHECKS = f"{_WING}.data_checks"

XTAIL = register_benchmark(Benchmark(
    "xtail", FAMILY, f"{_WING}.streams:xtail",
    protocol="X-TAIL (RAIL; the MoRAM paper's): 10 domains, 16 shots per class, order 1 by default, every "
             "domain's classes at test",
    check=DataCheck(f"{_CHECKS}:check_xtail_layout", layout="X-TAIL's split files", images=True)))
MTIL = register_benchmark(Benchmark(
    "mtil", FAMILY, f"{_WING}.streams:mtil",
    protocol="MTIL as ZSCL runs it: 11 domains, the full training sets by default, each domain's own classes "
             "at test",
    check=DataCheck(f"{_CHECKS}:check_mtil_layout", layout="torchvision's layout (also what mtil-5shot reads)",
                    images=True)))
#: the shots (5) are streams.MTIL_PAPER_SHOTS (a test holds the two together); its data is mtil's
MTIL_5SHOT = register_benchmark(Benchmark(
    "mtil-5shot", FAMILY, f"{_WING}.streams:mtil_5shot",
    protocol="few-shot MTIL, the MoRAM paper's MTIL table (MoE-Adapters' protocol): mtil with 5 shots per "
             "class"))
SYNTHETIC = register_benchmark(Benchmark(
    "synthetic", FAMILY, f"{_WING}.synthetic:synthetic_from_options",
    protocol="an offline drawn stream of five toy domains (demo, tests)"))

__all__ = ["FAMILY", "MTIL", "MTIL_5SHOT", "SYNTHETIC", "XTAIL"]
