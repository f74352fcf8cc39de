"""The command line's checked-arguments layer: every argument checked before anything runs.

``moram-avalanche`` commands call these checks first, so a mistake costs no model load and
writes nothing. A mistake is reported in one line that names the argument, what was given,
what is allowed and how to fix it, and the command exits with 2 (:func:`report_error`):

* argparse's own errors (a missing option, ``--batch-size 0`` through the argument types
  below) go through :class:`OneLineParser`;
* :func:`check_run_arguments` / :func:`check_compare_arguments` check the rest against the
  registries and the machine: benchmark and strategy names, ``--fsdp`` (under torchrun, with
  strategies that declare it), each strategy's options with its
  ``--set`` values (:func:`~moram_avalanche.strategies.options.check_strategy_options`:
  names, types and ranges, nothing built), reference data the strategies take, the device
  (``auto`` resolved), the data root and the cache folder (the output folder, and the
  settings it was made with, are the run path's: checked once there, before anything is written).

Nothing here branches on strategy names: what a strategy takes, it declares
(:class:`~moram_avalanche.strategies.needs.StrategyNeeds`).
"""

from __future__ import annotations

import argparse
import errno
import math
import re
from typing import List, Mapping

from .utils.errors import UserError, user_message


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (no usage block), exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (`{self.prog} --help` lists the options)\n")


# ---------------------------------------------------------------- argument types (argparse)
def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 or more), got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def shots(text: str):
    """An argparse type: images per class (an integer >= 1), or ``"full"`` (every image)."""
    if text.lower() in ("full", "none"):
        return "full"
    value = _integer(text, "a positive integer or 'full'")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'full', got {text!r}")
    return value


def share(text: str) -> float:
    """An argparse type: a share, a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], e.g. 0.99, got {text!r}")
    return value


def _integer(text: str, what: str = "an integer") -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


# ---------------------------------------------------------------- errors
def report_error(command: str, error: BaseException) -> str:
    """The line the command line prints for a user's mistake (without the trailing newline)."""
    return f"moram-avalanche {command}: {user_message(error)}"


def is_user_error(error: BaseException) -> bool:
    """A mistake of the user (a wrong value or type, a missing file, an unusable machine):
    reported in one line; anything else keeps its traceback."""
    return isinstance(error, (ValueError, UserError)) or (
        isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS))


# ---------------------------------------------------------------- checks of run / compare
def check_shared_arguments(args) -> str:
    """The options ``run`` and ``compare`` share; returns ``--device`` resolved (``auto``: CUDA when
    there is one)."""
    from .benchmarks import benchmark_entry
    from .experiments.stream_arguments import NOT_PATHS
    from .utils.devices import resolve_device
    from .utils.files import check_output_folder
    from .utils.paths import check_input_path

    benchmark = benchmark_entry(args.benchmark)
    device = resolve_device(args.device, "--device")
    if args.data_root is not None:
        check_input_path(args.data_root, "--data-root", kind="dir",
                         fix="give the folder that holds the datasets (moram-avalanche check-data --root DIR "
                             "lists what it finds)")
    if args.data_root is None and benchmark.reads_from_disk:
        raise ValueError(f"--benchmark {args.benchmark} reads datasets from disk: give --data-root DIR "
                         "(or --benchmark synthetic for the offline stream)")
    if args.cache_dir is not None:
        check_output_folder(args.cache_dir, "--cache-dir")
    check_fsdp_arguments(args)
    check_speed_switches(args, device)
    for option, value, kind in (("--ref-images", args.ref_images, "dir"),
                                ("--ref-sentences", args.ref_sentences, "file")):
        if value is not None and value not in NOT_PATHS:
            check_input_path(value, option, kind=kind, fix="give an existing "
                             f"{'folder' if kind == 'dir' else 'file'}, or 'synthetic' for a small generated set")
    return device


def check_speed_switches(args, device: str) -> None:
    """``--compile-eval`` records CUDA graphs (a CUDA device); ``--keep-base-casts`` keeps whole
    frozen weights, which ``--fsdp`` shards (issue 44's switches, :mod:`~moram_avalanche.strategies.plugins.base_casts`)."""
    if getattr(args, "compile_eval", False) and not str(device).startswith("cuda"):
        raise ValueError(f"--compile-eval records the image tower's evaluation as CUDA graphs: it needs a CUDA "
                         f"device (--device resolves to {device}); leave --compile-eval out")
    if getattr(args, "keep_base_casts", False) and getattr(args, "fsdp", False):
        raise ValueError("--keep-base-casts keeps each frozen weight whole in the compute dtype, and --fsdp "
                         "shards them (the copy would hold the gathered weight): leave one of them out")


