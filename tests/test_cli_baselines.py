"""The parameter-efficient baselines from the command line: options and offline errors."""

import json
import urllib.error

import torch

from moram_avalanche.cli import main


def common(tmp_path, *extra):
    return ["run", "--benchmark", "synthetic", "--model", "moram-synthetic-tiny", "--pretrained", "none",
            "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--iterations", "1",
            "--batch-size", "8", *extra]


def test_moe_adapters_without_alexnet_weights_offline_says_how_to_get_them(tmp_path, monkeypatch, capsys):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", offline)
    code = main(common(tmp_path, "--strategy", "moe-adapters", "--ref-images", "synthetic",
                       "--log-dir", str(tmp_path / "run")))
    assert code == 2
    err = capsys.readouterr().err
    assert "DDAS needs ImageNet AlexNet weights" in err and "feature_extractor" in err


def test_moe_adapters_reads_alexnet_weights_from_the_given_file(tmp_path, capsys):
    missing = tmp_path / "elsewhere" / "alexnet-owt-7be5be79.pth"
    code = main(common(tmp_path, "--strategy", "moe-adapters", "--ref-images", "synthetic",
                       "--set", f"ddas_weights={missing}", "--log-dir", str(tmp_path / "run")))
    assert code == 2
    err = capsys.readouterr().err
    assert f"AlexNet weights file {missing} does not exist" in err
    assert not (tmp_path / "run" / "results.json").exists()


def test_moe_adapters_needs_reference_images(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("moram_avalanche.strategies.clip.moe_adapters.alexnet_features",
                        lambda weights=None: torch.nn.Identity())
    assert main(common(tmp_path, "--strategy", "moe-adapters", "--log-dir", str(tmp_path / "run"))) == 2
    assert "needs reference_images" in capsys.readouterr().err


def test_inflora_options_through_set(tmp_path, capsys):
    code = main(common(tmp_path, "--strategy", "inflora", "--set", "rank=2", "--set", "encoders=('visual', 'text')",
                       "--log-dir", str(tmp_path / "run")))
    assert code == 0
    report = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(report["matrix"]) == 5
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["model"]
    downs = {k: v for k, v in state.items() if k.endswith(".down")}
    assert downs and all(v.shape[0] == 2 for v in downs.values())
    assert any(k.startswith("transformer.") for k in downs) and any(k.startswith("visual.") for k in downs)


def test_rail_codyra_and_icarl_run_from_the_command_line(tmp_path, capsys):
    # RAIL takes no --iterations (training-free): the command line leaves it out for it
    for name, extra in (("rail-primal", ("--set", "hidden_dim=64")), ("rail-dual", ()),
                        ("codyra", ("--set", "rank=2")), ("icarl", ("--set", "memory_size=8"))):
        out = tmp_path / name
        assert main(common(tmp_path, "--strategy", name, *extra, "--log-dir", str(out))) == 0, capsys.readouterr().err
        report = json.loads((out / "results.json").read_text())
        assert len(report["matrix"]) == 5
