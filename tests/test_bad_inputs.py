"""A user's mistakes, each caught before anything runs: the command line exits with 2 and one line
naming the argument, what was given and what is allowed; the API raises ValueError / TypeError
with the same information. Each case also asserts that nothing was written where it should not be.
"""

import json
import math
import os

import pytest
import torch
from PIL import Image
from torch import nn

from moram_avalanche.cli import main

CLI_TINY = ["--model", "moram-synthetic-tiny", "--pretrained", "none", "--no-progress"]


def run_args(tmp_path, *extra, strategy="moram", log_dir=None):
    return ["run", "--benchmark", "synthetic", "--strategy", strategy, "--cache-dir", str(tmp_path / "cache"),
            "--log-dir", str(log_dir or tmp_path / "run"), *CLI_TINY, *extra]


def compare_args(tmp_path, *extra, strategies="zeroshot,moram"):
    return ["compare", "--benchmark", "synthetic", "--strategies", strategies, "--cache-dir",
            str(tmp_path / "cache"), "--out", str(tmp_path / "cmp"), *CLI_TINY, *extra]


def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


def garbage_weights(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(os.urandom(2000))
    return str(path)


def other_weights(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"layer.weight": torch.zeros(3)}, path)
    return str(path)


# (id, arguments as a function of tmp_path, the expected message fragments)
CLI_MISTAKES = [
    ("unknown benchmark", lambda t: ["run", "--benchmark", "imagenet-r", "--strategy", "moram",
                                     "--log-dir", str(t / "run")],
     ["unknown benchmark 'imagenet-r'; available: codealpaca, lm-cl, mtil,", "synthetic, synthetic-text, trace, xtail"]),
    ("unknown strategy", lambda t: run_args(t, strategy="ewc"), ["unknown strategy 'ewc'; available:", "moram"]),
    ("misspelled --set", lambda t: run_args(t, "--set", "topkk=3"),
     ["--set topkk=3: MoRAM takes no option 'topkk': did you mean topk?"]),
    ("--set string for an int", lambda t: run_args(t, "--set", "topk=abc"),
     ["--set topk='abc': MoRAM option topk takes Optional[int] (default 16), got str 'abc'"]),
    ("--set string for a float", lambda t: run_args(t, "--set", "lr=1e-3x"),
     ["--set lr='1e-3x': MoRAM option lr takes float | DomainLR (default 0.0005), got str '1e-3x'"]),
    ("--set float for an int", lambda t: run_args(t, "--set", "atoms_per_task=2.5"),
     ["option atoms_per_task takes int (default 16), got float 2.5"]),
    ("--set string for a bool", lambda t: run_args(t, "--set", "router=yes"),
     ["option router takes bool (default False), got str 'yes'"]),
    ("--set out of range", lambda t: run_args(t, "--set", "topk=0"),
     ["--set topk=0: topk must be a positive int, got 0"]),
    ("--set infinite temperature", lambda t: run_args(t, "--set", "temperature=float('inf')"),
     ["MoRAM option temperature takes Optional[float] (default 0.01), got str \"float('inf')\""]),
    ("--set inf as a literal", lambda t: run_args(t, "--set", "temperature=1e999"),
     ["--set temperature=inf: temperature must be a finite number > 0", "got inf"]),
    ("--set threshold above 1", lambda t: run_args(t, "--set", "threshold=2"),
     ["--set threshold=2: threshold must be a finite number in [0, 1]", "got 2"]),
    ("--set unknown choice", lambda t: run_args(t, "--set", "balance_form='mean'"),
     ["balance_form must be one of ('release', 'switch'), got 'mean'"]),
    ("--set unknown encoder", lambda t: run_args(t, "--set", "encoders='vision'"),
     ["unknown encoder(s) ['vision']", "('visual', 'text')"]),
    ("--set without =", lambda t: run_args(t, "--set", "topk"), ["--set 'topk': expected KEY=VALUE"]),
    ("--set of another strategy's option", lambda t: run_args(t, "--set", "alpha=0.5", strategy="finetune"),
     ["FineTune takes no option 'alpha'"]),
    ("ZeroShot with iterations", lambda t: run_args(t, "--set", "iterations=5", strategy="zeroshot"),
     ["ZeroShot does not train: leave iterations unset (got 5)"]),
    ("WiSE-FT alpha above 1", lambda t: run_args(t, "--set", "alpha=1.5", strategy="wiseft"),
     ["--set alpha=1.5: alpha must be a finite number in [0, 1]"]),
    ("InfLoRA unknown memory", lambda t: run_args(t, "--set", "memory='gpm2'", strategy="inflora"),
     ["memory must be one of ('dual', 'gpm')", "got 'gpm2'"]),
    ("--device cuda without a GPU", lambda t: run_args(t, "--device", "cuda"),
     ["--device 'cuda': no CUDA GPU is usable on this machine", "use --device cpu"]),
    ("--device unknown", lambda t: run_args(t, "--device", "tpu"),
     ["--device 'tpu' is not a torch device; use auto, cpu, cuda or cuda:N"]),
    ("--log-dir is a file", lambda t: run_args(t, log_dir=a_file(t)),
     ["--log-dir", "a-file is a file, not a folder"]),
    ("--log-dir below a file", lambda t: run_args(t, log_dir=a_file(t) / "run"),
     ["a-file is a file, not a folder"]),
    ("--cache-dir is a file", lambda t: run_args(t, "--cache-dir", str(a_file(t))),
     ["--cache-dir", "is a file, not a folder"]),
    ("--data-root missing", lambda t: run_args(t, "--data-root", str(t / "nowhere")),
     ["--data-root", "nowhere: no such folder"]),
    ("disk benchmark without --data-root", lambda t: ["run", "--benchmark", "xtail", "--strategy", "moram",
                                                      "--log-dir", str(t / "run"), *CLI_TINY],
     ["--benchmark xtail reads datasets from disk: give --data-root DIR"]),
    ("--ref-images for a strategy that takes none", lambda t: run_args(t, "--ref-images", "synthetic",
                                                                       strategy="lwf"),
     ["--ref-images is for strategies that take reference images: moe-adapters, zscl"]),
    ("--ref-images folder missing", lambda t: run_args(t, "--ref-images", str(t / "nowhere"),
                                                       "--ref-sentences", "synthetic", strategy="zscl"),
     ["--ref-images", "nowhere: no such folder"]),
    ("ZSCL without reference data", lambda t: run_args(t, strategy="zscl"),
     ["--strategy zscl: ZSCL needs reference_images and reference_sentences"]),
    ("--pretrained unknown", lambda t: run_args(t, "--pretrained", "laion9000"),
     ["pretrained='laion9000' is neither a known tag for 'moram-synthetic-tiny' nor an existing file"]),
    ("--pretrained garbage file", lambda t: run_args(t, "--pretrained", garbage_weights(t)),
     ["does not hold weights of open_clip model 'moram-synthetic-tiny'", "torch.load cannot read it"]),
    ("--pretrained weights of another model", lambda t: run_args(t, "--pretrained", other_weights(t)),
     ["does not hold weights", "a state dict of another model:", "1 unexpected keys"]),
    ("compare: a strategy twice", lambda t: compare_args(t, strategies="moram,zeroshot,moram"),
     ["--strategies lists ['moram'] twice"]),
    ("compare: --set for a strategy not compared", lambda t: compare_args(t, "--set", "lwf.temperature=3"),
     ["--set names strategies that are not compared: ['lwf']"]),
    ("compare: misspelled --set", lambda t: compare_args(t, "--set", "moram.topkk=2"),
     ["--set moram.topkk=2: MoRAM takes no option 'topkk'"]),
    ("compare: --set without a strategy", lambda t: compare_args(t, "--set", "topk=2"),
     ["expected STRATEGY.KEY=VALUE"]),
    ("compare: out of range", lambda t: compare_args(t, "--set", "moram.threshold=-1"),
     ["--set moram.threshold=-1: threshold must be a finite number in [0, 1]"]),
    ("demo: --device cuda", lambda t: ["demo", "--out", str(t / "demo"), "--device", "cuda"],
     ["moram-avalanche demo: --device 'cuda': no CUDA GPU"]),
    ("demo: --out is a file", lambda t: ["demo", "--out", str(a_file(t))],
     ["moram-avalanche demo: --out", "a-file is a file, not a folder"]),
    ("cost: --device cuda", lambda t: ["cost", "--params-only", "--device", "cuda", "--out", str(t / "run")],
     ["moram-avalanche cost: --device 'cuda': no CUDA GPU"]),
    ("cost: --out is a file", lambda t: ["cost", "--params-only", "--out", str(a_file(t))],
     ["moram-avalanche cost: --out", "a-file is a file, not a folder"]),
    ("analyze: --device cuda", lambda t: ["analyze", str(t / "run"), "--device", "cuda"],
     ["moram-avalanche analyze: --device 'cuda': no CUDA GPU"]),
]