def check_family_arguments(args, options: Mapping[str, Mapping[str, object]]) -> None:
    """What the family of ``--benchmark`` checks of the command line without loading the model's
    weights (its record's :attr:`~moram_avalanche.experiments.family.Family.check_arguments`: for
    the language models the CLIP flags they do not use, the dtype, the model's files and the
    stream's data). Run last, after the cheaper checks, and before any model loads or the output
    folder (or its lock) exists."""
    from .experiments.families import family_of_benchmark

    family_of_benchmark(args.benchmark).check_arguments(args, options)


def check_fsdp_arguments(args) -> None:
    """``--fsdp``: a benchmark with strategies that train with sharded weights, under torchrun."""
    from .benchmarks import benchmark_family, benchmarks
    from .experiments.distributed import under_torchrun
    from .strategies.registry import sharding_strategies

    if not getattr(args, "fsdp", False):
        return
    if not sharding_strategies(benchmark_family(args.benchmark)):
        sharded = [name for name, entry in benchmarks().items() if sharding_strategies(entry.family)]
        raise ValueError(f"--fsdp shards a language model's frozen weights; no strategy of --benchmark "
                         f"{args.benchmark} trains that way: leave --fsdp out (it is for the text benchmarks: "
                         f"{', '.join(sharded)})")
    if not under_torchrun():
        raise ValueError("--fsdp shards the frozen weights over the processes of a torchrun run: start it "
                         "with `torchrun --nproc_per_node N -m moram_avalanche ...`, or leave --fsdp out")


def check_sharding_strategy(args, name: str, needs) -> None:
    """``--fsdp`` only with a strategy that trains with sharded weights (it declares ``needs.fsdp``)."""
    from .benchmarks import benchmark_family
    from .strategies.registry import sharding_strategies

    if getattr(args, "fsdp", False) and not needs.fsdp:
        raise ValueError(f"--fsdp shards the frozen pre-trained weights, and strategy {name} does not train "
                         "that way (it trains those weights, copies the model or keeps state per process); "
                         f"those that do: {', '.join(sharding_strategies(benchmark_family(args.benchmark)))}; leave --fsdp out "
                         f"for {name}")


def check_strategy_arguments(args, name: str, options: Mapping[str, object], overrides: Mapping[str, object], *,
                             set_prefix: str = "") -> None:
    """Check strategy ``name``'s ``options`` as the command line built them
    (:func:`~moram_avalanche.experiments.from_arguments.command_options`; ``overrides``: its
    ``--set`` values, ``set_prefix``: ``"moram."`` for ``compare``), the reference data it takes
    described by their paths: the one check of a command line's strategy options, each mistake
    named as it was given (``--set moram.topk=0``, else ``--strategy moram``)."""
    from .benchmarks import benchmark_family
    from .strategies.options import check_strategy_options
    from .strategies.registry import get_strategy

    cls = get_strategy(name, benchmark_family(args.benchmark))
    needs = cls.needs
    check_sharding_strategy(args, name, needs)
    references = needs.reference_arguments(images=args.ref_images, sentences=args.ref_sentences)
    try:
        check_strategy_options(cls, {**references, **options}, unbuilt=tuple(references))
    except (TypeError, ValueError) as err:
        named = [key for key in overrides if _names(str(err), key)]
        where = f"--set {set_prefix}{named[0]}={overrides[named[0]]!r}" if named else f"--strategy {name}"
        raise _option_error(where, err) from None


def _names(message: str, option: str) -> bool:
    """Whether the message of an option check is about ``option`` (the checks name it first:
    "topk must be ...", "each of betas ...", "MoRAM option topk takes ...", "MoRAM takes no
    option 'topk'", "avalanche.replay has no argument(s) ['mem_sise']")."""
    key = re.escape(option)
    return bool(re.match(rf"(each of )?{key}\b", message)
                or re.match(rf"\S+ (option {key}\b|takes no option '{key}'|has no argument\(s\) \[.*'{key}')",
                            message))


def _option_error(where: str, error: BaseException) -> Exception:
    from .utils.errors import OptionError

    message = f"{where}: {error}"
    return OptionError(message) if isinstance(error, TypeError) else ValueError(message)


