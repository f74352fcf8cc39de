"""The X-TAIL and MTIL streams as Avalanche benchmarks, read from the datasets on disk.

========  =====================  ==========  =====================  ========================
stream    domains / classes      label space training data          evaluation prompts
========  =====================  ==========  =====================  ========================
X-TAIL    10 / 1,100 (no CIFAR)  "all"       16 shots per class     one per class (its
                                                                    domain's template)
MTIL      11 / 1,201             "domain"    full, or 5 shots       template ensemble of the
                                                                    test domain
========  =====================  ==========  =====================  ========================

Every experience carries ``domain``, ``classnames``, ``template``, ``eval_templates``,
``label_space``, ``label_offset`` and ``domains`` (see
:func:`~moram_avalanche.benchmarks.images.clip_benchmark.clip_benchmark`), and ``bad_images`` (the
:class:`~moram_avalanche.benchmarks.images.datasets.BadImages` record of unreadable files).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Union

from ...utils.paths import check_input_path
from ..readers import DataError
from .clip_benchmark import Domain, clip_benchmark
from .datasets import BadImages
from .domains import DomainData, DomainSpec, resolve_domain
from .fewshot import domain_rng, few_shot_indices
from .prompts import domain_prompts
from .validate import check_domain

#: X-TAIL task orders. Order 1 is the MoRAM / RAIL default [MoRAM XTAIL/main.py --datasets;
#: RAIL configs/analytic_clip.yaml], the column order of the MoRAM paper's X-TAIL table. Order 2
#: is in no released code: it is the column order of the paper's order-2 X-TAIL table
#: (``tab:few_xtail_order_2``), whose Transfer row has "--" under Cars, the first task.
XTAIL_ORDERS = {
    1: ("Aircraft", "Caltech101", "DTD", "EuroSAT", "Flowers", "Food", "MNIST", "OxfordPet",
        "StanfordCars", "SUN397"),
    2: ("StanfordCars", "Aircraft", "OxfordPet", "Food", "SUN397", "MNIST", "Flowers", "DTD",
        "Caltech101", "EuroSAT"),
}
#: MTIL task orders [ZSCL mtil/scripts/*.sh (I); ZSCL mtil/results.ipynb statistics(order=2) (II)].
MTIL_ORDERS = {
    "I": ("Aircraft", "Caltech101", "CIFAR100", "DTD", "EuroSAT", "Flowers", "Food", "MNIST",
          "OxfordPet", "StanfordCars", "SUN397"),
    "II": ("StanfordCars", "Food", "MNIST", "OxfordPet", "Flowers", "SUN397", "Aircraft",
           "Caltech101", "DTD", "EuroSAT", "CIFAR100"),
}
PROTOCOLS = ("xtail", "mtil")

Order = Union[int, str, Sequence[str]]


def xtail(root, *, order: Order = 1, shots: int = 16, seed: int = 42, prompts: str = "moram",
          train_transform=None, eval_transform=None, on_bad_image: str = "skip",
          bad_image_log=None, test_shots: Optional[int] = None):
    """The X-TAIL stream (RAIL, NeurIPS 2024, as run by the MoRAM release).

    Args:
        root: the folder holding the datasets in the CoOp split-file layout (any of the folder
            spellings of the MoRAM code, RAIL and CoOp; ``moram-avalanche check-data`` lists them).
        order: 1 (default), 2 (the paper's order-2 table, see :data:`XTAIL_ORDERS`) or a
            list of domain names / aliases.
        shots: training images per class, drawn from the split file's ``train`` list (16,
            [MoRAM main.py]); a class with fewer is sampled with replacement, as CoOp does.
        seed: few-shot sampling seed (42, [MoRAM main.py]); each domain has its own generator
            (:mod:`~moram_avalanche.benchmarks.images.fewshot`).
        prompts: "moram" (per-domain template, default), "rail" (one generic template) or
            "zscl" (see :mod:`~moram_avalanche.benchmarks.images.prompts`).
        train_transform, eval_transform: image transforms (e.g. ``load_clip``'s).
        on_bad_image: "skip" (warn, record, use another image of the class) or "raise".
        bad_image_log: file recording skipped images (default: a temporary file; the runner
            moves it into the run's output folder).
        test_shots: None (the whole test sets, as the paper) or at most this many test images
            per class, drawn like the training shots (rehearsals: a crash or a missing file
            shows in minutes; the accuracies mean nothing).

    Labels are local; the evaluation label space is the union of all 1,100 classes, each
    domain's classes offset by the class counts of the domains before it in ``order``.
    """
    specs = _resolve_order(order, XTAIL_ORDERS, "X-TAIL")
    missing_reader = [s.name for s in specs if s.read_xtail is None]
    if missing_reader:
        raise ValueError(f"{missing_reader} are not part of X-TAIL (no CoOp split file); use mtil()")
    return _build("xtail", root, specs, shots=shots, seed=seed, prompts=prompts,
                  replace_short=True, label_space="all", train_transform=train_transform,
                  eval_transform=eval_transform, on_bad_image=on_bad_image,
                  bad_image_log=bad_image_log, test_shots=test_shots)


def mtil(root, *, order: Order = "I", shots: Optional[int] = None, seed: int = 42,
         prompts: str = "zscl", train_transform=None, eval_transform=None,
         on_bad_image: str = "skip", bad_image_log=None, test_shots: Optional[int] = None):
    """The MTIL stream (ZSCL, ICCV 2023; 5-shot variant of MoE-Adapters, CVPR 2024).

    The default is ZSCL's full-shot protocol. The MoRAM paper's MTIL table is **5-shot**
    ("in line with RAIL, a 5-shot split for MTIL"): ``shots=5``, or :func:`mtil_5shot`
    (``--benchmark mtil-5shot``).

    Args:
        root: the folder holding the datasets in torchvision's layouts (``--data-location``
            of ZSCL); ``moram-avalanche check-data --benchmark mtil`` lists them.
        order: "I" (default), "II" or a list of domain names / aliases.
        shots: None for the full training sets (ZSCL), or images per class (5: MoE-Adapters'
            few-shot MTIL), without replacement -- a shorter class keeps what it has
            [MoE mtil/src/models/finetune.py].
        seed: few-shot sampling seed (42, [MoE mtil/src/utils.py seed_all]). The 80/20
            splits of Caltech101 / EuroSAT / SUN397 always use ZSCL's seed 42.
        prompts: "zscl" (default: train on each domain's first template, evaluate with its
            template ensemble [ZSCL models/evaluation.py]), "moram" or "rail".
        train_transform, eval_transform, on_bad_image, bad_image_log, test_shots: as for
            :func:`xtail`.

    Labels are local and the evaluation label space is the test domain's own classes
    (task-incremental evaluation); the domain index is the task label.
    """
    specs = _resolve_order(order, MTIL_ORDERS, "MTIL")
    return _build("mtil", root, specs, shots=shots, seed=seed, prompts=prompts,
                  replace_short=False, label_space="domain", train_transform=train_transform,
                  eval_transform=eval_transform, on_bad_image=on_bad_image,
                  bad_image_log=bad_image_log, test_shots=test_shots)


#: the shots of the MoRAM paper's MTIL table ("a 5-shot split for MTIL") = MoE-Adapters' few-shot
#: MTIL [MoE-Adapters4CL mtil/scripts/train/train_few_shot_*.sh ``--few_shot=5``]
MTIL_PAPER_SHOTS = 5


def mtil_5shot(root, *, shots: int = MTIL_PAPER_SHOTS, **kwargs):
    """Few-shot MTIL, the MoRAM paper's MTIL protocol: :func:`mtil` with 5 training images per
    class (MoE-Adapters, CVPR 2024; the paper's ``tab:few_mtil_full``). Other arguments as
    :func:`mtil`; ``shots`` must stay 5 (use :func:`mtil` for other counts)."""
    if shots != MTIL_PAPER_SHOTS:
        raise ValueError(f"mtil-5shot is MTIL with {MTIL_PAPER_SHOTS} training images per class "
                         f"(the MoRAM paper's protocol), got shots={shots!r}; for other counts use "
                         "mtil(shots=N) (--benchmark mtil --shots N)")
    return mtil(root, shots=MTIL_PAPER_SHOTS, **kwargs)


def read_domain(protocol: str, spec: DomainSpec, root: Path, bad_images: BadImages, *,
                check: bool = True) -> DomainData:
    """One domain in the layout of ``protocol`` ("xtail" or "mtil").

    With ``check`` (default), a domain with any problem of
    :func:`~moram_avalanche.benchmarks.images.validate.domain_problems` (empty classes or splits, test
    classes without training images, duplicate class names) is a "malformed" :class:`DataError`
    listing them all; ``check-data`` passes False and reports the same list itself. A reader
    failing on files it does not understand (an error of the file format, not a
    :class:`DataError`) is turned into a "malformed" :class:`DataError` naming the domain.
    """
    reader = spec.read_xtail if protocol == "xtail" else spec.read_mtil
    if reader is None:
        raise DataError(spec.name, f"not part of {protocol}")
    try:
        data = reader(root, bad_images)
    except DataError:
        raise
    except (OSError, ValueError, KeyError, IndexError, TypeError, EOFError) as error:
        raise DataError(spec.name, f"cannot be read from {root}: {type(error).__name__}: {error}",
                        status="malformed",
                        fix=f"moram-avalanche check-data --root {root} --benchmark {protocol} shows "
                            "the layout it expects") from None
    if check:
        check_domain(data)
    return data


def protocol_domains(protocol: str) -> List[DomainSpec]:
    """Every domain of ``protocol``, in its first published order."""
    orders = {"xtail": XTAIL_ORDERS[1], "mtil": MTIL_ORDERS["I"]}
    if protocol not in orders:
        raise ValueError(f"benchmark must be one of {PROTOCOLS}, got {protocol!r}")
    return [resolve_domain(name) for name in orders[protocol]]


def _spot_check_files(data: DomainData, samples: int = 16) -> None:
    """A wrong image folder fails here, not deep inside a DataLoader: a few evenly spaced files
    of each split must exist (``check-data`` checks them all)."""
    for split in (data.train, data.test):
        paths = getattr(split, "paths", [])
        picked = [paths[i] for i in sorted({int(k * len(paths) / samples) for k in range(samples)})
                  if i < len(paths)]
        absent = [p for p in picked if not Path(p).is_file()]
        if absent:
            raise DataError(data.name, f"image files listed for it are missing, e.g. {absent[0]}",
                            status="malformed", expected=str(absent[0]),
                            fix=f"complete the images under {data.folder}; check-data lists them all")


def _resolve_order(order: Order, presets: dict, stream: str) -> List[DomainSpec]:
    if isinstance(order, (int, str)):
        key = order.upper() if isinstance(order, str) else order
        key = int(key) if isinstance(key, str) and key.isdigit() else key
        if key in presets:
            names = presets[key]
        elif isinstance(order, str) and _is_domain(order):
            names = [order]  # one domain
        else:
            raise ValueError(f"{stream} order must be one of {list(presets)} or a list of "
                             f"domains, got {order!r}")
    else:
        names = list(order)
    specs = [resolve_domain(name) for name in names]
    if not specs or len({s.name for s in specs}) != len(specs):
        raise ValueError(f"{stream} order must list distinct domains, got {list(names)}")
    return specs


def _is_domain(name: str) -> bool:
    try:
        resolve_domain(name)
    except ValueError:
        return False
    return True


def _build(protocol, root, specs, *, shots, seed, prompts, replace_short, label_space,
           train_transform, eval_transform, on_bad_image, bad_image_log, test_shots=None):
    if root is None:
        raise ValueError(f"{protocol}: data root None is not a folder; pass the folder that "
                         f"holds the datasets (--data-root)")
    root = check_input_path(root, f"{protocol}: data root", kind="dir",
                            fix="pass the folder that holds the datasets (--data-root)")
    if shots is not None and (isinstance(shots, bool) or not isinstance(shots, int) or shots < 1):
        raise ValueError(f"shots must be a positive integer{' or None' if protocol == 'mtil' else ''}, "
                         f"got {shots!r}")
    if test_shots is not None and (isinstance(test_shots, bool) or not isinstance(test_shots, int)
                                   or test_shots < 1):
        raise ValueError(f"test_shots must be a positive integer or None, got {test_shots!r}")
    bad_images = BadImages(on_bad_image, bad_image_log)
    read, errors = [], []
    for spec in specs:
        try:
            data = read_domain(protocol, spec, root, bad_images)
            _spot_check_files(data)
            read.append(data)
        except DataError as error:
            errors.append(str(error))
    if errors:
        raise DataError(
            protocol, f"cannot build the {protocol} stream from {root}: {len(errors)} of "
            f"{len(specs)} domains unavailable\n\n" + "\n\n".join(errors) +
            f"\n\nmoram-avalanche check-data --root {root} --benchmark {protocol} reports every domain.",
            status="missing")
    domains, train_sets, test_sets = [], [], []
    for data in read:
        template, eval_templates = domain_prompts(data.name, prompts)
        domains.append(Domain(data.name, data.classnames, template, eval_templates))
        train = data.train
        if shots is not None:
            train = train.subset(few_shot_indices(train.targets, shots, domain_rng(seed, data.name),
                                                  replace_short=replace_short))
        train_sets.append(train)
        test = data.test
        if test_shots is not None:
            test = test.subset(few_shot_indices(test.targets, test_shots,
                                                domain_rng(seed, data.name + "/test"), replace_short=False))
        test_sets.append(test)
    benchmark = clip_benchmark(domains, train_sets, test_sets, label_space=label_space,
                               train_transform=train_transform, eval_transform=eval_transform)
    for stream in (benchmark.train_stream, benchmark.test_stream):
        for experience in stream:
            experience.bad_images = bad_images
    benchmark.bad_images = bad_images
    benchmark.protocol, benchmark.shots, benchmark.seed, benchmark.prompts = protocol, shots, seed, prompts
    benchmark.root = root
    return benchmark