@pytest.mark.parametrize("make_args, fragments", [c[1:] for c in CLI_MISTAKES], ids=[c[0] for c in CLI_MISTAKES])
def test_a_command_line_mistake_is_one_line_and_exit_status_2(make_args, fragments, tmp_path, capsys):
    args = make_args(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("moram-avalanche ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    # nothing was run or written: no run folder, no comparison folder
    for folder in ("run", "cmp", "demo"):
        assert not (tmp_path / folder).exists() or not any((tmp_path / folder).iterdir()), folder


ARGPARSE_MISTAKES = [
    ("--batch-size 0", ["--batch-size", "0"], "argument --batch-size: must be a positive integer (1 or more), got '0'"),
    ("--batch-size x", ["--batch-size", "x"], "argument --batch-size: must be an integer, got 'x'"),
    ("--iterations -1", ["--iterations", "-1"], "argument --iterations: must be an integer >= 0, got '-1'"),
    ("--lr 0", ["--lr", "0"], "argument --lr: must be a finite number > 0, got '0'"),
    ("--lr nan", ["--lr", "nan"], "argument --lr: must be a finite number > 0, got 'nan'"),
    ("--num-workers -2", ["--num-workers", "-2"], "argument --num-workers: must be an integer >= 0, got '-2'"),
    ("--shots 0", ["--shots", "0"], "argument --shots: must be a positive integer or 'full', got '0'"),
    ("--on-bad-image ignore", ["--on-bad-image", "ignore"], "argument --on-bad-image: invalid choice: 'ignore'"),
]


@pytest.mark.parametrize("extra, message", [c[1:] for c in ARGPARSE_MISTAKES], ids=[c[0] for c in ARGPARSE_MISTAKES])
def test_an_argument_of_the_wrong_form_is_one_line_and_exit_status_2(extra, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(run_args(tmp_path, *extra))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "run").exists()


OTHER_COMMANDS_MISTAKES = [
    ("analyze --share 1.5", ["analyze", "LOG", "--share", "1.5"], "argument --share: must be a number in (0, 1]"),
    ("analyze --images 0", ["analyze", "LOG", "--images", "0"], "argument --images: must be a positive integer"),
    ("analyze --layer x", ["analyze", "LOG", "--layer", "x"], "argument --layer: must be an integer, got 'x'"),
    ("cost --batch-size 0", ["cost", "--batch-size", "0"], "argument --batch-size: must be a positive integer"),
    ("cost --repeats -1", ["cost", "--repeats", "-1"], "argument --repeats: must be a positive integer"),
    ("demo --oot", ["demo", "--oot", "x"], "unrecognized arguments: --oot x"),
]


@pytest.mark.parametrize("argv, message", [c[1:] for c in OTHER_COMMANDS_MISTAKES],
                         ids=[c[0] for c in OTHER_COMMANDS_MISTAKES])
def test_other_commands_refuse_arguments_of_the_wrong_form_in_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_read_only_log_dir_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    import tempfile

    (tmp_path / "run").mkdir()
    mkstemp = tempfile.mkstemp

    def denied(*args, dir=None, **kwargs):
        if str(dir) == str(tmp_path / "run"):
            raise PermissionError(13, "Permission denied")
        return mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", denied)  # root ignores chmod: refuse the write itself
    assert main(run_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert f"moram-avalanche run: --log-dir {tmp_path / 'run'} cannot be written (Permission denied)" in err
    assert list((tmp_path / "run").iterdir()) == []


def test_a_damaged_run_record_in_a_comparison_is_named(tmp_path, capsys):
    (tmp_path / "cmp" / "moram").mkdir(parents=True)
    (tmp_path / "cmp" / "moram" / "run.json").write_text('{"benchmark": "synth')
    assert main(compare_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert "run.json, the record of moram in" in err and "is damaged" in err
    # never "delete it": a run resumed without its record could mix two runs' results
    assert "restore it, give another folder, or start the run over (--no-resume" in err


def test_a_run_folder_made_with_other_settings_is_refused_with_the_differences(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({"format": 2, "run": {"benchmark": "synthetic", "iterations": 80}}))
    assert main(run_args(tmp_path, "--iterations", "40")) == 2
    err = capsys.readouterr().err
    assert "was made with other settings (" in err and "run.iterations: 80 there, 40 now" in err
    assert "--no-resume" in err


# ---------------------------------------------------------------- the Python API
def moram_layer(**kwargs):
    from moram_avalanche import MoRAMLinear

    return MoRAMLinear(nn.Linear(8, 4), **kwargs)


def grown_layer():
    layer = moram_layer(atoms_per_task=2, topk=2)
    layer.expand()
    return layer


def strategy(name, **kwargs):
    from moram_avalanche.strategies.registry import get_strategy

    # the options are checked before anything is built: no model is needed to see them refused
    return get_strategy(name)(model=None, tokenizer=None, **kwargs)


def tiny_benchmark(names):
    from moram_avalanche.benchmarks import Domain, clip_benchmark

    data = torch.utils.data.TensorDataset(torch.zeros(2, 3, 4, 4), torch.tensor([0, 1]))
    data.targets = [0, 1]
    domains = [Domain(name, ("a", "b"), "a {}.") for name in names]
    return clip_benchmark(domains, [data] * len(names), [data] * len(names), label_space="all")


def float_image():
    from moram_avalanche.benchmarks.images.datasets import to_rgb

    return to_rgb(Image.new("F", (4, 4), 0.5))


def damaged_settings(tmp_path):
    from moram_avalanche.experiments.record import read_record

    (tmp_path / "run.json").write_text('{"run": ')
    return read_record(tmp_path, "the run in x")


def tokenizer_of_another_model():
    import open_clip

    from moram_avalanche.clip.head import TextHead
    from tiny_clip import TINY_CONFIG

    model = open_clip.CLIP(**TINY_CONFIG)  # context length 16
    return TextHead(model, open_clip.tokenizer.SimpleTokenizer(context_length=77))


def run_stream_with(tmp_path, **kwargs):
    from moram_avalanche.experiments.runner import run_stream

    return run_stream(None, None, tmp_path / "run", **kwargs)  # refused before either is read


API_MISTAKES = [
    ("infinite temperature", lambda t: moram_layer(temperature=math.inf), ValueError,
     "temperature must be a finite number > 0 (paper: 0.01 for CLIP; None means 1), got inf"),
    ("NaN temperature", lambda t: moram_layer(temperature=math.nan), ValueError, "got nan"),
    ("negative threshold", lambda t: moram_layer(threshold=-0.1), ValueError,
     "threshold must be a finite number in [0, 1]"),
    ("zero atoms per task", lambda t: moram_layer(atoms_per_task=0), ValueError,
     "atoms_per_task must be a positive int, got 0"),
    ("wrong input width (same element count)", lambda t: grown_layer()(torch.randn(4, 4)), ValueError,
     "MoRAMLinear takes inputs [..., in_features=8], got (4, 4)"),
    ("NaN atom keys", lambda t: grown_layer().load_atoms(torch.full((2, 8), math.nan), torch.zeros(4, 2), 0),
     ValueError, "keys hold NaN or infinite entries (16 of 16)"),
    ("infinite atom values", lambda t: grown_layer().load_atoms(
        torch.zeros(2, 8), torch.tensor([[math.inf, 0.0]] * 4), 0), ValueError,
     "values hold NaN or infinite entries (4 of 8)"),
    ("duplicate domain names", lambda t: tiny_benchmark(["a", "b", "a"]), ValueError,
     "domain names must be distinct (they key the accuracy matrix, the logs and the checkpoints), got ['a']"),
    ("max_experiences=-1", lambda t: run_stream_with(t, max_experiences=-1), ValueError,
     "max_experiences must be a positive int, got -1"),
    ("max_experiences=0", lambda t: run_stream_with(t, max_experiences=0), ValueError,
     "max_experiences must be a positive int, got 0"),
    ("num_workers=-1", lambda t: run_stream_with(t, num_workers=-1), ValueError,
     "num_workers must be an int >= 0, got -1"),
    ("misspelled strategy option", lambda t: strategy("moram", topkk=2), TypeError,
     "MoRAM takes no option 'topkk': did you mean topk?"),
    ("string learning rate", lambda t: strategy("moram", lr="5e-4"), TypeError,
     "MoRAM option lr takes float | DomainLR (default 0.0005), got str '5e-4'"),
    ("zero batch size", lambda t: strategy("finetune", train_mb_size=0), ValueError,
     "train_mb_size must be a positive int, got 0"),
    ("negative iterations", lambda t: strategy("moram", iterations=-1), ValueError,
     "iterations must be an int >= 0, got -1"),
    ("NaN learning rate", lambda t: strategy("finetune", lr=math.nan), ValueError,
     "lr must be a finite number > 0 (e.g. 5e-4, MoRAM's), got nan"),
    ("beta of 1.5", lambda t: strategy("moram", betas=(0.9, 1.5)), ValueError,
     "each of betas must be a finite number in [0, 1), got 1.5"),
    ("CUDA without a GPU", lambda t: strategy("moram", device="cuda"), ValueError,
     "device 'cuda': no CUDA GPU is usable on this machine"),
    ("ZeroShot with iterations", lambda t: strategy("zeroshot", iterations=3), ValueError,
     "ZeroShot does not train"),
    ("negative balance coefficient", lambda t: strategy("moram-load-balance", balance_coef=-0.1), ValueError,
     "balance_coef must be a finite number >= 0 (0: no load balancing), got -0.1"),
    ("WiSE-FT alpha", lambda t: strategy("wiseft", alpha=2.0), ValueError,
     "alpha must be a finite number in [0, 1]"),
    ("ZSCL without references", lambda t: strategy("zscl"), ValueError,
     "ZSCL needs reference_images and reference_sentences"),
    ("LwF temperature 0", lambda t: strategy("lwf", temperature=0), ValueError,
     "temperature must be a finite number > 0 (ZSCL: 2), got 0"),
    ("LwF-VR without sentences", lambda t: strategy("lwf-vr", sentences=0), ValueError,
     "sentences must be a positive int, got 0"),
    ("MoE-Adapters unknown selector", lambda t: strategy("moe-adapters", selector="router"), ValueError,
     "selector must be one of ('ddas', 'oracle', 'latest'), got 'router'"),
    ("MoE-Adapters without reference images", lambda t: strategy("moe-adapters"), ValueError,
     "MoEAdapters with selector='ddas' needs reference_images"),
    ("InfLoRA rank 0", lambda t: strategy("inflora", rank=0), ValueError, "rank must be a positive int, got 0"),
    ("MoE-LoRA temperature", lambda t: strategy("moe-lora", temperature=-1.0), ValueError,
     "temperature must be a finite number > 0"),
    ("a string where a module goes", lambda t: strategy("moe-adapters", feature_extractor="alexnet"),
     TypeError, "option feature_extractor takes Optional[Module] (default None), got str 'alexnet'"),
    ("tokenizer of another model", lambda t: tokenizer_of_another_model(), ValueError,
     "the tokenizer makes sequences of 77 tokens but the model's text encoder takes 16"),
    ("load_clip on a missing GPU", lambda t: __import__("moram_avalanche").load_clip(
        "ViT-B-32", pretrained=None, device="cuda:0"), ValueError, "device 'cuda:0': no CUDA GPU"),
    ("a float image", lambda t: float_image(), ValueError,
     "PIL mode 'F' cannot be shown as 8-bit RGB faithfully"),
    ("a damaged settings record", damaged_settings, ValueError,
     "run.json, the record of the run in x, is damaged"),
    ("an output folder that is a file", lambda t: __import__("moram_avalanche.utils", fromlist=["x"])
     .check_output_folder(a_file(t), "out_dir"), ValueError, "is a file, not a folder"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in API_MISTAKES], ids=[c[0] for c in API_MISTAKES])
def test_an_api_mistake_raises_a_clear_error(call, error, message, tmp_path):
    with pytest.raises(error) as info:
        call(tmp_path)
    assert message in str(info.value)
    assert not (tmp_path / "run").exists()


def test_there_are_at_least_forty_cases():
    assert len(CLI_MISTAKES) + len(ARGPARSE_MISTAKES) + len(OTHER_COMMANDS_MISTAKES) + len(API_MISTAKES) >= 40
