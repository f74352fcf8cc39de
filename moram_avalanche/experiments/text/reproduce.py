"""What ``reproduce`` was asked for the language-model tables (:class:`TextReproduceSettings`), and
what it means for their runs: the model each run loads (a rehearsal's tiny one), the shorter
budget of smoke runs and rehearsals, the data and model files the plan needs, and what the plan
says of them. The tables are data (:mod:`.paper_tables`), their streams protocols
(:mod:`.streams`); the pipeline that reads them is :mod:`~moram_avalanche.experiments.paper`
(written once for every family).

``--paper`` prints the paper's numbers, ``--dry-run`` the plan, and ``--rehearse`` runs the
whole plan on the real data, capped (:mod:`.rehearsal`: training and test examples per task,
steps per task), with a tiny random-init model of the table's architecture and a word-level
tokenizer built from the capped stream (:mod:`moram_avalanche.text.tiny`), so a missing file or
a crash shows in minutes, offline, before a GPU-day.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..paper.needs import data_status
from ..paper.settings import REHEARSAL_ITERATIONS, ReproductionSettings
from .rehearsal import REHEARSAL_NEW_TOKENS, REHEARSAL_TEST, REHEARSAL_TRAIN


@dataclass
class TextReproduceSettings(ReproductionSettings):
    """What ``reproduce`` was asked for a language-model table.

    Attributes:
        data_root: O-LoRA's ``CL_Benchmark`` or the release's ``LLM-CL-Benchmark_500`` folder.
        out: where the runs and the tables go. seeds: None: the table's (42).
        device: torch device. model: a Hugging Face name or local folder; None: the table's.
        dtype: the weights' dtype; None: the table's. gradient_checkpointing: recompute
            activations in the backward pass.
        layout: the data layout ("auto", "olora", "moram").
        iterations: a shorter budget per task (smoke runs; not the paper's one epoch).
        rehearse: the whole plan capped, with a tiny model, under ``out/rehearsal``.
        progress: progress bars.
    """

    data_root: Optional[str] = None
    out: str = "runs/reproduce"
    seeds: Optional[Tuple[int, ...]] = None
    device: str = "cpu"
    model: Optional[str] = None
    dtype: Optional[str] = None
    gradient_checkpointing: bool = False
    layout: str = "auto"
    iterations: Optional[int] = None
    rehearse: bool = False
    progress: bool = True

    rehearsal = (f"{REHEARSAL_TRAIN} training and {REHEARSAL_TEST} test examples per task, {REHEARSAL_ITERATIONS} "
                 "steps per task, a tiny random-init model")
    data_wanted = "the text data"
    data_sources = ("O-LoRA's CL_Benchmark or the release's LLM-CL-Benchmark_500; TRACE's data for trace; SAPT's "
                    "CL_Benchmark for superni; ")

    def model_of(self, spec, block: Optional[str] = None) -> str:
        return self.model or (spec.block_model(block)[0] if block else spec.model)

    def dtype_of(self, spec) -> str:
        return self.dtype or spec.dtype

    # ------------------------------------------------------------------ the model
    def model_record(self, run) -> Dict[str, Any]:
        protocol = run.protocol
        return {"model": "tiny random-init " + protocol.architecture if self.rehearse else protocol.model,
                "dtype": protocol.dtype, "gradient_checkpointing": self.gradient_checkpointing}

    def load_model(self, run) -> tuple:
        """The run's language model (a rehearsal's tiny random-init one, with a word-level tokenizer
        of its capped stream) as :class:`~moram_avalanche.models.language_model.LanguageModel`."""
        from ...models.language_model import LanguageModel

        protocol = run.protocol
        if self.rehearse:
            from ...text.tiny import tiny_language_model, word_tokenizer

            benchmark = protocol.make_benchmark(run, self)(None, None)
            texts = [text for task in benchmark.tasks for pairs in (task.train, task.test)
                     for pair in pairs for text in pair]
            tokenizer = word_tokenizer(texts)
            model = tiny_language_model(protocol.architecture, tokenizer, seed=run.seed)
        else:
            from ...text.load import load_language_model

            model, tokenizer = load_language_model(protocol.model, dtype=protocol.dtype,
                                                   gradient_checkpointing=self.gradient_checkpointing)
        return LanguageModel(model.to(self.device), tokenizer), None, None, tokenizer

    def setup_arguments(self) -> Dict[str, Any]:
        from ..tables import TEXT_TABLES

        return {"family": "text", "tables": TEXT_TABLES}

    def budget_options(self, run, options: Dict[str, Any]) -> Dict[str, Any]:
        """``iterations``; in a rehearsal also minibatches of at most 4, small enough that the stream's
        accumulation steps (SuperNI: SAPT's 4) fit a task capped at
        :data:`~.rehearsal.REHEARSAL_TRAIN` examples (the loop refuses more), short answers, and
        what the strategy itself caps (LFPT5: its sampled pseudo-samples)."""
        shorter: Dict[str, Any] = {"iterations": self.budget}
        if self.rehearse:
            from .recipes import text_strategy_classes

            batch = max(1, min(4, REHEARSAL_TRAIN // int(options.get("accumulation_steps", 1))))
            shorter.update(train_mb_size=batch, eval_mb_size=4, max_new_tokens=REHEARSAL_NEW_TOKENS,
                           max_target_length=16)
            shorter.update(getattr(text_strategy_classes().get(run.strategy), "rehearsal_options", {}))
        return shorter

    # ------------------------------------------------------------------ the data
    def plan_header(self, specs: Sequence[Any], planned: Sequence[Any]) -> List[str]:
        """The streams, the data root (and its layout) and how many of their tasks it holds; a
        budget that is not the paper's."""
        lines = [f"  data: {', '.join(dict.fromkeys(spec.benchmark for spec in specs))} under "
                 f"{self.data_root or '<data-root>'}" + (f" (layout {self.layout})" if any(
                     spec.stream.has_layout for spec in specs) else "") + f": {data_status(self.data_root, lambda: self._task_reports(specs), 'tasks ')}"]
        if self.budget is not None:
            lines.append(f"  NOT the paper's budget: {self.budget} steps per task "
                         + ("(rehearsal)" if self.rehearse else "(--iterations)"))
        return lines

    def _task_reports(self, specs: Sequence[Any]) -> list:
        """``check-data``'s reports of every task the tables read (each stream's)."""
        return [report for stream, tables in _by_stream(specs).items() for report in stream.task_reports(tables, self)]

    def problems(self, specs: Sequence[Any], planned: Sequence[Any]) -> List[str]:
        """Every task the tables read, what their streams need beyond their data, and (but in a
        rehearsal, whose model is tiny) every model they load."""
        problems = [f"task {r.name}: {r.status} -- {' '.join(r.message.split())}"
                    for r in self._task_reports(specs) if not r.usable]
        problems += [problem for stream, tables in _by_stream(specs).items() for problem in stream.problems(tables, self)]
        if not self.rehearse:
            problems += self._model_problems(specs)
        return problems

    def _model_problems(self, specs: Sequence[Any]) -> List[str]:
        """Every model the tables load, checked as a run checks it before its weights load
        (:func:`~moram_avalanche.text.check.check_language_model`: config, weights' headers and fit,
        tokenizer; a Hub name not in the cache as far as its config)."""
        from ...text.check import check_language_model

        problems = []
        models = {(self.model_of(spec, block), self.dtype_of(spec)): None
                  for spec in specs for block, _ in spec.table_rows()}
        for model, dtype in models:
            try:
                check_language_model(model, dtype=dtype)
            except (OSError, ValueError) as error:
                problems.append(f"model {model}: {str(error).splitlines()[0]}")
        return list(dict.fromkeys(problems))

    def needs_hint(self, specs: Sequence[Any], root: Path) -> str:
        return (f"\n`moram-avalanche check-data --benchmark {specs[0].benchmark} --root {root}` details the data; "
                "`reproduce --rehearse` runs the plan with a tiny model and no weights.")


def _by_stream(specs: Sequence[Any]) -> Dict[Any, List[Any]]:
    """The tables grouped by their stream, in order."""
    grouped: Dict[Any, List[Any]] = {}
    for spec in specs:
        grouped.setdefault(spec.stream, []).append(spec)
    return grouped


__all__ = ["TextReproduceSettings"]
