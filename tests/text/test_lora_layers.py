"""The LoRA-family baselines as O-LoRA and the release build them: LoraConfig(r=8, lora_alpha=32,
lora_dropout=0.1), i.e. the update scaled by 4 and read from a dropped-out input."""

import pytest
import torch
from torch import nn
from torch.nn import functional as F


def test_seq_inc_and_olora_default_to_olora_s_lora_config():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear
    from moram_avalanche.layers.task_lora import TaskLoRALinear
    from moram_avalanche.strategies.registry import get_strategy
    from tiny_stream import FAMILIES, stream_tokenizer

    tokenizer = stream_tokenizer()
    for name, layer_type in (("seq-lora", LoRALinear), ("inc-lora", TaskLoRALinear), ("o-lora", TaskLoRALinear),
                            ("hidelora", LoRALinear)):  # TreeLoRA training/main.py: the same LoraConfig
        strategy = get_strategy(name, family="text")(model=FAMILIES["t5"](tokenizer), tokenizer=tokenizer)
        layers = find_layers(strategy.model, layer_type).values()
        # O-LoRA src/run_uie_lora.py: r = --lora_dim 8, lora_alpha 32 -> scaling 32 / 8, lora_dropout 0.1
        assert {(layer.rank, layer.scale, layer.lora_dropout.p) for layer in layers} == {(8, 32 / 8, 0.1)}, name


def test_the_update_reads_a_dropped_out_input_and_the_base_the_clean_one():
    from moram_avalanche.text.lora_layers import DropoutLoRALinear, DropoutTaskLoRALinear

    torch.manual_seed(0)
    base = nn.Linear(5, 3)
    x = torch.randn(4, 5)
    for layer in (DropoutLoRALinear(base, 2, scale=4.0, dropout=0.5), DropoutTaskLoRALinear(base, 2, scale=4.0, dropout=0.5)):
        if isinstance(layer, DropoutTaskLoRALinear):
            layer.expand()
            layer.expand()  # two task LoRAs, one mask for both (O-LoRA's fork: lora_A and loranew_A read one x)
            downs, ups = list(layer.downs), list(layer.ups)
        else:
            downs, ups = [layer.down], [layer.up]
        with torch.no_grad():
            for up in ups:
                up.normal_()
        layer.train()
        torch.manual_seed(1)
        out = layer(x)
        torch.manual_seed(1)
        dropped = F.dropout(x, 0.5, training=True)  # the same mask: the base draws no random numbers
        expected = base(x) + sum(4.0 * dropped @ d.t() @ u.t() for d, u in zip(downs, ups))
        torch.testing.assert_close(out, expected)
        layer.eval()  # no dropout: the parent's forward
        expected = base(x) + sum(4.0 * x @ d.t() @ u.t() for d, u in zip(downs, ups))
        torch.testing.assert_close(layer(x), expected)
    with pytest.raises(ValueError, match="dropout.*O-LoRA: 0.1"):
        DropoutLoRALinear(base, 2, dropout=1.0)