def check_references_taken(args, names: List[str]) -> None:
    """``--ref-images`` / ``--ref-sentences`` only when a chosen strategy takes them."""
    from .benchmarks import benchmark_family
    from .strategies.registry import get_strategy, strategies_taking

    family = benchmark_family(args.benchmark)
    for kind, value in (("images", args.ref_images), ("sentences", args.ref_sentences)):
        if value is not None and not any(kind in get_strategy(name, family).needs.references for name in names):
            raise ValueError(f"--ref-{kind} is for strategies that take reference {kind}: "
                             f"{', '.join(strategies_taking(kind))}")


def check_run_arguments(args, name: str, options: Mapping[str, object], overrides: Mapping[str, object]) -> None:
    """Everything ``run`` takes, before anything is loaded or written (the shared options:
    :func:`check_shared_arguments`, first): the strategy's options with its ``--set`` values, and
    the reference data it takes (``--log-dir`` is the run path's:
    :class:`~moram_avalanche.experiments.run_folder.RunFolder`)."""
    check_references_taken(args, [name])
    check_strategy_arguments(args, name, options, overrides)


def check_compare_names(args, names: List[str], overrides: Mapping[str, Mapping[str, object]]) -> None:
    """``compare``'s ``--strategies`` and ``--set`` names (after the shared options,
    :func:`check_shared_arguments`): each strategy once and known, each ``--set`` one of theirs."""
    from .benchmarks import benchmark_family
    from .strategies.registry import get_strategy

    if not names:
        raise ValueError("--strategies is empty: give comma-separated names, e.g. zeroshot,finetune,moram")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"--strategies lists {repeated} twice: give each strategy once")
    family = benchmark_family(args.benchmark)
    for name in names:
        get_strategy(name, family)
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError(f"--set names strategies that are not compared: {unknown} (compared: {names}); "
                         "write --set STRATEGY.KEY=VALUE with STRATEGY one of --strategies")


def check_compare_arguments(args, options: Mapping[str, Mapping[str, object]],
                            overrides: Mapping[str, Mapping[str, object]]) -> None:
    """Everything ``compare`` takes, before anything is loaded or written (after
    :func:`check_compare_names`): every strategy's options with its own ``--set`` values, and the
    reference data they take (``--out`` is the comparison's:
    :func:`~moram_avalanche.experiments.compare.run_comparison`)."""
    check_references_taken(args, list(options))
    for name, given in options.items():
        check_strategy_arguments(args, name, given, overrides.get(name, {}), set_prefix=f"{name}.")


# ---------------------------------------------------------------- each sub-command's checks
def checked(args, **values) -> argparse.Namespace:
    """A copy of the parsed ``args`` with checked ``values`` (resolved, built): what a sub-command
    hands to :mod:`moram_avalanche.experiments.commands`. The parsed arguments are not changed."""
    return argparse.Namespace(**{**vars(args), **values})


