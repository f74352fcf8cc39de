"""A finished tiny T5 MoRAM run on two TRACE tasks, for the resume checks (``tests/experiments``): its
inputs written to a folder, its command line, and what a refused resume must leave unchanged."""

import json

from moram_avalanche.cli import main
from tiny_text import tiny_t5, word_tokenizer

#: the two TRACE tasks of the tiny run
TRACE_TASKS = ("C-STANCE", "FOMC")


def write_trace_inputs(base, pairs):
    """A tiny T5 folder and a TRACE tree whose splits hold ``pairs(split=...)``: ``(model, root)``."""
    model = base / "model"
    tiny_t5().save_pretrained(model)
    word_tokenizer().save_pretrained(model)
    root = base / "TRACE"
    for name in TRACE_TASKS:
        (root / name).mkdir(parents=True)
        for split in ("train", "eval", "test"):
            (root / name / f"{split}.json").write_text(json.dumps(pairs(split=split)))
    return model, root


def trace_run_arguments(root, model, log_dir):
    """``run``'s command line of the tiny MoRAM run (one step per task, two new tokens)."""
    return ["run", "--benchmark", "trace", "--order", ",".join(TRACE_TASKS), "--data-root", str(root), "--strategy",
            "moram", "--model", str(model), "--log-dir", str(log_dir), "--iterations", "1", "--batch-size", "2",
            "--dtype", "float32", "--set", "max_new_tokens=2", "--no-progress"]


def snapshot(folder):
    """Every file of ``folder`` with its bytes (to see that nothing was written)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "tb" not in p.relative_to(folder).parts and p.name != ".moram-run.lock"}


def error_lines(capsys):
    """The command's error lines (transformers' loading bars, on stderr too, left out)."""
    return [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("moram-avalanche")]


def refused_resume(capsys, argv, log_dir, *fragments):
    """``argv`` run again in ``log_dir`` is refused in one line holding every fragment, and nothing
    in the folder is trained, written or lost; returns the line."""
    before = snapshot(log_dir)
    capsys.readouterr()
    assert main(argv) == 2
    err = error_lines(capsys)
    assert len(err) == 1, err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    assert snapshot(log_dir) == before  # nothing trained or written
    return err[0]
