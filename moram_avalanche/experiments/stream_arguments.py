"""What a command line says of the data and its stream, read the same for every family:
``--order``, ``--shots``, ``--data-seed``, ``--prompts``, ``--on-bad-image`` (:func:`stream_options`),
the DataLoader workers (:func:`default_num_workers`) and the folders a run reads
(:func:`data_roots`). Read by the family records' loaders and by
:mod:`~moram_avalanche.experiments.from_arguments`."""

from __future__ import annotations

import os


def default_num_workers(args) -> int:
    """``--num-workers`` when not given: worker processes when images are decoded from disk (a
    ``--data-root`` is given; half the CPU cores, at most 8), else 0 (in memory)."""
    if args.num_workers is not None:
        return args.num_workers
    return max(1, min(8, (os.cpu_count() or 1) // 2)) if args.data_root else 0


#: ``--pretrained`` when not given: OpenAI's weights (what a CLIP run records, and what a text run's
#: record has always held, so that earlier folders resume)
DEFAULT_PRETRAINED = "openai"


def pretrained_of(args) -> str:
    """``--pretrained``, else :data:`DEFAULT_PRETRAINED` (the flag is parsed without a default so
    that a text run can tell it was given, and refuse it)."""
    return getattr(args, "pretrained", None) or DEFAULT_PRETRAINED


#: the values of ``--ref-images`` / ``--ref-sentences`` that name no path: a small generated set, none
NOT_PATHS = ("synthetic", "none")


def data_roots(args) -> list:
    """The folders a run reads data from, which no output folder may be, hold or lie inside."""
    return [value for value in (args.data_root, args.ref_images) if value is not None and value not in NOT_PATHS]


def stream_options(args) -> dict:
    """The benchmark options given on the command line (only those given)."""
    options = {}
    if args.order is not None:
        options["order"] = args.order.split(",") if "," in args.order else args.order
    if args.shots is not None:
        options["shots"] = None if args.shots == "full" else args.shots
    if args.data_seed is not None:
        options["seed"] = args.data_seed
    if args.prompts is not None:
        options["prompts"] = args.prompts
    if args.on_bad_image is not None:
        options["on_bad_image"] = args.on_bad_image
    return options


__all__ = ["DEFAULT_PRETRAINED", "NOT_PATHS", "pretrained_of", "data_roots", "default_num_workers", "stream_options"]