def parse_sets(items, *, prefixed: bool) -> dict:
    """``--set [STRATEGY.]KEY=VALUE`` items -> ``{strategy or "": {key: value}}``.

    Values are Python literals (numbers, strings, tuples, True/None); anything else is kept as
    a string.
    """
    import ast

    parsed = {}
    for item in items or ():
        target, sep, text = item.partition("=")
        name, dot, key = target.rpartition(".") if prefixed else ("", "", target)
        if not sep or not key.isidentifier() or (prefixed and not (dot and name)):
            form = "STRATEGY.KEY=VALUE (e.g. moram.lr=1e-3)" if prefixed else "KEY=VALUE (e.g. topk=8)"
            raise ValueError(f"--set {item!r}: expected {form}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        parsed.setdefault(name.lower(), {})[key] = value
    return parsed


def strategy_names(text: str) -> List[str]:
    """Comma-separated strategy names, lower-cased."""
    return [name.strip().lower() for name in text.split(",") if name.strip()]


def check_demo(args) -> argparse.Namespace:
    """``demo``: the family's demo (``--text``: the language models'), ``--full`` where it has one,
    ``--out`` and ``--cache-dir`` writable, the device."""
    from .experiments.families import family
    from .utils.devices import resolve_device
    from .utils.files import check_output_folder
    from .utils.paths import check_compare_path

    name = "text" if args.text else "clip"
    demo = family(name).demo
    if args.full and not demo.full_strategies:
        raise ValueError(f"--full is no setting of {demo.title}, which runs {' and '.join(demo.strategies)}: "
                         "leave --full out")
    device = resolve_device(args.device, "--device")
    strategies = demo.full_strategies if args.full else demo.strategies
    out = args.out or demo.out
    check_compare_path(out, strategies, "--out")
    if args.cache_dir is not None:
        check_output_folder(args.cache_dir, "--cache-dir")
    return checked(args, family=name, device=device, out=out, strategies=strategies)


def check_run(args) -> argparse.Namespace:
    """``run``: the shared options, then the strategy's options (built once,
    :func:`~moram_avalanche.experiments.from_arguments.command_options`) with its ``--set`` values."""
    from .benchmarks import benchmark_entry
    from .experiments.from_arguments import command_options

    benchmark_entry(args.benchmark)  # an unknown name fails first
    name = args.strategy.lower()
    overrides = {name: parse_sets(args.set, prefixed=False).get("", {})}
    device = check_shared_arguments(args)
    options = {name: command_options(args, name, overrides[name])}
    check_run_arguments(args, name, options[name], overrides[name])
    check_family_arguments(args, options)
    return checked(args, device=device, options=options, overrides=overrides)


def check_compare(args) -> argparse.Namespace:
    """``compare``: the shared options, the strategies' names, then each one's options (built once)
    with its own ``--set`` values."""
    from .benchmarks import benchmark_entry
    from .experiments.from_arguments import command_options

    benchmark_entry(args.benchmark)  # an unknown name fails first
    names = strategy_names(args.strategies)
    overrides = parse_sets(args.set, prefixed=True)
    device = check_shared_arguments(args)
    check_compare_names(args, names, overrides)
    options = {name: command_options(args, name, overrides.get(name, {})) for name in names}
    check_compare_arguments(args, options, overrides)
    check_family_arguments(args, options)
    return checked(args, device=device, options=options, overrides=overrides)


def check_device(args) -> argparse.Namespace:
    """``analyze``: ``--device`` resolved."""
    from .utils.devices import resolve_device

    return checked(args, device=resolve_device(args.device, "--device"))


#: ``cost --tasks``: the most tasks a bank is grown to (the paper's streams have 10 or 11)
MAX_COST_TASKS = 1000


def task_numbers(text: str) -> List[int]:
    """``cost --tasks``: task numbers >= 1 (at most :data:`MAX_COST_TASKS`), sorted, each once."""
    from .utils.checks import check_int_range

    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() and int(t) >= 1 for t in items):
        raise ValueError(f"--tasks must list task numbers >= 1, e.g. 1,5,10; got {text!r}")
    for item in items:
        check_int_range("--tasks", int(item), high=MAX_COST_TASKS,
                        hint="each task grows every adapter and is timed; the paper's streams have 10 or 11")
    return sorted({int(t) for t in items})


def check_cost(args) -> argparse.Namespace:
    """``cost``: the device, ``--out`` writable, ``--tasks``, the strategies and their ``--set`` values."""
    from .utils.devices import resolve_device
    from .utils.files import check_output_folder

    device = resolve_device(args.device, "--device")
    if args.out:
        check_output_folder(args.out, "--out")
    return checked(args, device=device, strategies=strategy_names(args.strategies), tasks=task_numbers(args.tasks),
                   overrides=parse_sets(args.set, prefixed=True))


def check_nothing(args) -> argparse.Namespace:
    """``check-data``: its arguments are argparse's (a folder to read, one of the layouts)."""
    return checked(args)


def check_reproduce(args) -> argparse.Namespace:
    """``reproduce TABLE``: a table of a family (:mod:`~moram_avalanche.experiments.families`) and
    that family's settings from the command line (another family's flags refused)."""
    from .experiments.reproduce import reproduction_of

    return checked(args, settings=reproduction_of(args.table).settings(args))


__all__ = ["MAX_COST_TASKS", "OneLineParser", "check_compare", "check_compare_arguments", "check_compare_names",
           "check_cost", "check_demo", "check_device", "check_family_arguments", "check_nothing", "check_reproduce",
           "check_run", "checked",
           "parse_sets", "strategy_names", "task_numbers", "check_fsdp_arguments",
           "check_references_taken", "check_sharding_strategy", "check_run_arguments",
           "check_shared_arguments", "check_strategy_arguments", "is_user_error", "nonnegative_int",
           "positive_float", "positive_int", "report_error", "share", "shots"]
